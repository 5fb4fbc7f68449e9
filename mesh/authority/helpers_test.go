package authority

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Fixtures shared by the planner and executor tests: two node runs, each
// owned by one host run.

var (
	nodeA  = Node{MeshName: "game", RoutingID: []byte{0x0a, 0x01}, LifecycleGeneration: 3}
	nodeB  = Node{MeshName: "game", RoutingID: []byte{0x0b, 0x02}, LifecycleGeneration: 7}
	ownerA = Owner{ID: "owner-a", LeaseGeneration: 5}
	ownerB = Owner{ID: "owner-b", LeaseGeneration: 9}

	storeNow = time.UnixMilli(1_752_000_000_000).UTC()
)

func mustKey(t testing.TB, k string, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func authKey(t testing.TB, o Object) string {
	t.Helper()
	k, err := o.Key()
	return mustKey(t, k, err)
}

func leaseKey(t testing.TB, id string) string {
	t.Helper()
	k, err := record.OwnerLeaseKey(id)
	return mustKey(t, k, err)
}

func objGenKey(t testing.TB) string {
	t.Helper()
	k, err := record.CounterKey(record.CounterObjectGeneration)
	return mustKey(t, k, err)
}

// secKey and actKey are the stored rows of counter id: secured
// (reserved+active) and active.
func secKey(t testing.TB, id CounterID) string {
	t.Helper()
	k, err := CapacityKey(id, MeasureSecured)
	return mustKey(t, k, err)
}

func actKey(t testing.TB, id CounterID) string {
	t.Helper()
	k, err := CapacityKey(id, MeasureActive)
	return mustKey(t, k, err)
}

// secVal and actVal are the canonical values of those rows holding n.
func secVal(t testing.TB, id CounterID, n int) []byte {
	t.Helper()
	v, err := EncodeCapacity(id, MeasureSecured, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func actVal(t testing.TB, id CounterID, n int) []byte {
	t.Helper()
	v, err := EncodeCapacity(id, MeasureActive, n)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// byKey sorts conditions by key: applyCapacity adds the counters' rows in
// key order, whose order between two rows is their digests'.
func byKey(cs ...locstore.Condition) []locstore.Condition {
	slices.SortFunc(cs, func(a, b locstore.Condition) int { return strings.Compare(a.Key, b.Key) })
	return cs
}

// mutsByKey sorts mutations by key, as byKey.
func mutsByKey(ms ...locstore.Mutation) []locstore.Mutation {
	slices.SortFunc(ms, func(a, b locstore.Mutation) int { return strings.Compare(a.Key, b.Key) })
	return ms
}

func actorsOf(n Node) CounterID { return CounterID{Node: n, Class: SlotActors} }
func spotsOf(n Node) CounterID  { return CounterID{Node: n, Class: SlotSpots} }
func spotTypeOf(n Node, k record.ObjectKind, st string) CounterID {
	return CounterID{Node: n, Class: SlotSpotType, SpotKind: k, StableType: st}
}

func leaseRow(t testing.TB, o Owner, version string) LeaseRow {
	t.Helper()
	return LeaseRow{Key: leaseKey(t, o.ID), Found: true, Version: version,
		Lease: record.OwnerLease{OwnerID: o.ID, LeaseGeneration: record.Generation(o.LeaseGeneration)}}
}

func missingLease(t testing.TB, id string) LeaseRow {
	t.Helper()
	return LeaseRow{Key: leaseKey(t, id)}
}

// capRow is counter id read with its rows at version+"s" (secured, present
// when reserved+active > 0) and version+"a" (active, present when active >
// 0).
func capRow(id CounterID, reserved, active int, version string) CapacityRow {
	r := CapacityRow{ID: id, Usage: Usage{Reserved: reserved, Active: active}}
	if reserved+active > 0 {
		r.Found, r.Secured = true, StoredCount{Found: true, Version: version + "s"}
	}
	if active > 0 {
		r.Active = StoredCount{Found: true, Version: version + "a"}
	}
	return r
}

func noCap(id CounterID) CapacityRow { return CapacityRow{ID: id} }

func counterValue(t testing.TB, v uint64) []byte {
	t.Helper()
	b, err := record.Counter{Value: record.Generation(v)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeAuth(t testing.TB, a record.Authority) []byte {
	t.Helper()
	v, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var (
	player = Object{ID: "user:42", Kind: record.ObjectActor, StableType: "Player"}
	room   = Object{ID: "room:7", Kind: record.ObjectUserSpot, StableType: "Room"}
	shard  = Object{ID: "shard:1", Kind: record.ObjectInstanceSpot, StableType: "Shard"}
)

func pending(resID string) record.PendingCreation {
	return record.PendingCreation{
		ReservationID:           resID,
		RequestContentReference: "authority-payload",
		RequestSHA256:           sha256.Sum256([]byte("request " + resID)),
		RequestEncodedSize:      17,
	}
}

// authority builds the record an object has on node n owned by o.
func authority(o Object, n Node, owner Owner, state record.AllocationState, objGen, ownerGen uint64) record.Authority {
	b, err := BundleFor(o.Kind, o.StableType)
	if err != nil {
		panic(err)
	}
	return record.Authority{
		ObjectID:                 o.ID,
		ObjectGeneration:         record.Generation(objGen),
		AuthorityOwnerGeneration: record.Generation(ownerGen),
		OwnerID:                  owner.ID,
		OwnerLeaseGeneration:     record.Generation(owner.LeaseGeneration),
		Allocation: record.Allocation{
			State: state, ObjectKind: o.Kind, StableType: o.StableType,
			Descriptor:                    record.DescriptorRef{MeshName: n.MeshName, RoutingID: n.RoutingID},
			DescriptorLifecycleGeneration: record.Generation(n.LifecycleGeneration),
			Capacity:                      b,
		},
	}
}

func reservedRow(t testing.TB, o Object, n Node, owner Owner, objGen uint64, resID, version string) AuthorityRow {
	t.Helper()
	a := authority(o, n, owner, record.AllocationReserved, objGen, 1)
	pc := pending(resID)
	a.PendingCreation = &pc
	return AuthorityRow{Key: authKey(t, o), Found: true, Record: a, Version: version}
}

func activeRow(t testing.TB, o Object, n Node, owner Owner, objGen, ownerGen uint64, version string) AuthorityRow {
	t.Helper()
	return AuthorityRow{Key: authKey(t, o), Found: true, Record: authority(o, n, owner, record.AllocationActive, objGen, ownerGen), Version: version}
}

func missingRow(t testing.TB, o Object) AuthorityRow {
	t.Helper()
	return AuthorityRow{Key: authKey(t, o)}
}

// wantRequest compares a planned batch with the expected one, item by item.
func wantRequest(t testing.TB, got, want locstore.WriteRequest) {
	t.Helper()
	g, w := describe(got), describe(want)
	if g != w {
		t.Errorf("planned batch differs\n got:\n%s\nwant:\n%s", g, w)
	}
}

func describe(r locstore.WriteRequest) string {
	var b strings.Builder
	for _, c := range r.Conditions {
		switch c.Kind {
		case locstore.CondMissing:
			fmt.Fprintf(&b, "  if missing %s\n", c.Key)
		case locstore.CondVersion:
			fmt.Fprintf(&b, "  if version %s = %q\n", c.Key, c.Version)
		default:
			fmt.Fprintf(&b, "  condition kind %d on %s\n", c.Kind, c.Key)
		}
	}
	for _, m := range r.Mutations {
		switch m.Kind {
		case locstore.MutPut:
			fmt.Fprintf(&b, "  put %s retention=%v %s\n", m.Key, m.Retention, m.Value)
		case locstore.MutDelete:
			fmt.Fprintf(&b, "  delete %s\n", m.Key)
		default:
			fmt.Fprintf(&b, "  mutation kind %d on %s\n", m.Kind, m.Key)
		}
	}
	return b.String()
}

// planErrCase edits a valid request and snapshot (a planner test's base)
// into one the planner must refuse with the error kinds.
type planErrCase[R any] struct {
	name  string
	edit  func(*R, *Snapshot)
	kinds []error
}

// checkPlanErrors runs each case, one subtest each, on a fresh base()
// through plan: the error has exactly the kinds, and no batch (nor
// AlreadyApplied) comes with it.
func checkPlanErrors[R any](t *testing.T, base func() (R, Snapshot), plan func(R, Snapshot) (Plan, error), cases []planErrCase[R]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, snap := base()
			tc.edit(&req, &snap)
			p, err := plan(req, snap)
			wantErr(t, err, tc.kinds...)
			if len(p.Request.Conditions)+len(p.Request.Mutations) != 0 || p.AlreadyApplied {
				t.Errorf("an error came with a batch (or AlreadyApplied): %s", describe(p.Request))
			}
		})
	}
}

// wantErr checks that err matches every sentinel in kinds and no other
// sentinel of the vocabulary.
func wantErr(t testing.TB, err error, kinds ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", kinds)
	}
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an *Error", err)
	}
	all := []error{ErrConflict, ErrNotFound, ErrStaleGeneration, ErrTypeMismatch, ErrCapacityExhausted,
		ErrGenerationExhausted, ErrInvalidOperation, ErrCorruptRecord}
	for _, k := range all {
		want := false
		for _, w := range kinds {
			want = want || w == k
		}
		if got := errors.Is(err, k); got != want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, k, got, want)
		}
	}
}

func sortedKeys(keys ...string) []string {
	out := append([]string(nil), keys...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
