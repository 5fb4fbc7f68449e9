package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// quietLease keeps every node's owner lease from being renewed while a test
// runs: the renewal is the one background writer, and the tests below
// compare every row of the store before and after a call.
func quietLease(_ int, cfg *config.Config) {
	cfg.Lease.RenewInterval = 10 * time.Minute
	cfg.Lease.TTL = 30 * time.Minute
}

// storeRows scans every row of the Location Store.
func storeRows(t *testing.T, s locstore.Store) []locstore.Item {
	t.Helper()
	var out []locstore.Item
	req := locstore.ScanRequest{Limit: locstore.MaxPageItems}
	for {
		page, err := s.Scan(context.Background(), req)
		if err != nil || page.Expired {
			t.Fatalf("scan: %v (expired %v)", err, page.Expired)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out
		}
		req.Cursor = page.Next
	}
}

// rowsDiff describes how two scans differ ("" when every key, value,
// version and expiry is the same).
func rowsDiff(before, after []locstore.Item) string {
	index := func(items []locstore.Item) map[string]locstore.Item {
		m := make(map[string]locstore.Item, len(items))
		for _, it := range items {
			m[it.Key] = it
		}
		return m
	}
	b, a := index(before), index(after)
	var diffs []string
	for k, x := range b {
		y, ok := a[k]
		switch {
		case !ok:
			diffs = append(diffs, "deleted "+k)
		case !bytes.Equal(x.Value, y.Value) || x.Version != y.Version || !x.ExpiresAt.Equal(y.ExpiresAt):
			diffs = append(diffs, "changed "+k)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			diffs = append(diffs, "added "+k)
		}
	}
	return strings.Join(diffs, "; ")
}

// storeOf is the Location Store a cluster built by newClusterOn uses.
func storeOf(f *fixture, loc locstore.Store) locstore.Store {
	if loc != nil {
		return loc
	}
	return f.loc
}

// §3.2, §12 "Issuing the next generation after 2^63-1 is always
// GenerationExhausted and doesn't change the Store": with the
// ObjectGeneration counter at the sentinel every Create/GetOrCreate ends
// GenerationExhausted, writes nothing (not even the creation request) and
// gives the same answer when repeated.
func runGenerationExhaustedChangesNothing(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	c := newClusterOn(t, f, loc, 1, quietLease)
	store := storeOf(f, loc)
	ctx := ctxT(t, 30*time.Second)
	key, err := record.CounterKey(record.CounterObjectGeneration)
	if err != nil {
		t.Fatal(err)
	}
	v, err := record.Counter{Value: record.Generation(gen.Sentinel)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, v)}}); err != nil {
		t.Fatal(err)
	}
	m := c.m(0)
	body := WithBody([]byte("request"))
	tests := []struct {
		name string
		call func() error
	}{
		{"CreateActor", func() error { return second(m.CreateActor(ctx, "gx-actor", testActorType, body)) }},
		{"GetOrCreateActor", func() error { return second(m.GetOrCreateActor(ctx, "gx-actor2", testActorType, body)) }},
		{"CreateUserSpot", func() error { return second(m.CreateUserSpot(ctx, testSpotType, body)) }},
		{"GetOrCreateUserSpot", func() error { return second(m.GetOrCreateUserSpot(ctx, "gx-spot", testSpotType, body)) }},
		{"CreateActor with an OperationId", func() error {
			return second(m.CreateActor(ctx, "gx-actor3", testActorType, body, WithOperationID([16]byte{15: 1})))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := storeRows(t, store)
			for i := 1; i <= 2; i++ {
				err := tc.call()
				if !errors.Is(err, ErrGenerationExhausted) {
					t.Fatalf("call %d: err = %v, want ErrGenerationExhausted", i, err)
				}
				if d := rowsDiff(before, storeRows(t, store)); d != "" {
					t.Fatalf("call %d changed the store: %s", i, d)
				}
			}
		})
	}
	for _, id := range []string{"gx-actor", "gx-actor2", "gx-actor3", "gx-spot"} {
		if n := c.probe.runCount(id); n != 0 {
			t.Errorf("factory ran %d times for %s", n, id)
		}
	}
}

func TestGenerationExhaustedChangesNothing(t *testing.T) {
	runGenerationExhaustedChangesNothing(t, nil)
}

