package authority

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/record"
)

// Planner tests: one table per operation of spec §6.1, each row asserting
// the exact batch (conditions and mutations in order) or the error decided
// before the store.

func targetA() Target { return Target{Node: nodeA, Owner: ownerA, Limits: Limits{}} }
func targetB() Target { return Target{Node: nodeB, Owner: ownerB, Limits: Limits{}} }

func TestPlanReserve(t *testing.T) {
	ctrKey := objGenKey(t)
	reserveActor := ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1"), Payload: []byte("init")}
	baseSnap := func() Snapshot {
		return Snapshot{
			StoreNow:         storeNow,
			Authority:        missingRow(t, player),
			ObjectGeneration: CounterRow{Key: ctrKey, Found: true, Value: 100, Version: "c1"},
			TargetLease:      leaseRow(t, ownerA, "lA"),
			Capacity:         []CapacityRow{capRow(actorsOf(nodeA), 0, 2, "k1")},
		}
	}
	wantRecord := func(o Object, objGen uint64, resID string, payload []byte) record.Authority {
		a := authority(o, nodeA, ownerA, record.AllocationReserved, objGen, 1)
		pc := pending(resID)
		a.PendingCreation = &pc
		a.Payload = payload
		return a
	}

	t.Run("actor: Missing to Reserved, exact batch", func(t *testing.T) {
		p, err := PlanReserve(reserveActor, baseSnap())
		if err != nil {
			t.Fatal(err)
		}
		rec := wantRecord(player, 101, "res-1", []byte("init"))
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfMissing(authKey(t, player)),
				locstore.IfVersion(ctrKey, "c1"),
				locstore.IfVersion(leaseKey(t, ownerA.ID), "lA"),
				locstore.IfVersion(secKey(t, actorsOf(nodeA)), "k1s"), // reserved 0→1: the secured row alone
			},
			Mutations: []locstore.Mutation{
				locstore.Put(authKey(t, player), encodeAuth(t, rec)),
				locstore.Put(ctrKey, counterValue(t, 101)),
				locstore.Put(secKey(t, actorsOf(nodeA)), secVal(t, actorsOf(nodeA), 3)),
			},
		})
		if p.Record.ObjectGeneration != 101 || p.Record.AuthorityOwnerGeneration != 1 {
			t.Errorf("generations = %d/%d, want ObjectGeneration 101 (counter+1) and AuthorityOwnerGeneration 1",
				p.Record.ObjectGeneration, p.Record.AuthorityOwnerGeneration)
		}
		if p.AuthorityMutation != 0 || !bytes.Equal(p.Value, p.Request.Mutations[0].Value) {
			t.Errorf("AuthorityMutation = %d, Value does not match the authority Put", p.AuthorityMutation)
		}
		if len(p.Capacity) != 1 || p.Capacity[0].Before != (Usage{0, 2}) || p.Capacity[0].After != (Usage{1, 2}) {
			t.Errorf("capacity changes = %+v", p.Capacity)
		}
	})

	t.Run("first ObjectGeneration when the counter is missing", func(t *testing.T) {
		s := baseSnap()
		s.ObjectGeneration = CounterRow{Key: ctrKey}
		s.Capacity = []CapacityRow{noCap(actorsOf(nodeA))}
		p, err := PlanReserve(reserveActor, s)
		if err != nil {
			t.Fatal(err)
		}
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfMissing(authKey(t, player)),
				locstore.IfMissing(ctrKey),
				locstore.IfVersion(leaseKey(t, ownerA.ID), "lA"),
				locstore.IfMissing(secKey(t, actorsOf(nodeA))),
			},
			Mutations: []locstore.Mutation{
				locstore.Put(authKey(t, player), encodeAuth(t, wantRecord(player, 1, "res-1", []byte("init")))),
				locstore.Put(ctrKey, counterValue(t, 1)),
				locstore.Put(secKey(t, actorsOf(nodeA)), secVal(t, actorsOf(nodeA), 1)),
			},
		})
	})

	t.Run("fences follow the lease condition", func(t *testing.T) {
		req := reserveActor
		req.Fences = []Fence{{Key: "mesh-node:abc", Version: "d9"}}
		p, err := PlanReserve(req, baseSnap())
		if err != nil {
			t.Fatal(err)
		}
		if c := p.Request.Conditions[3]; c != locstore.IfVersion("mesh-node:abc", "d9") {
			t.Errorf("condition 3 = %+v, want the fence", c)
		}
	})

	// withContent is reserveActor carrying the creation request its
	// pendingCreation names (§7, §12: written in the Reserve batch).
	withContent := func() ReserveRequest {
		r := reserveActor
		body := []byte("the creation request")
		r.Creation.RequestSHA256, r.Creation.RequestEncodedSize = sha256.Sum256(body), len(body)
		r.Content = &CreationContent{Value: body, Retention: 7 * time.Minute}
		return r
	}
	t.Run("content is written in the same batch", func(t *testing.T) {
		req := withContent()
		p, err := PlanReserve(req, baseSnap())
		if err != nil {
			t.Fatal(err)
		}
		// The batch of the same request without content (its exact form is
		// checked above), plus the content Put.
		bare := req
		bare.Content = nil
		want, err := PlanReserve(bare, baseSnap())
		if err != nil {
			t.Fatal(err)
		}
		want.Request.Mutations = append(want.Request.Mutations,
			locstore.PutExpiring(req.Creation.RequestContentReference, req.Content.Value, 7*time.Minute))
		wantRequest(t, p.Request, want.Request)
	})

	errCases := []struct {
		name  string
		req   func() ReserveRequest
		snap  func() Snapshot
		kinds []error
	}{
		{"with content, ObjectGeneration counter at the sentinel", withContent,
			func() Snapshot {
				s := baseSnap()
				s.ObjectGeneration.Value = gen.Sentinel
				return s
			}, []error{ErrGenerationExhausted}},
		{"content other than the request pendingCreation names", func() ReserveRequest {
			r := withContent()
			r.Content.Value = []byte("the creation request, changed")
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"content with an invalid reference", func() ReserveRequest {
			r := withContent()
			r.Creation.RequestContentReference = ""
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"record exists with the same type", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.Authority = reservedRow(t, player, nodeB, ownerB, 7, "other", "v1")
				return s
			}, []error{ErrConflict}},
		{"record exists as another stable type", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.Authority = activeRow(t, Object{ID: player.ID, Kind: record.ObjectActor, StableType: "Npc"}, nodeB, ownerB, 7, 1, "v1")
				return s
			}, []error{ErrTypeMismatch, ErrConflict}},
		{"record exists as another Spot kind", func() ReserveRequest {
			r := reserveActor
			r.Object = Object{ID: room.ID, Kind: record.ObjectInstanceSpot, StableType: room.StableType}
			return r
		}, func() Snapshot {
			s := baseSnap()
			s.Authority = activeRow(t, room, nodeB, ownerB, 7, 1, "v1")
			return s
		}, []error{ErrTypeMismatch, ErrConflict}},
		{"ObjectGeneration counter at 2^63-2", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.ObjectGeneration.Value = gen.MaxIssued
				return s
			}, []error{ErrGenerationExhausted}},
		{"ObjectGeneration counter at the sentinel", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.ObjectGeneration.Value = gen.Sentinel
				return s
			}, []error{ErrGenerationExhausted}},
		{"ObjectGeneration counter holding 0", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.ObjectGeneration.Value = 0
				return s
			}, []error{ErrCorruptRecord}},
		{"target lease expired", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.TargetLease = missingLease(t, ownerA.ID)
				return s
			}, []error{ErrConflict}},
		{"target lease of another run", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.TargetLease = leaseRow(t, Owner{ID: ownerA.ID, LeaseGeneration: 6}, "lA2")
				return s
			}, []error{ErrConflict}},
		{"target lease row read under another key", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.TargetLease = leaseRow(t, ownerB, "lB")
				return s
			}, []error{ErrInvalidOperation}},
		{"snapshot lacks the capacity row", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.Capacity = nil
				return s
			}, []error{ErrInvalidOperation}},
		{"authority row of another key", func() ReserveRequest { return reserveActor },
			func() Snapshot {
				s := baseSnap()
				s.Authority = missingRow(t, room)
				return s
			}, []error{ErrInvalidOperation}},
		{"Entry Spot kind", func() ReserveRequest {
			r := reserveActor
			r.Object = Object{ID: "entry:1", Kind: "entrySpot", StableType: "Entry"}
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"no stable type", func() ReserveRequest {
			r := reserveActor
			r.Object.StableType = ""
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"no reservation id", func() ReserveRequest {
			r := reserveActor
			r.Creation.ReservationID = ""
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"negative limit", func() ReserveRequest {
			r := reserveActor
			r.Target.Limits.Actors = -1
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"limit beyond 2^31-1", func() ReserveRequest {
			r := reserveActor
			r.Target.Limits.Spots = record.MaxSlots + 1
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"target owner without lease generation", func() ReserveRequest {
			r := reserveActor
			r.Target.Owner.LeaseGeneration = 0
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
		{"fence on a key already conditioned", func() ReserveRequest {
			r := reserveActor
			r.Fences = []Fence{{Key: leaseKey(t, ownerA.ID), Version: "lA"}}
			return r
		}, baseSnap, []error{ErrInvalidOperation}},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanReserve(tc.req(), tc.snap())
			wantErr(t, err, tc.kinds...)
			if len(p.Request.Mutations) != 0 {
				t.Errorf("an error came with a batch: %s", describe(p.Request))
			}
		})
	}

	t.Run("Conflict carries the current record", func(t *testing.T) {
		s := baseSnap()
		s.Authority = reservedRow(t, player, nodeB, ownerB, 7, "other", "v1")
		_, err := PlanReserve(reserveActor, s)
		var ae *Error
		if !errors.As(err, &ae) || ae.Current == nil || ae.Current.Version != "v1" || ae.Current.Record.ObjectGeneration != 7 {
			t.Fatalf("error %v does not carry the current row", err)
		}
	})
}

// TestCapacityTable covers every row of §3.3's capacity table and the §4
// limit rules.
func TestCapacityTable(t *testing.T) {
	ctrKey := objGenKey(t)
	snapFor := func(o Object, rows ...CapacityRow) Snapshot {
		return Snapshot{
			StoreNow:         storeNow,
			Authority:        missingRow(t, o),
			ObjectGeneration: CounterRow{Key: ctrKey, Found: true, Value: 1, Version: "c"},
			TargetLease:      leaseRow(t, ownerA, "lA"),
			Capacity:         rows,
		}
	}
	type change struct {
		id            CounterID
		before, after Usage
	}
	cases := []struct {
		name   string
		obj    Object
		limits Limits
		rows   []CapacityRow
		want   []change
		err    []error
	}{
		{name: "Actor: 1 actor slot (an Entry Spot's Actor is an actor too)", obj: player,
			rows: []CapacityRow{noCap(actorsOf(nodeA)), noCap(spotsOf(nodeA))},
			want: []change{{actorsOf(nodeA), Usage{}, Usage{1, 0}}}},
		{name: "User Spot: 1 spot slot + 1 slot of (userSpot, Room)", obj: room,
			rows: []CapacityRow{capRow(spotsOf(nodeA), 1, 4, "s"), noCap(spotTypeOf(nodeA, record.ObjectUserSpot, "Room"))},
			want: []change{{spotsOf(nodeA), Usage{1, 4}, Usage{2, 4}}, {spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), Usage{}, Usage{1, 0}}}},
		{name: "Instance Spot: 1 spot slot + 1 slot of (instanceSpot, Shard)", obj: shard,
			rows: []CapacityRow{noCap(spotsOf(nodeA)), capRow(spotTypeOf(nodeA, record.ObjectInstanceSpot, "Shard"), 0, 2, "t")},
			want: []change{{spotsOf(nodeA), Usage{}, Usage{1, 0}}, {spotTypeOf(nodeA, record.ObjectInstanceSpot, "Shard"), Usage{0, 2}, Usage{1, 2}}}},
		{name: "limit 0 is unlimited", obj: player, limits: Limits{Actors: 0},
			rows: []CapacityRow{capRow(actorsOf(nodeA), 500, 100000, "a")},
			want: []change{{actorsOf(nodeA), Usage{500, 100000}, Usage{501, 100000}}}},
		{name: "the last slot under a limit", obj: player, limits: Limits{Actors: 3},
			rows: []CapacityRow{capRow(actorsOf(nodeA), 1, 1, "a")},
			want: []change{{actorsOf(nodeA), Usage{1, 1}, Usage{2, 1}}}},
		{name: "limit counts reserved and active", obj: player, limits: Limits{Actors: 3},
			rows: []CapacityRow{capRow(actorsOf(nodeA), 1, 2, "a")}, err: []error{ErrCapacityExhausted}},
		{name: "limit 1", obj: player, limits: Limits{Actors: 1},
			rows: []CapacityRow{capRow(actorsOf(nodeA), 0, 1, "a")}, err: []error{ErrCapacityExhausted}},
		{name: "limit 2^31-1", obj: player, limits: Limits{Actors: record.MaxSlots},
			rows: []CapacityRow{capRow(actorsOf(nodeA), 0, record.MaxSlots, "a")}, err: []error{ErrCapacityExhausted}},
		{name: "unlimited still stops at the 2^31-1 slot range", obj: player,
			rows: []CapacityRow{capRow(actorsOf(nodeA), 1, record.MaxSlots-1, "a")}, err: []error{ErrCapacityExhausted}},
		{name: "Spot limit reached", obj: room, limits: Limits{Spots: 2, SpotType: 10},
			rows: []CapacityRow{capRow(spotsOf(nodeA), 0, 2, "s"), noCap(spotTypeOf(nodeA, record.ObjectUserSpot, "Room"))},
			err:  []error{ErrCapacityExhausted}},
		{name: "Spot type limit reached while spots remain", obj: room, limits: Limits{Spots: 10, SpotType: 1},
			rows: []CapacityRow{capRow(spotsOf(nodeA), 0, 2, "s"), capRow(spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), 1, 0, "t")},
			err:  []error{ErrCapacityExhausted}},
		{name: "the actor limit does not bound spots", obj: room, limits: Limits{Actors: 1},
			rows: []CapacityRow{capRow(spotsOf(nodeA), 0, 5, "s"), noCap(spotTypeOf(nodeA, record.ObjectUserSpot, "Room"))},
			want: []change{{spotsOf(nodeA), Usage{0, 5}, Usage{1, 5}}, {spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), Usage{}, Usage{1, 0}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := ReserveRequest{Object: tc.obj, Target: Target{Node: nodeA, Owner: ownerA, Limits: tc.limits}, Creation: pending("r")}
			p, err := PlanReserve(req, snapFor(tc.obj, tc.rows...))
			if tc.err != nil {
				wantErr(t, err, tc.err...)
				var ae *Error
				if errors.As(err, &ae) && ae.Counter == nil {
					t.Error("ErrCapacityExhausted does not name the counter")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]change{}
			secured, active := map[string]bool{}, map[string]bool{}
			for _, c := range tc.want {
				want[c.id.String()] = c
				secured[secKey(t, c.id)], active[actKey(t, c.id)] = true, true
			}
			if len(p.Capacity) != len(tc.want) {
				t.Fatalf("changed %d counters, want %d: %+v", len(p.Capacity), len(tc.want), p.Capacity)
			}
			for _, c := range p.Capacity {
				w, ok := want[c.ID.String()]
				if !ok || c.Before != w.before || c.After != w.after || !c.ID.equal(w.id) {
					t.Errorf("change %s %+v -> %+v not expected (want %+v)", c.ID, c.Before, c.After, w)
				}
			}
			// Every changed counter's secured row is conditioned and
			// written; a Reserve leaves the active rows alone.
			capMuts := 0
			for _, m := range p.Request.Mutations {
				if secured[m.Key] {
					capMuts++
				}
				if active[m.Key] {
					t.Errorf("a Reserve wrote the active row %s", m.Key)
				}
			}
			for _, c := range p.Request.Conditions {
				if active[c.Key] {
					t.Errorf("a Reserve conditioned the active row %s", c.Key)
				}
			}
			if capMuts != len(tc.want) {
				t.Errorf("%d capacity mutations, want %d", capMuts, len(tc.want))
			}
		})
	}

	t.Run("User Spot relocation with 3 member Actors: 1 spot, 1 Room, 3 actor slots", func(t *testing.T) {
		bun, err := RelocationBundle(record.ObjectUserSpot, "Room", 3)
		if err != nil {
			t.Fatal(err)
		}
		snap := Snapshot{TargetLease: leaseRow(t, ownerB, "lB"), Capacity: []CapacityRow{
			capRow(actorsOf(nodeB), 0, 10, "a"), noCap(spotsOf(nodeB)), noCap(spotTypeOf(nodeB, record.ObjectUserSpot, "Room")),
		}}
		p, err := PlanSecureCapacity(CapacityRequest{Target: targetB(), Bundle: bun}, snap)
		if err != nil {
			t.Fatal(err)
		}
		roomB := spotTypeOf(nodeB, record.ObjectUserSpot, "Room")
		keys := sortedKeys(secKey(t, actorsOf(nodeB)), secKey(t, spotsOf(nodeB)), secKey(t, roomB))
		vals := map[string][]byte{ // the secured rows only: reserved grows, active stays
			secKey(t, actorsOf(nodeB)): secVal(t, actorsOf(nodeB), 13),
			secKey(t, spotsOf(nodeB)):  secVal(t, spotsOf(nodeB), 1),
			secKey(t, roomB):           secVal(t, roomB, 1),
		}
		conds := map[string]locstore.Condition{
			secKey(t, actorsOf(nodeB)): locstore.IfVersion(secKey(t, actorsOf(nodeB)), "as"),
			secKey(t, spotsOf(nodeB)):  locstore.IfMissing(secKey(t, spotsOf(nodeB))),
			secKey(t, roomB):           locstore.IfMissing(secKey(t, roomB)),
		}
		want := locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion(leaseKey(t, ownerB.ID), "lB")}}
		for _, k := range keys {
			want.Conditions = append(want.Conditions, conds[k])
			want.Mutations = append(want.Mutations, locstore.Put(k, vals[k]))
		}
		wantRequest(t, p.Request, want)
		if p.AuthorityMutation != -1 || p.Record != nil {
			t.Error("a capacity-only plan touches an authority record")
		}
	})

	t.Run("a bundle needs at least one positive slot", func(t *testing.T) {
		snap := Snapshot{TargetLease: leaseRow(t, ownerB, "lB")}
		_, err := PlanSecureCapacity(CapacityRequest{Target: targetB(), Bundle: Bundle{}}, snap)
		wantErr(t, err, ErrInvalidOperation)
		zeroSpot := Bundle{SpotType: &record.SpotTypeSlots{ObjectKind: record.ObjectUserSpot, StableType: "Room", Count: 0}}
		_, err = PlanSecureCapacity(CapacityRequest{Target: targetB(), Bundle: zeroSpot}, snap)
		wantErr(t, err, ErrInvalidOperation)
		if _, err := RelocationBundle(record.ObjectUserSpot, "Room", 0); err != nil {
			t.Errorf("a Spot alone is a positive bundle: %v", err)
		}
		if _, err := RelocationBundle(record.ObjectActor, "Player", 2); err == nil {
			t.Error("an Actor relocation bundle built as a Spot bundle")
		}
	})

	t.Run("Entry Spot has no bundle", func(t *testing.T) {
		if _, err := BundleFor("entrySpot", "Entry"); err == nil {
			t.Error("BundleFor accepted an Entry Spot")
		}
		b, err := BundleFor(record.ObjectActor, "EntryMember")
		if err != nil || b.Actors != 1 || b.Spots != 0 || b.SpotType != nil {
			t.Errorf("actor bundle = %+v, %v", b, err)
		}
	})
}

