package mesh

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// A move whose reservation is gone before any Restore was sent (released by
// a reclaim, or by the move's own release whose answer was lost) must read
// the record before it reopens the object it holds, as any cancelled move
// that held it does: a record removed meanwhile ends it NotMoved (removed),
// a record naming another node ends it NotMoved (ownerChanged) — never
// reopened beside that owner, never Moved (the target, which never saw a
// Restore, cannot have committed). Before, it reopened the held object
// unread: it served on the source with no record naming it, or beside the
// node the record names.
func TestMoveWhoseReservationIsGoneBeforeAnyRestoreReadsTheRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *cluster, id string) error // the store change while the object is held
		reason relocation.Reason
	}{
		{"record removed", removeRecord, relocation.ReasonRemoved},
		{"record names another node", recordElsewhere, relocation.ReasonOwnerChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c, _ := failCluster(t, f, f.loc)
			ctx := ctxT(t, 60*time.Second)
			ref := recorder(t, ctx, c, "gone-before-restore", failPreserveType, "a")
			src, dst := movePair(t, c, record.ObjectActor, ref.ActorID)
			o := c.nodes[src].obj
			changed := make(chan error, 1)
			o.hooks.Store(&testHooks{relocationStep: func(id, step string) {
				if id == ref.ActorID && step == stepSourceRecord {
					// The reservation goes first (a reclaim releasing
					// it), then the record: the Captured write is refused
					// and the cancel's release finds nothing to release.
					err := dropReservations(c)
					if err == nil {
						err = tc.change(c, id)
					}
					changed <- err
				}
			}})
			t.Cleanup(func() { o.hooks.Store(nil) })
			res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration))
			if err := <-changed; err != nil {
				t.Fatal(err)
			}
			if res.Outcome == Moved || res.Reason != tc.reason.String() {
				t.Fatalf("move whose reservation was gone before any Restore: %v (%s), want notMoved (%s)", res.Outcome, res.Reason, tc.reason)
			}
			notHostedOn(t, c, ref, src)
			if tc.reason == relocation.ReasonRemoved {
				servedByNobody(t, ctx, c, ref)
			}
		})
	}
}

// A move cancelled before relay-ready whose release succeeds — so the
// target, whose owner CAS needs the reservation, did not commit — and whose
// record then names another node, or even the target, did not move the
// object: it ends NotMoved (ownerChanged), the held instance is dropped
// (its queued request answered with an error, not run) and not reopened
// beside the owner the record names. Before, any record that no longer
// named the source read as the target's commit: Moved.
func TestCancelledMoveWhoseRecordNamesAnotherOwnerIsNotMoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *cluster, id string, dst int) error
	}{
		{"another node", func(c *cluster, id string, _ int) error { return recordElsewhere(c, id) }},
		{"the target", recordOnTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before authority.AuthorityRow
			c, _, ref, src, res := cancelHeldMove(t, "owner-changed-while-held", func(c *cluster, id string, dst int) error {
				err := tc.change(c, id, dst)
				if err == nil {
					before = rowOf(t, c, record.ObjectActor, id)
				}
				return err
			})
			if res.Outcome == Moved || res.Reason != relocation.ReasonOwnerChanged.String() {
				t.Fatalf("cancelled move whose record names another owner: %v (%s), want notMoved (%s)",
					res.Outcome, res.Reason, relocation.ReasonOwnerChanged)
			}
			notHostedOn(t, c, ref, src)
			if after := rowOf(t, c, record.ObjectActor, ref.ActorID); !after.Found || after.Version != before.Version {
				t.Fatalf("the record the move found naming another owner changed: %+v -> %+v", before, after)
			}
		})
	}
}

// notHostedOn checks that node i does not host ref (dropped, not reopened).
func notHostedOn(t *testing.T, c *cluster, ref ActorRef, i int) {
	t.Helper()
	o := c.nodes[i].obj
	o.mu.Lock()
	_, hosted := o.hosted[spot.Key{ID: ref.ActorID}]
	o.mu.Unlock()
	if hosted {
		t.Fatalf("node %d still hosts %s although no record names it", i, ref.ActorID)
	}
}

// dropReservations deletes every relocation reservation row, as a reclaim
// releasing them would (without its counter changes).
func dropReservations(c *cluster) error {
	page, err := c.f.loc.Scan(context.Background(), locstore.ScanRequest{
		Prefix: record.KindPrefix(authority.KindRelocationReservation), Limit: 1000})
	if err != nil {
		return err
	}
	if len(page.Items) == 0 {
		return errors.New("no relocation reservation to drop")
	}
	var muts []locstore.Mutation
	for _, it := range page.Items {
		muts = append(muts, locstore.Delete(it.Key))
	}
	_, err = c.f.loc.Write(context.Background(), locstore.WriteRequest{Mutations: muts})
	return err
}

