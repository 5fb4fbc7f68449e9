package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// A host Relocate called while the node is closing (review, 2026-12-07;
// issue 11, §11) is refused with ErrUnavailable, as Relocate's documentation promises
// ("ErrUnavailable (the node is closing or its owner lease is not
// valid)"). Called once Close has stopped object work — its owner lease
// still valid, the sweep of the objects' records still to come — it must
// not report a Completed command with nothing to move: its caller would
// read that the node was emptied while the shutdown is about to remove
// every object the node held, with its state.
func TestHostRelocateDuringCloseIsRefused(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 30*time.Second)
	_, mine := createUntil(t, ctx, c, "closing", 1, 3)
	n := c.nodes[1]
	type outcome struct {
		res HostRelocationResult
		err error
	}
	got := make(chan outcome, 1)
	n.obj.hooks.Store(&testHooks{closeStep: func(step string) {
		if step != closeObjectsStopped {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := n.Relocate(rctx, HostRelocateOptions{})
		got <- outcome{res, err}
	}})
	if err := n.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	o := <-got
	swept := 0
	for _, ref := range mine {
		if !rowOf(t, c, record.ObjectActor, ref.ActorID).Found {
			swept++
		}
	}
	if !errors.Is(o.err, ErrUnavailable) {
		t.Fatalf("Relocate during Close (node held %d objects, %d of them swept by the shutdown): end %s, progress %+v, err %v; want ErrUnavailable (node closing)",
			len(mine), swept, o.res.End, o.res.Progress, o.err)
	}
}
