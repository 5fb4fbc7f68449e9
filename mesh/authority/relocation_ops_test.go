package authority

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/record"
)

// Planner tests of the relocation batches (docs/AUTHORITY.md
// "Relocation"): keyed SecureCapacity and ReleaseCapacity (§8.1 "Check
// result / Handling"), RecordCaptured, RecordPrepared, the relocation's
// NewOwner and CompleteRelocation (§8.2 stages, §6.1).

var (
	moveID = [16]byte{0xa1, 15: 0x01}
	resID  = [16]byte{0xb2, 15: 0x02}
	partyA = Party{Node: nodeA, Owner: ownerA}
	partyB = Party{Node: nodeB, Owner: ownerB}
)

func moveRef(attempt uint64) RelocationRef {
	return RelocationRef{RelocationID: moveID, TargetAttempt: attempt, ReservationID: resID}
}

func resKey(t testing.TB, id [16]byte) string {
	t.Helper()
	k, err := ReservationKey(id)
	return mustKey(t, k, err)
}

// reservationOf is the reservation moving o (generation objGen, first read
// at authVersion) from partyA to partyB.
func reservationOf(o Object, objGen uint64, authVersion string) Reservation {
	b, err := BundleFor(o.Kind, o.StableType)
	if err != nil {
		panic(err)
	}
	return Reservation{ID: resID, ObjectID: o.ID, ObjectKind: o.Kind, ObjectGeneration: objGen, AuthorityVersion: authVersion,
		Source: partyA, Target: partyB, Bundle: b}
}

func resRow(t testing.TB, r Reservation, version string) ReservationRow {
	t.Helper()
	return ReservationRow{Key: resKey(t, r.ID), Found: true, Reservation: r, Version: version}
}

func missingRes(t testing.TB, id [16]byte) ReservationRow {
	t.Helper()
	return ReservationRow{Key: resKey(t, id)}
}

func encodeRes(t testing.TB, r Reservation) []byte {
	t.Helper()
	v, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// progress is the move's progress from partyA to partyB at stage.
func progress(stage record.RelocationStage, attempt uint64) *record.RelocationProgress {
	return &record.RelocationProgress{Stage: stage, RelocationID: moveID, TargetAttempt: record.Generation(attempt), ReservationID: resID,
		Source: partyA.relocationParty(), Target: partyB.relocationParty()}
}

func withProgress(row AuthorityRow, p *record.RelocationProgress) AuthorityRow {
	row.Record.Relocation = p
	return row
}

// committedRow is player after the move committed: owned by partyB, owner
// generation 2, progress committed from generation 1.
func committedRow(t testing.TB, attempt uint64, version string) AuthorityRow {
	p := progress(record.RelocationCommitted, attempt)
	p.PreviousAuthorityOwnerGeneration = 1
	return withProgress(activeRow(t, player, nodeB, ownerB, 11, 2, version), p)
}

// capBatch lists the conditions and mutations applyCapacity writes for
// counters going from their row to after, in key order: each stored row
// (secured = reserved+active, active) whose count changes is conditioned
// and written; holdSecured also conditions an unchanged secured row (a move
// from reserved to active whose slots nothing else in the batch guards).
type capStep struct {
	row         CapacityRow
	after       Usage
	holdSecured bool
}

func capBatch(t testing.TB, steps ...capStep) ([]locstore.Condition, []locstore.Mutation) {
	t.Helper()
	type rowStep struct {
		stored StoredCount
		m      Measure
		id     CounterID
		after  int
		write  bool
	}
	byKey := map[string]rowStep{}
	var keys []string
	for _, s := range steps {
		sk, ak := secKey(t, s.row.ID), actKey(t, s.row.ID)
		if s.row.Usage.Total() != s.after.Total() || s.holdSecured {
			byKey[sk] = rowStep{s.row.Secured, MeasureSecured, s.row.ID, s.after.Total(), s.row.Usage.Total() != s.after.Total()}
			keys = append(keys, sk)
		}
		if s.row.Usage.Active != s.after.Active {
			byKey[ak] = rowStep{s.row.Active, MeasureActive, s.row.ID, s.after.Active, true}
			keys = append(keys, ak)
		}
	}
	var conds []locstore.Condition
	var muts []locstore.Mutation
	for _, k := range sortedKeys(keys...) {
		s := byKey[k]
		if s.stored.Found {
			conds = append(conds, locstore.IfVersion(k, s.stored.Version))
		} else {
			conds = append(conds, locstore.IfMissing(k))
		}
		switch {
		case !s.write:
		case s.after == 0:
			muts = append(muts, locstore.Delete(k))
		default:
			v, err := EncodeCapacity(s.id, s.m, s.after)
			if err != nil {
				t.Fatal(err)
			}
			muts = append(muts, locstore.Put(k, v))
		}
	}
	return conds, muts
}

func TestReservationRecord(t *testing.T) {
	id := [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77}
	p, err := ReservationPreimage(id)
	if err != nil || string(p) != "relocation-reservation\x000123456789abcdef0011223344556677" {
		t.Fatalf("preimage %q, %v", p, err)
	}
	// Digest checked with sha256sum(1).
	if k, _ := ReservationKey(id); k != "relocation-reservation:48d67e66ad3dd741180c30a8fc45f7af3a01f5566427fd04a4913de6dad4c86a" {
		t.Errorf("key %s", k)
	}
	if _, err := ReservationKey([16]byte{}); err == nil {
		t.Error("zero reservation id accepted")
	}

	r := reservationOf(room, 11, "v1")
	r.ID = id
	r.Bundle.Actors = 3 // a Spot moving with member Actors
	const want = `{"authorityVersion":"v1","bundle":{"actors":3,"spotType":{"count":1,"objectKind":"userSpot","stableType":"Room"},"spots":1},` +
		`"object":{"id":"room:7","kind":"userSpot"},"objectGeneration":"11","recordVersion":1,"reservationId":"0123456789abcdef0011223344556677",` +
		`"source":{"lifecycleGeneration":"3","meshName":"game","ownerId":"owner-a","ownerLeaseGeneration":"5","routingIdHex":"0a01"},` +
		`"target":{"lifecycleGeneration":"7","meshName":"game","ownerId":"owner-b","ownerLeaseGeneration":"9","routingIdHex":"0b02"}}`
	v, err := r.Encode()
	if err != nil || string(v) != want {
		t.Fatalf("Encode = %s, %v\nwant %s", v, err, want)
	}
	got, err := DecodeReservation([]byte(want))
	if err != nil || !got.Equal(r) {
		t.Fatalf("DecodeReservation = %+v, %v", got, err)
	}
	actor := reservationOf(player, 11, "v\"1")
	av := encodeRes(t, actor)
	if !strings.Contains(string(av), `"authorityVersion":"v\"1","bundle":{"actors":1,"spotType":null,"spots":0}`) {
		t.Errorf("actor reservation %s", av)
	}
	if got, err := DecodeReservation(av); err != nil || !got.Equal(actor) {
		t.Errorf("actor round trip %+v %v", got, err)
	}

	bad := []struct {
		name, value string
		version     bool
	}{
		{"whitespace", strings.Replace(want, `"bundle":{`, `"bundle": {`, 1), false},
		{"members out of order", `{"recordVersion":1,` + strings.Replace(strings.TrimPrefix(want, "{"), `"recordVersion":1,`, ``, 1), false},
		{"unknown member", strings.Replace(want, `"recordVersion":1`, `"recordVersion":1,"x":1`, 1), false},
		{"uppercase reservation id", strings.Replace(want, "0123456789abcdef", "0123456789ABCDEF", 1), false},
		{"zero reservation id", strings.Replace(want, "0123456789abcdef0011223344556677", strings.Repeat("0", 32), 1), false},
		{"generation 0", strings.Replace(want, `"objectGeneration":"11"`, `"objectGeneration":"0"`, 1), false},
		{"empty bundle", strings.Replace(want, `"actors":3,"spotType":{"count":1,"objectKind":"userSpot","stableType":"Room"},"spots":1`, `"actors":0,"spotType":null,"spots":0`, 1), false},
		{"same node run", strings.Replace(want, `"lifecycleGeneration":"7","meshName":"game","ownerId":"owner-b","ownerLeaseGeneration":"9","routingIdHex":"0b02"`,
			`"lifecycleGeneration":"3","meshName":"game","ownerId":"owner-b","ownerLeaseGeneration":"9","routingIdHex":"0a01"`, 1), false},
		{"recordVersion 2", strings.Replace(want, `"recordVersion":1`, `"recordVersion":2`, 1), true},
	}
	for _, b := range bad {
		_, err := DecodeReservation([]byte(b.value))
		var uv *record.UnknownVersionError
		if err == nil || errors.As(err, &uv) != b.version {
			t.Errorf("%s: DecodeReservation err = %v (unknown version expected: %v)", b.name, err, b.version)
		}
	}
	if _, err := ReservationRowOf(resKey(t, resID), locstore.ReadResult{Found: true, Value: []byte(want), Version: "x"}); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("row read under another reservation's key: %v", err)
	}
	if _, err := ReservationRowOf(resKey(t, resID), locstore.ReadResult{Found: true, Value: []byte("{}"), Version: "x"}); !errors.Is(err, ErrCorruptRecord) {
		t.Errorf("undecodable row: %v", err)
	}
}

