package follow

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const followFor = 30 * time.Second

func mustTable(t testing.TB, c Clock, d time.Duration) *Table {
	t.Helper()
	tab, err := NewTable(c, d)
	if err != nil {
		t.Fatalf("NewTable(%v): %v", d, err)
	}
	return tab
}

func TestNewTableRejectsBadArguments(t *testing.T) {
	if tab, err := NewTable(nil, followFor); !errors.Is(err, ErrInvalidArgument) || tab != nil {
		t.Fatalf("NewTable(nil) = %v, %v", tab, err)
	}
	if tab, err := NewTable(newClock(), -time.Nanosecond); !errors.Is(err, ErrInvalidArgument) || tab != nil {
		t.Fatalf("NewTable(-1ns) = %v, %v", tab, err)
	}
}

// TestForward covers every Forward rule of spec §7.3 against one recorded
// move: actor/a, object generation 5, owner generation 4 -> 7 on node "n2".
func TestForward(t *testing.T) {
	const obj = 5
	in := func(o, own uint64, hop int) Inbound {
		return Inbound{Key: actorA, ObjectGeneration: o, AuthorityOwnerGeneration: own, Hop: hop}
	}
	tests := []struct {
		name    string
		in      Inbound
		advance time.Duration
		wantErr []error // every one must match; nil = success
		wantHop int
	}{
		{"first hop", in(obj, 4, 0), 0, nil, 1},
		{"later hop", in(obj, 4, 3), 0, nil, 4},
		{"last allowed hop", in(obj, 4, MaxHops-1), 0, nil, MaxHops},
		{"hop limit", in(obj, 4, MaxHops), 0, []error{ErrHopLimit, ErrUnavailable}, 0},
		{"beyond hop limit", in(obj, 4, MaxHops+1), 0, []error{ErrHopLimit, ErrUnavailable}, 0},
		{"negative hop", in(obj, 4, -1), 0, []error{ErrInvalidArgument}, 0},
		{"addressed to an older ownership of this node", in(obj, 2, 0), 0, nil, 1},
		{"addressed between the two generations", in(obj, 6, 0), 0, nil, 1},
		{"addressed to the new generation: no progress", in(obj, 7, 0), 0, []error{ErrCycle, ErrUnavailable}, 0},
		{"addressed past the new generation", in(obj, 8, 2), 0, []error{ErrCycle, ErrUnavailable}, 0},
		{"older object generation", in(4, 4, 0), 0, []error{ErrGenerationMismatch, ErrInvalidOperation}, 0},
		{"newer object generation", in(6, 4, 0), 0, []error{ErrGenerationMismatch, ErrInvalidOperation}, 0},
		{"mismatch wins over hop limit", in(6, 4, MaxHops), 0, []error{ErrGenerationMismatch}, 0},
		{"zero object generation", in(0, 4, 0), 0, []error{ErrInvalidArgument}, 0},
		{"zero owner generation", in(obj, 0, 0), 0, []error{ErrInvalidArgument}, 0},
		{"just before expiry", in(obj, 4, 0), followFor - 1, nil, 1},
		{"at expiry", in(obj, 4, 0), followFor, []error{ErrNotFound}, 0},
		{"after expiry", in(obj, 4, 0), time.Hour, []error{ErrNotFound}, 0},
		{"unknown object", Inbound{Key: Key{KindActor, "b"}, ObjectGeneration: obj, AuthorityOwnerGeneration: 4}, 0, []error{ErrNotFound}, 0},
		{"same id, other kind", Inbound{Key: spotA, ObjectGeneration: obj, AuthorityOwnerGeneration: 4}, 0, []error{ErrNotFound}, 0},
		{"bad key", Inbound{Key: Key{KindActor, ""}, ObjectGeneration: obj, AuthorityOwnerGeneration: 4}, 0, []error{ErrInvalidArgument}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tab := mustTable(t, clk, followFor)
			mv := move(actorA, 4, 7, "n2")
			mv.ObjectGeneration = obj
			if ok, err := tab.Record(mv); !ok || err != nil {
				t.Fatalf("Record = %v, %v", ok, err)
			}
			clk.Advance(tt.advance)
			got, err := tab.Forward(tt.in)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Forward(%+v) = %v", tt.in, err)
				}
				if got.Hop != tt.wantHop || !got.Target.equal(mv) {
					t.Fatalf("Forward = %+v, want hop %d to %+v", got, tt.wantHop, mv)
				}
				return
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Fatalf("Forward(%+v) = %v, want errors.Is %v", tt.in, err, want)
				}
			}
			// The error belongs to exactly one top-level category: the one
			// the expected error belongs to.
			for _, category := range []error{ErrInvalidArgument, ErrInvalidOperation, ErrUnavailable, ErrNotFound} {
				if errors.Is(err, category) != errors.Is(tt.wantErr[0], category) {
					t.Fatalf("Forward error %v: errors.Is(%v) = %v", err, category, errors.Is(err, category))
				}
			}
		})
	}
}

