package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// fixedDraws returns the draws in order, then 0.
func fixedDraws(rs ...float64) func() float64 {
	return func() float64 {
		if len(rs) == 0 {
			return 0
		}
		r := rs[0]
		rs = rs[1:]
		return r
	}
}

func weightedSet(ws ...int) *candidateSet {
	s := &candidateSet{}
	var total int64
	for i, w := range ws {
		total += int64(w)
		s.cands = append(s.cands, candidate{weight: w, node: authority.Node{MeshName: "m", RoutingID: []byte{byte(i + 1)}, LifecycleGeneration: 1}})
		s.cum = append(s.cum, total)
	}
	return s
}

func TestDrawerFirstDrawByWeight(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		r       float64
		want    int
	}{
		{"none", nil, 0.5, -1},
		{"single", []int{100}, 0.99, 0},
		{"first share", []int{100, 300}, 0.24, 0},
		{"second share starts at 1/4", []int{100, 300}, 0.25, 1},
		{"top of range", []int{100, 300}, 0.999, 1},
		{"a draw of exactly 1 stays in range", []int{100, 300}, 1, 1},
	}
	for _, tc := range tests {
		d := drawer{set: weightedSet(tc.weights...), rnd: fixedDraws(tc.r)}
		if got, _ := d.next(); got != tc.want {
			t.Errorf("%s: first draw = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// Every candidate is drawn exactly once, whatever the draws return (a
// constant draw keeps landing on a drawn candidate: the scan takes over).
func TestDrawerDrawsEachOnce(t *testing.T) {
	for _, draws := range []func() float64{fixedDraws(), rand.New(rand.NewPCG(1, 2)).Float64} {
		d := drawer{set: weightedSet(5, 1, 300, 7, 7, 100), rnd: draws}
		seen := map[int]bool{}
		for {
			i, ok := d.next()
			if !ok {
				break
			}
			if seen[i] {
				t.Fatalf("candidate %d drawn twice", i)
			}
			seen[i] = true
		}
		if len(seen) != 6 {
			t.Fatalf("drew %d of 6 candidates", len(seen))
		}
	}
}

// The n-th draw picks among the candidates not drawn yet by weight: over
// many seeded runs the second draw, after the heavy first candidate was
// drawn, splits the rest 1:2:3.
func TestDrawerSecondDrawByRemainingWeight(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	counts := make([]int, 4)
	const runs = 60000
	for range runs {
		d := drawer{set: weightedSet(1000, 100, 200, 300), rnd: rnd.Float64}
		d.take(0)
		i, _ := d.next()
		counts[i]++
	}
	if counts[0] != 0 {
		t.Fatalf("a drawn candidate was drawn again %d times", counts[0])
	}
	for i, want := range []float64{0, 1.0 / 6, 2.0 / 6, 3.0 / 6} {
		if got := float64(counts[i]) / runs; math.Abs(got-want) > 0.01 {
			t.Errorf("candidate %d drawn %.3f of the time, want %.3f", i, got, want)
		}
	}
}

func TestNewCandidateSet(t *testing.T) {
	self, peer := []byte{1}, []byte{2}
	desc := func(rid []byte, edit func(*record.MeshNodeDescriptor)) directory.Entry {
		d := record.MeshNodeDescriptor{MeshName: "m", RoutingID: rid, LifecycleGeneration: 7, ObjectRole: record.RoleServer,
			PlacementWeight: 100, State: record.StateServing, OwnerID: "o", LeaseGeneration: 7, DescriptorRevision: 12,
			ObjectCapabilities: []record.ObjectCapability{{ObjectKind: record.ObjectActor, StableType: "t", Limit: 5}}}
		if edit != nil {
			edit(&d)
		}
		return directory.Entry{Descriptor: d, LeaseValid: true}
	}
	leaving := func(rid []byte, st record.State, edit func(*record.MeshNodeDescriptor)) directory.Entry {
		return desc(rid, func(d *record.MeshNodeDescriptor) {
			d.State = st
			if edit != nil {
				edit(d)
			}
		})
	}
	tests := []struct {
		name    string
		entry   directory.Entry
		ok      bool
		local   bool
		leaving int // counted as a server of the type draining or stopped
	}{
		{"self", desc(self, nil), true, true, 0},
		{"self, another run", desc(self, func(d *record.MeshNodeDescriptor) { d.LifecycleGeneration = 6 }), true, false, 0},
		{"peer", desc(peer, nil), true, false, 0},
		{"weight 0", desc(peer, func(d *record.MeshNodeDescriptor) { d.PlacementWeight = 0 }), false, false, 0},
		{"draining", leaving(peer, record.StateDraining, nil), false, false, 1},
		{"stopped", leaving(peer, record.StateStopped, nil), false, false, 1},
		{"self draining: not counted", leaving(self, record.StateDraining, nil), false, false, 0},
		{"draining, type not registered: not counted", leaving(peer, record.StateDraining, func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].StableType = "u" }), false, false, 0},
		{"draining, lease gone: not counted", func() directory.Entry {
			e := leaving(peer, record.StateDraining, nil)
			e.LeaseValid = false
			return e
		}(), false, false, 0},
		{"preparing: not counted", leaving(peer, record.StatePreparing, nil), false, false, 0},
		{"client role", desc(peer, func(d *record.MeshNodeDescriptor) { d.ObjectRole = record.RoleClient }), false, false, 0},
		{"other mesh", desc(peer, func(d *record.MeshNodeDescriptor) { d.MeshName = "x" }), false, false, 0},
		{"type not registered", desc(peer, func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].StableType = "u" }), false, false, 0},
		{"kind not registered", desc(peer, func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities[0].ObjectKind = record.ObjectUserSpot }), false, false, 0},
		{"lease gone", func() directory.Entry { e := desc(peer, nil); e.LeaseValid = false; return e }(), false, false, 0},
	}
	for _, tc := range tests {
		s := newCandidateSet(directory.Snapshot{Entries: []directory.Entry{tc.entry}}, "m", record.ObjectActor, "t", self, 7)
		if s.leaving != tc.leaving {
			t.Errorf("%s: %d counted leaving, want %d", tc.name, s.leaving, tc.leaving)
		}
		if (len(s.cands) == 1) != tc.ok {
			t.Errorf("%s: %d candidates, want ok=%v", tc.name, len(s.cands), tc.ok)
			continue
		}
		if tc.ok {
			c := s.cands[0]
			if c.local != tc.local || c.limits.SpotType != 5 || c.owner.ID != "o" || c.descriptorVersion != "12" || s.total() != 100 {
				t.Errorf("%s: candidate %+v, total %d", tc.name, c, s.total())
			}
		}
	}
}