// TestPlanSecureKeyed covers §8.1's "Check result / Handling" table for the
// keyed SecureCapacity.
func TestPlanSecureKeyed(t *testing.T) {
	base := func() (CapacityRequest, Snapshot) {
		req := CapacityRequest{Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Actors: 2}}, Bundle: Bundle{Actors: 1},
			ReservationID: resID, Object: player, ObjectGeneration: 11, AuthorityVersion: "v1", Source: partyA}
		snap := Snapshot{
			Authority: activeRow(t, player, nodeA, ownerA, 11, 1, "v1"), OwnerLease: leaseRow(t, ownerA, "lA"), TargetLease: leaseRow(t, ownerB, "lB"),
			Reservation: missingRes(t, resID), Capacity: []CapacityRow{capRow(actorsOf(nodeB), 0, 1, "kb")},
		}
		return req, snap
	}

	t.Run("target valid: reservation row and reserved slots in one batch", func(t *testing.T) {
		req, snap := base()
		p, err := PlanSecureCapacity(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		cc, cm := capBatch(t, capStep{row: snap.Capacity[0], after: Usage{1, 1}})
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: append([]locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v1"),
				locstore.IfVersion(leaseKey(t, ownerA.ID), "lA"),
				locstore.IfVersion(leaseKey(t, ownerB.ID), "lB"),
				locstore.IfMissing(resKey(t, resID)),
			}, cc...),
			Mutations: append([]locstore.Mutation{locstore.Put(resKey(t, resID), encodeRes(t, reservationOf(player, 11, "v1")))}, cm...),
		})
		if p.AlreadyApplied || p.Reservation == nil || !p.Reservation.Equal(reservationOf(player, 11, "v1")) || p.AuthorityMutation != -1 {
			t.Errorf("plan %+v", p)
		}
	})

	t.Run("same reservation id, same content: the earlier value, nothing written", func(t *testing.T) {
		req, snap := base()
		snap.Reservation = resRow(t, reservationOf(player, 11, "v1"), "r1")
		// Nothing else is consulted: the answer is the reservation itself.
		snap.Authority, snap.TargetLease, snap.Capacity = AuthorityRow{}, LeaseRow{}, nil
		p, err := PlanSecureCapacity(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if !p.AlreadyApplied || len(p.Request.Conditions)+len(p.Request.Mutations) != 0 || !p.Reservation.Equal(reservationOf(player, 11, "v1")) {
			t.Errorf("plan %+v", p)
		}
	})

	t.Run("one host run owning both node runs: its lease is conditioned once", func(t *testing.T) {
		req, snap := base()
		req.Target.Owner = ownerA
		snap.TargetLease = snap.OwnerLease
		p, err := PlanSecureCapacity(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(p.Request.Conditions); n != 4 {
			t.Errorf("%d conditions, want 4:\n%s", n, describe(p.Request))
		}
	})

	checkPlanErrors(t, base, PlanSecureCapacity, []planErrCase[CapacityRequest]{
		{"same reservation id, other content", func(r *CapacityRequest, s *Snapshot) {
			other := reservationOf(player, 11, "v1")
			other.Target.Node.LifecycleGeneration++
			s.Reservation = resRow(t, other, "r1")
		}, []error{ErrConflict}},
		{"same reservation id, another object generation", func(r *CapacityRequest, s *Snapshot) {
			s.Reservation = resRow(t, reservationOf(player, 12, "v1"), "r1")
		}, []error{ErrConflict}},
		{"target lease expired", func(r *CapacityRequest, s *Snapshot) { s.TargetLease = missingLease(t, ownerB.ID) }, []error{ErrConflict}},
		{"target lease of another run", func(r *CapacityRequest, s *Snapshot) {
			s.TargetLease = leaseRow(t, Owner{ID: ownerB.ID, LeaseGeneration: 10}, "lB2")
		}, []error{ErrConflict}},
		{"source owner lease expired", func(r *CapacityRequest, s *Snapshot) { s.OwnerLease = missingLease(t, ownerA.ID) }, []error{ErrConflict}},
		{"the current owner is not the source", func(r *CapacityRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeA, Owner{ID: ownerA.ID, LeaseGeneration: 4}, 11, 1, "v1")
		}, []error{ErrConflict}},
		{"the record is on another node", func(r *CapacityRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, Node{MeshName: "game", RoutingID: []byte{9}, LifecycleGeneration: 1}, ownerA, 11, 1, "v1")
		}, []error{ErrConflict}},
		{"the record changed since the first read", func(r *CapacityRequest, s *Snapshot) { s.Authority.Version = "v2" }, []error{ErrConflict}},
		{"the record is missing", func(r *CapacityRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"another object generation", func(r *CapacityRequest, s *Snapshot) { r.ObjectGeneration = 10 }, []error{ErrStaleGeneration, ErrConflict}},
		{"a Reserved record", func(r *CapacityRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 11, "res-1", "v1")
		}, []error{ErrConflict}},
		{"target remaining space exhausted", func(r *CapacityRequest, s *Snapshot) { s.Capacity[0] = capRow(actorsOf(nodeB), 1, 1, "kb") }, []error{ErrCapacityExhausted}},
		{"target node is the source's", func(r *CapacityRequest, s *Snapshot) { r.Target.Node = nodeA }, []error{ErrInvalidOperation}},
		{"no first-read version", func(r *CapacityRequest, s *Snapshot) { r.AuthorityVersion = "" }, []error{ErrInvalidOperation}},
		{"no object generation", func(r *CapacityRequest, s *Snapshot) { r.ObjectGeneration = 0 }, []error{ErrInvalidOperation}},
		{"empty bundle", func(r *CapacityRequest, s *Snapshot) { r.Bundle = Bundle{} }, []error{ErrInvalidOperation}},
		{"reservation row of another key", func(r *CapacityRequest, s *Snapshot) { s.Reservation = missingRes(t, moveID) }, []error{ErrInvalidOperation}},
		{"a fence duplicating the authority condition", func(r *CapacityRequest, s *Snapshot) {
			r.Fences = []Fence{{Key: authKey(t, player), Version: "v1"}}
		}, []error{ErrInvalidOperation}},
	})
}

