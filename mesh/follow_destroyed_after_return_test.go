package mesh

import (
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
)

// An Actor that moved away from a node and back (A -> B -> A) and was then
// destroyed there: a sender whose route still names its last stay on A gets
// ErrNotFound, as for an object destroyed without moving. Before, A's follow
// table still held the first departure (to B, at a lower owner generation),
// Forward took the message for the return stay as a follow cycle, and every
// call was refused ErrUnavailable ("terminated") — which the guide tells an
// application to retry — for as long as MessageFollowDuration kept that
// departure (found writing an application from docs/EMBEDDING.md).
func TestMessageToActorDestroyedAfterReturnIsNotFound(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "back-1", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	a := ownerIndex(t, c, record.ObjectActor, "back-1")
	b := 1
	if a == 1 {
		b = 2
	}
	for _, hop := range []struct{ from, to int }{{a, b}, {b, a}} {
		res, err := c.m(hop.from).RelocateActor(ctx, ref, ToNode(c.nodes[hop.to].RID()))
		if err != nil || res.Outcome != Moved {
			t.Fatalf("move %d -> %d: %v (%s), %v", hop.from, hop.to, res.Outcome, res.Reason, err)
		}
		// The sender's route cache learns the new owner: the first
		// request may be passed on by the previous owner, whose command 50
		// drops the cached route; the next one reads the store.
		for i := 0; i < 3; i++ {
			if _, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if closed, err := c.m(0).Destroy(ctx, ref); !closed || err != nil {
		t.Fatalf("Destroy: %v, %v", closed, err)
	}
	_, err = c.m(0).RequestActor(ctx, ref, []byte("count"))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("request to the destroyed Actor: %v, want ErrNotFound", err)
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("one")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("send to the destroyed Actor: %v, want ErrNotFound", err)
	}
}