func TestForwardDisabled(t *testing.T) {
	tab := mustTable(t, newClock(), 0)
	if tab.Enabled() {
		t.Fatal("Enabled with duration 0")
	}
	if ok, err := tab.Record(move(actorA, 1, 2, "n2")); ok || err != nil {
		t.Fatalf("Record = %v, %v; want false, nil", ok, err)
	}
	if _, err := tab.Record(move(actorA, 2, 2, "n2")); !errors.Is(err, ErrInvalidOperation) {
		t.Fatalf("Record of a bad move while disabled = %v, want ErrInvalidOperation", err)
	}
	_, err := tab.Forward(Inbound{Key: actorA, ObjectGeneration: 1, AuthorityOwnerGeneration: 1})
	if !errors.Is(err, ErrNotFound) || tab.Len() != 0 {
		t.Fatalf("Forward = %v, Len = %d; want ErrNotFound, 0", err, tab.Len())
	}
}

func TestRecordValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Move)
		want   error
		text   string
	}{
		{"new owner generation equal to previous", func(m *Move) { m.AuthorityOwnerGeneration = m.PreviousAuthorityOwnerGeneration }, ErrInvalidOperation, "not greater"},
		{"new owner generation lower", func(m *Move) { m.AuthorityOwnerGeneration = 1 }, ErrInvalidOperation, "not greater"},
		{"bad kind", func(m *Move) { m.Key.Kind = 9 }, ErrInvalidArgument, "kind(9)"},
		{"empty id", func(m *Move) { m.Key.ID = "" }, ErrInvalidArgument, "0 bytes"},
		{"object generation 0", func(m *Move) { m.ObjectGeneration = 0 }, ErrInvalidArgument, "ObjectGeneration"},
		{"previous generation 0", func(m *Move) { m.PreviousAuthorityOwnerGeneration = 0 }, ErrInvalidArgument, "previous"},
		{"new generation sentinel", func(m *Move) { m.AuthorityOwnerGeneration = 1<<63 - 1 }, ErrInvalidArgument, "AuthorityOwnerGeneration"},
		{"empty owner", func(m *Move) { m.Owner.ID = "" }, ErrInvalidArgument, "OwnerId"},
		{"lease generation 0", func(m *Move) { m.Owner.LeaseGeneration = 0 }, ErrInvalidArgument, "OwnerLeaseGeneration"},
		{"empty RID", func(m *Move) { m.Route.NodeRID = []byte{} }, ErrInvalidArgument, "RID"},
		{"node generation 0", func(m *Move) { m.Route.NodeGeneration = 0 }, ErrInvalidArgument, "node run generation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := mustTable(t, newClock(), followFor)
			m := move(actorA, 4, 7, "n2")
			tt.mutate(&m)
			ok, err := tab.Record(m)
			if ok || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("Record = %v, %v; want false, %v mentioning %q", ok, err, tt.want, tt.text)
			}
			if tab.Len() != 0 {
				t.Fatal("a rejected move was kept")
			}
		})
	}
}

