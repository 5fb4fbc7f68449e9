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
	_, mine := createUntil(t, ctx, c, "nomore", 1, 4)
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
		if res.End != hostmove.ForceStopped || res.Progress.NotStarted != len(mine)-1 || res.Progress.Moved != 0 {
			t.Fatalf("round %d, stopped during its first move: %s %+v, want forceStopped with %d not started",
				round, res.End, res.Progress, len(mine)-1)
		}
	}
}
