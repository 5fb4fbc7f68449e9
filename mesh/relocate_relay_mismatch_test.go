package mesh

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
)

// TestRelayMismatchTellsTheSourceAtOnce: the cutover (54) declares more
// relayed records than reached the target, which had answered relay-ready.
// The target removes what it prepared without sending its owner CAS
// (relay mismatch) and tells the source so, a second 53 failed
// (checksumMismatch, "relay mismatch: …"): the source stops waiting for
// the commit, releases the reservation, reads the record still its own and
// takes the object back (NotMoved: targetLost), serving it again with its
// state. Before, the target told nothing and the source waited for the
// commit until the move's deadline (30 s here), the object answering
// nobody meanwhile: the move then ended without the target's word.
func TestRelayMismatchTellsTheSourceAtOnce(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		registerFailTypes(t, f)
		c := newClusterOn(t, f, loc, 3, clientRole0)
		ctx := ctxT(t, 60*time.Second)
		const id = "mismatched"
		ref := recorder(t, ctx, c, id, failPreserveType, "a")
		src, dst := movePair(t, c, record.ObjectActor, id)
		before := rowOf(t, c, record.ObjectActor, id)

		var told atomic.Bool
		c.nodes[src].obj.hooks.Store(&testHooks{
			cutover: func(oid string, cut *router.RelocationCutover) {
				if oid == id {
					cut.RelayedCount++ // a record the target never got
				}
			},
			relocationStep: func(oid, step string) {
				if oid == id && step == stepSourceTold {
					told.Store(true)
				}
			},
		})
		ended := make(chan relocation.TargetFailure, 1)
		c.nodes[dst].obj.hooks.Store(&testHooks{
			arrivalEnded: func(oid string, _ relocation.TargetState, failure relocation.TargetFailure) {
				if oid == id {
					ended <- failure
				}
			},
		})
		// A deadline far beyond the test's wait for the outcome's cause:
		// only the target's word ends the move's wait early.
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res := outcomeOf(t, relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
		select {
		case got := <-ended:
			if got != relocation.TgtFailRelayMismatch {
				t.Fatalf("the target's attempt failed %s, want %s", got, relocation.TgtFailRelayMismatch)
			}
		case <-ctx.Done():
			t.Fatal("the target's attempt did not end")
		}
		if !told.Load() {
			t.Fatalf("the source's wait for the commit did not end on the target's word (move %v, %s, detail %q)",
				res.Outcome, res.Reason, res.Detail)
		}
		if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() ||
			!strings.HasPrefix(res.Detail, "checksumMismatch: relay mismatch: ") {
			t.Fatalf("the move ended %v, %s, detail %q; want notMoved, %s, checksumMismatch: relay mismatch: …",
				res.Outcome, res.Reason, res.Detail, relocation.ReasonTargetLost)
		}
		if mctx.Err() != nil {
			t.Fatal("the move ended at its deadline")
		}
		if _, rsv := capacityOf(t, loc); rsv != 0 {
			t.Fatalf("%d reservations left", rsv)
		}
		after := rowOf(t, c, record.ObjectActor, id)
		sameOwnership(t, before, after)
		checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
		wantRan(t, ctx, c, ref, "a")
	})
}
