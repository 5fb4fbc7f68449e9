package meshsim

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
)

// flaky fails every Write while down.
type flaky struct {
	locstore.Store
	down atomic.Bool
}

func (f *flaky) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if f.down.Load() {
		return locstore.WriteResult{}, errors.New("store unreachable")
	}
	return f.Store.Write(ctx, req)
}

// waitFor polls cond with a generous deadline (no timing is asserted).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A renewal that fails, and the lease that lapses meanwhile, are counted:
// the discovery scale figures would otherwise blame the real nodes'
// discovery for the runs the simulator let die (its log is discarded there).
func TestRenewalFailuresAndLapsesAreCounted(t *testing.T) {
	mem, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	st := &flaky{Store: mem}
	const ttl = 100 * time.Millisecond
	sim, err := New(Config{Store: st, MeshName: "sim", LeaseTTL: ttl, RenewEvery: ttl / 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	if _, err := sim.Add(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "renewals", func() bool { return sim.Renewals() > 2 })
	if f, l := sim.Failures(), sim.Lapses(); f != 0 {
		t.Fatalf("failures %d, lapses %d with a working store", f, l)
	}
	st.down.Store(true)
	down := time.Now()
	waitFor(t, "failed renewals for longer than the lease", func() bool { return sim.Failures() > 0 && time.Since(down) > 2*ttl })
	st.down.Store(false)
	waitFor(t, "the lapse counted once renewals succeed again", func() bool { return sim.Lapses() > 0 })
}
