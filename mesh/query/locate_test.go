package query

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// TestLocateStates is the §7.4 state table, "Lookup by ID" column, on both
// providers.
func TestLocateStates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		tests := []struct {
			name  string
			obj   obj
			setup func(t *testing.T) // lease state
			want  State              // "" = no record (empty answer)
		}{
			{name: "no record", obj: obj{id: "user:missing"}, want: ""},
			{name: "creating", obj: obj{id: "user:c1", state: record.AllocationReserved, owner: "o-creating"},
				setup: func(t *testing.T) { putLease(t, b.store, "o-creating", 5, 0) }, want: StateCreating},
			{name: "creating, owner lease gone", obj: obj{id: "user:c2", state: record.AllocationReserved, owner: "o-creating-gone"},
				want: StateCreating},
			{name: "ready", obj: obj{id: "user:r1", owner: "o-ready"},
				setup: func(t *testing.T) { putLease(t, b.store, "o-ready", 5, 0) }, want: StateReady},
			{name: "ready spot", obj: obj{id: "room:1", kind: record.ObjectUserSpot, typ: "Room", owner: "o-ready"},
				setup: func(t *testing.T) { putLease(t, b.store, "o-ready", 5, 0) }, want: StateReady},
			{name: "unavailable: lease missing", obj: obj{id: "user:u1", owner: "o-missing"}, want: StateUnavailable},
			{name: "unavailable: lease expired", obj: obj{id: "user:u2", owner: "o-expired"},
				setup: func(t *testing.T) { b.expireLease(t, "o-expired", 5) }, want: StateUnavailable},
			{name: "unavailable: lease of another generation", obj: obj{id: "user:u3", owner: "o-restarted"},
				setup: func(t *testing.T) { putLease(t, b.store, "o-restarted", 6, 0) }, want: StateUnavailable},
			{name: "unavailable: lease unreadable", obj: obj{id: "user:u4", owner: "o-garbage"},
				setup: func(t *testing.T) { putRaw(t, b.store, leaseKey(t, "o-garbage"), []byte(`{"recordVersion":2}`)) }, want: StateUnavailable},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				if tc.setup != nil {
					tc.setup(t)
				}
				if tc.want != "" {
					seed(t, b.store, tc.obj)
				}
				o := tc.obj.withDefaults()
				got, found, err := Locate(context.Background(), b.store, o.kind.IdentityKind(), o.id)
				if err != nil {
					t.Fatal(err)
				}
				if tc.want == "" {
					if found || !reflect.DeepEqual(got, Entry{}) {
						t.Fatalf("no record: got found=%v %+v, want the empty answer", found, got)
					}
					return
				}
				if !found {
					t.Fatal("not found")
				}
				if want := tc.obj.want(t, tc.want); !reflect.DeepEqual(got, want) {
					t.Fatalf("got  %+v\nwant %+v", got, want)
				}
			})
		}
	})
}

// TestLocateStoreFailure: the fifth row — a failed authority or lease read
// is the typed Unavailable framework error, not an entry.
func TestLocateStoreFailure(t *testing.T) {
	b := memoryBackend(t)
	seed(t, b.store, obj{id: "user:1"})
	putLease(t, b.store, "node-1", 5, 0)
	for _, tc := range []struct {
		name string
		fail func(n int, key string) bool
	}{
		{"authority read", func(n int, _ string) bool { return n == 1 }},
		{"owner lease read", func(_ int, key string) bool { return strings.HasPrefix(key, "owner-lease:") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &faultyStore{Store: b.store, failRead: tc.fail}
			got, found, err := Locate(context.Background(), fs, record.IdentityActor, "user:1")
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, errInjected) {
				t.Fatalf("err = %v, want ErrUnavailable wrapping the provider error", err)
			}
			if found || !reflect.DeepEqual(got, Entry{}) {
				t.Fatalf("an entry came back with the error: %+v", got)
			}
		})
	}
	t.Run("closed store", func(t *testing.T) {
		b := memoryBackend(t)
		b.store.Close()
		if _, _, err := Locate(context.Background(), b.store, record.IdentityActor, "x"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
	})
}

