package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// A host Relocate waits for its own objects, not for a move of another
// object that began before it (review, 2026-12-07). Before, its list stayed
// open while any object of the node was moving or closing: once its own
// objects had moved, it polled on until that other move ended or its
// deadline came, and then ended ForceStopped though every object it listed
// had its outcome.
func TestHostRelocateDoesNotWaitForAMoveOutsideIt(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "outside", 1, 4)
	n := c.nodes[1]
	outside := mine[0]
	atSecure, release := make(chan struct{}), make(chan struct{})
	n.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == outside.ActorID && step == stepSourceSecure {
			select {
			case <-atSecure:
			default:
				close(atSecure)
			}
			<-release
		}
	}})
	single := make(chan error, 1)
	go func() {
		_, err := c.m(1).RelocateActor(ctx, outside)
		single <- err
	}()
	<-atSecure
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	res, err := n.Relocate(rctx, HostRelocateOptions{})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("end %s %+v in %s; the single move: %v", res.End, res.Progress, res.Took, <-single)
	if res.End != hostmove.Completed || res.Progress.Moved != len(mine)-1 {
		t.Fatalf("host relocate beside a single move: %s %+v, want completed with %d moved", res.End, res.Progress, len(mine)-1)
	}
	for _, o := range res.Objects {
		if o.Object.ID == outside.ActorID {
			t.Fatalf("%s, moving when the command listed, is listed: %s %q", o.Object.ID, o.Outcome, o.Reason)
		}
	}
}
