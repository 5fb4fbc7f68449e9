package authority

import (
	"context"
	"testing"

	"github.com/meshnode/meshnode/locstore"
)

func TestPlanReclaim(t *testing.T) {
	base := func() (ReclaimRequest, Snapshot) {
		return ReclaimRequest{Object: player, ObjectGeneration: 101, Owner: ownerA},
			Snapshot{
				Authority:  activeRow(t, player, nodeA, ownerA, 101, 2, "v1"),
				OwnerLease: missingLease(t, ownerA.ID),
				Capacity:   []CapacityRow{capRow(actorsOf(nodeA), 0, 3, "k1")},
			}
	}
	okCases := []struct {
		name  string
		edit  func(*ReclaimRequest, *Snapshot)
		lease locstore.Condition
	}{
		{"lease row gone: kept gone", func(*ReclaimRequest, *Snapshot) {}, locstore.IfMissing(leaseKey(t, ownerA.ID))},
		{"lease row of a later generation: kept at its version", func(r *ReclaimRequest, s *Snapshot) {
			s.OwnerLease = leaseRow(t, Owner{ID: ownerA.ID, LeaseGeneration: ownerA.LeaseGeneration + 1}, "lA2")
		}, locstore.IfVersion(leaseKey(t, ownerA.ID), "lA2")},
	}
	for _, tc := range okCases {
		t.Run(tc.name, func(t *testing.T) {
			req, snap := base()
			tc.edit(&req, &snap)
			p, err := PlanReclaim(req, snap)
			if err != nil {
				t.Fatal(err)
			}
			wantRequest(t, p.Request, removedActiveBatch(t, tc.lease))
		})
	}
	checkPlanErrors(t, base, PlanReclaim, []planErrCase[ReclaimRequest]{
		{"owner's lease live", func(r *ReclaimRequest, s *Snapshot) { s.OwnerLease = leaseRow(t, ownerA, "lA") }, []error{ErrConflict}},
		{"record now names another owner", func(r *ReclaimRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeB, ownerB, 101, 3, "v2")
		}, []error{ErrConflict}},
		{"record changed since read", func(r *ReclaimRequest, s *Snapshot) { r.IfVersion = "v0" }, []error{ErrConflict}},
		{"Reserved record", func(r *ReclaimRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 101, "res", "v1")
		}, []error{ErrConflict}},
		{"Missing", func(r *ReclaimRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"another generation", func(r *ReclaimRequest, s *Snapshot) { r.ObjectGeneration = 100 }, []error{ErrStaleGeneration, ErrConflict}},
		{"no generation", func(r *ReclaimRequest, s *Snapshot) { r.ObjectGeneration = 0 }, []error{ErrInvalidOperation}},
		{"lease row of another owner", func(r *ReclaimRequest, s *Snapshot) {
			l := leaseRow(t, ownerB, "lB")
			l.Key = leaseKey(t, ownerA.ID)
			s.OwnerLease = l
		}, []error{ErrCorruptRecord}},
		{"counter below the record's slots", func(r *ReclaimRequest, s *Snapshot) { s.Capacity = []CapacityRow{noCap(actorsOf(nodeA))} }, []error{ErrCorruptRecord}},
	})
}

// On a store: a record whose owner's lease expired is removed with its
// slot; one whose owner is alive is left alone.
func TestExecutorReclaim(t *testing.T) {
	ctx := context.Background()
	mem, clock := newMemory(t)
	putLease(t, mem, ownerA)
	e := newExecutor(t, mem)
	r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
	if err != nil {
		t.Fatal(err)
	}
	gen := uint64(r.Plan.Record.ObjectGeneration)
	if _, err := e.Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA}); err != nil {
		t.Fatal(err)
	}
	_, err = e.Reclaim(ctx, ReclaimRequest{Object: player, ObjectGeneration: gen, Owner: ownerA})
	wantErr(t, err, ErrConflict)
	if row := readAuthorityRow(t, mem, player); !row.Found {
		t.Fatal("a live owner's record was reclaimed")
	}
	clock.Advance(leaseTTL + 1)
	if _, err := e.Reclaim(ctx, ReclaimRequest{Object: player, ObjectGeneration: gen, Owner: ownerA}); err != nil {
		t.Fatal(err)
	}
	if row := readAuthorityRow(t, mem, player); row.Found {
		t.Fatal("record still there after reclaim")
	}
	if u := readUsage(t, mem, actorsOf(nodeA)); u != (Usage{}) {
		t.Errorf("dead run's counter = %+v, want empty", u)
	}
}