// TestRecordReplace: a later move of the same object replaces the kept one
// and restarts the period; the identical move is a no-op; an older or
// conflicting one is refused and the kept move is untouched.
func TestRecordReplace(t *testing.T) {
	other := move(actorA, 4, 7, "n9") // same generations, other node
	newObj := move(actorA, 1, 2, "n5")
	newObj.ObjectGeneration = 2
	tests := []struct {
		name      string
		second    Move
		wantOK    bool
		wantErr   error
		wantRID   string // kept afterwards
		wantObj   uint64
		expiresAt time.Duration // since the first Record, of the kept move
	}{
		{"later owner generation", move(actorA, 7, 9, "n3"), true, nil, "n3", 1, 10*time.Second + followFor},
		{"later object generation", newObj, true, nil, "n5", 2, 10*time.Second + followFor},
		{"identical: no-op, period not restarted", move(actorA, 4, 7, "n2"), true, nil, "n2", 1, followFor},
		{"same generations, other route", other, false, ErrInvalidOperation, "n2", 1, followFor},
		{"older owner generation", move(actorA, 2, 5, "n4"), false, ErrInvalidOperation, "n2", 1, followFor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tab := mustTable(t, clk, followFor)
			if _, err := tab.Record(move(actorA, 4, 7, "n2")); err != nil {
				t.Fatal(err)
			}
			clk.Advance(10 * time.Second)
			ok, err := tab.Record(tt.second)
			if ok != tt.wantOK || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("second Record = %v, %v; want %v, %v", ok, err, tt.wantOK, tt.wantErr)
			}
			probe := Inbound{Key: actorA, ObjectGeneration: tt.wantObj, AuthorityOwnerGeneration: 1}
			clk.Advance(tt.expiresAt - 10*time.Second - 1)
			got, err := tab.Forward(probe)
			if err != nil || string(got.Target.Route.NodeRID) != tt.wantRID {
				t.Fatalf("Forward just before expiry = %+v, %v; want route %s", got, err, tt.wantRID)
			}
			clk.Advance(1)
			if _, err := tab.Forward(probe); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Forward at expiry = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	tab := mustTable(t, newClock(), followFor)
	if _, err := tab.Record(move(actorA, 1, 2, "n2")); err != nil {
		t.Fatal(err)
	}
	if tab.Remove(spotA) {
		t.Fatal("Remove(spot/a) removed actor/a's move")
	}
	if !tab.Remove(actorA) || tab.Remove(actorA) {
		t.Fatal("Remove(actor/a) did not report exactly one removal")
	}
	if _, err := tab.Forward(Inbound{Key: actorA, ObjectGeneration: 1, AuthorityOwnerGeneration: 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Forward after Remove = %v", err)
	}
}

// TestRecordCopiesRID: the kept route does not change with the caller's buffer.
func TestRecordCopiesRID(t *testing.T) {
	tab := mustTable(t, newClock(), followFor)
	m := move(actorA, 1, 2, "n2")
	if _, err := tab.Record(m); err != nil {
		t.Fatal(err)
	}
	m.Route.NodeRID[0] = 'X'
	got, err := tab.Forward(Inbound{Key: actorA, ObjectGeneration: 1, AuthorityOwnerGeneration: 1})
	if err != nil || string(got.Target.Route.NodeRID) != "n2" {
		t.Fatalf("Forward = %+v, %v; want route n2", got, err)
	}
}

// TestNoCapPerMove: entries are per object, so any number of messages can be
// forwarded through one move (spec §7.3: no cap on the retainable amount),
// and the table holds one entry however many were forwarded.
func TestNoCapPerMove(t *testing.T) {
	tab := mustTable(t, newClock(), followFor)
	if _, err := tab.Record(move(actorA, 1, 2, "n2")); err != nil {
		t.Fatal(err)
	}
	const messages = 5000 // well past the wire's 1024 queued-messages report limit
	for i := range messages {
		if _, err := tab.Forward(Inbound{Key: actorA, ObjectGeneration: 1, AuthorityOwnerGeneration: 1, Hop: i % MaxHops}); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if tab.Len() != 1 {
		t.Fatalf("Len = %d after %d forwards, want 1", tab.Len(), messages)
	}
}

// TestExpiredReclaimed: expired moves are reclaimed without a sweep, so the
// table only holds the moves of the last MessageFollowDuration.
func TestExpiredReclaimed(t *testing.T) {
	clk := newClock()
	tab := mustTable(t, clk, followFor)
	for i := range 1000 {
		if _, err := tab.Record(move(Key{KindSpot, fmt.Sprint("s", i)}, 1, 2, "n2")); err != nil {
			t.Fatal(err)
		}
		if i == 499 {
			clk.Advance(10 * time.Second)
		}
	}
	if n := tab.Len(); n != 1000 {
		t.Fatalf("Len = %d, want 1000", n)
	}
	clk.Advance(followFor - 10*time.Second) // the first 500 expire now
	if n := tab.Len(); n != 500 {
		t.Fatalf("Len = %d, want 500", n)
	}
	if n := len(tab.m); n != 500 || tab.byExpiry.Len() != 500 {
		t.Fatalf("internal sizes map %d, list %d; want 500", n, tab.byExpiry.Len())
	}
	clk.Advance(10 * time.Second)
	if _, err := tab.Record(move(actorA, 1, 2, "n2")); err != nil {
		t.Fatal(err)
	}
	if n := len(tab.m); n != 1 || tab.byExpiry.Len() != 1 {
		t.Fatalf("after Record: map %d, list %d; want 1", n, tab.byExpiry.Len())
	}
}

// mesh is a set of nodes, each with its own follow table, to walk follow
// paths the way the runtime will: a message addressed to (node, owner
// generation) is forwarded until a node holds no move for it (the owner) or
// Forward refuses.
type meshSim map[string]*Table

// deliver returns the node the message ends on and the hops taken, or the
// refusal.
func (ms meshSim) deliver(node string, own uint64) (string, int, error) {
	in := Inbound{Key: actorA, ObjectGeneration: 1, AuthorityOwnerGeneration: own}
	for {
		f, err := ms[node].Forward(in)
		if errors.Is(err, ErrNotFound) {
			return node, in.Hop, nil
		}
		if err != nil {
			return node, in.Hop, err
		}
		node = string(f.Target.Route.NodeRID)
		in.AuthorityOwnerGeneration = f.Target.AuthorityOwnerGeneration
		in.Hop = f.Hop
	}
}

func TestFollowPaths(t *testing.T) {
	type rec struct {
		on         string
		prev, next uint64
		to         string
	}
	tests := []struct {
		name     string
		moves    []rec
		from     string
		own      uint64
		wantNode string
		wantHops int
		wantErr  error
	}{
		{
			name:  "chain of moves is followed to the owner",
			moves: []rec{{"A", 1, 2, "B"}, {"B", 2, 3, "C"}, {"C", 3, 4, "D"}},
			from:  "A", own: 1, wantNode: "D", wantHops: 3,
		},
		{
			name:  "object moved back: the returning node forwards to the latest owner",
			moves: []rec{{"B", 2, 3, "A"}, {"A", 3, 4, "C"}},
			from:  "B", own: 2, wantNode: "C", wantHops: 2,
		},
		{
			name:  "stale two-node loop is cut as a cycle",
			moves: []rec{{"A", 1, 3, "B"}, {"B", 2, 3, "A"}},
			from:  "A", own: 1, wantErr: ErrCycle, wantHops: 1,
		},
		{
			name:  "stale three-node loop is cut as a cycle",
			moves: []rec{{"A", 1, 2, "B"}, {"B", 2, 3, "C"}, {"C", 1, 2, "A"}},
			from:  "A", own: 1, wantErr: ErrCycle, wantHops: 2,
		},
		{
			name: "eight consecutive moves are followed",
			moves: []rec{{"n0", 1, 2, "n1"}, {"n1", 2, 3, "n2"}, {"n2", 3, 4, "n3"}, {"n3", 4, 5, "n4"},
				{"n4", 5, 6, "n5"}, {"n5", 6, 7, "n6"}, {"n6", 7, 8, "n7"}, {"n7", 8, 9, "n8"}},
			from: "n0", own: 1, wantNode: "n8", wantHops: 8,
		},
		{
			name: "a ninth hop is refused",
			moves: []rec{{"n0", 1, 2, "n1"}, {"n1", 2, 3, "n2"}, {"n2", 3, 4, "n3"}, {"n3", 4, 5, "n4"},
				{"n4", 5, 6, "n5"}, {"n5", 6, 7, "n6"}, {"n6", 7, 8, "n7"}, {"n7", 8, 9, "n8"}, {"n8", 9, 10, "n9"}},
			from: "n0", own: 1, wantErr: ErrHopLimit, wantHops: 8,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			ms := meshSim{}
			table := func(n string) *Table {
				if ms[n] == nil {
					ms[n] = mustTable(t, clk, followFor)
				}
				return ms[n]
			}
			for _, m := range tt.moves {
				if _, err := table(m.on).Record(move(actorA, m.prev, m.next, m.to)); err != nil {
					t.Fatalf("Record on %s: %v", m.on, err)
				}
				table(m.to)
			}
			node, hops, err := ms.deliver(tt.from, tt.own)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrUnavailable) || hops != tt.wantHops {
					t.Fatalf("deliver = %s after %d hops, %v; want %v after %d hops", node, hops, err, tt.wantErr, tt.wantHops)
				}
				return
			}
			if err != nil || node != tt.wantNode || hops != tt.wantHops {
				t.Fatalf("deliver = %s after %d hops, %v; want %s after %d", node, hops, err, tt.wantNode, tt.wantHops)
			}
		})
	}
}

