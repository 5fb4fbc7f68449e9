package authority

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

func TestPlanSweep(t *testing.T) {
	room := Object{ID: "room:7", Kind: record.ObjectUserSpot, StableType: "Room"}
	roomType := spotTypeOf(nodeA, record.ObjectUserSpot, "Room")
	rows := func() []AuthorityRow {
		return []AuthorityRow{
			activeRow(t, player, nodeA, ownerA, 101, 2, "vp"),
			reservedRow(t, room, nodeA, ownerA, 102, "res-r", "vr"),
		}
	}
	snap := func() Snapshot {
		return Snapshot{OwnerLease: leaseRow(t, ownerA, "lA"), Capacity: []CapacityRow{
			capRow(actorsOf(nodeA), 0, 3, "k"), capRow(spotsOf(nodeA), 1, 0, "s"), capRow(roomType, 1, 0, "t")}}
	}

	t.Run("an Active and a Reserved row in one batch, exact", func(t *testing.T) {
		p, err := PlanSweep(SweepRequest{Owner: ownerA, Rows: rows()}, snap())
		if err != nil {
			t.Fatal(err)
		}
		// The player's active slot leaves both actors rows (3 → 2); the
		// room's reserved slots leave the secured rows (spots 1 → 0,
		// Room 1 → 0: deleted).
		conds := byKey(
			locstore.IfVersion(secKey(t, actorsOf(nodeA)), "ks"), locstore.IfVersion(actKey(t, actorsOf(nodeA)), "ka"),
			locstore.IfVersion(secKey(t, spotsOf(nodeA)), "ss"), locstore.IfVersion(secKey(t, roomType), "ts"))
		muts := mutsByKey(
			locstore.Put(secKey(t, actorsOf(nodeA)), secVal(t, actorsOf(nodeA), 2)), locstore.Put(actKey(t, actorsOf(nodeA)), actVal(t, actorsOf(nodeA), 2)),
			locstore.Delete(secKey(t, spotsOf(nodeA))), locstore.Delete(secKey(t, roomType)))
		auth := byKey(locstore.IfVersion(authKey(t, player), "vp"), locstore.IfVersion(authKey(t, room), "vr"))
		dels := mutsByKey(locstore.Delete(authKey(t, player)), locstore.Delete(authKey(t, room)))
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: append(append(auth, locstore.IfVersion(leaseKey(t, ownerA.ID), "lA")), conds...),
			Mutations:  append(dels, muts...),
		})
	})

	for _, tc := range []struct {
		name string
		edit func(*SweepRequest, *Snapshot)
		kind error
	}{
		{"no rows", func(r *SweepRequest, _ *Snapshot) { r.Rows = nil }, ErrInvalidOperation},
		{"too many rows", func(r *SweepRequest, _ *Snapshot) {
			for len(r.Rows) <= MaxSweepRows {
				r.Rows = append(r.Rows, activeRow(t, Object{ID: fmt.Sprint("x", len(r.Rows)), Kind: record.ObjectActor, StableType: "P"}, nodeA, ownerA, 1, 1, "v"))
			}
		}, ErrInvalidOperation},
		{"a row of another owner", func(r *SweepRequest, _ *Snapshot) {
			r.Rows[0] = activeRow(t, player, nodeA, ownerB, 101, 2, "vp")
		}, ErrInvalidOperation},
		{"a row of another lease generation", func(r *SweepRequest, _ *Snapshot) {
			r.Rows[0] = activeRow(t, player, nodeA, Owner{ID: ownerA.ID, LeaseGeneration: ownerA.LeaseGeneration + 1}, 101, 2, "vp")
		}, ErrInvalidOperation},
		{"a row without its version", func(r *SweepRequest, _ *Snapshot) { r.Rows[0].Version = "" }, ErrInvalidOperation},
		{"a row under another key", func(r *SweepRequest, _ *Snapshot) { r.Rows[0].Key = authKey(t, room) }, ErrInvalidOperation},
		{"the same row twice", func(r *SweepRequest, _ *Snapshot) { r.Rows[1] = r.Rows[0] }, ErrInvalidOperation},
		{"owner lease gone", func(_ *SweepRequest, s *Snapshot) { s.OwnerLease = missingLease(t, ownerA.ID) }, ErrConflict},
		{"a counter short of the rows' slots", func(_ *SweepRequest, s *Snapshot) {
			s.Capacity[0] = capRow(actorsOf(nodeA), 0, 0, "k")
		}, ErrCorruptRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, s := SweepRequest{Owner: ownerA, Rows: rows()}, snap()
			tc.edit(&req, &s)
			_, err := PlanSweep(req, s)
			wantErr(t, err, tc.kind)
		})
	}
}

// runSweep: the executor removes a host run's rows in one batch, counters
// exact; a row changed since it was read makes the batch change nothing.
func runSweep(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	putLease(t, s, ownerA)
	e := newExecutor(t, s)
	var rows []AuthorityRow
	for i := range 6 {
		obj := Object{ID: fmt.Sprintf("sw:%d", i), Kind: record.ObjectActor, StableType: "Player"}
		c := reserveFor(t, e, obj, fmt.Sprint("rs", i))
		if i%3 != 0 {
			if _, err := e.Commit(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		rows = append(rows, readAuthorityRow(t, s, obj))
	}
	if u := readUsage(t, s, actorsOf(nodeA)); u != (Usage{Reserved: 2, Active: 4}) {
		t.Fatalf("seeded counter %+v", u)
	}
	// One row moves on: the batch of all six changes nothing.
	moved := rows[4]
	if _, err := e.Preserve(ctx, PreserveRequest{Object: Object{ID: moved.Record.ObjectID, Kind: record.ObjectActor}, Owner: ownerA,
		ObjectGeneration: uint64(moved.Record.ObjectGeneration), Payload: SetPayload([]byte("x"))}); err != nil {
		t.Fatal(err)
	}
	_, err := e.Sweep(ctx, SweepRequest{Owner: ownerA, Rows: rows})
	wantErr(t, err, ErrConflict)
	if u := readUsage(t, s, actorsOf(nodeA)); u != (Usage{Reserved: 2, Active: 4}) {
		t.Fatalf("a refused sweep changed the counter: %+v", u)
	}
	// Without it, the other five go at once.
	rest := append(rows[:4:4], rows[5])
	if _, err := e.Sweep(ctx, SweepRequest{Owner: ownerA, Rows: rest}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rest {
		if got := readAuthorityRow(t, s, Object{ID: r.Record.ObjectID, Kind: record.ObjectActor}); got.Found {
			t.Errorf("%s still there", r.Record.ObjectID)
		}
	}
	if u := readUsage(t, s, actorsOf(nodeA)); u != (Usage{Active: 1}) {
		t.Errorf("counter after the sweep %+v, want the moved row's one active slot", u)
	}
}

func TestExecutorSweepMemory(t *testing.T) {
	s, _ := newMemory(t)
	runSweep(t, s)
}

func TestExecutorSweepRedis(t *testing.T) { runSweep(t, newRedis(t)) }
