package directory_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/directory"
)

// A run the Tracker saw as LeaseReacquired (same OwnerId, newer generation)
// whose process then dies before republishing its descriptor under the new
// generation: its new lease expires, and the Tracker reads it again at that
// expiry, as it does a valid one — the run is dead, no longer a connection
// target. Before, the Reacquired verdict was never read again: every node's
// planner kept redialling the dead run until its descriptor was reclaimed
// (an hour), and its watchers never removed it.
func TestReacquiredRunThatDiesIsNoticed(t *testing.T) {
	mem, clock := newMem(t)
	ctx := context.Background()
	l3 := grantLease(t, mem, "owner-3", 1, leaseTTL)
	newNode(t, mem, l3, "m", []byte{3})
	tr := &directory.Tracker{Store: mem, PageSize: 1000, Logger: quiet(), Self: []byte{2}, Watchers: 2,
		Linked: func([]byte, uint64) bool { return false }} // its links are down: it is dead
	plan, err := directory.NewPlanner(directory.PlannerConfig{MeshName: "m", Self: []byte{2}})
	if err != nil {
		t.Fatal(err)
	}
	round := func() directory.Snapshot {
		t.Helper()
		s, _, err := tr.Round(ctx, "m")
		if err != nil {
			t.Fatal(err)
		}
		_, err = plan.Observe(0, s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	round()
	clock.Advance(leaseTTL + time.Second)
	putLease(t, mem, "owner-3", 2, leaseTTL) // reacquired...
	s := round()
	if !s.Entries[0].LeaseReacquired {
		t.Fatalf("setup: %+v", s.Entries[0])
	}
	// ... and the process is killed before it republishes: gen 2 expires.
	for i := 0; i < 20; i++ {
		clock.Advance(leaseTTL)
		s = round()
	}
	e := s.Entries[0]
	if e.LeaseReacquired || len(plan.Intents()) != 0 {
		t.Fatalf("a run with no owner lease for %v is still listed LeaseReacquired and kept as a connection target", 20*leaseTTL)
	}
}
