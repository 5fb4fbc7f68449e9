package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// A host Relocate stopped early (HostRelocateOptions.Stop) starts no move
// after it, as its documentation says: the objects not reached are
// NotStarted and stay here. Before, a worker whose move ended after the
// stop took the next object itself, each such move failing at once on the
// ended context: those objects were reported Failed. Whether the worker or
// the command's loop sees the stop first is a race, so the stop is repeated
// (the old code lost it in about half the rounds).
func TestHostRelocateStoppedStartsNoMore(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	createUntil(t, ctx, c, "nomore", 1, 6)
	n := c.nodes[1]
	defer n.obj.hooks.Store(nil)
	for round := 0; round < 10; round++ {
		atSecure, release := holdMovesAtSecure(n)
		stop := make(chan struct{})
		done := make(chan HostRelocationResult, 1)
		go func() {
			res, _ := n.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1, Stop: stop})
			done <- res
		}()
		<-atSecure
		close(stop)
		close(release)
		res := <-done
		// The move under way at the stop ends either way (Moved when it
		// was past its commit before its context ended — Stop cancels it
		// a moment later, on stopWith's goroutine — else Failed); none
		// starts after it.
		p := res.Progress
		if res.End != hostmove.ForceStopped || p.NotStarted != p.Total-1 || p.Moved+p.Failed != 1 {
			t.Fatalf("round %d, stopped during its first move: %s %+v, want forceStopped with %d not started and the one under way moved or failed",
				round, res.End, p, p.Total-1)
		}
		if p.Total < 3 {
			break // moved away in earlier rounds: too few left to show it
		}
	}
}
