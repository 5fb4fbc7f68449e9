package mesh

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/mesh/hostmove"
)

// An object of a host command that leaves this node while its move is
// being retried — destroyed after an attempt that failed on its target —
// is Gone, not Failed (review, 2026-12-07): Failed says it stays owned and
// working here, and for a drain that the shutdown removes it. Before, an
// attempt that ended without an error (NotMoved, here targetFailed: its
// Restore payload arrived corrupt) stood as the outcome once the object
// was no longer hosted.
func TestHostRelocateObjectDestroyedAfterAFailedAttemptIsGone(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "leaves", 1, 1)
	ref := mine[0]
	n := c.nodes[1]
	var corrupted, destroyed sync.Once
	var destroyErr error
	n.obj.hooks.Store(&testHooks{
		restoreChunk: func(oid string, _ chunk.Binding, index int, data []byte) []byte {
			out := data
			if oid == ref.ActorID && index == 0 && len(data) > 0 {
				corrupted.Do(func() {
					out = append([]byte(nil), data...)
					out[len(out)/2] ^= 0x5a
				})
			}
			return out
		},
		relocationStep: func(id, step string) {
			if id == ref.ActorID && step == stepHostAttempt {
				destroyed.Do(func() { _, destroyErr = c.m(0).Destroy(ctx, ref) })
			}
		},
	})
	res, err := n.Relocate(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if destroyErr != nil {
		t.Fatalf("destroy after the first attempt: %v", destroyErr)
	}
	if len(res.Objects) != 1 {
		t.Fatalf("%d objects listed, want 1", len(res.Objects))
	}
	o := res.Objects[0]
	t.Logf("%s: %s %q", o.Object.ID, o.Outcome, o.Reason)
	if o.Outcome != hostmove.Gone {
		t.Fatalf("%s destroyed after a failed attempt: %s (%q), want gone", o.Object.ID, o.Outcome, o.Reason)
	}
}