func TestLocateIdentityAndInput(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	// The same Id as an actor and as a spot are two objects (§3.4).
	seed(t, b.store, obj{id: "user:42", objGen: 7}, obj{id: "user:42", kind: record.ObjectInstanceSpot, typ: "Shard", objGen: 9})
	a, ok, err := Locate(context.Background(), b.store, record.IdentityActor, "user:42")
	if err != nil || !ok || a.ObjectGeneration != 7 || a.Kind != record.ObjectActor {
		t.Fatalf("actor: %+v %v %v", a, ok, err)
	}
	s, ok, err := Locate(context.Background(), b.store, record.IdentitySpot, "user:42")
	if err != nil || !ok || s.ObjectGeneration != 9 || s.Kind != record.ObjectInstanceSpot {
		t.Fatalf("spot: %+v %v %v", s, ok, err)
	}
	// Ids match byte for byte: no case folding.
	if _, ok, err := Locate(context.Background(), b.store, record.IdentityActor, "User:42"); ok || err != nil {
		t.Fatalf("User:42 found=%v err=%v", ok, err)
	}

	// A spot record under an actor key, and bytes that are no record.
	spotVal, _ := obj{id: "x", kind: record.ObjectUserSpot, typ: "Room"}.authority().Encode()
	putRaw(t, b.store, obj{id: "misfiled"}.key(t), spotVal)
	otherVal, _ := obj{id: "someone-else"}.authority().Encode()
	putRaw(t, b.store, obj{id: "copied"}.key(t), otherVal)
	putRaw(t, b.store, obj{id: "garbage"}.key(t), []byte("not json"))
	putRaw(t, b.store, obj{id: "future"}.key(t), []byte(`{"recordVersion":2}`))
	for _, id := range []string{"misfiled", "copied", "garbage", "future"} {
		if _, ok, err := Locate(context.Background(), b.store, record.IdentityActor, id); !errors.Is(err, ErrCorruptRecord) || ok {
			t.Fatalf("%s: found=%v err=%v, want ErrCorruptRecord", id, ok, err)
		}
	}

	bad := []struct {
		kind record.IdentityKind
		id   string
	}{
		{"Actor", "x"}, {"", "x"}, {"userSpot", "x"},
		{record.IdentityActor, ""}, {record.IdentityActor, "a\x00b"},
		{record.IdentityActor, strings.Repeat("x", 256)}, {record.IdentityActor, "\xff"},
	}
	for _, tc := range bad {
		if _, _, err := Locate(context.Background(), b.store, tc.kind, tc.id); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Locate(%q, %q): err = %v, want ErrInvalidArgument", tc.kind, tc.id, err)
		}
	}
	if _, _, err := (Reader{}).Locate(context.Background(), record.IdentityActor, "x"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no store: %v", err)
	}
	// 255 bytes is the largest valid Id.
	long := strings.Repeat("é", 127) + "x"
	seed(t, b.store, obj{id: long})
	if e, ok, err := Locate(context.Background(), b.store, record.IdentityActor, long); err != nil || !ok || e.ID != long {
		t.Fatalf("255-byte id: %v %v", ok, err)
	}
}

// TestLocateIndependentOfMesh: the answer is the record's, whatever mesh
// the object was placed in (§12); the query takes no mesh at all.
func TestLocateIndependentOfMesh(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	seed(t, b.store, obj{id: "a", mesh: "east"}, obj{id: "b", mesh: "west"})
	for id, mesh := range map[string]string{"a": "east", "b": "west"} {
		e, ok, err := Locate(context.Background(), b.store, record.IdentityActor, id)
		if err != nil || !ok || e.MeshName != mesh || e.State != StateReady {
			t.Fatalf("%s: %+v %v %v", id, e, ok, err)
		}
	}
}