func TestPlanReleaseCapacity(t *testing.T) {
	bun, _ := RelocationBundle(record.ObjectUserSpot, "Room", 1)
	room := spotTypeOf(nodeB, record.ObjectUserSpot, "Room")
	snap := Snapshot{Capacity: []CapacityRow{capRow(actorsOf(nodeB), 1, 4, "a"), capRow(spotsOf(nodeB), 1, 0, "s"), capRow(room, 2, 0, "t")}}
	p, err := PlanReleaseCapacity(CapacityRequest{Target: Target{Node: nodeB}, Bundle: bun}, snap)
	if err != nil {
		t.Fatal(err)
	}
	// Releasing reserved slots lowers the secured rows only.
	keys := sortedKeys(secKey(t, actorsOf(nodeB)), secKey(t, spotsOf(nodeB)), secKey(t, room))
	muts := map[string]locstore.Mutation{
		secKey(t, actorsOf(nodeB)): locstore.Put(secKey(t, actorsOf(nodeB)), secVal(t, actorsOf(nodeB), 4)),
		secKey(t, spotsOf(nodeB)):  locstore.Delete(secKey(t, spotsOf(nodeB))), // back to zero: the row goes
		secKey(t, room):            locstore.Put(secKey(t, room), secVal(t, room, 1)),
	}
	vers := map[string]string{secKey(t, actorsOf(nodeB)): "as", secKey(t, spotsOf(nodeB)): "ss", secKey(t, room): "ts"}
	var want locstore.WriteRequest
	for _, k := range keys {
		want.Conditions = append(want.Conditions, locstore.IfVersion(k, vers[k]))
		want.Mutations = append(want.Mutations, muts[k])
	}
	wantRequest(t, p.Request, want)

	snap.Capacity[1] = noCap(spotsOf(nodeB))
	_, err = PlanReleaseCapacity(CapacityRequest{Target: Target{Node: nodeB}, Bundle: bun}, snap)
	wantErr(t, err, ErrCorruptRecord)
}