func TestPlanReleaseKeyed(t *testing.T) {
	res := reservationOf(room, 11, "v1")
	snap := Snapshot{Reservation: resRow(t, res, "r1"), Capacity: []CapacityRow{
		capRow(spotsOf(nodeB), 1, 3, "s"), capRow(spotTypeOf(nodeB, record.ObjectUserSpot, "Room"), 1, 0, "t")}}
	// Target and bundle come from the row, not the request.
	req := CapacityRequest{ReservationID: resID}

	p, err := PlanReleaseCapacity(req, snap)
	if err != nil {
		t.Fatal(err)
	}
	cc, cm := capBatch(t, capStep{row: snap.Capacity[0], after: Usage{0, 3}}, capStep{row: snap.Capacity[1], after: Usage{}})
	wantRequest(t, p.Request, locstore.WriteRequest{
		Conditions: append([]locstore.Condition{locstore.IfVersion(resKey(t, resID), "r1")}, cc...),
		Mutations:  append([]locstore.Mutation{locstore.Delete(resKey(t, resID))}, cm...),
	})

	t.Run("missing row: already released or consumed, nothing to do", func(t *testing.T) {
		p, err := PlanReleaseCapacity(req, Snapshot{Reservation: missingRes(t, resID)})
		if err != nil || !p.AlreadyApplied || len(p.Request.Mutations) != 0 {
			t.Fatalf("plan %+v, %v", p, err)
		}
	})
	t.Run("counters holding fewer reserved slots", func(t *testing.T) {
		s := snap
		s.Capacity = []CapacityRow{capRow(spotsOf(nodeB), 0, 3, "s"), capRow(spotTypeOf(nodeB, record.ObjectUserSpot, "Room"), 1, 0, "t")}
		_, err := PlanReleaseCapacity(req, s)
		wantErr(t, err, ErrCorruptRecord)
	})
}