func TestGenerationExhaustedChangesNothingRedis(t *testing.T) {
	runGenerationExhaustedChangesNothing(t, newRedisLocation(t))
}

// The creation body bound is exact (§7: the stored request is at most
// 1 MiB, the store's value limit): the longest header the Manager encodes
// plus MaxCreationBody is exactly the limit.
func TestMaxCreationBodyIsExact(t *testing.T) {
	if record.MaxCreationRequestBytes != locstore.MaxValueBytes {
		t.Fatalf("stored request limit %d, store value limit %d", record.MaxCreationRequestBytes, locstore.MaxValueBytes)
	}
	id, typ := strings.Repeat("i", record.MaxIDBytes), strings.Repeat("t", record.MaxNameBytes)
	body := make([]byte, MaxCreationBody)
	longest := 0
	for _, mode := range []createMode{modeCreate, modeGetOrCreate} {
		for _, kind := range []record.ObjectKind{record.ObjectActor, record.ObjectUserSpot} {
			longest = max(longest, len(encodeCreationRequest(mode, kind, id, typ, body)))
		}
	}
	if longest != record.MaxCreationRequestBytes {
		t.Fatalf("longest request with a MaxCreationBody body is %d bytes, want exactly %d", longest, record.MaxCreationRequestBytes)
	}
}

// §7 "The creation request's stored size is at most 1 MiB", at the Manager:
// with a maximal id and stable type, a body of MaxCreationBody bytes is
// created, one byte more is InvalidOperation and writes nothing.
func runCreationBodyBoundary(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	actorType, spotType := strings.Repeat("a", record.MaxNameBytes), strings.Repeat("s", record.MaxNameBytes)
	got := make(chan int, 4)
	newFn := func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
		got <- len(req.Body)
		return &echo{p: newProbe()}, nil
	}
	for _, fac := range []spot.Factory{
		{StableType: actorType, Kind: spot.KindActor, Policy: spot.PolicyDisabled, New: newFn},
		{StableType: spotType, Kind: spot.KindUserSpot, Policy: spot.PolicyDisabled, New: newFn},
	} {
		if err := f.reg.Register(fac); err != nil {
			t.Fatal(err)
		}
	}
	c := newClusterOn(t, f, loc, 1, quietLease)
	store := storeOf(f, loc)
	m := c.m(0)
	ctx := ctxT(t, 60*time.Second)
	tests := []struct {
		name   string
		create func(id string, body []byte) error
	}{
		{"GetOrCreateUserSpot", func(id string, body []byte) error {
			return second(m.GetOrCreateUserSpot(ctx, id, spotType, WithBody(body)))
		}},
		{"GetOrCreateActor", func(id string, body []byte) error {
			return second(m.GetOrCreateActor(ctx, id, actorType, WithBody(body)))
		}},
		{"CreateActor", func(id string, body []byte) error {
			return second(m.CreateActor(ctx, id, actorType, WithBody(body)))
		}},
	}
	id := func(i int) string { return fmt.Sprintf("%d%s", i, strings.Repeat("x", record.MaxIDBytes-1)) }
	// Every refusal first: a creation makes the node republish its
	// descriptor's capacity copy in the background, which would change the
	// store under a later comparison.
	before := storeRows(t, store)
	for i, tc := range tests {
		err := tc.create(id(i), make([]byte, MaxCreationBody+1))
		if !errors.Is(err, ErrInvalidOperation) {
			t.Fatalf("%s, body of MaxCreationBody+1 bytes: err = %v, want ErrInvalidOperation", tc.name, err)
		}
		if d := rowsDiff(before, storeRows(t, store)); d != "" {
			t.Fatalf("%s: a refused body changed the store: %s", tc.name, d)
		}
	}
	for i, tc := range tests {
		if err := tc.create(id(i), make([]byte, MaxCreationBody)); err != nil {
			t.Fatalf("%s, body of MaxCreationBody bytes: %v", tc.name, err)
		}
		if n := <-got; n != MaxCreationBody {
			t.Fatalf("%s: factory got a %d-byte body, want %d", tc.name, n, MaxCreationBody)
		}
	}
}

func TestCreationBodyBoundary(t *testing.T) { runCreationBodyBoundary(t, nil) }

func TestCreationBodyBoundaryRedis(t *testing.T) { runCreationBodyBoundary(t, newRedisLocation(t)) }

