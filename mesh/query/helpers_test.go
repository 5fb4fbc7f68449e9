package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/record"
)

var t0 = time.Date(2025, 7, 8, 12, 0, 0, 0, time.UTC)

// obj describes one authority row to seed. Zero fields get defaults.
type obj struct {
	id       string
	kind     record.ObjectKind
	state    record.AllocationState
	typ      string
	mesh     string
	rid      []byte
	owner    string
	leaseGen record.Generation
	objGen   record.Generation
	aog      record.Generation
}

func (o obj) withDefaults() obj {
	if o.kind == "" {
		o.kind = record.ObjectActor
	}
	if o.state == "" {
		o.state = record.AllocationActive
	}
	if o.typ == "" {
		o.typ = "Player"
	}
	if o.mesh == "" {
		o.mesh = "game"
	}
	if o.rid == nil {
		o.rid = []byte{0x0a, 0x01}
	}
	if o.owner == "" {
		o.owner = "node-1"
	}
	if o.leaseGen == 0 {
		o.leaseGen = 5
	}
	if o.objGen == 0 {
		o.objGen = 101
	}
	if o.aog == 0 {
		o.aog = 1
	}
	return o
}

func (o obj) identity() record.IdentityKind { return o.withDefaults().kind.IdentityKind() }

func (o obj) key(t testing.TB) string {
	t.Helper()
	k, err := record.AuthorityKey(o.identity(), o.id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (o obj) authority() record.Authority {
	o = o.withDefaults()
	c := record.AllocationCapacity{Actors: 1}
	if o.kind != record.ObjectActor {
		c = record.AllocationCapacity{Spots: 1, SpotType: &record.SpotTypeSlots{ObjectKind: o.kind, StableType: o.typ, Count: 1}}
	}
	a := record.Authority{
		ObjectID:                 o.id,
		ObjectGeneration:         o.objGen,
		AuthorityOwnerGeneration: o.aog,
		OwnerID:                  o.owner,
		OwnerLeaseGeneration:     o.leaseGen,
		Allocation: record.Allocation{
			State:                         o.state,
			ObjectKind:                    o.kind,
			StableType:                    o.typ,
			Descriptor:                    record.DescriptorRef{MeshName: o.mesh, RoutingID: o.rid},
			DescriptorLifecycleGeneration: 3,
			Capacity:                      c,
		},
	}
	if o.state == record.AllocationReserved {
		a.PendingCreation = &record.PendingCreation{ReservationID: "res-" + o.owner, RequestContentReference: "inline", RequestEncodedSize: 12}
	}
	return a
}

// want is the entry Locate and List should return for o.
func (o obj) want(t testing.TB, state State) Entry {
	d := o.withDefaults()
	return Entry{
		ID: d.id, Key: o.key(t), Kind: d.kind, ObjectGeneration: d.objGen, MeshName: d.mesh,
		NodeRID: d.rid, State: state, StableType: d.typ, AuthorityOwnerGeneration: d.aog,
		OwnerID: d.owner, OwnerLeaseGeneration: d.leaseGen,
	}
}

// write applies puts in batches the SPI accepts.
func write(t testing.TB, st locstore.Store, muts []locstore.Mutation) {
	t.Helper()
	ctx := context.Background()
	for len(muts) > 0 {
		n, size := 0, 0
		for n < len(muts) && n < 1000 && size+len(muts[n].Value)+len(muts[n].Key) < 3<<20 {
			size += len(muts[n].Value) + len(muts[n].Key)
			n++
		}
		res, err := st.Write(ctx, locstore.WriteRequest{Mutations: muts[:n]})
		if err != nil || !res.Applied {
			t.Fatalf("seed write: %+v %v", res, err)
		}
		muts = muts[n:]
	}
}

// seed writes the authority rows and returns key -> id.
func seed(t testing.TB, st locstore.Store, objs ...obj) map[string]string {
	t.Helper()
	keys := make(map[string]string, len(objs))
	muts := make([]locstore.Mutation, 0, len(objs))
	for _, o := range objs {
		v, err := o.authority().Encode()
		if err != nil {
			t.Fatalf("encode %q: %v", o.id, err)
		}
		k := o.key(t)
		keys[k] = o.id
		muts = append(muts, locstore.Put(k, v))
	}
	write(t, st, muts)
	return keys
}

// putLease writes an owner lease; retention 0 is durable.
func putLease(t testing.TB, st locstore.Store, owner string, gen record.Generation, retention time.Duration) {
	t.Helper()
	v, err := record.OwnerLease{OwnerID: owner, LeaseGeneration: gen, AcquiredAt: 1, UpdatedAt: 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := record.OwnerLeaseKey(owner)
	write(t, st, []locstore.Mutation{locstore.PutExpiring(key, v, retention)})
}

func putRaw(t testing.TB, st locstore.Store, key string, value []byte) {
	t.Helper()
	write(t, st, []locstore.Mutation{locstore.Put(key, value)})
}

func leaseKey(t testing.TB, owner string) string {
	t.Helper()
	k, err := record.OwnerLeaseKey(owner)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// backend is a Location Store to run a scenario against, plus a way to
// make a lease written with a retention expire.
type backend struct {
	name  string
	store locstore.Store
	// expireLease writes owner's lease (generation gen) so that it is
	// expired when the call returns, by the store's clock.
	expireLease func(t testing.TB, owner string, gen record.Generation)
	clock       *memory.ManualClock // nil for Redis
}

func memoryBackend(t testing.TB, opts ...memory.Option) backend {
	t.Helper()
	clock := memory.NewManualClock(t0)
	st, err := memory.New(append([]memory.Option{memory.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return backend{name: "memory", store: st, clock: clock,
		expireLease: func(t testing.TB, owner string, gen record.Generation) {
			putLease(t, st, owner, gen, 10*time.Second)
			clock.Advance(10 * time.Second) // expiry is exclusive: gone from ExpiresAt on
		}}
}

func redisStore(t testing.TB, addr, ns string) *locredis.Store {
	t.Helper()
	st, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func redisBackend(t testing.TB) backend {
	t.Helper()
	st := redisStore(t, testredis.Addr(t), testredis.Namespace(t))
	return backend{name: "redis", store: st,
		// The Redis clock cannot be injected: write the lease with a 1 ms
		// retention and wait until the store itself reports it gone. Nothing
		// is asserted about how long that takes.
		expireLease: func(t testing.TB, owner string, gen record.Generation) {
			putLease(t, st, owner, gen, time.Millisecond)
			key := leaseKey(t, owner)
			deadline := time.Now().Add(10 * time.Second)
			for {
				rr, err := st.Read(context.Background(), key)
				if err != nil {
					t.Fatal(err)
				}
				if !rr.Found {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("lease of %s still present 10s after a 1ms retention", owner)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}}
}

// forEachBackend runs f against the memory provider (manual clock) and
// against a real redis-server (internal/testredis: fails loudly without
// one unless testredis.EnvSkip is set, and then skips loudly).
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("memory", func(t *testing.T) { f(t, memoryBackend(t)) })
	t.Run("redis", func(t *testing.T) { f(t, redisBackend(t)) })
}

var errInjected = errors.New("injected store failure")

// faultyStore wraps a store and fails, or answers Expired, on chosen calls.
type faultyStore struct {
	locstore.Store
	mu        sync.Mutex
	scans     int
	reads     int
	failScan  func(n int, req locstore.ScanRequest) bool // n is 1-based
	expire    func(n int, req locstore.ScanRequest) bool
	failRead  func(n int, key string) bool
	failWrite func(req locstore.WriteRequest) bool
	readKeys  []string
	scanLimit []int
	// firstScans counts cursor-less scans: snapshot starts.
	firstScans int
}

func (f *faultyStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	f.mu.Lock()
	f.scans++
	n := f.scans
	f.scanLimit = append(f.scanLimit, req.Limit)
	if req.Cursor == "" {
		f.firstScans++
	}
	fail := f.failScan != nil && f.failScan(n, req)
	exp := f.expire != nil && f.expire(n, req)
	f.mu.Unlock()
	if fail {
		return locstore.ScanPage{}, &locstore.ProviderError{Provider: "faulty", Op: "scan", Err: errInjected}
	}
	if exp {
		return locstore.ScanPage{Expired: true, StoreNow: t0}, nil
	}
	return f.Store.Scan(ctx, req)
}

func (f *faultyStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if f.failWrite != nil && f.failWrite(req) {
		return locstore.WriteResult{}, &locstore.ProviderError{Provider: "faulty", Op: "write", Err: errInjected}
	}
	return f.Store.Write(ctx, req)
}

func (f *faultyStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	f.mu.Lock()
	f.reads++
	n := f.reads
	f.readKeys = append(f.readKeys, key)
	fail := f.failRead != nil && f.failRead(n, key)
	f.mu.Unlock()
	if fail {
		return locstore.ReadResult{}, &locstore.ProviderError{Provider: "faulty", Op: "read", Err: errInjected}
	}
	return f.Store.Read(ctx, key)
}

// collect reads a whole cycle, failing the test on any error.
func collect(t testing.TB, r Reader, req ListRequest) []Page {
	t.Helper()
	var pages []Page
	for {
		p, err := r.List(context.Background(), req)
		if err != nil {
			t.Fatalf("page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, p)
		if p.Next == "" {
			return pages
		}
		if len(pages) > 100000 {
			t.Fatal("cycle does not end")
		}
		req.Continuation = p.Next
	}
}

// keysOf returns every entry key of the pages and fails on a duplicate.
func keysOf(t testing.TB, pages []Page) map[string]Entry {
	t.Helper()
	seen := make(map[string]Entry)
	for i, p := range pages {
		for _, e := range p.Entries {
			if _, dup := seen[e.Key]; dup {
				t.Fatalf("key %s returned twice in one cycle (again on page %d)", e.Key, i+1)
			}
			seen[e.Key] = e
		}
	}
	return seen
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%05d", prefix, i)
	}
	return out
}
