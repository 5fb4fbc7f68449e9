package mesh

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router/transport"
)

// Held messages whose relay failed midway (unrelayed) come back into the
// object when the target never commits and the source takes the object
// back (recoverLocal), after the ones relayed. Before, the cutover passed
// them on to the target and forgot them: the target dropped them unrun,
// and four accepted one-way messages were lost.
func TestRecoveredMoveKeepsUnrelayedHeldMessages(t *testing.T) {
	f := newFixture(t)
	faults := &casFaults{Store: f.loc}
	c, ctl := failCluster(t, f, faults)
	ctx := ctxT(t, 60*time.Second)
	const id = "unrelayed-back"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	blk := ctl.block(id, nil) // the target's Restore waits: relay-ready too, arrivals go into the source's hold
	built, release := blk.started, blk.release
	hooks := &testHooks{}
	ends := watchArrivals(hooks)
	c.nodes[dst].obj.hooks.Store(hooks)
	c.nodes[src].obj.hooks.Store(&testHooks{relaySend: func(got string, index int) error {
		if got == id && index >= 1 {
			return fmt.Errorf("%w: link broke (test)", transport.ErrPeerDown)
		}
		return nil
	}})
	faults.arm(t, id, -1, false) // the target's owner CAS fails until the deadline
	mctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, built, "the target's hidden instance")
	for i := 1; i <= 5; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // let them reach the source's hold
	close(release)
	res := outcomeOf(t, moving)
	e := waitEnd(t, ends, id)
	if e.state != relocation.TgtFailed {
		t.Fatalf("the target attempt ended %s/%s, want failed", e.state, e.failure)
	}
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() {
		t.Fatalf("the source reported %v (%s); want notMoved (targetLost)", res.Outcome, res.Reason)
	}
	faults.mu.Lock()
	faults.failWrites = 0
	faults.mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	got, err := c.m(0).RequestActor(ctx, ref, []byte("list"))
	if err != nil || string(got) != "a,m1,m2,m3,m4,m5" {
		t.Fatalf("recovered object ran %q, %v; want a,m1,m2,m3,m4,m5 (five accepted one-way messages)", got, err)
	}
}
