package mesh

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/record"
)

// An object whose own single-object move (RelocateActor) is under way when
// a drain lists the node's objects is not listed; when that move fails and
// the object serves here again, the drain's list is still open (it stays
// open while objects are leaving), so the drain moves it. Before, the list
// closed without it: the object was neither moved nor reported, and the
// shutdown's sweep removed it with its state.
func TestDrainMovesAnObjectBackFromAFailedMove(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "drainback", 1, 3)
	y := mine[0]
	atSecure, release := make(chan struct{}), make(chan struct{})
	c.nodes[1].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == y.ActorID && step == stepSourceSecure {
			select {
			case <-atSecure:
			default:
				close(atSecure)
			}
			<-release
		}
	}})
	ymove := make(chan relocateOutcome, 1)
	go func() {
		var o relocateOutcome
		o.res, o.err = c.m(1).RelocateActor(ctx, y, ToNode(c.nodes[2].RID()))
		ymove <- o
	}()
	<-atSecure
	var started sync.Once
	res, err := c.nodes[1].Drain(ctx, HostRelocateOptions{Progress: func(HostProgress) {
		// A second after the drain began, y's own move fails (node 2
		// refuses it) and y serves on node 1 again.
		started.Do(func() {
			time.AfterFunc(time.Second, func() {
				c.nodes[2].obj.hostMove.Store(true)
				close(release)
			})
		})
	}, beforeStop: func(r HostRelocationResult) {
		o := <-ymove
		c.nodes[2].obj.hostMove.Store(false)
		t.Logf("the application's move of %s: %v %s, %v", y.ActorID, o.res.Outcome, o.res.Reason, o.err)
	}})
	t.Logf("drain: %s %+v swept=%v err=%v", res.End, res.Progress, res.ShutdownSwept, err)
	listed := false
	for _, r := range res.Objects {
		if r.Object.ID == y.ActorID {
			listed = true
			t.Logf("%s: %s %s", y.ActorID, r.Outcome, r.Reason)
		}
	}
	row := rowOf(t, c, record.ObjectActor, y.ActorID)
	if !row.Found {
		t.Fatalf("%s (listed in the drain result: %v; drain end %s, %d moved, %d not moved) was removed by the drain's shutdown: its state is lost",
			y.ActorID, listed, res.End, res.Progress.Moved, len(res.NotMoved()))
	}
	if res.End != hostmove.Completed {
		t.Logf("end %s", res.End)
	}
}
