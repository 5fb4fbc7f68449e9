//go:build knownopen

package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// Known, open: a route switch's barrier does not wait for a message of
// another goroutine that passed beforeSend on the previous route and is not
// queued yet. Goroutine A passes beforeSend on the previous owner's route
// (n0:2) and is delayed before the transport takes it; goroutine B, its
// cache entry gone, switches: its barrier goes out on the previous route
// ahead of A's message and is answered, and the node's route is the new
// owner's. A's message then leaves on the previous route and is passed on;
// A's next message (n0:3) finds the node's route already switched, needs no
// barrier, goes straight to the new owner and runs before n0:2 — one
// goroutine's two sends out of order. (Waiting, before the barrier, for
// the sends claimed on the previous route would need to know when a
// request is queued: the transport's Request does not say.)
func TestSwitchBarrierWaitsForSendsClaimedOnThePreviousRoute(t *testing.T) {
	c, ctx := seqCluster(t)
	ref, src, _ := movedAfterOne(t, ctx, c, "switch-pending")
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}
	sender := c.nodes[0]

	aDone, aGo := sendHeld(t, ctx, c, ref, "s:n0:2", nil)
	defer aGo()

	// B's route switch (its cache entry aged out): barrier, then the new
	// owner directly.
	sender.obj.cache.Drop(key)
	if err := c.m(0).SendActor(ctx, ref, []byte("s:x:1")); err != nil {
		t.Fatal(err)
	}
	if s := c.stats(0); s.RouteBarriers != 1 {
		t.Fatalf("route barriers %d, want 1 (B's switch)", s.RouteBarriers)
	}

	// A's message leaves on the previous route; the previous owner holds
	// it while passing it on.
	rel := passOnHeld(t, ctx, c.nodes[src], ref, aDone, aGo)
	defer rel()
	done := make(chan error, 1)
	go func() { done <- c.m(0).SendActor(ctx, ref, []byte("s:n0:3")) }()
	select {
	case err := <-done:
		done <- err
		eventually(t, 10*time.Second, "n0:3 to run", func() bool {
			return seqStateOf(t, ctx, c, ref).Last["n0"] == 3
		})
	case <-time.After(5 * time.Second):
	}
	rel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seqSentInOrder(t, ctx, c, ref)
}