func TestTableConcurrent(t *testing.T) {
	clk := newClock()
	tab := mustTable(t, clk, 20*time.Millisecond)
	var wg sync.WaitGroup
	var forwarded atomic.Int64
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				key := Key{Kind: KindActor, ID: fmt.Sprint("o", (i+w)%50)}
				switch i % 4 {
				case 0:
					// Generations grow with i, so a Record is either later
					// than the kept move, identical, or refused as older.
					own := uint64(i + 2)
					_, err := tab.Record(move(key, own-1, own, "n"+fmt.Sprint(own)))
					if err != nil && !errors.Is(err, ErrInvalidOperation) {
						errs <- err
						return
					}
				case 1, 2:
					f, err := tab.Forward(Inbound{Key: key, ObjectGeneration: 1, AuthorityOwnerGeneration: 1, Hop: i % 9})
					switch {
					case err == nil:
						forwarded.Add(1)
						if want := fmt.Sprint("n", f.Target.AuthorityOwnerGeneration); string(f.Target.Route.NodeRID) != want || f.Hop != i%9+1 {
							errs <- fmt.Errorf("torn forwarding %+v", f)
							return
						}
					case errors.Is(err, ErrNotFound), errors.Is(err, ErrHopLimit):
					default:
						errs <- err
						return
					}
				case 3:
					if i%40 == 3 {
						tab.Remove(key)
					}
					clk.Advance(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if forwarded.Load() == 0 {
		t.Error("no Forward succeeded: the forwarding checks never ran")
	}
	if tab.Len() > 50 {
		t.Fatalf("Len = %d, more than the 50 objects used", tab.Len())
	}
}
