package mesh

import (
	"bytes"
	"errors"
	"testing"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

func TestPickWeighted(t *testing.T) {
	c := func(w int) candidate { return candidate{weight: w} }
	tests := []struct {
		name  string
		cands []candidate
		r     float64
		want  int
	}{
		{"none", nil, 0.5, -1},
		{"all zero", []candidate{c(0), c(0)}, 0.5, -1},
		{"single", []candidate{c(100)}, 0.99, 0},
		{"first share", []candidate{c(100), c(300)}, 0.24, 0},
		{"second share starts at 1/4", []candidate{c(100), c(300)}, 0.25, 1},
		{"top of range", []candidate{c(100), c(300)}, 0.999, 1},
		{"zero weight never picked", []candidate{c(0), c(1), c(0)}, 0.0, 1},
	}
	for _, tc := range tests {
		if got := pickWeighted(tc.cands, tc.r); got != tc.want {
			t.Errorf("%s: pickWeighted = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCandidatesOf(t *testing.T) {
	self, peer, stranger := []byte{1}, []byte{2}, []byte{3}
	desc := func(rid []byte, edit func(*record.MeshNodeDescriptor)) directory.Entry {
		d := record.MeshNodeDescriptor{MeshName: "m", RoutingID: rid, LifecycleGeneration: 7, ObjectRole: record.RoleServer,
			PlacementWeight: 100, State: record.StateServing, OwnerID: "o", LeaseGeneration: 7,
			ObjectCapabilities: []record.ObjectCapability{{ObjectKind: record.ObjectActor, StableType: "t", Limit: 5}}}
		if edit != nil {
			edit(&d)
		}
		return directory.Entry{Descriptor: d, LeaseValid: true}
	}
	base := candidateFilter{mesh: "m", kind: record.ObjectActor, stableType: "t", selfRID: self, selfGen: 7,
		admitted: map[string]uint64{string(peer): 7, string(stranger): 6}}
	tests := []struct {
		name  string
		entry directory.Entry
		ok    bool
	}{
		{"self", desc(self, nil), true},
		{"admitted peer", desc(peer, nil), true},
		{"peer admitted at another generation", desc(stranger, nil), false},
		{"not admitted", desc([]byte{9}, nil), false},
		{"weight 0", desc(peer, func(d *record.MeshNodeDescriptor) { d.PlacementWeight = 0 }), false},
		{"draining", desc(peer, func(d *record.MeshNodeDescriptor) { d.State = record.StateDraining }), false},
		{"client role", desc(peer, func(d *record.MeshNodeDescriptor) { d.ObjectRole = record.RoleClient }), false},
		{"other mesh", desc(peer, func(d *record.MeshNodeDescriptor) { d.MeshName = "x" }), false},
		{"type not registered", desc(peer, func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].StableType = "u" }), false},
		{"kind not registered", desc(peer, func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].ObjectKind = record.ObjectUserSpot }), false},
		{"lease gone", func() directory.Entry { e := desc(peer, nil); e.LeaseValid = false; return e }(), false},
	}
	for _, tc := range tests {
		got := candidatesOf(directory.Snapshot{Entries: []directory.Entry{tc.entry}}, base)
		if (len(got) == 1) != tc.ok {
			t.Errorf("%s: %d candidates, want ok=%v", tc.name, len(got), tc.ok)
			continue
		}
		if tc.ok {
			c := got[0]
			if c.local != bytes.Equal(tc.entry.Descriptor.RoutingID, self) || c.limits.SpotType != 5 || c.owner.ID != "o" {
				t.Errorf("%s: candidate %+v", tc.name, c)
			}
		}
	}
	f := base
	f.excluded = map[string]exclusion{}
	cs := candidatesOf(directory.Snapshot{Entries: []directory.Entry{desc(self, nil), desc(peer, nil)}}, f)
	f.excluded[cs[0].key()] = excludedFull
	if got := candidatesOf(directory.Snapshot{Entries: []directory.Entry{desc(self, nil), desc(peer, nil)}}, f); len(got) != 1 || got[0].key() == cs[0].key() {
		t.Fatalf("exclusion not applied: %+v", got)
	}
}

