package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Found by review (owner lease, hold, re-adoption; 2026-12-07, fixed the
// same day: endOnceAt re-adopts, closeOnce re-adopts after a reopen,
// reclaimDead never takes this run's own hosted object for a dead owner's).
// An object whose Destroy is under way while its node loses its owner lease
// and reacquires it was passed over by the re-adoption (it takes only the objects the node
// serves; this one is hostClosing). When the Delete then does not apply
// (its batch verifies the old lease row, which now holds the new
// generation) the close reopens the object (reopen: hostServing) — with
// its record still naming the dead lease generation. Nothing re-adopts it
// (readoptAfterHold covers only a move that did not move). Then the
// Destroy's own retry (objects.end: errRouteStale → endOnce) finds the
// record under this node's earlier generation, takes it for a dead
// owner's (ownerEnded: only the current generation counts as this run)
// and reclaims it without the grace — Destroy answers closed=true while
// the instance was never closed and still serves here, with no record: the
// Id can be created anew, on any node, while this copy runs — two owners.
// (Without the retry, others would answer OwnerGoneError and their sweep
// reclaim it after the grace, with the same end.) LEASE.md "Riding out a
// store outage" steps 3 and 5 ("Never two owners"), spec §3.1/§5.
func TestObjectClosingAcrossALeaseLossIsNotLeftUnderTheDeadGeneration(t *testing.T) {
	f, hold, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	src := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	mine := createOnNode(t, ctx, client, src, "closing", 1)
	x := mine[0]
	if err := client.Manager().SendActor(ctx, x, []byte("one")); err != nil {
		t.Fatal(err)
	}
	akey, err := authority.Object{ID: x.ActorID, Kind: record.ObjectActor}.Key()
	if err != nil {
		t.Fatal(err)
	}
	// The Destroy's Delete reaches the store only after the lease loss
	// and the re-adoption.
	hold.key.Store(&akey)
	type outcome struct {
		closed bool
		err    error
	}
	ended := make(chan outcome, 1)
	go func() {
		closed, err := src.Manager().Destroy(ctx, x)
		ended <- outcome{closed, err}
	}()
	eventually(t, 10*time.Second, "the Delete to be under way", func() bool { return hold.held.Load() > 0 })
	_, before := src.Owner()
	blocker.loseLeaseOf(t, src)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the node to reacquire its lease and re-adopt what it serves", func() bool {
		_, lg := src.Owner()
		return lg != before && src.lease.Gate().Admit() == nil
	})
	hold.key.Store(nil)
	close(hold.release)
	o := <-ended
	t.Logf("Destroy after the loss: closed=%v err=%v", o.closed, o.err)
	_, now := src.Owner()
	src.obj.mu.Lock()
	h := src.obj.hosted[spot.Key{ID: x.ActorID}]
	serving := h != nil && h.state == hostServing
	src.obj.mu.Unlock()
	row, _, err := src.obj.readAuthorityAt(ctx, record.ObjectActor, x.ActorID)
	if err != nil {
		t.Fatal(err)
	}
	if !serving {
		if o.err != nil && row.Found {
			t.Fatalf("Destroy failed (%v) but %s is gone from its node while its record is still there", o.err, x.ActorID)
		}
		return // closed for good: fine
	}
	if !row.Found {
		again, cerr := client.Manager().CreateActor(ctx, x.ActorID, testMoverType)
		t.Logf("re-created %s while the old copy is hosted on %x: gen %d on %x, %v",
			x.ActorID, src.RID(), again.ObjectGeneration, again.NodeRID, cerr)
		t.Fatalf("%s serves on %x again (Destroy: closed=%v, %v) but its record is gone: any node may create it anew — two owners",
			x.ActorID, src.RID(), o.closed, o.err)
	}
	if got := uint64(row.Record.OwnerLeaseGeneration); got != now {
		t.Fatalf("%s serves on its node again after the failed Destroy (%v), but its record names lease generation %d "+
			"(the one before the loss: %d), not the node's %d: others see its owner gone and reclaim it while it runs here",
			x.ActorID, o.err, got, before, now)
	}
}