func TestPlanRecordCaptured(t *testing.T) {
	base := func() (CaptureRequest, Snapshot) {
		req := CaptureRequest{Object: player, ObjectGeneration: 11, IfVersion: "v1", Source: partyA, Target: partyB, Move: moveRef(1)}
		snap := Snapshot{Authority: activeRow(t, player, nodeA, ownerA, 11, 1, "v1"), OwnerLease: leaseRow(t, ownerA, "lA"),
			Reservation: resRow(t, reservationOf(player, 11, "v1"), "r1")}
		return req, snap
	}
	wantBatch := func(t *testing.T, p Plan, fromVersion string, attempt uint64) {
		t.Helper()
		next := authority(player, nodeA, ownerA, record.AllocationActive, 11, 1)
		next.Relocation = progress(record.RelocationCaptured, attempt)
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfVersion(authKey(t, player), fromVersion),
				locstore.IfVersion(leaseKey(t, ownerA.ID), "lA"),
				locstore.IfVersion(resKey(t, resID), "r1"),
			},
			Mutations: []locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, next))},
		})
	}

	t.Run("no progress: captured, exact batch", func(t *testing.T) {
		req, snap := base()
		p, err := PlanRecordCaptured(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		wantBatch(t, p, "v1", 1)
		if p.AuthorityMutation != 0 || p.ReservationKey != resKey(t, resID) {
			t.Errorf("plan %+v", p)
		}
	})

	other := func(stage record.RelocationStage) *record.RelocationProgress {
		p := progress(stage, 4)
		p.RelocationID, p.ReservationID = [16]byte{0xee}, [16]byte{0xef}
		p.Target = Party{Node: Node{MeshName: "game", RoutingID: []byte{0xcc}, LifecycleGeneration: 2}, Owner: Owner{ID: "owner-c", LeaseGeneration: 1}}.relocationParty()
		return p
	}
	replaced := []struct {
		name string
		old  *record.RelocationProgress
	}{
		{"stale captured progress of a cancelled move (§9.4)", other(record.RelocationCaptured)},
		{"stale prepared progress of a cancelled move (§9.4)", other(record.RelocationPrepared)},
		{"this move captured before with another target attempt", progress(record.RelocationCaptured, 7)},
		{"this move prepared by the target (re-capture)", progress(record.RelocationPrepared, 7)},
	}
	for _, tc := range replaced {
		t.Run("replaces "+tc.name, func(t *testing.T) {
			req, snap := base()
			snap.Authority = withProgress(snap.Authority, tc.old)
			p, err := PlanRecordCaptured(req, snap)
			if err != nil {
				t.Fatal(err)
			}
			wantBatch(t, p, "v1", 1)
		})
	}
	t.Run("replaces the committed progress of the move into this owner", func(t *testing.T) {
		req, snap := base()
		prev := other(record.RelocationCommitted)
		prev.Source, prev.Target = prev.Target, partyA.relocationParty()
		prev.PreviousAuthorityOwnerGeneration = 1
		snap.Authority = withProgress(activeRow(t, player, nodeA, ownerA, 11, 2, "v1"), prev)
		p, err := PlanRecordCaptured(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if r := p.Record.Relocation; r == nil || r.Stage != record.RelocationCaptured || r.RelocationID != moveID || r.PreviousAuthorityOwnerGeneration != 0 {
			t.Errorf("progress %+v", r)
		}
	})

	checkPlanErrors(t, base, PlanRecordCaptured, []planErrCase[CaptureRequest]{
		{"this move recorded with another target", func(r *CaptureRequest, s *Snapshot) {
			p := progress(record.RelocationCaptured, 1)
			p.Target = other(record.RelocationCaptured).Target
			s.Authority = withProgress(s.Authority, p)
		}, []error{ErrConflict}},
		{"this move recorded with another reservation", func(r *CaptureRequest, s *Snapshot) {
			p := progress(record.RelocationCaptured, 1)
			p.ReservationID = [16]byte{0xef}
			s.Authority = withProgress(s.Authority, p)
		}, []error{ErrConflict}},
		{"committed progress naming another owner", func(r *CaptureRequest, s *Snapshot) {
			s.Authority = withProgress(s.Authority, other(record.RelocationCommitted))
		}, []error{ErrConflict}},
		{"the reservation is missing (released by a cancellation)", func(r *CaptureRequest, s *Snapshot) { s.Reservation = missingRes(t, resID) }, []error{ErrConflict}},
		{"the reservation is for another generation", func(r *CaptureRequest, s *Snapshot) {
			s.Reservation = resRow(t, reservationOf(player, 10, "v1"), "r1")
		}, []error{ErrConflict}},
		{"the reservation is for another object", func(r *CaptureRequest, s *Snapshot) {
			res := reservationOf(player, 11, "v1")
			res.ObjectID = "user:43"
			s.Reservation = resRow(t, res, "r1")
		}, []error{ErrConflict}},
		{"the reservation is on another target", func(r *CaptureRequest, s *Snapshot) {
			res := reservationOf(player, 11, "v1")
			res.Target.Owner.LeaseGeneration++
			s.Reservation = resRow(t, res, "r1")
		}, []error{ErrConflict}},
		{"source lease expired", func(r *CaptureRequest, s *Snapshot) { s.OwnerLease = missingLease(t, ownerA.ID) }, []error{ErrConflict}},
		{"the source is not the owner", func(r *CaptureRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeB, ownerB, 11, 2, "v1")
		}, []error{ErrConflict}},
		{"changed since the first read", func(r *CaptureRequest, s *Snapshot) { r.IfVersion = "v0" }, []error{ErrConflict}},
		{"another object generation", func(r *CaptureRequest, s *Snapshot) { r.ObjectGeneration = 12 }, []error{ErrStaleGeneration, ErrConflict}},
		{"record missing", func(r *CaptureRequest, s *Snapshot) { s.Authority = missingRow(t, player) }, []error{ErrNotFound, ErrConflict}},
		{"a Reserved record", func(r *CaptureRequest, s *Snapshot) {
			s.Authority = reservedRow(t, player, nodeA, ownerA, 11, "res-1", "v1")
		}, []error{ErrConflict}},
		{"creation recovery state present", func(r *CaptureRequest, s *Snapshot) {
			pc := pending("res-1")
			s.Authority.Record.PendingCreation = &pc
		}, []error{ErrConflict}},
		{"no first-read version", func(r *CaptureRequest, s *Snapshot) { r.IfVersion = "" }, []error{ErrInvalidOperation}},
		{"zero relocation id", func(r *CaptureRequest, s *Snapshot) { r.Move.RelocationID = [16]byte{} }, []error{ErrInvalidOperation}},
		{"zero reservation id", func(r *CaptureRequest, s *Snapshot) { r.Move.ReservationID = [16]byte{} }, []error{ErrInvalidOperation}},
		{"target attempt 0", func(r *CaptureRequest, s *Snapshot) { r.Move.TargetAttempt = 0 }, []error{ErrInvalidOperation}},
		{"target on the source's node", func(r *CaptureRequest, s *Snapshot) { r.Target.Node = nodeA }, []error{ErrInvalidOperation}},
	})
}

