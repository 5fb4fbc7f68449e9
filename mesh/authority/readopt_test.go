package authority

import (
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

func TestPlanReadopt(t *testing.T) {
	newA := Owner{ID: ownerA.ID, LeaseGeneration: ownerA.LeaseGeneration + 3}
	base := func() (ReadoptRequest, Snapshot) {
		return ReadoptRequest{Object: player, ObjectGeneration: 101, From: ownerA, To: newA, Node: nodeA},
			Snapshot{
				Authority:  activeRow(t, player, nodeA, ownerA, 101, 2, "v1"),
				OwnerLease: leaseRow(t, newA, "lN"),
			}
	}
	t.Run("owner generation and AuthorityOwnerGeneration move on, exact batch", func(t *testing.T) {
		req, snap := base()
		p, err := PlanReadopt(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		want := activeRow(t, player, nodeA, newA, 101, 3, "").Record
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v1"),
				locstore.IfVersion(leaseKey(t, newA.ID), "lN"),
			},
			Mutations: []locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, want))},
		})
		if !p.Observed(AuthorityRow{Key: authKey(t, player), Found: true, Record: want, Version: "v2"}) {
			t.Error("the applied record is not recognised as this plan's effect")
		}
	})
	// Progress left by a cancelled move (or a CompleteRelocation that did
	// not land) is stale for an object its host serves: re-adopted, and
	// cleared.
	for _, stage := range []record.RelocationStage{record.RelocationCaptured, record.RelocationPrepared, record.RelocationCommitted} {
		t.Run("stale relocation progress "+string(stage), func(t *testing.T) {
			req, snap := base()
			row := activeRow(t, player, nodeA, ownerA, 101, 2, "v1")
			row.Record.Relocation = &record.RelocationProgress{Stage: stage, RelocationID: [16]byte{1}, TargetAttempt: 1, ReservationID: [16]byte{2}}
			snap.Authority = row
			p, err := PlanReadopt(req, snap)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Request.Mutations) != 1 {
				t.Fatalf("mutations %d", len(p.Request.Mutations))
			}
			got, err := record.DecodeAuthority(p.Request.Mutations[0].Value)
			if err != nil {
				t.Fatal(err)
			}
			if got.Relocation != nil || got.OwnerLeaseGeneration != record.Generation(newA.LeaseGeneration) {
				t.Fatalf("re-adopted record %+v: want the progress cleared, owner %d", got, newA.LeaseGeneration)
			}
		})
	}
	checkPlanErrors(t, base, PlanReadopt, []planErrCase[ReadoptRequest]{
		{"reclaimed meanwhile", func(r *ReadoptRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"recreated under another owner", func(r *ReadoptRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeB, ownerB, 102, 1, "v9")
		}, []error{ErrStaleGeneration, ErrConflict}},
		{"moved to another owner", func(r *ReadoptRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeB, ownerB, 101, 3, "v9")
		}, []error{ErrConflict}},
		{"another node run of ours", func(r *ReadoptRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeB, ownerA, 101, 2, "v1")
		}, []error{ErrConflict}},
		{"changed since read", func(r *ReadoptRequest, s *Snapshot) { r.IfVersion = "v0" }, []error{ErrConflict}},
		{"new lease not live", func(r *ReadoptRequest, s *Snapshot) { s.OwnerLease = missingLease(t, newA.ID) }, []error{ErrConflict}},
		{"not a later generation", func(r *ReadoptRequest, s *Snapshot) { r.To = ownerA }, []error{ErrInvalidOperation}},
		{"another owner id", func(r *ReadoptRequest, s *Snapshot) { r.To = ownerB }, []error{ErrInvalidOperation}},
		{"Creating record", func(r *ReadoptRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 101, "res", "v1")
		}, []error{ErrConflict}},
	})
}
