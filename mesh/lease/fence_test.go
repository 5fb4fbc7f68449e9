package lease_test

import (
	"context"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

// TestFence checks that Fence names our record at its current version
// through acquire and renew (so a batch fenced on it applies), and that a
// lost lease yields an empty version.
func TestFence(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()

	fencedWrite := func(step string) bool {
		t.Helper()
		key, version := m.Fence()
		if version == "" {
			return false
		}
		res, err := e.mem.Write(context.Background(), locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfVersion(key, version)},
			Mutations:  []locstore.Mutation{locstore.Put("probe:"+step, []byte(step))},
		})
		if err != nil {
			t.Fatalf("%s: fenced write: %v", step, err)
		}
		return res.Applied
	}
	check := func(step string) {
		t.Helper()
		key, version := m.Fence()
		want, err := record.OwnerLeaseKey(m.OwnerID())
		if err != nil {
			t.Fatal(err)
		}
		if key != want {
			t.Fatalf("%s: Fence key %q, want %q", step, key, want)
		}
		_, rr := e.readRecord(m)
		if !rr.Found || version != rr.Version {
			t.Fatalf("%s: Fence version %q, stored %q (found %v)", step, version, rr.Version, rr.Found)
		}
		if !fencedWrite(step) {
			t.Fatalf("%s: a batch fenced on Fence() conflicted", step)
		}
	}

	check("acquired")
	_, before := m.Fence()
	e.waitIdle(m, 2)
	e.clock.Advance(lease.DefaultRenewInterval)
	e.expect(lease.EventRenewed)
	if _, after := m.Fence(); after == before {
		t.Fatal("Fence version unchanged by a renew")
	}
	check("renewed")

	// Another generation under our key: the next renew conflicts, the lease
	// is lost, and Fence no longer offers a version.
	e.waitIdle(m, 2)
	e.putLease(m, m.OwnerID(), m.Generation()+1)
	e.clock.Advance(lease.DefaultRenewInterval)
	e.expect(lease.EventLost)
	if key, version := m.Fence(); version != "" || key == "" {
		t.Fatalf("after loss Fence = (%q, %q), want (key, \"\")", key, version)
	}
}