func TestPlanRecordPrepared(t *testing.T) {
	base := func() (PrepareRequest, Snapshot) {
		req := PrepareRequest{Object: player, ObjectGeneration: 11, IfVersion: "v2", Target: partyB, Move: moveRef(2)}
		snap := Snapshot{Authority: withProgress(activeRow(t, player, nodeA, ownerA, 11, 1, "v2"), progress(record.RelocationCaptured, 1)),
			TargetLease: leaseRow(t, ownerB, "lB"), Reservation: resRow(t, reservationOf(player, 11, "v1"), "r1")}
		return req, snap
	}
	t.Run("captured to prepared with the new target attempt", func(t *testing.T) {
		req, snap := base()
		p, err := PlanRecordPrepared(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		next := authority(player, nodeA, ownerA, record.AllocationActive, 11, 1)
		next.Relocation = progress(record.RelocationPrepared, 2)
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{
				locstore.IfVersion(authKey(t, player), "v2"),
				locstore.IfVersion(leaseKey(t, ownerB.ID), "lB"),
				locstore.IfVersion(resKey(t, resID), "r1"),
			},
			Mutations: []locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, next))},
		})
	})
	checkPlanErrors(t, base, PlanRecordPrepared, []planErrCase[PrepareRequest]{
		{"no progress", func(r *PrepareRequest, s *Snapshot) { s.Authority.Record.Relocation = nil }, []error{ErrConflict}},
		{"another relocation", func(r *PrepareRequest, s *Snapshot) { r.Move.RelocationID = [16]byte{0xee} }, []error{ErrConflict}},
		{"another target (a move does not swap targets, §8.2)", func(r *PrepareRequest, s *Snapshot) {
			r.Target = Party{Node: Node{MeshName: "game", RoutingID: []byte{0xcc}, LifecycleGeneration: 2}, Owner: ownerB}
		}, []error{ErrConflict}},
		{"already committed", func(r *PrepareRequest, s *Snapshot) { s.Authority = committedRow(t, 1, "v2") }, []error{ErrConflict}},
		{"target lease expired", func(r *PrepareRequest, s *Snapshot) { s.TargetLease = missingLease(t, ownerB.ID) }, []error{ErrConflict}},
		{"reservation missing", func(r *PrepareRequest, s *Snapshot) { s.Reservation = missingRes(t, resID) }, []error{ErrConflict}},
		{"changed since the target read", func(r *PrepareRequest, s *Snapshot) { r.IfVersion = "v1" }, []error{ErrConflict}},
		{"no first-read version", func(r *PrepareRequest, s *Snapshot) { r.IfVersion = "" }, []error{ErrInvalidOperation}},
	})
}