func createdTerminal(deadline time.Time) *TerminalResult {
	return &TerminalResult{
		Operation:     OperationRef{SourceRoutingID: []byte{0xc1}, SourceRunGeneration: 4, OperationID: [16]byte{1, 2, 3}},
		RequestSHA256: [32]byte{9},
		Deadline:      deadline,
		Outcome:       OutcomeCreated,
	}
}

func TestPlanCommit(t *testing.T) {
	base := func() (CommitRequest, Snapshot) {
		return CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA, ObjectGeneration: 101, IfVersion: "v1"},
			Snapshot{
				StoreNow:   storeNow,
				Authority:  reservedRow(t, player, nodeA, ownerA, 101, "res-1", "v1"),
				OwnerLease: leaseRow(t, ownerA, "lA"),
				Capacity:   []CapacityRow{capRow(actorsOf(nodeA), 1, 2, "k1")},
			}
	}

	t.Run("Reserved to Active with the Created result, exact batch", func(t *testing.T) {
		req, snap := base()
		deadline := storeNow.Add(10 * time.Second)
		req.Terminal = createdTerminal(deadline)
		p, err := PlanCommit(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		rec := authority(player, nodeA, ownerA, record.AllocationActive, 101, 1)
		termKey, err := TerminalKey(req.Terminal.Operation)
		if err != nil {
			t.Fatal(err)
		}
		term := TerminalRecord{
			Operation: req.Terminal.Operation, RequestSHA256: req.Terminal.RequestSHA256,
			ID: player.ID, ObjectKind: player.Kind, StableType: player.StableType, Outcome: OutcomeCreated,
			Ref:      &CreatedRef{ObjectGeneration: 101, AuthorityOwnerGeneration: 1, MeshName: nodeA.MeshName, RoutingID: nodeA.RoutingID},
			Deadline: record.EpochMillisOf(deadline), RecordedAt: record.EpochMillisOf(storeNow),
		}
		termValue, err := term.Encode()
		if err != nil {
			t.Fatal(err)
		}
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v1"),
				locstore.IfVersion(leaseKey(t, ownerA.ID), "lA"),
				// reserved 1→0, active 2→3: the secured row (3) stays and is
				// not conditioned (the slot is the Reserved record's own)
				locstore.IfVersion(actKey(t, actorsOf(nodeA)), "k1a"),
				locstore.IfMissing(termKey),
			},
			Mutations: []locstore.Mutation{
				locstore.Put(authKey(t, player), encodeAuth(t, rec)),
				locstore.Put(actKey(t, actorsOf(nodeA)), actVal(t, actorsOf(nodeA), 3)),
				// deadline 10 s after StoreNow, kept 5 min past it
				locstore.PutExpiring(termKey, termValue, 5*time.Minute+10*time.Second),
			},
		})
		if p.Record.PendingCreation != nil {
			t.Error("pendingCreation kept without KeepPendingCreation")
		}
	})

	t.Run("Instance Spot keeps pendingCreation and takes a new payload", func(t *testing.T) {
		req := CommitRequest{Object: shard, ReservationID: "res-9", Owner: ownerA, KeepPendingCreation: true, Payload: SetPayload([]byte("ready"))}
		snap := Snapshot{
			Authority:  reservedRow(t, shard, nodeA, ownerA, 5, "res-9", "v"),
			OwnerLease: leaseRow(t, ownerA, "lA"),
			Capacity:   []CapacityRow{capRow(spotsOf(nodeA), 1, 0, "s"), capRow(spotTypeOf(nodeA, record.ObjectInstanceSpot, "Shard"), 1, 0, "t")},
		}
		p, err := PlanCommit(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if p.Record.PendingCreation == nil || p.Record.PendingCreation.ReservationID != "res-9" || string(p.Record.Payload) != "ready" {
			t.Errorf("record = %+v", p.Record)
		}
		for _, c := range p.Capacity {
			if c.After != (Usage{0, 1}) {
				t.Errorf("%s after = %+v, want reserved 0 active 1", c.ID, c.After)
			}
		}
		if len(p.Capacity) != 2 {
			t.Errorf("changed %d counters, want spots and spotType", len(p.Capacity))
		}
	})

	t.Run("retention already over: no final result", func(t *testing.T) {
		req, snap := base()
		req.Terminal = createdTerminal(storeNow.Add(-6 * time.Minute))
		p, err := PlanCommit(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if !p.TerminalSkipped || p.Terminal != nil || len(p.Request.Mutations) != 2 {
			t.Errorf("skipped=%v terminal=%v batch:\n%s", p.TerminalSkipped, p.Terminal, describe(p.Request))
		}
	})

	checkPlanErrors(t, base, PlanCommit, []planErrCase[CommitRequest]{
		{"another reservation", func(r *CommitRequest, s *Snapshot) { r.ReservationID = "res-2" }, []error{ErrConflict}},
		{"already Active", func(r *CommitRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeA, ownerA, 101, 1, "v1")
		}, []error{ErrConflict}},
		{"Missing", func(r *CommitRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"another ObjectGeneration", func(r *CommitRequest, s *Snapshot) { r.ObjectGeneration = 100 }, []error{ErrStaleGeneration, ErrConflict}},
		{"StoreVersion changed since Reserve", func(r *CommitRequest, s *Snapshot) { r.IfVersion = "v0" }, []error{ErrConflict}},
		{"committer is not the owner", func(r *CommitRequest, s *Snapshot) {
			r.Owner = ownerB
			s.OwnerLease = leaseRow(t, ownerB, "lB")
		}, []error{ErrConflict}},
		{"owner lease expired", func(r *CommitRequest, s *Snapshot) { s.OwnerLease = missingLease(t, ownerA.ID) }, []error{ErrConflict}},
		{"a rejected result on Commit", func(r *CommitRequest, s *Snapshot) {
			r.Terminal = createdTerminal(storeNow)
			r.Terminal.Outcome = OutcomeRejected
		}, []error{ErrInvalidOperation}},
		{"counter holds fewer reserved slots than the record", func(r *CommitRequest, s *Snapshot) {
			s.Capacity = []CapacityRow{capRow(actorsOf(nodeA), 0, 2, "k1")}
		}, []error{ErrCorruptRecord}},
		{"type mismatch", func(r *CommitRequest, s *Snapshot) { r.Object.StableType = "Npc" }, []error{ErrTypeMismatch, ErrConflict}},
		{"no reservation id", func(r *CommitRequest, s *Snapshot) { r.ReservationID = "" }, []error{ErrInvalidOperation}},
	})
}

func TestPlanAbort(t *testing.T) {
	base := func() (AbortRequest, Snapshot) {
		return AbortRequest{Object: room, ReservationID: "res-1"},
			Snapshot{
				StoreNow:  storeNow,
				Authority: reservedRow(t, room, nodeA, ownerA, 50, "res-1", "v1"),
				Capacity:  []CapacityRow{capRow(spotsOf(nodeA), 1, 3, "s"), capRow(spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), 1, 0, "t")},
			}
	}
	roomType := spotTypeOf(nodeA, record.ObjectUserSpot, "Room")

	t.Run("Reserved to Missing with a Rejected result, exact batch", func(t *testing.T) {
		req, snap := base()
		req.Terminal = createdTerminal(storeNow.Add(time.Minute))
		req.Terminal.Outcome, req.Terminal.Reason, req.Terminal.Reply = OutcomeRejected, "room is full", []byte("sorry")
		p, err := PlanAbort(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		termKey, err := TerminalKey(req.Terminal.Operation)
		if err != nil {
			t.Fatal(err)
		}
		reason := "room is full"
		termValue, err := TerminalRecord{
			Operation: req.Terminal.Operation, RequestSHA256: req.Terminal.RequestSHA256,
			ID: room.ID, ObjectKind: room.Kind, StableType: room.StableType, Outcome: OutcomeRejected, Reason: &reason,
			Reply: []byte("sorry"), Deadline: record.EpochMillisOf(storeNow.Add(time.Minute)), RecordedAt: record.EpochMillisOf(storeNow),
		}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		// The reserved slots go back: the secured rows only.
		keys := sortedKeys(secKey(t, spotsOf(nodeA)), secKey(t, roomType))
		muts := map[string]locstore.Mutation{
			secKey(t, spotsOf(nodeA)): locstore.Put(secKey(t, spotsOf(nodeA)), secVal(t, spotsOf(nodeA), 3)),
			secKey(t, roomType):       locstore.Delete(secKey(t, roomType)),
		}
		vers := map[string]string{secKey(t, spotsOf(nodeA)): "ss", secKey(t, roomType): "ts"}
		want := locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfVersion(authKey(t, room), "v1")},
			Mutations:  []locstore.Mutation{locstore.Delete(authKey(t, room))},
		}
		for _, k := range keys {
			want.Conditions = append(want.Conditions, locstore.IfVersion(k, vers[k]))
			want.Mutations = append(want.Mutations, muts[k])
		}
		want.Conditions = append(want.Conditions, locstore.IfMissing(termKey))
		want.Mutations = append(want.Mutations, locstore.PutExpiring(termKey, termValue, 6*time.Minute))
		wantRequest(t, p.Request, want)
		if p.Record != nil || p.AuthorityMutation != 0 {
			t.Errorf("Abort plan record=%v authority mutation=%d", p.Record, p.AuthorityMutation)
		}
	})

	t.Run("typed Failed result", func(t *testing.T) {
		req, snap := base()
		req.Terminal = createdTerminal(storeNow.Add(time.Minute))
		req.Terminal.Outcome, req.Terminal.Failure = OutcomeFailed, &Failure{Type: "factoryPanic", Message: "nil map"}
		p, err := PlanAbort(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if p.Terminal == nil || p.Terminal.Outcome != OutcomeFailed || p.Terminal.Failure.Type != "factoryPanic" || p.Terminal.Ref != nil {
			t.Errorf("terminal = %+v", p.Terminal)
		}
	})

	t.Run("framework failure: no final result, no lease", func(t *testing.T) {
		req, snap := base()
		p, err := PlanAbort(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if p.Terminal != nil || len(p.Request.Conditions) != 3 || len(p.Request.Mutations) != 3 {
			t.Errorf("batch:\n%s", describe(p.Request))
		}
	})

	t.Run("with the owner, its lease is verified", func(t *testing.T) {
		req, snap := base()
		req.Owner = &ownerA
		snap.OwnerLease = leaseRow(t, ownerA, "lA")
		p, err := PlanAbort(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if c := p.Request.Conditions[1]; c != locstore.IfVersion(leaseKey(t, ownerA.ID), "lA") {
			t.Errorf("condition 1 = %+v", c)
		}
	})

	checkPlanErrors(t, base, PlanAbort, []planErrCase[AbortRequest]{
		{"another reservation", func(r *AbortRequest, s *Snapshot) { r.ReservationID = "x" }, []error{ErrConflict}},
		{"Active", func(r *AbortRequest, s *Snapshot) { s.Authority = activeRow(t, room, nodeA, ownerA, 50, 1, "v1") }, []error{ErrConflict}},
		{"Missing", func(r *AbortRequest, s *Snapshot) { s.Authority = missingRow(t, room) }, []error{ErrNotFound, ErrConflict}},
		{"owner lease expired", func(r *AbortRequest, s *Snapshot) {
			r.Owner = &ownerA
			s.OwnerLease = missingLease(t, ownerA.ID)
		}, []error{ErrConflict}},
		{"a created result on Abort", func(r *AbortRequest, s *Snapshot) { r.Terminal = createdTerminal(storeNow) }, []error{ErrInvalidOperation}},
		{"a failed result without its failure", func(r *AbortRequest, s *Snapshot) {
			r.Terminal = createdTerminal(storeNow.Add(time.Minute))
			r.Terminal.Outcome = OutcomeFailed
		}, []error{ErrInvalidOperation}},
	})
}

// The reservation's end deletes the creation request it stored in the
// Location Store (storedRequest), in the same batch; a reference to
// anything else (an Instance Spot's Relocation Store payload) is left to
// its own path, and so is a request pendingCreation still names.
func TestReservationEndDeletesItsStoredRequest(t *testing.T) {
	stored := record.KindPrefix(KindCreationRequest) + strings.Repeat("ab", 32)
	other := "meshnode/instance-activation/x"
	rowWith := func(ref string) AuthorityRow {
		row := reservedRow(t, player, nodeA, ownerA, 101, "res-1", "v1")
		pc := *row.Record.PendingCreation
		pc.RequestContentReference = ref
		row.Record.PendingCreation = &pc
		return row
	}
	snap := func(ref string) Snapshot {
		return Snapshot{StoreNow: storeNow, Authority: rowWith(ref), OwnerLease: leaseRow(t, ownerA, "lA"),
			Capacity: []CapacityRow{capRow(actorsOf(nodeA), 1, 2, "k1")}}
	}
	commit := func(keep bool) func(Snapshot) (Plan, error) {
		return func(s Snapshot) (Plan, error) {
			return PlanCommit(CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA, KeepPendingCreation: keep}, s)
		}
	}
	abort := func(s Snapshot) (Plan, error) {
		return PlanAbort(AbortRequest{Object: player, ReservationID: "res-1", Owner: &ownerA}, s)
	}
	for _, tc := range []struct {
		name    string
		plan    func(Snapshot) (Plan, error)
		ref     string
		deleted bool
	}{
		{"Commit deletes the stored request", commit(false), stored, true},
		{"Commit keeping pendingCreation keeps it", commit(true), stored, false},
		{"Abort deletes the stored request", abort, stored, true},
		{"Commit leaves another store's payload", commit(false), other, false},
		{"Abort leaves another store's payload", abort, other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.plan(snap(tc.ref))
			if err != nil {
				t.Fatal(err)
			}
			var deletes int
			for _, m := range p.Request.Mutations {
				if m.Key == tc.ref {
					if m.Kind != locstore.MutDelete {
						t.Fatalf("mutation of the request row %+v, want a Delete", m)
					}
					deletes++
				}
			}
			for _, c := range p.Request.Conditions {
				if c.Key == tc.ref {
					t.Errorf("the request row is conditioned (%+v): deleting it needs no condition", c)
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.deleted]; deletes != want {
				t.Fatalf("%d deletes of the request row, want %d: %+v", deletes, want, p.Request.Mutations)
			}
		})
	}
}

func TestPlanPreserve(t *testing.T) {
	base := func() (PreserveRequest, Snapshot) {
		row := activeRow(t, player, nodeA, ownerA, 101, 4, "v1")
		pc := pending("res-1")
		row.Record.PendingCreation = &pc
		return PreserveRequest{Object: player, ObjectGeneration: 101, Owner: ownerA, Payload: SetPayload([]byte("progress"))},
			Snapshot{Authority: row, OwnerLease: leaseRow(t, ownerA, "lA")}
	}

	t.Run("Active: only the payload changes, exact batch", func(t *testing.T) {
		req, snap := base()
		p, err := PlanPreserve(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		want := snap.Authority.Record
		want.Payload = []byte("progress")
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v1"),
				locstore.IfVersion(leaseKey(t, ownerA.ID), "lA"),
			},
			Mutations: []locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, want))},
		})
		if len(p.Capacity) != 0 {
			t.Error("Preserve changed capacity")
		}
	})

	t.Run("clearing pendingCreation", func(t *testing.T) {
		req, snap := base()
		req.Payload, req.ClearPendingCreation = PayloadUpdate{}, true
		p, err := PlanPreserve(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		want := snap.Authority.Record
		want.PendingCreation = nil
		if !bytes.Equal(p.Value, encodeAuth(t, want)) {
			t.Errorf("value = %s", p.Value)
		}
	})

	checkPlanErrors(t, base, PlanPreserve, []planErrCase[PreserveRequest]{
		{"Reserved record", func(r *PreserveRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 101, "res-1", "v1")
		}, []error{ErrConflict}},
		{"Missing", func(r *PreserveRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"stale lease", func(r *PreserveRequest, s *Snapshot) {
			s.OwnerLease = leaseRow(t, Owner{ID: ownerA.ID, LeaseGeneration: 6}, "lA")
		}, []error{ErrConflict}},
		{"expired lease", func(r *PreserveRequest, s *Snapshot) { s.OwnerLease = missingLease(t, ownerA.ID) }, []error{ErrConflict}},
		{"not the owner", func(r *PreserveRequest, s *Snapshot) {
			r.Owner = ownerB
			s.OwnerLease = leaseRow(t, ownerB, "lB")
		}, []error{ErrConflict}},
		{"another generation of the Id", func(r *PreserveRequest, s *Snapshot) { r.ObjectGeneration = 99 }, []error{ErrStaleGeneration, ErrConflict}},
		{"no generation given", func(r *PreserveRequest, s *Snapshot) { r.ObjectGeneration = 0 }, []error{ErrInvalidOperation}},
		{"first-read version changed", func(r *PreserveRequest, s *Snapshot) { r.IfVersion = "v0" }, []error{ErrConflict}},
	})
}

