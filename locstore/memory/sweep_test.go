package memory

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// TestSweepReclaimsExpired: expired entries nobody reads again do not stay
// in memory forever; commits purge them at an amortised O(1) cost.
func TestSweepReclaimsExpired(t *testing.T) {
	clock := NewManualClock(time.Unix(1_900_000_000, 0))
	s, err := New(WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var req locstore.WriteRequest
	for i := range 500 {
		req.Mutations = append(req.Mutations, locstore.PutExpiring(fmt.Sprintf("e/%d", i), []byte("x"), time.Second))
	}
	req.Mutations = append(req.Mutations, locstore.Put("durable", []byte("d")))
	if res, err := s.Write(t.Context(), req); err != nil || !res.Applied {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	for range 1024 {
		if _, err := s.Write(t.Context(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("busy", []byte("b"))}}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.RLock()
	n := len(s.data)
	s.mu.RUnlock()
	if n != 2 {
		t.Fatalf("%d entries kept after the sweep, want 2 (durable, busy)", n)
	}
}