// TestPlanNewOwnerRelocation covers §8.2's owner rules: Captured and
// Prepared keep the source as owner until the target's CAS; only the exactly
// recorded target and attempt can change the owner.
func TestPlanNewOwnerRelocation(t *testing.T) {
	base := func(stage record.RelocationStage) (NewOwnerRequest, Snapshot) {
		ref := moveRef(1)
		req := NewOwnerRequest{Object: player, ObjectGeneration: 11, IfVersion: "v2", Target: targetB(), Relocation: &ref}
		snap := Snapshot{
			Authority:   withProgress(activeRow(t, player, nodeA, ownerA, 11, 1, "v2"), progress(stage, 1)),
			TargetLease: leaseRow(t, ownerB, "lB"), Reservation: resRow(t, reservationOf(player, 11, "v1"), "r1"),
			Capacity: []CapacityRow{capRow(actorsOf(nodeA), 0, 3, "ka"), capRow(actorsOf(nodeB), 1, 0, "kb")},
		}
		return req, snap
	}
	for _, stage := range []record.RelocationStage{record.RelocationCaptured, record.RelocationPrepared} {
		t.Run("from "+string(stage)+": owner, generation, capacity and reservation in one batch", func(t *testing.T) {
			req, snap := base(stage)
			p, err := PlanNewOwner(req, snap)
			if err != nil {
				t.Fatal(err)
			}
			next := authority(player, nodeB, ownerB, record.AllocationActive, 11, 2)
			next.Relocation = progress(record.RelocationCommitted, 1)
			next.Relocation.PreviousAuthorityOwnerGeneration = 1
			// The target's slots go from reserved to active under the
			// reservation row: its secured row is neither written nor
			// conditioned.
			cc, cm := capBatch(t, capStep{row: snap.Capacity[0], after: Usage{0, 2}}, capStep{row: snap.Capacity[1], after: Usage{0, 1}})
			wantRequest(t, p.Request, locstore.WriteRequest{
				Conditions: append([]locstore.Condition{
					locstore.IfVersion(authKey(t, player), "v2"),
					locstore.IfVersion(leaseKey(t, ownerB.ID), "lB"),
					locstore.IfVersion(resKey(t, resID), "r1"),
				}, cc...),
				Mutations: append([]locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, next)), locstore.Delete(resKey(t, resID))}, cm...),
			})
			if p.Record.ObjectGeneration != 11 || p.Record.AuthorityOwnerGeneration != 2 || p.AuthorityMutation != 0 {
				t.Errorf("record %+v", p.Record)
			}
		})
	}

	t.Run("already committed by this relocation and attempt: success without a batch (§10)", func(t *testing.T) {
		req, snap := base(record.RelocationCaptured)
		snap.Authority = committedRow(t, 1, "v3") // the first-read version is long gone
		p, err := PlanNewOwner(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		if !p.AlreadyApplied || len(p.Request.Mutations) != 0 || p.Record.OwnerID != ownerB.ID {
			t.Errorf("plan %+v", p)
		}
	})

	checkPlanErrors(t, func() (NewOwnerRequest, Snapshot) { return base(record.RelocationCaptured) }, PlanNewOwner, []planErrCase[NewOwnerRequest]{
		{"a previous target attempt cannot change the owner", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority.Record.Relocation.TargetAttempt = 2
		}, []error{ErrConflict}},
		{"a later target attempt than the recorded one", func(r *NewOwnerRequest, s *Snapshot) { r.Relocation.TargetAttempt = 3 }, []error{ErrConflict}},
		{"committed by another target attempt", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority = committedRow(t, 2, "v2")
		}, []error{ErrConflict}},
		{"no progress (cancelled and cleared)", func(r *NewOwnerRequest, s *Snapshot) { s.Authority.Record.Relocation = nil }, []error{ErrConflict}},
		{"progress of another relocation", func(r *NewOwnerRequest, s *Snapshot) { r.Relocation.RelocationID = [16]byte{0xee} }, []error{ErrConflict}},
		{"progress naming another reservation", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority.Record.Relocation.ReservationID = [16]byte{0xef}
		}, []error{ErrConflict}},
		{"progress naming another target node", func(r *NewOwnerRequest, s *Snapshot) {
			r.Target.Node = Node{MeshName: "game", RoutingID: []byte{0xcc}, LifecycleGeneration: 2}
		}, []error{ErrConflict}},
		{"progress naming another target run", func(r *NewOwnerRequest, s *Snapshot) {
			r.Target.Owner.LeaseGeneration = 10
			s.TargetLease = leaseRow(t, r.Target.Owner, "lB2")
		}, []error{ErrConflict}},
		{"reservation released (cancellation)", func(r *NewOwnerRequest, s *Snapshot) { s.Reservation = missingRes(t, resID) }, []error{ErrConflict}},
		{"reservation secured another bundle", func(r *NewOwnerRequest, s *Snapshot) {
			res := reservationOf(player, 11, "v1")
			res.Bundle.Actors = 2
			s.Reservation = resRow(t, res, "r1")
		}, []error{ErrConflict}},
		{"target lease expired", func(r *NewOwnerRequest, s *Snapshot) { s.TargetLease = missingLease(t, ownerB.ID) }, []error{ErrConflict}},
		{"changed since the target's first read", func(r *NewOwnerRequest, s *Snapshot) { r.IfVersion = "v1" }, []error{ErrConflict}},
		{"target counter lacks the reserved slot", func(r *NewOwnerRequest, s *Snapshot) {
			s.Capacity[1] = capRow(actorsOf(nodeB), 0, 1, "kb")
		}, []error{ErrCorruptRecord}},
		{"AuthorityOwnerGeneration exhausted", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority.Record.AuthorityOwnerGeneration = record.Generation(gen.MaxIssued)
		}, []error{ErrGenerationExhausted}},
		{"no first-read version", func(r *NewOwnerRequest, s *Snapshot) { r.IfVersion = "" }, []error{ErrInvalidOperation}},
		{"PreSecured with a relocation", func(r *NewOwnerRequest, s *Snapshot) { r.PreSecured = true }, []error{ErrInvalidOperation}},
		{"zero target attempt", func(r *NewOwnerRequest, s *Snapshot) { r.Relocation.TargetAttempt = 0 }, []error{ErrInvalidOperation}},
		{"target is the current node", func(r *NewOwnerRequest, s *Snapshot) { r.Target = targetA() }, []error{ErrInvalidOperation}},
	})

	t.Run("recovery NewOwner (no relocation) removes the progress of a dead move", func(t *testing.T) {
		_, snap := base(record.RelocationPrepared)
		snap.Capacity[1] = noCap(actorsOf(nodeB))
		p, err := PlanNewOwner(NewOwnerRequest{Object: player, ObjectGeneration: 11, Target: targetB()}, snap)
		if err != nil {
			t.Fatal(err)
		}
		if p.Record.Relocation != nil || p.Record.OwnerID != ownerB.ID {
			t.Errorf("record %+v", p.Record)
		}
	})
}