// recordElsewhere rewrites the Actor id's authority row, at its
// ObjectGeneration, to name a node and owner that are not in the test's
// mesh under the next AuthorityOwnerGeneration — what a recovery by another
// node leaves (without its checks).
func recordElsewhere(c *cluster, id string) error {
	return rewriteOwner(c, id, func(a *record.Authority) {
		a.OwnerID, a.OwnerLeaseGeneration = "elsewhere", 1
		a.Allocation.Descriptor.RoutingID = bytes.Repeat([]byte{0xee}, len(a.Allocation.Descriptor.RoutingID))
		a.Allocation.DescriptorLifecycleGeneration = 1
	})
}

// recordOnTarget rewrites the Actor id's authority row to name node dst —
// the move's target — under the next AuthorityOwnerGeneration, as its
// owner CAS would.
func recordOnTarget(c *cluster, id string, dst int) error {
	owner, lg := c.nodes[dst].Owner()
	return rewriteOwner(c, id, func(a *record.Authority) {
		a.OwnerID, a.OwnerLeaseGeneration = owner, record.Generation(lg)
		a.Allocation.Descriptor.RoutingID = append([]byte(nil), c.nodes[dst].RID()...)
		a.Allocation.DescriptorLifecycleGeneration = record.Generation(c.nodes[dst].run.lifecycleGeneration)
	})
}

// rewriteOwner applies change to the Actor id's authority row, raises its
// AuthorityOwnerGeneration and clears its relocation progress, and writes
// it over the row as it is.
// The row is read from the store itself, past any fault wrapper the nodes
// use.
func rewriteOwner(c *cluster, id string, change func(*record.Authority)) error {
	key, err := authority.Object{ID: id, Kind: record.ObjectActor}.Key()
	if err != nil {
		return err
	}
	rr, err := c.f.loc.Read(context.Background(), key)
	if err != nil {
		return err
	}
	row, err := authority.AuthorityRowOf(key, rr)
	if err != nil {
		return err
	}
	if !row.Found {
		return errors.New("no record to rewrite")
	}
	a := row.Record
	change(&a)
	a.AuthorityOwnerGeneration++
	a.Relocation = nil
	v, err := a.Encode()
	if err != nil {
		return err
	}
	_, err = c.f.loc.Write(context.Background(), locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion(key, row.Version)},
		Mutations:  []locstore.Mutation{locstore.Put(key, v)}})
	return err
}

// A host command counts an object whose record named another owner during
// its move as Gone (no longer here), not Failed (which says it stays
// working here, and which a drain's shutdown counts among what it removes).
func TestHostRelocateCountsAnObjectNowOwnedElsewhereGone(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "hostelsewhere", 1, 2)
	victim := mine[0]
	o := c.nodes[1].obj
	var once sync.Once
	o.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == victim.ActorID && step == stepSourceRecord {
			// The Captured write is refused, the release succeeds, and
			// the read finds the record naming another node.
			once.Do(func() {
				if err := recordElsewhere(c, id); err != nil {
					t.Error(err)
				}
			})
		}
	}})
	t.Cleanup(func() { o.hooks.Store(nil) })
	res, err := c.nodes[1].Relocate(ctx, HostRelocateOptions{MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	onlyGone(t, res, victim.ActorID, relocation.ReasonOwnerChanged)
	notHostedOn(t, c, victim, 1)
}

// A target that committed and then moved the object on (or whose new owner
// did) before the source's first read of the record — the CAS's answer and
// the reads lost past the move's deadline, so the source's release finds the
// reservation consumed — is Moved: while the source holds the lease
// generation the move began under, only the target's CAS and moves after
// it can change the owner at the moved ObjectGeneration
// (sourceMove.readOwner turns the row naming a third owner into
// EvOwnerIsTarget). Were it read as an owner the move did not make, the
// move would end NotMoved (ownerChanged) and the source drop what it keeps
// for the new owner (its Message Follow entry, the relayed messages): no
// test covered that turn before (removing it failed none).
func TestMoveWhoseTargetCommittedAndMovedItOnBeforeTheSourceReadIsMoved(t *testing.T) {
	f := newFixture(t)
	faults := &casFaults{Store: f.loc}
	l := startLateCAS(t, f, faults, faults, "moved-on-unseen")
	if failed, applied := faults.counts(); failed != 1 || applied != 1 {
		t.Fatalf("%d owner CAS batches failed (%d applied; %v), want 1 (1)", failed, applied, faults.notApplied)
	}
	// The target's CAS applied; the object then moved on to another node
	// (its owner CAS: the next AuthorityOwnerGeneration).
	if err := recordElsewhere(l.c, l.ref.ActorID); err != nil {
		t.Fatal(err)
	}
	faults.mu.Lock()
	faults.failReads = false
	faults.mu.Unlock()
	res := outcomeOf(t, l.moving)
	if res.Outcome != Moved {
		t.Fatalf("move whose target committed and moved the object on: %v (%s), want moved", res.Outcome, res.Reason)
	}
}
