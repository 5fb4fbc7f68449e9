package mesh

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// HostRelocateOptions.Stop (closed by meshnode run on a second SIGTERM)
// ends a drain where it is: no move starts after it, and the node shuts
// down at once (§11), its sweep removing what did not move. Before, nothing
// could cut a drain short but its deadline: a second signal was swallowed
// and the drain went on moving (an operator try-out).
func TestDrainStopsWhenAsked(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "stopped", 1, 4)
	atSecure, release := holdMovesAtSecure(c.nodes[1])
	stop := make(chan struct{})
	go func() {
		// The first move is under way (one at a time): ask the drain to
		// stop, then let that move go on, to its cancellation.
		<-atSecure
		close(stop)
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	began := time.Now()
	res, err := c.nodes[1].Drain(ctx, HostRelocateOptions{MaxConcurrent: 1, Stop: stop})
	took := time.Since(began)
	t.Logf("drain: %s %+v swept=%v took %v err=%v", res.End, res.Progress, res.ShutdownSwept, took, err)
	if err != nil {
		t.Fatal(err)
	}
	if res.End != hostmove.ForceStopped || res.Progress.Moved > 1 || res.Progress.NotStarted < len(mine)-1 {
		t.Fatalf("drain asked to stop at its first move ended %s with %d moved and %d not started of %d, want forceStopped, at most 1 moved",
			res.End, res.Progress.Moved, res.Progress.NotStarted, len(mine))
	}
	if !res.ShutdownSwept {
		t.Fatal("the shutdown did not sweep the objects that stayed")
	}
	if took > 10*time.Second {
		t.Fatalf("the drain took %v after it was asked to stop", took)
	}
}

// holdMovesAtSecure makes every move from n wait at its source's secure
// step until release is closed; atSecure closes when the first gets there.
func holdMovesAtSecure(n *Node) (atSecure, release chan struct{}) {
	atSecure, release = make(chan struct{}), make(chan struct{})
	var first sync.Once
	n.obj.hooks.Store(&testHooks{relocationStep: func(_, step string) {
		if step == stepSourceSecure {
			first.Do(func() { close(atSecure) })
			<-release
		}
	}})
	return atSecure, release
}