func TestPlanNewOwner(t *testing.T) {
	base := func() (NewOwnerRequest, Snapshot) {
		return NewOwnerRequest{Object: player, ObjectGeneration: 101, IfVersion: "v1", Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Actors: 10}}},
			Snapshot{
				Authority:   activeRow(t, player, nodeA, ownerA, 101, 4, "v1"),
				TargetLease: leaseRow(t, ownerB, "lB"),
				Capacity:    []CapacityRow{capRow(actorsOf(nodeA), 0, 3, "ka"), capRow(actorsOf(nodeB), 1, 2, "kb")},
			}
	}
	moved := func() record.Authority {
		a := authority(player, nodeB, ownerB, record.AllocationActive, 101, 5)
		return a
	}
	// The source's slots leave both its rows; the target's arrive under
	// its limits (both rows grow) or, pre-secured, move from reserved to
	// active with the secured row held unchanged (no reservation row
	// guards an unkeyed pre-secured move).
	capBatch := func(srcAfter, dstAfter Usage, preSecured bool) ([]locstore.Condition, []locstore.Mutation) {
		_, snap := base()
		return capBatch(t, capStep{row: snap.Capacity[0], after: srcAfter}, capStep{row: snap.Capacity[1], after: dstAfter, holdSecured: preSecured})
	}

	t.Run("Active to the target owner under its limits, exact batch", func(t *testing.T) {
		req, snap := base()
		p, err := PlanNewOwner(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		conds, muts := capBatch(Usage{0, 2}, Usage{1, 3}, false)
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: append([]locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v1"),
				locstore.IfVersion(leaseKey(t, ownerB.ID), "lB"),
			}, conds...),
			Mutations: append([]locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, moved()))}, muts...),
		})
		if p.Record.ObjectGeneration != 101 || p.Record.AuthorityOwnerGeneration != 5 {
			t.Errorf("generations %d/%d, want ObjectGeneration kept (101) and AuthorityOwnerGeneration 4+1",
				p.Record.ObjectGeneration, p.Record.AuthorityOwnerGeneration)
		}
	})

	t.Run("pre-secured target capacity turns reserved into active", func(t *testing.T) {
		req, snap := base()
		req.PreSecured = true
		p, err := PlanNewOwner(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		conds, muts := capBatch(Usage{0, 2}, Usage{0, 3}, true)
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: append([]locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v1"),
				locstore.IfVersion(leaseKey(t, ownerB.ID), "lB"),
			}, conds...),
			Mutations: append([]locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, moved()))}, muts...),
		})
	})

	t.Run("pre-secured ignores the limit it was secured under", func(t *testing.T) {
		req, snap := base()
		req.PreSecured, req.Target.Limits.Actors = true, 3
		if _, err := PlanNewOwner(req, snap); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a User Spot moves its spot and spot-type slots", func(t *testing.T) {
		req := NewOwnerRequest{Object: room, ObjectGeneration: 8, Target: targetB()}
		snap := Snapshot{
			Authority:   activeRow(t, room, nodeA, ownerA, 8, 1, "v"),
			TargetLease: leaseRow(t, ownerB, "lB"),
			Capacity: []CapacityRow{capRow(spotsOf(nodeA), 0, 1, "sa"), capRow(spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), 0, 1, "ta"),
				noCap(spotsOf(nodeB)), noCap(spotTypeOf(nodeB, record.ObjectUserSpot, "Room"))},
		}
		p, err := PlanNewOwner(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]CapacityChange{}
		for _, c := range p.Capacity {
			got[c.ID.String()] = c
		}
		for _, w := range []struct {
			id    CounterID
			after Usage
		}{
			{spotsOf(nodeA), Usage{}}, {spotTypeOf(nodeA, record.ObjectUserSpot, "Room"), Usage{}},
			{spotsOf(nodeB), Usage{0, 1}}, {spotTypeOf(nodeB, record.ObjectUserSpot, "Room"), Usage{0, 1}},
		} {
			c, ok := got[w.id.String()]
			if !ok || c.After != w.after {
				t.Errorf("%s: %+v (present %v), want after %+v", w.id, c, ok, w.after)
			}
		}
		// The source's rows back at zero are deleted.
		for _, id := range []CounterID{spotsOf(nodeA), spotTypeOf(nodeA, record.ObjectUserSpot, "Room")} {
			for _, k := range []string{secKey(t, id), actKey(t, id)} {
				if !slices.ContainsFunc(p.Request.Mutations, func(m locstore.Mutation) bool { return m.Kind == locstore.MutDelete && m.Key == k }) {
					t.Errorf("%s: row %s not deleted at zero", id, k)
				}
			}
		}
		if len(got) != 4 {
			t.Errorf("%d counters changed, want 4", len(got))
		}
	})

	checkPlanErrors(t, base, PlanNewOwner, []planErrCase[NewOwnerRequest]{
		{"Reserved record", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 101, "res", "v1")
		}, []error{ErrConflict}},
		{"Missing", func(r *NewOwnerRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"target lease expired", func(r *NewOwnerRequest, s *Snapshot) { s.TargetLease = missingLease(t, ownerB.ID) }, []error{ErrConflict}},
		{"target lease of another run", func(r *NewOwnerRequest, s *Snapshot) {
			s.TargetLease = leaseRow(t, Owner{ID: ownerB.ID, LeaseGeneration: 10}, "lB")
		}, []error{ErrConflict}},
		{"target capacity exhausted", func(r *NewOwnerRequest, s *Snapshot) { r.Target.Limits.Actors = 3 }, []error{ErrCapacityExhausted}},
		{"pre-secured capacity missing", func(r *NewOwnerRequest, s *Snapshot) {
			r.PreSecured = true
			s.Capacity[1] = capRow(actorsOf(nodeB), 0, 2, "kb")
		}, []error{ErrConflict}},
		{"target is the current owner on the current node", func(r *NewOwnerRequest, s *Snapshot) {
			r.Target = targetA()
			s.TargetLease = leaseRow(t, ownerA, "lA")
		}, []error{ErrInvalidOperation}},
		{"target node is the current node under another owner", func(r *NewOwnerRequest, s *Snapshot) {
			r.Target.Node = nodeA
		}, []error{ErrInvalidOperation}},
		{"target without owner id", func(r *NewOwnerRequest, s *Snapshot) { r.Target.Owner.ID = "" }, []error{ErrInvalidOperation}},
		{"target without lifecycle generation", func(r *NewOwnerRequest, s *Snapshot) { r.Target.Node.LifecycleGeneration = 0 }, []error{ErrInvalidOperation}},
		{"target lease row of another owner", func(r *NewOwnerRequest, s *Snapshot) { s.TargetLease = leaseRow(t, ownerA, "lA") }, []error{ErrInvalidOperation}},
		{"AuthorityOwnerGeneration exhausted", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority.Record.AuthorityOwnerGeneration = record.Generation(gen.MaxIssued)
		}, []error{ErrGenerationExhausted}},
		{"creation recovery state still held", func(r *NewOwnerRequest, s *Snapshot) {
			pc := pending("res")
			s.Authority.Record.PendingCreation = &pc
		}, []error{ErrConflict}},
		{"first-read version changed", func(r *NewOwnerRequest, s *Snapshot) { s.Authority.Version = "v2" }, []error{ErrConflict}},
		{"another generation of the Id", func(r *NewOwnerRequest, s *Snapshot) { r.ObjectGeneration = 100 }, []error{ErrStaleGeneration, ErrConflict}},
		{"snapshot lacks the target counter", func(r *NewOwnerRequest, s *Snapshot) { s.Capacity = s.Capacity[:1] }, []error{ErrInvalidOperation}},
	})
}

