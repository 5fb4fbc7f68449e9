package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// deadlineStore records the longest time left before the deadline of the
// contexts its reads and scans get, while watching is set.
type deadlineStore struct {
	locstore.Store
	mu       sync.Mutex
	watching bool
	longest  time.Duration
	calls    int
}

func (s *deadlineStore) note(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.watching {
		return
	}
	s.calls++
	left := time.Duration(1<<63 - 1) // no deadline at all
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	s.longest = max(s.longest, left)
}

func (s *deadlineStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	s.note(ctx)
	return s.Store.Read(ctx, key)
}

func (s *deadlineStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	s.note(ctx)
	return s.Store.Scan(ctx, req)
}

// With the memory provider a discovery round is bounded by the renew
// interval plus lease.renew_timeout, not by location_store.redis.* (a key
// the operator reads as Redis's only, and which config lists as ignored
// there). Before, an operation_timeout of an hour let a round of a memory
// store run for an hour. The check is on the deadline the calls get, which
// only shrinks with time: no bound on how fast anything runs.
func TestDiscoveryRoundOfAMemoryStoreIgnoresRedisOperationTimeout(t *testing.T) {
	f := newFixture(t)
	st := &deadlineStore{Store: f.loc}
	cfg := fastConfig("bound")
	cfg.LocationStore.Redis.OperationTimeout = time.Hour
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: st, Relocation: f.reloc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	st.mu.Lock()
	st.watching = true
	st.mu.Unlock()
	if err := n.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	bound := cfg.Lease.RenewInterval + cfg.Lease.RenewTimeout
	if st.calls == 0 {
		t.Fatal("the discovery round read nothing from the store")
	}
	if st.longest > bound {
		t.Fatalf("a discovery round's store call had %v left, want at most renew_interval + renew_timeout = %v", st.longest, bound)
	}
}
