package directory_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

var storeBase = time.UnixMilli(1_700_000_000_000).UTC()

const leaseTTL = 15 * time.Second

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newMem(t *testing.T) (*memory.Store, *memory.ManualClock) {
	t.Helper()
	clock := memory.NewManualClock(storeBase)
	s, err := memory.New(memory.WithClock(clock), memory.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

// testLease is an owner lease written straight into the store, the way the
// lease manager writes it (PutExpiring under the owner-lease key), so that
// store tests control expiry with the store's ManualClock alone.
type testLease struct {
	t     *testing.T
	store locstore.Store
	owner string
	gen   record.Generation
	key   string

	mu      sync.Mutex
	version string
}

func grantLease(t *testing.T, store locstore.Store, owner string, gen record.Generation, ttl time.Duration) *testLease {
	t.Helper()
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		t.Fatal(err)
	}
	l := &testLease{t: t, store: store, owner: owner, gen: gen, key: key}
	l.version = putLease(t, store, owner, gen, ttl)
	return l
}

// putLease writes an owner-lease record for (owner, gen) under owner's key.
func putLease(t *testing.T, store locstore.Store, owner string, gen record.Generation, ttl time.Duration) string {
	t.Helper()
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		t.Fatal(err)
	}
	v, err := record.OwnerLease{OwnerID: owner, LeaseGeneration: gen, AcquiredAt: 1, UpdatedAt: 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	res, err := store.Write(context.Background(), locstore.WriteRequest{
		Mutations: []locstore.Mutation{locstore.PutExpiring(key, v, ttl)},
	})
	if err != nil || !res.Applied {
		t.Fatalf("put lease: %v %+v", err, res)
	}
	return res.Versions[0]
}

func (l *testLease) OwnerID() string    { return l.owner }
func (l *testLease) Generation() uint64 { return uint64(l.gen) }
func (l *testLease) Fence() (string, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.key, l.version
}

// renew rewrites the record; if remember is false the fence keeps the old
// version (a renew whose answer the manager did not see yet).
func (l *testLease) renew(ttl time.Duration, remember bool) {
	l.t.Helper()
	v := putLease(l.t, l.store, l.owner, l.gen, ttl)
	if remember {
		l.mu.Lock()
		l.version = v
		l.mu.Unlock()
	}
}

func (l *testLease) revoke() {
	l.t.Helper()
	del(l.t, l.store, l.key)
}

func del(t *testing.T, store locstore.Store, key string) {
	t.Helper()
	if _, err := store.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}}); err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, store locstore.Store, key string, value []byte) {
	t.Helper()
	res, err := store.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, value)}})
	if err != nil || !res.Applied {
		t.Fatalf("put %s: %v %+v", key, err, res)
	}
}

// gate is a settable lease.Admitter.
type gate struct{ err atomic.Pointer[error] }