// TestPlanRefusedAtFinish: a batch that passes every planner check but not
// the SPI's own bounds (here a fence version above MaxVersionBytes, which
// only WriteRequest.Validate measures) is refused by the planner's last step
// as ErrInvalidOperation, with no plan — never sent for the store to refuse.
func TestPlanRefusedAtFinish(t *testing.T) {
	fence := []Fence{{Key: "fence", Version: strings.Repeat("9", locstore.MaxVersionBytes+1)}}
	plans := map[string]func() (Plan, error){
		"Preserve": func() (Plan, error) {
			return PlanPreserve(PreserveRequest{Object: player, ObjectGeneration: 101, Owner: ownerA, Payload: SetPayload([]byte("p")), Fences: fence},
				Snapshot{Authority: activeRow(t, player, nodeA, ownerA, 101, 4, "v1"), OwnerLease: leaseRow(t, ownerA, "lA")})
		},
		"Delete": func() (Plan, error) {
			return PlanDelete(DeleteRequest{Object: player, ObjectGeneration: 101, Owner: ownerA, Fences: fence},
				Snapshot{Authority: activeRow(t, player, nodeA, ownerA, 101, 2, "v1"), OwnerLease: leaseRow(t, ownerA, "lA"),
					Capacity: []CapacityRow{capRow(actorsOf(nodeA), 0, 3, "k1")}})
		},
	}
	for name, plan := range plans {
		t.Run(name, func(t *testing.T) {
			p, err := plan()
			wantErr(t, err, ErrInvalidOperation)
			if !errors.Is(err, locstore.ErrArgument) || !strings.Contains(err.Error(), "planned batch") {
				t.Errorf("error %v does not carry the SPI's ArgumentError on the planned batch", err)
			}
			if p.Op != "" || len(p.Request.Conditions)+len(p.Request.Mutations) != 0 {
				t.Errorf("a refused plan came back with a batch of %d conditions and %d mutations", len(p.Request.Conditions), len(p.Request.Mutations))
			}
		})
	}
}