// §7 InMesh: a mesh that doesn't exist is NotFound; a mesh that exists (a
// live MeshNode descriptor) but that this node is not a member of cannot be
// placed in from here: Unavailable with ErrNotMember, never NotFound.
func runInMeshOtherMesh(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	c := newClusterOn(t, f, loc, 1, nil)
	cfg := objConfig("elsewhere")
	cfg.Node.RoutingID = "0909"
	other, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: storeOf(f, loc),
		Relocation: f.reloc, DiscoveryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	m := c.m(0)
	ctx := ctxT(t, 20*time.Second)

	_, err = m.CreateActor(ctx, "im-1", testActorType, InMesh("elsewhere"))
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrNotMember) || errors.Is(err, ErrNotFound) {
		t.Fatalf("InMesh of an existing other mesh: %v, want ErrUnavailable and ErrNotMember, not ErrNotFound", err)
	}
	_, err = m.GetOrCreateUserSpot(ctx, "im-2", testSpotType, InMesh("nowhere"))
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotMember) {
		t.Fatalf("InMesh of a mesh without nodes: %v, want ErrNotFound", err)
	}
	_, err = m.CreateUserSpot(ctx, testSpotType, InMesh(strings.Repeat("m", record.MaxNameBytes+1)))
	wantIs(t, err, ErrInvalidOperation)
	if _, err := m.CreateActor(ctx, "im-3", testActorType, InMesh("objects")); err != nil {
		t.Fatalf("InMesh of its own mesh: %v", err)
	}

	// Once the other mesh's only node is gone (its lease released), the
	// mesh no longer exists.
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = m.CreateActor(ctx, "im-4", testActorType, InMesh("elsewhere"))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("InMesh of a mesh whose nodes are gone: %v, want ErrNotFound", err)
	}
}

func TestInMeshOtherMesh(t *testing.T) { runInMeshOtherMesh(t, nil) }

func TestInMeshOtherMeshRedis(t *testing.T) { runInMeshOtherMesh(t, newRedisLocation(t)) }

// failReads is a Location Store whose Read fails for the keys a call's
// context names (failReadsKey): a store failure injected into exactly one
// caller's reads, leaving the nodes' own background work alone.
type failReads struct{ locstore.Store }

type failReadsKey struct{}

func withFailingReads(ctx context.Context, keys ...string) context.Context {
	return context.WithValue(ctx, failReadsKey{}, keys)
}

func (s failReads) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	keys, _ := ctx.Value(failReadsKey{}).([]string)
	for _, k := range keys {
		if k == key {
			return locstore.ReadResult{}, &locstore.ProviderError{Provider: "test", Op: "read",
				Err: fmt.Errorf("%w: injected failure", locstore.ErrUnavailable)}
		}
	}
	return s.Store.Read(ctx, key)
}

