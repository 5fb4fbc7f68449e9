package mesh

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/record"
)

// callLog records the keys of every store call (a ReadMany is one call).
type callLog struct {
	locstore.Store
	mu    sync.Mutex
	calls []storeCall
}

type storeCall struct {
	write bool
	keys  []string
}

func (l *callLog) add(write bool, keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, storeCall{write: write, keys: keys})
}

func (l *callLog) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	l.add(false, []string{key})
	return l.Store.Read(ctx, key)
}

func (l *callLog) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	l.add(false, slices.Clone(keys))
	return locstore.ReadMany(ctx, l.Store, keys)
}

func (l *callLog) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	var keys []string
	for _, m := range req.Mutations {
		keys = append(keys, m.Key)
	}
	for _, c := range req.Conditions {
		keys = append(keys, c.Key)
	}
	l.add(true, keys)
	return l.Store.Write(ctx, req)
}

// take returns the calls so far and forgets them.
func (l *callLog) take() []storeCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// A remote creation of a new id costs two read calls and two batches (issue
// 15): the source's Reserve reads the authority row with the rows it plans
// on in one call (no read of its own before placement), and the target's
// first read brings the counters its Commit is conditioned on.
func runRemoteCreationStoreCalls(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	log := &callLog{Store: storeOf(f, loc)}
	c := newClusterOn(t, f, log, 2, func(i int, cfg *config.Config) {
		if i == 0 {
			cfg.Node.ObjectRole = config.RoleClient
		}
	})
	ctx := ctxT(t, 20*time.Second)
	// The first creation meets cold hints (the target's lease); count a
	// later one.
	if _, err := c.m(0).CreateActor(ctx, "calls-warm", demoapp.CounterType); err != nil {
		t.Fatal(err)
	}
	log.take()
	const id = "calls-1"
	ref, err := c.m(0).CreateActor(ctx, id, demoapp.CounterType)
	if err != nil {
		t.Fatal(err)
	}
	if c.indexOf(ref.NodeRID) != 1 {
		t.Fatalf("created on node %d, want the server", c.indexOf(ref.NodeRID))
	}
	akey, err := authority.Object{ID: id, Kind: record.ObjectActor}.Key()
	if err != nil {
		t.Fatal(err)
	}
	server := authority.Node{MeshName: "objects", RoutingID: c.nodes[1].run.rid, LifecycleGeneration: c.nodes[1].run.lifecycleGeneration}
	counters, err := authority.BundleCounterKeys(server, authority.Bundle{Actors: 1})
	if err != nil {
		t.Fatal(err)
	}
	var reads, writes, counterReads int
	for _, call := range log.take() {
		switch {
		case slices.Contains(call.keys, akey) && call.write:
			writes++
		case slices.Contains(call.keys, akey):
			reads++
		case !call.write && slices.Equal(call.keys, counters):
			counterReads++ // the Commit reading the counter on its own
		case !call.write && slices.ContainsFunc(call.keys, func(k string) bool { return strings.HasPrefix(k, "authority:") }):
			t.Errorf("a read of another authority row during the creation: %v", call.keys)
		}
	}
	if reads != 2 || writes != 2 || counterReads != 0 {
		t.Errorf("creation store calls: %d reads and %d batches with the authority row, %d counter reads alone; want 2, 2, 0",
			reads, writes, counterReads)
	}
}

func TestRemoteCreationStoreCalls(t *testing.T) { runRemoteCreationStoreCalls(t, nil) }

func TestRemoteCreationStoreCallsRedis(t *testing.T) {
	runRemoteCreationStoreCalls(t, newRedisLocation(t))
}
