package marker

import (
	"context"
	"errors"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	locredis "github.com/meshnode/meshnode/locstore/redis"
)

func stores(t *testing.T) map[string]locstore.Store {
	mem, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{testredis.Addr(t)}, Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close(); _ = rs.Close() })
	return map[string]locstore.Store{"memory": mem, "redis": rs}
}

// The first node writes the marker, the next ones read the same; while it
// stays, Check passes; gone or replaced, Check reports ErrDataLost.
func TestMarker(t *testing.T) {
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			m, created, err := Ensure(ctx, st)
			if err != nil || !created || len(m.ID) != 32 {
				t.Fatalf("first Ensure: %+v %v %v", m, created, err)
			}
			again, created, err := Ensure(ctx, st)
			if err != nil || created || again != m {
				t.Fatalf("second Ensure: %+v %v %v, want the same marker", again, created, err)
			}
			if err := Check(ctx, st, m); err != nil {
				t.Fatalf("Check with the marker in place: %v", err)
			}
			// The data is lost (FLUSHALL): gone.
			if _, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(Key)}}); err != nil {
				t.Fatal(err)
			}
			if err := Check(ctx, st, m); !errors.Is(err, ErrDataLost) {
				t.Fatalf("Check after the marker vanished: %v, want ErrDataLost", err)
			}
			// A node started on the emptied store writes a new marker: the
			// old node still sees the loss.
			fresh, created, err := Ensure(ctx, st)
			if err != nil || !created || fresh.ID == m.ID {
				t.Fatalf("Ensure on the emptied store: %+v %v %v", fresh, created, err)
			}
			if err := Check(ctx, st, m); !errors.Is(err, ErrDataLost) {
				t.Fatalf("Check against a recreated namespace: %v, want ErrDataLost", err)
			}
			// Garbage where the marker belongs.
			if _, err := st.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(Key, []byte(`{"markerId":1}`))}}); err != nil {
				t.Fatal(err)
			}
			if err := Check(ctx, st, fresh); !errors.Is(err, ErrDataLost) {
				t.Fatalf("Check of an unreadable marker: %v, want ErrDataLost", err)
			}
			if _, _, err := Ensure(ctx, st); err == nil {
				t.Fatal("Ensure accepted an unreadable marker")
			}
		})
	}
}

// failingWrites fails every write with err, as a store that refuses them.
type failingWrites struct {
	locstore.Store
	err    error
	writes int
}

func (f *failingWrites) Write(context.Context, locstore.WriteRequest) (locstore.WriteResult, error) {
	f.writes++
	return locstore.WriteResult{}, f.err
}

// A marker that cannot be written says why: a lasting refusal at once, any
// other failure after the attempts, with the store's error (it used to say
// only "could not read or write the namespace marker").
func TestEnsureSaysWhyItCouldNotWrite(t *testing.T) {
	mem, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	for _, tc := range []struct {
		name   string
		err    error
		writes int
	}{
		{"out of memory", &locstore.ProviderError{Provider: "t", Op: "write", Refused: true, Err: errors.New("OOM command not allowed")}, 1},
		{"read-only replica", &locstore.ProviderError{Provider: "t", Op: "write", Err: errors.New("READONLY You can't write against a read only replica")}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &failingWrites{Store: mem, err: tc.err}
			_, _, err := Ensure(context.Background(), st)
			if !errors.Is(err, tc.err) || st.writes != tc.writes {
				t.Fatalf("Ensure = %v after %d writes; want the store's error after %d", err, st.writes, tc.writes)
			}
		})
	}
}