// §7.3, §12 "Missing, Creating, and Store errors aren't left in the location
// cache", observed at the Manager: messages to an object whose record is
// Creating, and messages whose authority or owner-lease read fails, leave no
// cache entry, and the next message reads the store again.
func runRouteCacheNeverHoldsCreatingOrStoreErrors(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	c := newClusterOn(t, f, failReads{Store: storeOf(f, loc)}, 2, func(i int, cfg *config.Config) {
		if i == 0 {
			cfg.Node.ObjectRole = config.RoleClient
		}
	})
	src, m := c.nodes[0], c.m(0)
	ctx := ctxT(t, 30*time.Second)
	const id = "rc-obj"
	cacheKey := follow.Key{Kind: follow.KindActor, ID: id}
	cached := func() bool { _, ok := src.obj.cache.Get(cacheKey); return ok }
	// resolvedFromStore runs call and checks that it missed the cache, read
	// the authority row and left nothing cached.
	resolvedFromStore := func(t *testing.T, what string, call func() error, want error) {
		t.Helper()
		s0 := src.ObjectStats()
		err := call()
		if !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", what, err, want)
		}
		s1 := src.ObjectStats()
		if s1.RouteCacheHits != s0.RouteCacheHits || s1.RouteCacheMisses <= s0.RouteCacheMisses || s1.AuthorityReads <= s0.AuthorityReads {
			t.Fatalf("%s: hits %d -> %d, misses %d -> %d, authority reads %d -> %d; want a store resolution", what,
				s0.RouteCacheHits, s1.RouteCacheHits, s0.RouteCacheMisses, s1.RouteCacheMisses, s0.AuthorityReads, s1.AuthorityReads)
		}
		if cached() {
			t.Fatalf("%s: the route cache holds an entry", what)
		}
	}

	// Creating: the factory is held, the record is Reserved.
	type creation struct {
		ref ActorRef
		err error
	}
	created := make(chan creation, 1)
	go func() {
		ref, err := m.CreateActor(ctx, id, testActorType, WithBody([]byte("wait:rc")))
		created <- creation{ref, err}
	}()
	waitCreating(t, c, record.ObjectActor, id)
	ref := ActorRef{ActorID: id, ObjectGeneration: uint64(rowOf(t, c, record.ObjectActor, id).Record.ObjectGeneration)}
	for i := 0; i < 2; i++ {
		resolvedFromStore(t, "send while Creating", func() error { return m.SendActor(ctx, ref, []byte("x")) }, ErrNotFound)
		resolvedFromStore(t, "request while Creating", func() error { return second(m.RequestActor(ctx, ref, []byte("x"))) }, ErrNotFound)
	}
	close(c.probe.gate("rc"))
	if got := <-created; got.err != nil || got.ref.ObjectGeneration != ref.ObjectGeneration {
		t.Fatalf("created %+v, %v; want generation %d", got.ref, got.err, ref.ObjectGeneration)
	}

	// Store errors: the authority read fails, then the owner-lease read
	// (the route's admission deadline) fails.
	akey, err := authority.Object{ID: id, Kind: record.ObjectActor}.Key()
	if err != nil {
		t.Fatal(err)
	}
	ownerID, _ := c.nodes[1].Owner()
	lkey, err := record.OwnerLeaseKey(ownerID)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{akey, lkey} {
		fctx := withFailingReads(ctx, key)
		resolvedFromStore(t, "send with a failing read", func() error { return m.SendActor(fctx, ref, []byte("x")) }, ErrUnavailable)
		resolvedFromStore(t, "request with a failing read", func() error { return second(m.RequestActor(fctx, ref, []byte("x"))) }, ErrUnavailable)
	}

	// The store answers again: the next message reads it and is cached, and
	// the one after is a cache hit.
	s0 := src.ObjectStats()
	if _, err := m.RequestActor(ctx, ref, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if !cached() {
		t.Fatal("a Ready route was not cached")
	}
	if err := m.SendActor(ctx, ref, []byte("z")); err != nil {
		t.Fatal(err)
	}
	s1 := src.ObjectStats()
	if s1.RouteCacheMisses != s0.RouteCacheMisses+1 || s1.RouteCacheHits != s0.RouteCacheHits+1 {
		t.Fatalf("after recovery: misses %d -> %d, hits %d -> %d; want one miss then one hit",
			s0.RouteCacheMisses, s1.RouteCacheMisses, s0.RouteCacheHits, s1.RouteCacheHits)
	}
}

func TestRouteCacheNeverHoldsCreatingOrStoreErrors(t *testing.T) {
	runRouteCacheNeverHoldsCreatingOrStoreErrors(t, nil)
}

func TestRouteCacheNeverHoldsCreatingOrStoreErrorsRedis(t *testing.T) {
	runRouteCacheNeverHoldsCreatingOrStoreErrors(t, newRedisLocation(t))
}

// A creation's stored request goes with its reservation (authority
// storedRequest): once the record is Ready, or the creation was declined or
// failed, no creation-request row is left — before, each stayed until the
// deadline + 5 min (~40 % of a churning mesh's Redis memory). Remote
// creations (the request crosses to the target, which commits or aborts)
// and local ones, Actors and User Spots.
func runCreationLeavesNoStoredRequest(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	c := newClusterOn(t, f, loc, 2, quietLease)
	store := storeOf(f, loc)
	ctx := ctxT(t, 30*time.Second)
	for i := range 2 {
		m := c.m(i)
		if _, err := m.CreateActor(ctx, fmt.Sprintf("sr-actor-%d", i), testActorType, WithBody([]byte("request"))); err != nil {
			t.Fatal(err)
		}
		if _, err := m.GetOrCreateUserSpot(ctx, fmt.Sprintf("sr-spot-%d", i), testSpotType, WithBody([]byte("request"))); err != nil {
			t.Fatal(err)
		}
		if _, err := m.CreateActor(ctx, fmt.Sprintf("sr-declined-%d", i), testActorType, WithBody([]byte("decline:no"))); !errors.Is(err, ErrRejected) {
			t.Fatalf("declined creation: %v, want ErrRejected", err)
		}
	}
	if left := scanKinds(t, store, KindCreationRequest); len(left) != 0 {
		t.Fatalf("%d creation requests left after the creations ended: %v", len(left), left[0].Key)
	}
	if n := len(scanKinds(t, store, authority.KindCreationTerminal)); n != 6 {
		t.Fatalf("%d final results, want 6 (they stay: a lost answer is re-read from them)", n)
	}
}