func (g *gate) Admit() error {
	if p := g.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (g *gate) close(err error) { g.err.Store(&err) }
func (g *gate) open()           { g.err.Store(nil) }

func descriptor(mesh string, rid []byte, endpoint string) record.MeshNodeDescriptor {
	return record.MeshNodeDescriptor{
		MeshName:            mesh,
		RoutingID:           rid,
		LifecycleGeneration: 1,
		Endpoint:            endpoint,
		ObjectRole:          record.RoleClient,
		PlacementWeight:     100,
		Capacity: record.NodeCapacity{
			Actors: record.SlotUsage{Active: 1, Limit: 100},
		},
		State: record.StatePreparing,
		// Publisher overwrites these three (and the revision and time).
		OwnerID: "placeholder", LeaseGeneration: 1, DescriptorRevision: 1,
	}
}

// hookedPublisher is the publisher tests' usual world: a memory store
// behind a hookStore, owner-a's lease (generation 1) and a Publisher of
// game/ridA that writes through the hooks.
func hookedPublisher(t *testing.T) (*memory.Store, *hookStore, *directory.Publisher) {
	t.Helper()
	mem, _ := newMem(t)
	hs := &hookStore{Store: mem}
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	return mem, hs, newPublisher(t, hs, l, nil, "game", ridA)
}

func newPublisher(t *testing.T, store locstore.Store, l directory.Lease, g *gate, mesh string, rid []byte) *directory.Publisher {
	t.Helper()
	if g == nil {
		g = &gate{}
	}
	p, err := directory.NewPublisher(directory.PublisherConfig{
		Store: store, Lease: l, Gate: g, MeshName: mesh, RoutingID: rid, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPublish(t *testing.T, p *directory.Publisher, d record.MeshNodeDescriptor, want directory.Outcome) directory.PublishResult {
	t.Helper()
	res, err := p.Publish(context.Background(), d)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if res.Outcome != want {
		t.Fatalf("Publish outcome %v, want %v (%+v)", res.Outcome, want, res)
	}
	return res
}

// stored reads and decodes the descriptor under key.
func stored(t *testing.T, store locstore.Store, key string) (record.MeshNodeDescriptor, locstore.ReadResult) {
	t.Helper()
	rr, err := store.Read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Found {
		t.Fatalf("no descriptor at %s", key)
	}
	d, err := record.DecodeMeshNode(rr.Value)
	if err != nil {
		t.Fatal(err)
	}
	return d, rr
}

func counterValue(t *testing.T, store locstore.Store) record.Generation {
	t.Helper()
	name, _ := record.DescriptorCounter(record.KindMeshNode)
	key, _ := record.CounterKey(name)
	rr, err := store.Read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Found {
		return 0
	}
	c, err := record.DecodeCounter(rr.Value)
	if err != nil {
		t.Fatal(err)
	}
	return c.Value
}

// dump returns every live key of the store with its version and value.
func dump(t *testing.T, store locstore.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	req := locstore.ScanRequest{Limit: 1000}
	for {
		page, err := store.Scan(context.Background(), req)
		if err != nil || page.Expired {
			t.Fatalf("dump: %v %+v", err, page)
		}
		for _, it := range page.Items {
			out[it.Key] = it.Version + " " + string(it.Value)
		}
		if page.Next == "" {
			return out
		}
		req.Cursor = page.Next
	}
}

func sameDump(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("store changed: %d keys, was %d", len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("store changed at %s", k)
		}
	}
}

var errReset = errors.New("connection reset")

// hookStore wraps a store: it counts calls and runs hooks before them.
// A hook returning a non-nil error replaces the call's answer with a
// provider failure (after forwarding, when apply is set).
type hookStore struct {
	locstore.Store
	reads, writes, scans atomic.Int64

	mu          sync.Mutex
	beforeWrite func(n int64, req locstore.WriteRequest) (apply bool, err error)
	beforeScan  func(n int64, req locstore.ScanRequest) (expired bool, err error)
	beforeRead  func(n int64, key string) error
	lastWrite   locstore.WriteRequest
}

func (h *hookStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	n := h.reads.Add(1)
	h.mu.Lock()
	hook := h.beforeRead
	h.mu.Unlock()
	if hook != nil {
		if err := hook(n, key); err != nil {
			return locstore.ReadResult{}, &locstore.ProviderError{Provider: "hook", Op: "read", Err: err}
		}
	}
	return h.Store.Read(ctx, key)
}

func (h *hookStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	n := h.writes.Add(1)
	h.mu.Lock()
	hook := h.beforeWrite
	h.lastWrite = req
	h.mu.Unlock()
	if hook != nil {
		apply, err := hook(n, req)
		if err != nil {
			if apply {
				if _, werr := h.Store.Write(ctx, req); werr != nil {
					return locstore.WriteResult{}, werr
				}
			}
			return locstore.WriteResult{}, &locstore.ProviderError{Provider: "hook", Op: "write", Err: err}
		}
	}
	return h.Store.Write(ctx, req)
}

func (h *hookStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	n := h.scans.Add(1)
	h.mu.Lock()
	hook := h.beforeScan
	h.mu.Unlock()
	if hook != nil {
		expired, err := hook(n, req)
		if err != nil {
			return locstore.ScanPage{}, &locstore.ProviderError{Provider: "hook", Op: "scan", Err: err}
		}
		if expired {
			return locstore.ScanPage{Expired: true}, nil
		}
	}
	return h.Store.Scan(ctx, req)
}

func (h *hookStore) setWrite(f func(n int64, req locstore.WriteRequest) (bool, error)) {
	h.mu.Lock()
	h.beforeWrite = f
	h.mu.Unlock()
}

func (h *hookStore) setScan(f func(n int64, req locstore.ScanRequest) (bool, error)) {
	h.mu.Lock()
	h.beforeScan = f
	h.mu.Unlock()
}

func (h *hookStore) setRead(f func(n int64, key string) error) {
	h.mu.Lock()
	h.beforeRead = f
	h.mu.Unlock()
}
