package benchkit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
)

func memStore(t *testing.T) locstore.Store {
	t.Helper()
	mem, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	return mem
}

// The counting store tells the kinds of row apart as a store prices them.
func TestCountingStoreKinds(t *testing.T) {
	ctx := context.Background()
	v := []byte("v")
	for _, tc := range []struct {
		name  string
		setup []locstore.Mutation // applied first, uncounted
		req   locstore.WriteRequest
		want  Counts
	}{
		{"new under IfMissing", nil,
			locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("a")}, Mutations: []locstore.Mutation{locstore.Put("a", v)}},
			Counts{Writes: 1, WriteKeys: 1, NewKeys: 1}},
		{"new expiring, conditioned on nothing", nil,
			locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring("a", v, time.Minute)}},
			Counts{Writes: 1, WriteKeys: 1, NewExpiringKeys: 1}},
		{"update and condition-only row", []locstore.Mutation{locstore.Put("a", v), locstore.Put("b", v)},
			locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion("a", "?"), locstore.IfVersion("b", "?")}, Mutations: []locstore.Mutation{locstore.Put("a", v)}},
			Counts{Writes: 1, WriteKeys: 1, CondKeys: 1}},
		{"expiring update and delete", []locstore.Mutation{locstore.Put("a", v), locstore.Put("b", v)},
			locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion("a", "?")}, Mutations: []locstore.Mutation{locstore.PutExpiring("a", v, time.Minute), locstore.Delete("b")}},
			Counts{Writes: 1, WriteKeys: 2, ExpiringKeys: 1, DeleteKeys: 1}},
		{"refused batch", []locstore.Mutation{locstore.Put("a", v)},
			locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("a"), locstore.IfMissing("c")}, Mutations: []locstore.Mutation{locstore.Put("a", v), locstore.Delete("b")}},
			Counts{Writes: 1, Conflicts: 1, WriteKeys: 2, ConflictKeys: 2, CondKeys: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memStore(t)
			versions := map[string]string{}
			if len(tc.setup) > 0 {
				res, err := mem.Write(ctx, locstore.WriteRequest{Mutations: tc.setup})
				if err != nil {
					t.Fatal(err)
				}
				for i, m := range tc.setup {
					versions[m.Key] = res.Versions[i]
				}
			}
			for i, c := range tc.req.Conditions {
				if c.Kind == locstore.CondVersion {
					tc.req.Conditions[i].Version = versions[c.Key]
				}
			}
			s := &CountingStore{Store: mem}
			if _, err := s.Write(ctx, tc.req); err != nil {
				t.Fatal(err)
			}
			got := s.Counts()
			got.Time = 0
			if got != tc.want {
				t.Fatalf("counted %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A ceiling replays exactly the calls it was given, counted by the same
// CountingStore that counts the subject: in the subject's shape, over the
// subject's number of operations, the very totals the subject made.
func TestReplayReproducesTheSubjectsCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total Counts
		ops   int
	}{
		// 2,000 moves of a host Relocate on Redis (2026-12-05).
		{"host moves", Counts{Reads: 14642, ReadKeys: 32620, MissingKeys: 2380, Writes: 9162, Conflicts: 1162,
			WriteKeys: 22760, ConflictKeys: 3486, CondKeys: 15868, NewKeys: 2004, DeleteKeys: 2002}, 2000},
		// creations with one creator: two reads, Reserve and Commit.
		{"creations", Counts{Reads: 200, ReadKeys: 800, MissingKeys: 100, Writes: 200,
			WriteKeys: 800, CondKeys: 200, NewKeys: 100, NewExpiringKeys: 200, DeleteKeys: 100}, 100},
		{"one batch, a delete with nothing made", Counts{Reads: 3, ReadKeys: 3, Writes: 3, WriteKeys: 6, DeleteKeys: 3}, 3},
		{"plain", Counts{Reads: 7, ReadKeys: 7, Writes: 5, WriteKeys: 11}, 1},
		{"a refused batch larger than the object", Counts{Reads: 1, ReadKeys: 1, Writes: 2, Conflicts: 1, WriteKeys: 6, ConflictKeys: 5}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) { checkReplay(t, tc.total, tc.ops) })
	}
}