func TestCreationLeavesNoStoredRequest(t *testing.T) { runCreationLeavesNoStoredRequest(t, nil) }

func TestCreationLeavesNoStoredRequestRedis(t *testing.T) {
	runCreationLeavesNoStoredRequest(t, newRedisLocation(t))
}

// The pauses of the pollers: newBackoff's 2 ms doubling to 50 ms, and a
// source's confirmation reads after its first one missed (confirmPace).
func TestBackoffPauses(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	for _, tc := range []struct {
		name string
		b    *backoff
		want []time.Duration
	}{
		{"newBackoff", newBackoff(), []time.Duration{2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 64 * ms}},
		{"confirm, no lag seen", confirmPace(0), []time.Duration{100 * us, 200 * us, 400 * us, 800 * us}},
		{"confirm, 6 ms lag", confirmPace(6 * ms), []time.Duration{1500 * us, 1500 * us, 1500 * us, 1500 * us, 1500 * us, 3 * ms, 6 * ms}},
		{"confirm, tiny lag", confirmPace(200 * us), []time.Duration{100 * us, 100 * us, 100 * us, 100 * us, 100 * us, 200 * us}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, want := range tc.want {
				if got := tc.b.next(); got != want {
					t.Fatalf("pause %d: %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// A creation whose only target fails before the callback (here its store
// refuses the Commit, Redis at its maxmemory on that node's side) fails
// naming that node and what it answered, so that an operator knows whose
// log to read: the wire answer carries no more than its result.
func TestCreateNamesTheLastTargetThatFailed(t *testing.T) {
	c, rs := refusingCluster(t, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	rs.on.Store(true)
	_, err := c.m(0).CreateActor(ctx, "named", seqType)
	want := fmt.Sprintf("the last node tried, %x: ", c.nodes[1].RID())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("CreateActor = %v; want ErrUnavailable naming %q", err, want)
	}
	if rs.refused.Load() == 0 {
		t.Fatal("the target's store refused nothing: the test did not test the failure")
	}
}

// A store that starts refusing writes between the creator's Reserve and
// the target's Commit (Redis filling up; one store for both): the target
// can only answer "terminated" (the wire has no text), and the creator,
// whose return of the reservation is refused too, ends the creation at
// once saying why. It went on to place again before, found the Creating
// record it could not return, and said "already exists (Creating)".
func TestCreateWhenTheStoreFillsUpSaysSo(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	rs := &refusingStore{Store: f.loc}
	c := newClusterWith(t, f, func(i int) locstore.Store {
		if i <= 1 {
			return rs // the creator and the only server share it
		}
		return nil
	}, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	key, err := record.AuthorityKey(record.IdentityActor, "filled")
	if err != nil {
		t.Fatal(err)
	}
	rs.onAfter.Store(&key) // the Reserve writes the Creating record
	_, err = c.m(0).CreateActor(ctx, "filled", seqType)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, locstore.ErrWriteRefused) ||
		!strings.Contains(err.Error(), "raise maxmemory") ||
		!strings.Contains(err.Error(), fmt.Sprintf("node %x had answered", c.nodes[1].RID())) {
		t.Fatalf("CreateActor = %v; want the store's refusal, naming the node that failed", err)
	}
	t.Logf("CreateActor: %v", err)
	// Once the store takes writes again the reservation is returned (both
	// nodes alive: no recovery would) and the Id can be created.
	rs.on.Store(false)
	waitUntil(t, "the Creating record to be returned", func() bool {
		return !rowOf(t, c, record.ObjectActor, "filled").Found
	})
	if _, err := c.m(0).CreateActor(ctx, "filled", seqType); err != nil {
		t.Fatalf("CreateActor once the store takes writes: %v", err)
	}
}
