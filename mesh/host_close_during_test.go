package mesh

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/record"
)

// A Close during a host Relocate (review, 2026-12-07): the objects the
// command had not reached when the node stopped are removed by the
// shutdown with their state, so they are not Gone (Gone: the object left
// the mesh on its own) but not moved — NotStarted, or Failed for a move
// under way, with a reason saying the node stopped. Before, once Close had
// emptied the hosted table — here its first move still in flight when
// Close's wait for object work ended — each object the command reached
// afterwards was reported Gone, "no longer hosted here", and the command
// Completed.
func TestHostRelocateDuringCloseReportsTheRestNotMoved(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "stopped", 1, 6)
	n := c.nodes[1]
	atSecure, objectsStopped := make(chan struct{}), make(chan struct{})
	var first sync.Once
	n.obj.hooks.Store(&testHooks{relocationStep: func(_, step string) {
		if step == stepSourceSecure {
			first.Do(func() { close(atSecure) })
			<-objectsStopped // the first move outlives Close's wait for object work
		}
	}, closeStep: func(step string) {
		if step == closeObjectsStopped {
			close(objectsStopped)
		}
	}})
	done := make(chan HostRelocationResult, 1)
	go func() {
		res, err := n.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1})
		if err != nil {
			t.Errorf("relocate: %v", err)
		}
		done <- res
	}()
	<-atSecure
	_ = n.Close(ctx) // reports the held move as application code not returned
	res := <-done
	t.Logf("end %s %+v", res.End, res.Progress)
	for _, ref := range mine {
		if rowOf(t, c, record.ObjectActor, ref.ActorID).Found {
			t.Fatalf("%s: its record survived the shutdown (test set-up)", ref.ActorID)
		}
	}
	if k := len(res.NotMoved()) + len(res.LeftToTarget()); k != len(mine) {
		t.Errorf("NotMoved and LeftToTarget list %d objects, want all %d: none moved", k, len(mine))
	}
	for _, o := range res.Objects {
		switch {
		case o.Outcome == hostmove.Gone:
			t.Errorf("%s: gone (%q), but the shutdown removed it with its state", o.Object.ID, o.Reason)
		case o.Outcome == hostmove.NotStarted && !strings.Contains(o.Reason, "node stopped"):
			t.Errorf("%s: not started, reason %q: want it to say the node stopped", o.Object.ID, o.Reason)
		}
	}
}