// checkReplay replays total over ops operations (one if none) twice (the
// second period conditions on the versions the first left) and fails
// unless each period's calls, counted by a CountingStore, are total.
func checkReplay(t *testing.T, total Counts, ops int) {
	t.Helper()
	mem := memStore(t)
	s := &CountingStore{Store: mem}
	ctx := context.Background()
	value := make([]byte, StoreValueBytes)
	r := total.Replay(ops)
	rows, err := Seed(ctx, mem, "obj", r.Need(), value)
	if err != nil {
		t.Fatal(err)
	}
	for period := 1; period <= 2; period++ {
		before := s.Counts()
		for i := range r.Ops {
			if err := rows.Run(ctx, s, r.Op(i), value); err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		}
		got := s.Counts().Sub(before)
		got.Time = 0
		if got != total {
			t.Fatalf("period %d counted\n%+v, want\n%+v", period, got, total)
		}
	}
}

// The shapes kept to compare replay what they did: rounded per operation,
// every batch applied, every row an update (and for plain, one row per
// read and no condition-only rows).
func TestReplayOlderShapes(t *testing.T) {
	total := Counts{Reads: 14642, ReadKeys: 32620, MissingKeys: 2380, Writes: 9162, Conflicts: 1162,
		WriteKeys: 22760, ConflictKeys: 3486, CondKeys: 15868, NewKeys: 2004, DeleteKeys: 2002}
	for _, tc := range []struct {
		shape Shape
		want  Counts
	}{
		{ShapeUpdates, Counts{Reads: 7, ReadKeys: 16, Writes: 5, WriteKeys: 11, CondKeys: 8}},
		{ShapePlain, Counts{Reads: 7, ReadKeys: 7, Writes: 5, WriteKeys: 11}},
	} {
		mem := memStore(t)
		s := &CountingStore{Store: mem}
		ctx := context.Background()
		value := make([]byte, StoreValueBytes)
		r := total.Replay(2000)
		r.Shape = tc.shape
		rows, err := Seed(ctx, mem, "obj", r.Need(), value)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			before := s.Counts()
			if err := rows.Run(ctx, s, r.Op(i), value); err != nil {
				t.Fatal(err)
			}
			got := s.Counts().Sub(before)
			got.Time = 0
			if got != tc.want {
				t.Fatalf("shape %d op %d counted %+v, want %+v", tc.shape, i, got, tc.want)
			}
		}
	}
}

// A Run that needs more rows than were seeded says so.
func TestRunNeedsItsSeededRows(t *testing.T) {
	mem := memStore(t)
	ctx := context.Background()
	rows, err := Seed(ctx, mem, "obj", 1, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rows.Run(ctx, mem, StoreOps{Writes: 1, Rows: 3}, []byte("v")); err == nil {
		t.Fatal("a batch of three updates ran on one seeded row")
	}
}

// broken fails every call.
type broken struct{ locstore.Store }

var errBroken = errors.New("store unreachable")

func (broken) Read(context.Context, string) (locstore.ReadResult, error) {
	return locstore.ReadResult{}, errBroken
}

func (broken) ReadMany(context.Context, []string) ([]locstore.ReadResult, error) {
	return nil, errBroken
}

func (broken) Write(context.Context, locstore.WriteRequest) (locstore.WriteResult, error) {
	return locstore.WriteResult{}, errBroken
}

// A call that failed is not counted as one the store did: a ceiling
// replays the counted reads and batches as successful calls of their
// kind, so a subject's failed batch would come back as an applied one.
// Failed calls are counted apart (store-errors/op), so that a run that met
// store errors says so.
func TestCountingStoreCountsFailuresApart(t *testing.T) {
	s := &CountingStore{Store: broken{memStore(t)}}
	ctx := context.Background()
	v := []byte("v")
	if _, err := s.Read(ctx, "a"); !errors.Is(err, errBroken) {
		t.Fatalf("read: %v", err)
	}
	if _, err := s.ReadMany(ctx, []string{"a", "b"}); !errors.Is(err, errBroken) {
		t.Fatalf("read many: %v", err)
	}
	if _, err := s.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("a"), locstore.IfMissing("b")},
		Mutations: []locstore.Mutation{locstore.Put("a", v)}}); !errors.Is(err, errBroken) {
		t.Fatalf("write: %v", err)
	}
	got := s.Counts()
	got.Time = 0
	if want := (Counts{Errors: 3}); got != want || got.Replay(1).Op(0) != (StoreOps{}) {
		t.Fatalf("three failed calls counted %+v, want %+v", got, want)
	}
}
