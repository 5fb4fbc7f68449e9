package mesh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// flakyStore fails every Scan and Read while down is set (a Location Store
// outage as discovery sees it); writes pass through so the lease keeps
// renewing and the test isolates §10's discovery rules.
type flakyStore struct {
	locstore.Store
	down atomic.Bool
}

var errOutage = &locstore.ProviderError{Provider: "test", Op: "scan", Err: errors.New("outage")}

// Read fails too during the outage: a store that cannot scan cannot be
// relied on to read (discovery reads the change counter first, and skips
// the scan while it is unchanged).
func (s *flakyStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if s.down.Load() {
		return locstore.ReadResult{}, errOutage
	}
	return s.Store.Read(ctx, key)
}

func (s *flakyStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	if s.down.Load() {
		return locstore.ScanPage{}, errOutage
	}
	return s.Store.Scan(ctx, req)
}

// §10 StoreFailureGrace at node level: while discovery cannot read the
// store, the node keeps its last complete list and connections and connects
// to nothing new; after recovery it re-reads the whole list and connects.
func TestStoreFailureKeepsPeersAndConnectsNothingNew(t *testing.T) {
	f := newFixture(t)
	flaky := &flakyStore{Store: f.loc}
	cfg := fastConfig("g")
	cfg.StoreFailureGrace = 30 * time.Second
	a, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: flaky, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	b := f.start(fastConfig("g"))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	flaky.down.Store(true)
	if err := a.Discover(ctx); !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("Discover during the outage = %v, want the store error", err)
	}
	c := f.start(fastConfig("g"))
	if err := c.WaitPeers(ctx, 2); err != nil { // C finds A and B through the healthy store
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		_ = a.Discover(ctx)
	}
	if !hasPeer(a, b.RID()) {
		t.Fatal("A dropped B during the store outage")
	}
	if hasPeer(a, c.RID()) {
		t.Fatal("A connected to a node it could not have listed during the outage")
	}

	flaky.down.Store(false)
	if err := a.Discover(ctx); err != nil {
		t.Fatalf("Discover after recovery: %v", err)
	}
	eventually(t, 10*time.Second, "A to connect to C after recovery", func() bool { return hasPeer(a, c.RID()) })
}