func TestPlanCompleteRelocation(t *testing.T) {
	base := func() (CompleteRequest, Snapshot) {
		req := CompleteRequest{Object: player, ObjectGeneration: 11, Owner: ownerB, RelocationID: moveID, IfVersion: "v3"}
		snap := Snapshot{Authority: committedRow(t, 1, "v3"), OwnerLease: leaseRow(t, ownerB, "lB")}
		return req, snap
	}
	t.Run("committed: progress removed, everything else kept", func(t *testing.T) {
		req, snap := base()
		p, err := PlanCompleteRelocation(req, snap)
		if err != nil {
			t.Fatal(err)
		}
		next := authority(player, nodeB, ownerB, record.AllocationActive, 11, 2)
		wantRequest(t, p.Request, locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfVersion(authKey(t, player), "v3"), locstore.IfVersion(leaseKey(t, ownerB.ID), "lB")},
			Mutations:  []locstore.Mutation{locstore.Put(authKey(t, player), encodeAuth(t, next))},
		})
	})
	t.Run("already completed: success without a batch", func(t *testing.T) {
		req, snap := base()
		snap.Authority.Record.Relocation = nil
		snap.Authority.Version = "v4"
		p, err := PlanCompleteRelocation(req, snap)
		if err != nil || !p.AlreadyApplied || len(p.Request.Mutations) != 0 {
			t.Fatalf("plan %+v, %v", p, err)
		}
	})
	checkPlanErrors(t, base, PlanCompleteRelocation, []planErrCase[CompleteRequest]{
		{"not committed yet", func(r *CompleteRequest, s *Snapshot) {
			r.Owner = ownerA
			s.Authority = withProgress(activeRow(t, player, nodeA, ownerA, 11, 1, "v3"), progress(record.RelocationCaptured, 1))
			s.OwnerLease = leaseRow(t, ownerA, "lA")
		}, []error{ErrConflict}},
		{"another owner", func(r *CompleteRequest, s *Snapshot) {
			r.Owner = ownerA
			s.OwnerLease = leaseRow(t, ownerA, "lA")
		}, []error{ErrConflict}},
		{"owner lease expired", func(r *CompleteRequest, s *Snapshot) { s.OwnerLease = missingLease(t, ownerB.ID) }, []error{ErrConflict}},
		{"changed since NewOwner", func(r *CompleteRequest, s *Snapshot) { r.IfVersion = "v2" }, []error{ErrConflict}},
		{"zero relocation id", func(r *CompleteRequest, s *Snapshot) { r.RelocationID = [16]byte{} }, []error{ErrInvalidOperation}},
	})
}

// TestPlanObservedRelocation: a later read shows a relocation plan's effect
// exactly when its batch applied.
func TestPlanObservedRelocation(t *testing.T) {
	sp, err := PlanSecureCapacity(CapacityRequest{Target: targetB(), Bundle: Bundle{Actors: 1}, ReservationID: resID, Object: player,
		ObjectGeneration: 11, AuthorityVersion: "v1", Source: partyA}, Snapshot{
		Authority: activeRow(t, player, nodeA, ownerA, 11, 1, "v1"), OwnerLease: leaseRow(t, ownerA, "lA"), TargetLease: leaseRow(t, ownerB, "lB"),
		Reservation: missingRes(t, resID), Capacity: []CapacityRow{noCap(actorsOf(nodeB))}})
	if err != nil {
		t.Fatal(err)
	}
	if sp.ObservedIn(Snapshot{Reservation: missingRes(t, resID)}) || !sp.ObservedIn(Snapshot{Reservation: resRow(t, reservationOf(player, 11, "v1"), "r")}) ||
		sp.ObservedIn(Snapshot{Reservation: resRow(t, reservationOf(player, 11, "v0"), "r")}) {
		t.Error("keyed SecureCapacity observation wrong")
	}
	unkeyed, err := PlanSecureCapacity(CapacityRequest{Target: targetB(), Bundle: Bundle{Actors: 1}},
		Snapshot{TargetLease: leaseRow(t, ownerB, "lB"), Capacity: []CapacityRow{noCap(actorsOf(nodeB))}})
	if err != nil || unkeyed.ObservedIn(Snapshot{Reservation: resRow(t, reservationOf(player, 11, "v1"), "r")}) {
		t.Errorf("unkeyed SecureCapacity observed (%v)", err)
	}
	rp, err := PlanReleaseCapacity(CapacityRequest{ReservationID: resID}, Snapshot{Reservation: resRow(t, reservationOf(player, 11, "v1"), "r"),
		Capacity: []CapacityRow{capRow(actorsOf(nodeB), 1, 0, "k")}})
	if err != nil {
		t.Fatal(err)
	}
	if !rp.ObservedIn(Snapshot{Reservation: missingRes(t, resID)}) || rp.ObservedIn(Snapshot{Reservation: resRow(t, reservationOf(player, 11, "v1"), "r")}) {
		t.Error("keyed ReleaseCapacity observation wrong")
	}

	captured := withProgress(activeRow(t, player, nodeA, ownerA, 11, 1, "v2"), progress(record.RelocationCaptured, 1))
	cp, err := PlanRecordCaptured(CaptureRequest{Object: player, ObjectGeneration: 11, IfVersion: "v1", Source: partyA, Target: partyB, Move: moveRef(1)},
		Snapshot{Authority: activeRow(t, player, nodeA, ownerA, 11, 1, "v1"), OwnerLease: leaseRow(t, ownerA, "lA"),
			Reservation: resRow(t, reservationOf(player, 11, "v1"), "r1")})
	if err != nil {
		t.Fatal(err)
	}
	if !cp.Observed(captured) || cp.Observed(activeRow(t, player, nodeA, ownerA, 11, 1, "v1")) ||
		cp.Observed(withProgress(activeRow(t, player, nodeA, ownerA, 11, 1, "v2"), progress(record.RelocationCaptured, 2))) {
		t.Error("RecordCaptured observation wrong")
	}

	ref := moveRef(1)
	np, err := PlanNewOwner(NewOwnerRequest{Object: player, ObjectGeneration: 11, IfVersion: "v2", Target: targetB(), Relocation: &ref}, Snapshot{
		Authority: captured, TargetLease: leaseRow(t, ownerB, "lB"), Reservation: resRow(t, reservationOf(player, 11, "v1"), "r1"),
		Capacity: []CapacityRow{capRow(actorsOf(nodeA), 0, 1, "ka"), capRow(actorsOf(nodeB), 1, 0, "kb")}})
	if err != nil {
		t.Fatal(err)
	}
	if !np.Observed(committedRow(t, 1, "v3")) || np.Observed(committedRow(t, 2, "v3")) || np.Observed(captured) {
		t.Error("relocation NewOwner observation wrong")
	}

	done := withProgress(committedRow(t, 1, "v4"), nil)
	kp, err := PlanCompleteRelocation(CompleteRequest{Object: player, ObjectGeneration: 11, Owner: ownerB, RelocationID: moveID},
		Snapshot{Authority: committedRow(t, 1, "v3"), OwnerLease: leaseRow(t, ownerB, "lB")})
	if err != nil {
		t.Fatal(err)
	}
	if !kp.Observed(done) || kp.Observed(committedRow(t, 1, "v3")) {
		t.Error("CompleteRelocation observation wrong")
	}
}

