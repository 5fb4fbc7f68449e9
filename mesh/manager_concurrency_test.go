package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

func newRedisLocation(t *testing.T) locstore.Store {
	t.Helper()
	// One store is shared by the three nodes of the test (their leases,
	// discovery and every creation): a pool and an operation timeout sized
	// for a loaded 2-core test machine, not for production.
	s, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{testredis.Addr(t)}, Namespace: testredis.Namespace(t),
		PoolSize: 64, OperationTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// §12 Creation: concurrent requests for one id create one Creating record,
// and one target runs the factory. 50 GetOrCreate calls spread over three
// nodes: one factory run, one Created, 49 Existing, one generation.
func runConcurrentGetOrCreate(t *testing.T, c *cluster) {
	ctx := ctxT(t, 40*time.Second)
	const calls = 50
	type res struct {
		cr  ActorCreation
		err error
	}
	out := make([]res, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			cr, err := c.m(i%len(c.nodes)).GetOrCreateActor(ctx, "the-one", testActorType)
			out[i] = res{cr, err}
		}(i)
	}
	close(start)
	wg.Wait()
	created, existing := 0, 0
	var gen uint64
	for i, r := range out {
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		switch r.cr.Outcome {
		case Created:
			created++
		case Existing:
			existing++
		}
		if gen == 0 {
			gen = r.cr.Ref.ObjectGeneration
		}
		if r.cr.Ref.ObjectGeneration != gen {
			t.Fatalf("call %d got generation %d, another got %d", i, r.cr.Ref.ObjectGeneration, gen)
		}
	}
	if created != 1 || existing != calls-1 {
		t.Fatalf("created %d, existing %d; want 1 and %d", created, existing, calls-1)
	}
	if runs := c.probe.runCount("the-one"); runs != 1 {
		t.Fatalf("factory ran %d times, want 1", runs)
	}
	hosts := 0
	for _, n := range c.nodes {
		if _, ok := n.obj.hostedFor(actorKey("the-one")); ok {
			hosts++
		}
	}
	if hosts != 1 {
		t.Fatalf("%d nodes host the actor, want 1", hosts)
	}
}

func TestConcurrentGetOrCreateOneFactoryRun(t *testing.T) {
	runConcurrentGetOrCreate(t, newCluster(t, 3, nil))
}

func TestConcurrentGetOrCreateOneFactoryRunRedis(t *testing.T) {
	runConcurrentGetOrCreate(t, newClusterOn(t, newFixture(t), newRedisLocation(t), 3, nil))
}

// §3.3/§4: capacity is never exceeded under concurrency. Three nodes with an
// Actor limit of 3 each and 20 concurrent creations of distinct ids: exactly
// 9 succeed, the rest fail with ErrUnavailable wrapping
// ErrCapacityExhausted, and each node's counter holds exactly 3 active.
func runCapacityExhausted(t *testing.T, c *cluster) {
	ctx := ctxT(t, 40*time.Second)
	const calls, limit = 20, 3
	errs := make([]error, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = c.m(i%len(c.nodes)).CreateActor(ctx, fmt.Sprintf("cap-%02d", i), testActorType)
		}(i)
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrCapacityExhausted) && errors.Is(err, ErrUnavailable):
		default:
			t.Fatalf("call %d: %v, want success or capacity exhausted", i, err)
		}
	}
	if want := limit * len(c.nodes); ok != want {
		t.Fatalf("%d creations succeeded, want exactly %d", ok, want)
	}
	bun, _ := authority.BundleFor(record.ObjectActor, testActorType)
	for i, n := range c.nodes {
		node := authority.Node{MeshName: "objects", RoutingID: n.RID(), LifecycleGeneration: n.LifecycleGeneration()}
		rows, err := n.obj.readCapacity(ctx, node, bun)
		if err != nil || len(rows) != 1 {
			t.Fatalf("node %d counters: %v %v", i, rows, err)
		}
		if u := rows[0].Usage; u.Active != limit || u.Reserved != 0 {
			t.Fatalf("node %d actor counter %+v, want %d active, 0 reserved", i, u, limit)
		}
	}
}

func capacityConfig(_ int, cfg *config.Config) { cfg.Node.Limits.Actors = 3 }

func TestCapacityExhaustedUnderConcurrency(t *testing.T) {
	runCapacityExhausted(t, newCluster(t, 3, capacityConfig))
}

func TestCapacityExhaustedUnderConcurrencyRedis(t *testing.T) {
	runCapacityExhausted(t, newClusterOn(t, newFixture(t), newRedisLocation(t), 3, capacityConfig))
}