// removedActiveBatch is the batch that removes player's Active record
// (version v1) on nodeA with its active slot (the actors counter, rows k1s
// and k1a, 3 → 2) while lease holds: PlanDelete's with the owner's live
// lease, PlanReclaim's with the ended one.
func removedActiveBatch(t *testing.T, lease locstore.Condition) locstore.WriteRequest {
	t.Helper()
	return locstore.WriteRequest{
		Conditions: append([]locstore.Condition{
			locstore.IfVersion(authKey(t, player), "v1"),
			lease,
		}, byKey( // an active slot goes: both rows, 3 → 2
			locstore.IfVersion(secKey(t, actorsOf(nodeA)), "k1s"),
			locstore.IfVersion(actKey(t, actorsOf(nodeA)), "k1a"),
		)...),
		Mutations: append([]locstore.Mutation{
			locstore.Delete(authKey(t, player)),
		}, mutsByKey(
			locstore.Put(secKey(t, actorsOf(nodeA)), secVal(t, actorsOf(nodeA), 2)),
			locstore.Put(actKey(t, actorsOf(nodeA)), actVal(t, actorsOf(nodeA), 2)),
		)...),
	}
}

func TestPlanDelete(t *testing.T) {
	base := func() (DeleteRequest, Snapshot) {
		return DeleteRequest{Object: player, ObjectGeneration: 101, Owner: ownerA},
			Snapshot{
				Authority:  activeRow(t, player, nodeA, ownerA, 101, 2, "v1"),
				OwnerLease: leaseRow(t, ownerA, "lA"),
				Capacity:   []CapacityRow{capRow(actorsOf(nodeA), 0, 3, "k1")},
			}
	}

	t.Run("Active record and its capacity removed together, exact batch", func(t *testing.T) {
		req, snap := base()
		p, err := PlanDelete(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		wantRequest(t, p.Request, removedActiveBatch(t, locstore.IfVersion(leaseKey(t, ownerA.ID), "lA")))
	})

	checkPlanErrors(t, base, PlanDelete, []planErrCase[DeleteRequest]{
		{"Reserved record", func(r *DeleteRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 101, "res", "v1")
		}, []error{ErrConflict}},
		{"Missing", func(r *DeleteRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"another generation of the Id", func(r *DeleteRequest, s *Snapshot) { r.ObjectGeneration = 100 }, []error{ErrStaleGeneration, ErrConflict}},
		{"stale lease", func(r *DeleteRequest, s *Snapshot) {
			s.OwnerLease = leaseRow(t, Owner{ID: ownerA.ID, LeaseGeneration: 4}, "lA")
		}, []error{ErrConflict}},
		{"not the owner", func(r *DeleteRequest, s *Snapshot) {
			r.Owner = ownerB
			s.OwnerLease = leaseRow(t, ownerB, "lB")
		}, []error{ErrConflict}},
		{"counter below the record's slots", func(r *DeleteRequest, s *Snapshot) { s.Capacity = []CapacityRow{noCap(actorsOf(nodeA))} }, []error{ErrCorruptRecord}},
		{"no generation given", func(r *DeleteRequest, s *Snapshot) { r.ObjectGeneration = 0 }, []error{ErrInvalidOperation}},
		{"type mismatch", func(r *DeleteRequest, s *Snapshot) {
			r.Object = Object{ID: player.ID, Kind: record.ObjectActor, StableType: "Npc"}
		}, []error{ErrTypeMismatch, ErrConflict}},
	})
}

// TestPlanObserved checks the predicate the Executor uses after a lost
// result: a row shows a plan's effect exactly when the batch applied.
func TestPlanObserved(t *testing.T) {
	ctrKey := objGenKey(t)
	rp, err := PlanReserve(ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")}, Snapshot{
		Authority: missingRow(t, player), ObjectGeneration: CounterRow{Key: ctrKey, Found: true, Value: 10, Version: "c"},
		TargetLease: leaseRow(t, ownerA, "l"), Capacity: []CapacityRow{noCap(actorsOf(nodeA))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rp.Observed(missingRow(t, player)) {
		t.Error("Reserve observed on a missing row")
	}
	if !rp.Observed(reservedRow(t, player, nodeA, ownerA, 11, "res-1", "v")) {
		t.Error("Reserve not observed on its own record")
	}
	if rp.Observed(reservedRow(t, player, nodeA, ownerA, 11, "res-2", "v")) {
		t.Error("Reserve observed on another reservation's record")
	}

	dp, err := PlanDelete(DeleteRequest{Object: player, ObjectGeneration: 11, Owner: ownerA}, Snapshot{
		Authority: activeRow(t, player, nodeA, ownerA, 11, 1, "v"), OwnerLease: leaseRow(t, ownerA, "l"),
		Capacity: []CapacityRow{capRow(actorsOf(nodeA), 0, 1, "k")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !dp.Observed(missingRow(t, player)) || !dp.Observed(activeRow(t, player, nodeB, ownerB, 12, 1, "w")) {
		t.Error("Delete not observed on a missing or re-created row")
	}
	if dp.Observed(activeRow(t, player, nodeA, ownerA, 11, 1, "v")) {
		t.Error("Delete observed while its record is still there")
	}

	pp, err := PlanPreserve(PreserveRequest{Object: player, ObjectGeneration: 11, Owner: ownerA, Payload: SetPayload([]byte("x"))}, Snapshot{
		Authority: activeRow(t, player, nodeA, ownerA, 11, 1, "v"), OwnerLease: leaseRow(t, ownerA, "l"),
	})
	if err != nil {
		t.Fatal(err)
	}
	after := activeRow(t, player, nodeA, ownerA, 11, 1, "v2")
	after.Record.Payload = []byte("x")
	if !pp.Observed(after) || pp.Observed(activeRow(t, player, nodeA, ownerA, 11, 1, "v")) {
		t.Error("Preserve observation wrong")
	}
}

// §7.1 restart table: the recovery owner change of an Instance Spot whose
// first message is not recorded done keeps pendingCreation; every other
// owner change of such a record is refused.
func TestPlanNewOwnerResumeActivation(t *testing.T) {
	withPending := func(o Object) Snapshot {
		row := activeRow(t, o, nodeA, ownerA, 101, 4, "v1")
		pc := pending("res-1")
		row.Record.PendingCreation = &pc
		return Snapshot{Authority: row, TargetLease: leaseRow(t, ownerB, "lB"), Capacity: []CapacityRow{
			capRow(spotsOf(nodeA), 0, 1, "sa"), capRow(spotsOf(nodeB), 0, 0, "sb"),
			capRow(CounterID{Node: nodeA, Class: SlotSpotType, SpotKind: record.ObjectInstanceSpot, StableType: "Shard"}, 0, 1, "ta"),
			capRow(CounterID{Node: nodeB, Class: SlotSpotType, SpotKind: record.ObjectInstanceSpot, StableType: "Shard"}, 0, 0, "tb"),
		}}
	}
	for _, tc := range []struct {
		name   string
		obj    Object
		resume bool
		ok     bool
	}{
		{"instance spot, resume: kept", shard, true, true},
		{"instance spot, plain recovery: refused", shard, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := NewOwnerRequest{Object: tc.obj, ObjectGeneration: 101, IfVersion: "v1", ResumeActivation: tc.resume,
				Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Spots: 10}}}
			p, err := PlanNewOwner(req, withPending(tc.obj))
			if !tc.ok {
				if !errors.Is(err, ErrConflict) {
					t.Fatalf("err = %v, want Conflict", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Record.PendingCreation == nil || p.Record.PendingCreation.ReservationID != "res-1" {
				t.Fatal("the resumed record lost its pendingCreation")
			}
			if p.Record.ObjectGeneration != 101 || p.Record.OwnerID != ownerB.ID || p.Record.AuthorityOwnerGeneration != 5 {
				t.Fatalf("record %+v: want ObjectGeneration kept, owner B, AuthorityOwnerGeneration 5", p.Record)
			}
		})
	}
	t.Run("resume of a record without an activation is refused", func(t *testing.T) {
		req := NewOwnerRequest{Object: player, ObjectGeneration: 101, IfVersion: "v1", ResumeActivation: true,
			Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Actors: 10}}}
		snap := Snapshot{Authority: activeRow(t, player, nodeA, ownerA, 101, 4, "v1"), TargetLease: leaseRow(t, ownerB, "lB"),
			Capacity: []CapacityRow{capRow(actorsOf(nodeA), 0, 3, "ka"), capRow(actorsOf(nodeB), 1, 2, "kb")}}
		if _, err := PlanNewOwner(req, snap); !errors.Is(err, ErrConflict) {
			t.Fatalf("err = %v, want Conflict", err)
		}
	})
}