// TestDecideNewOwner: after the Restore deadline a target whose CAS answer
// was lost reads, never writes, until the rows say the CAS applied or can
// never apply (§10; docs/RELOCATION.md §5).
func TestDecideNewOwner(t *testing.T) {
	base := func() (NewOwnerRequest, Snapshot) {
		ref := moveRef(1)
		req := NewOwnerRequest{Object: player, ObjectGeneration: 11, IfVersion: "v2", Target: targetB(), Relocation: &ref}
		snap := Snapshot{
			Authority:   withProgress(activeRow(t, player, nodeA, ownerA, 11, 1, "v2"), progress(record.RelocationCaptured, 1)),
			Reservation: resRow(t, reservationOf(player, 11, "v1"), "r1"),
		}
		return req, snap
	}
	cases := []struct {
		name string
		edit func(*NewOwnerRequest, *Snapshot)
		want CASOutcome
	}{
		{"rows as first read: a batch in flight could still apply", func(*NewOwnerRequest, *Snapshot) {}, CASUndecided},
		{"committed by this relocation and attempt", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority, s.Reservation = committedRow(t, 1, "v3"), missingRes(t, resID)
		}, CASCommitted},
		{"committed by another attempt", func(r *NewOwnerRequest, s *Snapshot) { s.Authority = committedRow(t, 2, "v3") }, CASImpossible},
		{"row changed since the first read (the source took it back)", func(r *NewOwnerRequest, s *Snapshot) {
			s.Authority = activeRow(t, player, nodeA, ownerA, 11, 1, "v3")
		}, CASImpossible},
		{"reservation released by the source", func(r *NewOwnerRequest, s *Snapshot) { s.Reservation = missingRes(t, resID) }, CASImpossible},
		{"record gone", func(r *NewOwnerRequest, s *Snapshot) { s.Authority = AuthorityRow{} }, CASImpossible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, snap := base()
			tc.edit(&req, &snap)
			got, err := DecideNewOwner(req, snap)
			if err != nil || got != tc.want {
				t.Fatalf("DecideNewOwner = %s, %v; want %s", got, err, tc.want)
			}
		})
	}
	t.Run("not a relocation", func(t *testing.T) {
		req, snap := base()
		req.Relocation = nil
		_, err := DecideNewOwner(req, snap)
		wantErr(t, err, ErrInvalidOperation)
	})
}

// The reservation fast path accepts exactly what the strict path accepts,
// with the same result: every one-byte edit and deletion of canonical
// values either falls back (ok false) or decodes as the strict path does.
func TestReservationFastPathAgrees(t *testing.T) {
	spot := reservationOf(room, 11, "v1")
	spot.Bundle.Actors = 3
	actor := reservationOf(player, 1<<62, "v\"1") // an escape: strict path only
	big := reservationOf(player, 1<<63-1, "7")    // 19 digits: strict path only
	edits := []byte{'0', '1', '9', 'a', 'A', '"', '\\', ' ', 'n', ':', ',', '}', 0x00, 0xff}
	for _, c := range []struct {
		r     Reservation
		plain bool
	}{{spot, true}, {actor, false}, {big, false}, {reservationOf(player, 42, "12-34"), true}} {
		want := encodeRes(t, c.r)
		if _, ok := decodeCanonicalReservation(want); ok != c.plain {
			t.Errorf("fast path on %s: ok=%v, want %v", want, ok, c.plain)
		}
		if got, err := DecodeReservation(want); err != nil || !got.Equal(c.r) {
			t.Errorf("DecodeReservation(%s) = %+v, %v", want, got, err)
		}
		for i := range want {
			for _, e := range append(edits, 0) { // 0: delete byte i
				v := append([]byte(nil), want...)
				if e == 0 {
					v = append(v[:i], v[i+1:]...)
				} else {
					v[i] = e
				}
				fast, ok := decodeCanonicalReservation(v)
				if !ok {
					continue
				}
				strict, err := decodeReservationStrict(v)
				if err != nil || !strict.Equal(fast) {
					t.Fatalf("%s: fast path %+v, strict path %+v %v", v, fast, strict, err)
				}
			}
		}
	}
}
