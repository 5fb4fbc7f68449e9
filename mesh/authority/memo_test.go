package authority

import (
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// The remembered counter keys are the keys CapacityKey computes, for every
// field of the counter, also after the memo started over.
func TestCounterKeysMemoMatchesCapacityKey(t *testing.T) {
	base := CounterID{Node: Node{MeshName: "m", RoutingID: []byte{1, 2}, LifecycleGeneration: 3}, Class: SlotActors}
	ids := []CounterID{base}
	for _, edit := range []func(*CounterID){
		func(c *CounterID) { c.Node.MeshName = "n" },
		func(c *CounterID) { c.Node.RoutingID = []byte{1, 3} },
		func(c *CounterID) { c.Node.LifecycleGeneration = 4 },
		func(c *CounterID) { c.Class = SlotSpots },
		func(c *CounterID) { c.Class, c.SpotKind, c.StableType = SlotSpotType, record.ObjectUserSpot, "room" },
		func(c *CounterID) { c.Class, c.SpotKind, c.StableType = SlotSpotType, record.ObjectUserSpot, "lobby" },
		func(c *CounterID) {
			c.Class, c.SpotKind, c.StableType = SlotSpotType, record.ObjectInstanceSpot, "room"
		},
	} {
		c := base
		c.Node.RoutingID = append([]byte(nil), base.Node.RoutingID...)
		edit(&c)
		ids = append(ids, c)
	}
	// More distinct counters than the memo holds: it starts over.
	for g := uint64(10); g < 10+memoMax+10; g++ {
		c := base
		c.Node.LifecycleGeneration = g
		ids = append(ids, c)
	}
	seen := map[string]string{}
	for round := 0; round < 2; round++ {
		for _, id := range ids {
			secured, active, err := CounterKeys(id)
			if err != nil {
				t.Fatal(err)
			}
			ws, _ := CapacityKey(id, MeasureSecured)
			wa, _ := CapacityKey(id, MeasureActive)
			if secured != ws || active != wa {
				t.Fatalf("round %d, %s: memo gave %s/%s, want %s/%s", round, id, secured, active, ws, wa)
			}
			if other, dup := seen[secured]; dup && other != id.String() {
				t.Fatalf("%s and %s share a key", id, other)
			}
			seen[secured] = id.String()
		}
	}
	// The memo keeps its own copy of the routing id: a caller reusing its
	// buffer for another node does not change the remembered key.
	buf := []byte{7, 7}
	if _, _, err := CounterKeys(CounterID{Node: Node{MeshName: "m", RoutingID: buf, LifecycleGeneration: 1}, Class: SlotActors}); err != nil {
		t.Fatal(err)
	}
	buf[1] = 8
	counterKeys.mu.RLock()
	_, kept := counterKeys.m[counterMemoKey{mesh: "m", rid: "\x07\x07", gen: 1, class: SlotActors}]
	counterKeys.mu.RUnlock()
	if !kept {
		t.Fatal("the memo's key changed with its caller's routing id buffer")
	}
	// An invalid counter is an error, not remembered as anything.
	bad := base
	bad.Class = "nonsense"
	for range 2 {
		if _, _, err := CounterKeys(bad); err == nil {
			t.Fatal("an invalid counter got keys")
		}
	}
}

// A remembered lease is used only for the very same bytes of the same row;
// a changed value is decoded again and a corrupt one is refused every time.
func TestLeaseDecodeMemo(t *testing.T) {
	enc := func(gen uint64) []byte {
		b, err := record.OwnerLease{OwnerID: "0123456789abcdef0123456789abcdef", LeaseGeneration: record.Generation(gen),
			AcquiredAt: 1000, UpdatedAt: record.EpochMillis(1000 + gen)}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := fmt.Sprintf("owner-lease:%064x", 7)
	for _, tc := range []struct {
		value   []byte
		wantGen record.Generation
		wantErr bool
	}{
		{enc(1), 1, false},
		{enc(1), 1, false}, // remembered
		{enc(2), 2, false}, // renewed: decoded again
		{[]byte(`{"nonsense":true}`), 0, true},
		{[]byte(`{"nonsense":true}`), 0, true},
		{enc(2), 2, false},
	} {
		row, err := LeaseRowOf(key, readFound(tc.value, "v"))
		if tc.wantErr {
			if err == nil {
				t.Fatalf("%s decoded", tc.value)
			}
			continue
		}
		if err != nil || row.Lease.LeaseGeneration != tc.wantGen {
			t.Fatalf("%s: %+v, %v; want generation %d", tc.value, row.Lease, err, tc.wantGen)
		}
	}
	// The remembered bytes are a copy: the caller's buffer may be reused.
	v := enc(3)
	if _, err := LeaseRowOf(key, readFound(v, "v3")); err != nil {
		t.Fatal(err)
	}
	copy(v, enc(4))
	row, err := LeaseRowOf(key, readFound(v, "v4"))
	if err != nil || row.Lease.LeaseGeneration != 4 {
		t.Fatalf("after the buffer changed: %+v, %v; want generation 4", row.Lease, err)
	}
}

func readFound(value []byte, version string) locstore.ReadResult {
	return locstore.ReadResult{Found: true, Value: value, Version: version}
}