func TestPlaceRequestUsability(t *testing.T) {
	peer := candidate{node: authority.Node{MeshName: "m", RoutingID: []byte{2}, LifecycleGeneration: 7}, weight: 1}
	self := candidate{node: authority.Node{MeshName: "m", RoutingID: []byte{1}, LifecycleGeneration: 7}, weight: 1, local: true}
	admittedAt := func(gen uint64) placeEnv {
		return placeEnv{admitted: func(rid []byte) (uint64, bool) { return gen, bytes.Equal(rid, []byte{2}) }}
	}
	none := placeEnv{admitted: func([]byte) (uint64, bool) { return 0, false }}
	tests := []struct {
		name string
		req  placeRequest
		c    candidate
		env  placeEnv
		want usability
	}{
		{"admitted peer", placeRequest{}, peer, admittedAt(7), usableNow},
		{"peer admitted at another generation", placeRequest{}, peer, admittedAt(6), noLink},
		{"peer not admitted", placeRequest{}, peer, none, noLink},
		{"self needs no link", placeRequest{}, self, none, usableNow},
		{"self ruled out when placing elsewhere", placeRequest{notHere: true}, self, none, thisNode},
		{"a peer when placing elsewhere", placeRequest{notHere: true}, peer, admittedAt(7), usableNow},
		{"excluded", placeRequest{excluded: map[string]exclusion{peer.key(): excludedFull}}, peer, admittedAt(7), excludedByCall},
		{"another run excluded", placeRequest{excluded: map[string]exclusion{self.key(): excludedFailed}}, peer, admittedAt(7), usableNow},
		{"only this one", placeRequest{only: []byte{2}}, peer, admittedAt(7), usableNow},
		{"only another", placeRequest{only: []byte{3}}, peer, admittedAt(7), ruledOut},
		{"avoided", placeRequest{avoid: [][]byte{{3}, {2}}}, peer, admittedAt(7), ruledOut},
	}
	for _, tc := range tests {
		if got := tc.req.usability(tc.c, tc.env); got != tc.want {
			t.Errorf("%s: usability = %d, want %d", tc.name, got, tc.want)
		}
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

// A request a node refused as terminated (closing, its lease in doubt, a
// store failing, the object stopping) says so in words, not
// "terminated/none" alone — and names a failing store among the causes (a
// node whose store failed answers the same, and read as "closing" it sent
// a review looking in the wrong place).
func TestTerminatedReplySaysWhy(t *testing.T) {
	for _, cause := range []error{ErrClosed, fmt.Errorf("%w: relocation store read", ErrUnavailable)} {
		res, code := wireFailure(familySpot, cause)
		err := replyError(familySpot, &router.Reply{Result: res, FailureCode: code}, "request")
		for _, want := range []string{"could not serve it", "closing", "a store it needed failed"} {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
				t.Fatalf("terminated reply to %v reads %q (no %q)", cause, err, want)
			}
		}
	}
}

type closedGate struct{ err error }

func (g closedGate) Admit() error { return g.err }

type recordingHandler struct{ ran int }

func (h *recordingHandler) Receive(*spot.Turn, spot.Envelope) error { h.ran++; return nil }

// §5: a turn does not start while the admission gate is closed — and says
// so with spot.ErrNotStarted, so that the runtime keeps the envelope for
// the gate instead of losing it (the runtime's own check passed a moment
// before: an operator try-out — eight senders at full speed, Redis paused
// 8 s past the admission deadline — lost one accepted one-way message that
// way).
func TestGatedHandlerRefusesTurnsWhenTheGateIsClosed(t *testing.T) {
	h := &recordingHandler{}
	err := gated{h: h, gate: closedGate{lease.ErrLeaseExpired}}.Receive(nil, spot.Envelope{Kind: spot.Timer, Timer: "t"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, lease.ErrLeaseExpired) || !errors.Is(err, spot.ErrNotStarted) || h.ran != 0 {
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

// limitedSet is weightedSet with an Actor limit on every candidate.
func limitedSet(limit int, ws ...int) *candidateSet {
	s := weightedSet(ws...)
	for i := range s.cands {
		s.cands[i].limits.Actors = limit
	}
	return s
}

// fillActors stores usage as c's Actor counter (secured and active rows).
func fillActors(t *testing.T, store locstore.Store, c candidate, usage int) {
	t.Helper()
	id := authority.CounterID{Node: c.node, Class: authority.SlotActors}
	secured, active, err := authority.CounterKeys(id)
	if err != nil {
		t.Fatal(err)
	}
	var muts []locstore.Mutation
	for _, row := range []struct {
		key string
		m   authority.Measure
	}{{secured, authority.MeasureSecured}, {active, authority.MeasureActive}} {
		v, err := authority.EncodeCapacity(id, row.m, usage)
		if err != nil {
			t.Fatal(err)
		}
		muts = append(muts, locstore.Put(row.key, v))
	}
	if res, err := store.Write(context.Background(), locstore.WriteRequest{Mutations: muts}); err != nil || !res.Applied {
		t.Fatalf("fill counters: %v %+v", err, res)
	}
}

func TestDecide(t *testing.T) {
	everyone := func([]byte) (uint64, bool) { return 1, true }
	tests := []struct {
		name      string
		set       *candidateSet
		full      []int // candidates filled to their limit
		req       placeRequest
		admitted  func([]byte) (uint64, bool)
		draws     []float64
		want      int // candidate index, -1 for an error
		wantErr   error
		wantMsg   string
		wantCalls int64
		wantKeys  int64
	}{
		{name: "unlimited: no store read", set: weightedSet(100, 100, 100), draws: []float64{0.5}, want: 1},
		{name: "limited with room: one read of one node", set: limitedSet(10, 100, 100, 100), draws: []float64{0.5}, want: 1,
			wantCalls: 1, wantKeys: 2},
		{name: "first draw full: the next read takes the following draws", set: limitedSet(10, 100, 100, 100), full: []int{1},
			draws: []float64{0.5, 0.9}, want: 2, wantCalls: 2, wantKeys: 6},
		{name: "unlimited after a full one: no second read", set: func() *candidateSet {
			s := limitedSet(10, 100, 100)
			s.cands[1].limits = authority.Limits{}
			return s
		}(), full: []int{0}, draws: []float64{0.1}, want: 1, wantCalls: 1, wantKeys: 2},
		{name: "every node full", set: limitedSet(10, 100, 100, 100), full: []int{0, 1, 2}, want: -1,
			wantErr: ErrCapacityExhausted, wantMsg: "(3 full, 0 failed)", wantCalls: 2, wantKeys: 6},
		{name: "earlier exclusions are counted", set: limitedSet(10, 100, 100, 100), full: []int{1, 2},
			req: placeRequest{excluded: map[string]exclusion{
				weightedSet(100).cands[0].key(): excludedFull, "m/09@1": excludedFailed}},
			want: -1, wantErr: ErrCapacityExhausted, wantMsg: "(3 full, 1 failed)", wantCalls: 2, wantKeys: 4},
		{name: "no admitted link", set: limitedSet(10, 100, 100), admitted: func([]byte) (uint64, bool) { return 0, false },
			want: -1, wantErr: ErrUnavailable, wantMsg: "usable link"},
		{name: "only the named node", set: weightedSet(100, 100, 100), req: placeRequest{only: []byte{3}}, draws: []float64{0.1}, want: 2},
		{name: "the only other node was tried: nothing left to try", set: weightedSet(100, 100),
			req:  placeRequest{excluded: map[string]exclusion{"m/01@1": excludedFailed}, avoid: [][]byte{{2}}},
			want: -1, wantErr: ErrUnavailable, wantMsg: "is left to try (1 failed, 1 ruled out: tried before or not the node asked for)"},
		{name: "only this node hosts the type: a move away has nowhere to go", set: func() *candidateSet {
			s := weightedSet(100)
			s.cands[0].local = true
			return s
		}(), req: placeRequest{notHere: true}, want: -1, wantErr: ErrUnavailable, wantMsg: "other than this one registered actor"},
		// A drain of the last serving nodes: the others are draining, and
		// the error says so rather than read as a mesh without nodes.
		{name: "only this node serves, the others are leaving", set: func() *candidateSet {
			s := weightedSet(100)
			s.cands[0].local = true
			s.leaving = 2
			return s
		}(), req: placeRequest{notHere: true}, want: -1, wantErr: ErrUnavailable,
			wantMsg: "other than this one registered actor \"t\" with a weight above 0 (2 draining or stopped)"},
		{name: "no server serving, some leaving", set: func() *candidateSet {
			s := weightedSet()
			s.leaving = 3
			return s
		}(), want: -1, wantErr: ErrUnavailable, wantMsg: "a usable link (3 draining or stopped)"},
		{name: "preferred node with room: taken whatever the draw", set: limitedSet(10, 100, 100, 100), req: placeRequest{prefer: []byte{3}},
			draws: []float64{0.1}, want: 2, wantCalls: 1, wantKeys: 2},
		{name: "preferred node unlimited: taken without a read", set: weightedSet(100, 100, 100), req: placeRequest{prefer: []byte{1}},
			draws: []float64{0.9}, want: 0},
		{name: "preferred node full: the draw goes on among the others", set: limitedSet(10, 100, 100, 100), full: []int{2},
			req: placeRequest{prefer: []byte{3}}, draws: []float64{0.9, 0.1}, want: 0, wantCalls: 2, wantKeys: 6},
		{name: "preferred node without a link: drawn as usual", set: weightedSet(100, 100),
			admitted: func(rid []byte) (uint64, bool) { return 1, rid[0] != 2 }, req: placeRequest{prefer: []byte{2}}, draws: []float64{0.9}, want: 0},
		{name: "preferred node is this one: not taken for a move away", set: func() *candidateSet {
			s := weightedSet(100, 100)
			s.cands[0].local = true
			return s
		}(), req: placeRequest{prefer: []byte{1}, notHere: true}, draws: []float64{0.1}, want: 1},
		{name: "preferred node avoided: not taken", set: weightedSet(100, 100), req: placeRequest{prefer: []byte{1}, avoid: [][]byte{{1}}},
			draws: []float64{0.1}, want: 1},
		{name: "unknown preferred node: drawn as usual", set: weightedSet(100, 100), req: placeRequest{prefer: []byte{9}}, draws: []float64{0.9}, want: 1},
		{name: "listed but not linked", set: weightedSet(100, 100), admitted: func([]byte) (uint64, bool) { return 0, false },
			want: -1, wantErr: ErrUnavailable, wantMsg: "a usable link (2 without an admitted link)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem, err := locmemory.New()
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			for _, i := range tc.full {
				fillActors(t, mem, tc.set.cands[i], 10)
			}
			store := &countingReads{Store: mem}
			admitted := tc.admitted
			if admitted == nil {
				admitted = everyone
			}
			req := tc.req
			req.kind, req.stableType, req.mesh = record.ObjectActor, "t", "m"
			c, err := decide(context.Background(), tc.set, req, placeEnv{admitted: admitted, counters: store, rnd: fixedDraws(tc.draws...)})
			if tc.want < 0 {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(fmt.Sprint(err), tc.wantMsg) {
					t.Fatalf("err = %v, want %v with %q", err, tc.wantErr, tc.wantMsg)
				}
			} else if err != nil || c.key() != tc.set.cands[tc.want].key() {
				t.Fatalf("placed on %s (%v), want %s", c.key(), err, tc.set.cands[tc.want].key())
			}
			if got, gotKeys := store.calls.Load(), store.keys.Load(); got != tc.wantCalls || gotKeys != tc.wantKeys {
				t.Errorf("store reads %d calls / %d keys, want %d / %d", got, gotKeys, tc.wantCalls, tc.wantKeys)
			}
		})
	}
}

// Among the candidates with room, placement picks by weight (§4), however
// heavy the full ones are: seeded draws over 30,000 placements split
// 1:3 between the two with room while the heaviest is full.
func TestDecideByWeightAmongRoomy(t *testing.T) {
	mem, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	set := limitedSet(10, 100, 600, 300)
	fillActors(t, mem, set.cands[1], 10)
	rnd := rand.New(rand.NewPCG(5, 6))
	env := placeEnv{admitted: func([]byte) (uint64, bool) { return 1, true }, counters: mem, rnd: rnd.Float64}
	req := placeRequest{kind: record.ObjectActor, stableType: "t", mesh: "m"}
	counts := map[string]int{}
	const runs = 30000
	for range runs {
		c, err := decide(context.Background(), set, req, env)
		if err != nil {
			t.Fatal(err)
		}
		counts[c.key()]++
	}
	if counts[set.cands[1].key()] != 0 {
		t.Fatalf("the full node was chosen %d times", counts[set.cands[1].key()])
	}
	if got := float64(counts[set.cands[0].key()]) / runs; math.Abs(got-0.25) > 0.015 {
		t.Errorf("weight 100 of 400 with room chosen %.3f of the time, want 0.25", got)
	}
}

// A candidate set is built once per descriptor list and (mesh, kind, type):
// a new list number rebuilds it (a node that left is no longer drawn), and
// the memo stays bounded.
func TestCandidateSetsPerList(t *testing.T) {
	snap, _ := placementMesh(3, 0)
	var memo listMemo
	key := candidateSetKey{mesh: "m", kind: record.ObjectActor, stableType: "t"}
	first := memo.candidates(1, snap, key, nil, 0)
	if len(first.cands) != 3 || memo.candidates(1, snap, key, nil, 0) != first {
		t.Fatalf("not memoised per list: %d candidates", len(first.cands))
	}
	smaller := directory.Snapshot{Entries: snap.Entries[:2]}
	if got := memo.candidates(2, smaller, key, nil, 0); got == first || len(got.cands) != 2 {
		t.Fatalf("a new list did not rebuild the set: %d candidates", len(got.cands))
	}
	for i := range 2 * maxCandidateSets {
		memo.candidates(2, smaller, candidateSetKey{mesh: "m", kind: record.ObjectActor, stableType: fmt.Sprint("t", i)}, nil, 0)
	}
	if n := len(memo.sets); n > maxCandidateSets {
		t.Fatalf("memo holds %d sets, bound %d", n, maxCandidateSets)
	}
}

// With most candidates unusable (links not admitted yet), the draws pass
// over them and still pick among the usable ones by weight.
func TestDecideByWeightAmongFewUsable(t *testing.T) {
	ws := make([]int, 200)
	for i := range ws {
		ws[i] = 50 + i%7*100
	}
	ws[17], ws[150] = 100, 300
	set := weightedSet(ws...)
	usable := map[string]bool{set.cands[17].key(): true, set.cands[150].key(): true}
	env := placeEnv{rnd: rand.New(rand.NewPCG(7, 8)).Float64, admitted: func(rid []byte) (uint64, bool) {
		return 1, rid[0] == 18 || rid[0] == 151 // RoutingIDs are index+1
	}}
	req := placeRequest{kind: record.ObjectActor, stableType: "t", mesh: "m"}
	counts := map[string]int{}
	const runs = 20000
	for range runs {
		c, err := decide(context.Background(), set, req, env)
		if err != nil || !usable[c.key()] {
			t.Fatalf("placed on %s (%v), not one of the two usable", c.key(), err)
		}
		counts[c.key()]++
	}
	if got := float64(counts[set.cands[17].key()]) / runs; math.Abs(got-0.25) > 0.015 {
		t.Errorf("weight 100 of the 400 usable chosen %.3f of the time, want 0.25", got)
	}
}