func TestHasRoom(t *testing.T) {
	node := authority.Node{MeshName: "m", RoutingID: []byte{1}, LifecycleGeneration: 1}
	spotBun, _ := authority.BundleFor(record.ObjectUserSpot, "room")
	row := func(class authority.SlotClass, reserved, active int) authority.CapacityRow {
		id := authority.CounterID{Node: node, Class: class}
		if class == authority.SlotSpotType {
			id.SpotKind, id.StableType = record.ObjectUserSpot, "room"
		}
		return authority.CapacityRow{ID: id, Found: true, Usage: authority.Usage{Reserved: reserved, Active: active}}
	}
	tests := []struct {
		name   string
		rows   []authority.CapacityRow
		limits authority.Limits
		want   bool
	}{
		{"unlimited", []authority.CapacityRow{row(authority.SlotSpots, 50, 50)}, authority.Limits{}, true},
		{"spots one left", []authority.CapacityRow{row(authority.SlotSpots, 1, 2)}, authority.Limits{Spots: 4}, true},
		{"spots full (reserved counts)", []authority.CapacityRow{row(authority.SlotSpots, 2, 2)}, authority.Limits{Spots: 4}, false},
		{"spot type full", []authority.CapacityRow{row(authority.SlotSpots, 0, 0), row(authority.SlotSpotType, 0, 3)}, authority.Limits{SpotType: 3}, false},
	}
	for _, tc := range tests {
		if got := hasRoom(tc.rows, tc.limits, spotBun); got != tc.want {
			t.Errorf("%s: hasRoom = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCreationRequestRoundTrip(t *testing.T) {
	body := []byte("a\x00b\x00c")
	b := encodeCreationRequest(modeGetOrCreate, record.ObjectUserSpot, "room", "chat", body)
	got, err := decodeCreationRequest(b)
	if err != nil || got.mode != "getOrCreate" || got.kind != record.ObjectUserSpot || got.callerID != "room" ||
		got.stableType != "chat" || !bytes.Equal(got.body, body) {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, []byte("creation-request-v1\x00create"), []byte("other\x00a\x00b\x00c\x00d\x00")} {
		if _, err := decodeCreationRequest(bad); err == nil {
			t.Errorf("decode(%q) accepted", bad)
		}
	}
	// The framework-issued SpotId is not part of the request: a retry of
	// CreateUserSpot with the same OperationId is the same request.
	if !bytes.Equal(encodeCreationRequest(modeCreate, record.ObjectUserSpot, "", "chat", nil),
		encodeCreationRequest(modeCreate, record.ObjectUserSpot, "", "chat", nil)) {
		t.Fatal("not deterministic")
	}
}

// The wire mapping and its inverse agree on every vocabulary error that
// travels in a command 20.
func TestWireFailureRoundTrip(t *testing.T) {
	tests := []struct {
		fam  opFamily
		err  error
		want error
	}{
		{familyActor, ErrNotFound, ErrNotFound},
		{familySpot, ErrNotFound, ErrNotFound},
		{familyActor, ErrStaleGeneration, ErrStaleGeneration},
		{familySpot, ErrStaleGeneration, ErrStaleGeneration},
		{familySpot, ErrMoving, ErrMoving},
		{familyActor, ErrTypeMismatch, ErrTypeMismatch},
		{familySpot, ErrTypeMismatch, ErrTypeMismatch},
		{familyActor, ErrAlreadyExists, ErrAlreadyExists},
		{familyActor, &CreateFailedError{}, ErrCreateFailed},
		{familySpot, &CreateFailedError{}, ErrCreateFailed},
		{familyActor, deadlineErr("x"), ErrDeadlineExceeded},
		{familyActor, errRouteStale, errRouteStale},
		{familyActor, spot.ErrMailboxFull, spot.ErrMailboxFull},
		{familyActor, spot.ErrHandlerPanic, ErrRequestFailed},
		{familyActor, spot.ErrNoReply, ErrRequestFailed},
		{familyActor, errors.New("application error"), ErrRequestFailed},
		{familyActor, ErrInvalidOperation, ErrInvalidOperation},
		{familySpot, spot.ErrClosed, ErrUnavailable},
		{familySpot, ErrUnavailable, ErrUnavailable},
	}
	for _, tc := range tests {
		res, code := wireFailure(tc.fam, tc.err)
		rec := router.NewRecord(&router.Reply{Correlation: 1, Result: res, FailureCode: code}, nil, nil)
		if _, err := router.Encode(rec); err != nil {
			t.Errorf("%v: %s/%s is not a valid reply: %v", tc.err, res, code, err)
			continue
		}
		if got := replyError(tc.fam, &router.Reply{Result: res, FailureCode: code}, "request"); !errors.Is(got, tc.want) {
			t.Errorf("%v -> %s/%s -> %v, want %v", tc.err, res, code, got, tc.want)
		}
	}
}

type closedGate struct{ err error }

func (g closedGate) Admit() error { return g.err }

type recordingHandler struct{ ran int }

func (h *recordingHandler) Receive(*spot.Turn, spot.Envelope) error { h.ran++; return nil }

// §5: a turn does not start while the admission gate is closed.
func TestGatedHandlerRefusesTurnsWhenTheGateIsClosed(t *testing.T) {
	h := &recordingHandler{}
	err := gated{h: h, gate: closedGate{lease.ErrLeaseExpired}}.Receive(nil, spot.Envelope{Kind: spot.Timer, Timer: "t"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, lease.ErrLeaseExpired) || h.ran != 0 {
		t.Fatalf("closed gate: err %v, ran %d", err, h.ran)
	}
	if err := (gated{h: h, gate: closedGate{}}).Receive(nil, spot.Envelope{Kind: spot.Send}); err != nil || h.ran != 1 {
		t.Fatalf("open gate: err %v, ran %d", err, h.ran)
	}
}

func TestNewSpotIDIsUUIDv4(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		id := newSpotID()
		if !uuidV4.MatchString(id) || seen[id] {
			t.Fatalf("%q: not a fresh lowercase UUID v4", id)
		}
		seen[id] = true
	}
}
