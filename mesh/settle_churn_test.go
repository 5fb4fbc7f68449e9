package mesh

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Creations, sends and destroys from eight workers on three nodes over a
// shared id space, while Redis is stopped three times (0.4–1 s, past the
// store's 300 ms operation timeout: writes lose their results and re-reads
// fail). Afterwards every record and every instance agree: a Ready record
// is hosted by the node it names under its generation and by no other,
// nothing is hosted without a record, and no Creating record is left. Before
// unknown outcomes were settled by reading (settle.go) this found an object
// hosted on two nodes — a reopened instance whose Delete had applied, beside
// its next generation — and a Creating record left for good.
func TestChurnThroughStorePausesKeepsOneInstancePerRecord(t *testing.T) {
	srv := testredis.NewServer(t)
	store, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{srv.Addr}, Namespace: testredis.Namespace(t),
		PoolSize: 64, OperationTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	f := newFixture(t)
	c := newClusterOn(t, f, store, 3, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	var stop atomic.Bool
	var ops, fails atomic.Int64
	var wg sync.WaitGroup
	const ids = 40
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("churn-%d", (w*7+i)%ids)
				octx, cancel := context.WithTimeout(ctx, 2*time.Second)
				r, err := c.m(w%3).GetOrCreateActor(octx, id, demoapp.CounterType)
				if err == nil {
					_ = c.m(w%3).SendActor(octx, r.Ref, []byte("inc"))
					if i%2 == 0 {
						_, err = c.m(w%3).Destroy(octx, r.Ref)
					}
				}
				cancel()
				ops.Add(1)
				if err != nil {
					fails.Add(1)
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	for p := 0; p < 3; p++ {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(400+300*p) * time.Millisecond)
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1 * time.Second)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d operations, %d failed", ops.Load(), fails.Load())
	if ops.Load() < 100 || fails.Load() == 0 {
		t.Fatalf("%d operations, %d failed: the workers did not churn through the pauses", ops.Load(), fails.Load())
	}
	// Background settling and reservation returns finish within a few
	// pauses of theirs.
	check := func() []string {
		var bad []string
		for i := 0; i < ids; i++ {
			id := fmt.Sprintf("churn-%d", i)
			row := rowOf(t, c, record.ObjectActor, id)
			hostedOn := -1
			var hostedGen uint64
			for k, n := range c.nodes {
				n.obj.mu.Lock()
				if h, ok := n.obj.hosted[spot.Key{ID: id}]; ok {
					if hostedOn >= 0 {
						bad = append(bad, fmt.Sprintf("%s hosted on %d and %d", id, hostedOn, k))
					}
					hostedOn, hostedGen = k, h.objectGeneration
				}
				n.obj.mu.Unlock()
			}
			switch {
			case !row.Found && hostedOn >= 0:
				bad = append(bad, fmt.Sprintf("%s hosted on %d (gen %d) with no record", id, hostedOn, hostedGen))
			case row.Found && row.Record.Allocation.State == record.AllocationReserved:
				bad = append(bad, fmt.Sprintf("%s Creating record left", id))
			case row.Found && row.Record.Allocation.State == record.AllocationActive:
				owner := c.indexOf(row.Record.Allocation.Descriptor.RoutingID)
				if owner != hostedOn || uint64(row.Record.ObjectGeneration) != hostedGen {
					bad = append(bad, fmt.Sprintf("%s Ready on %d gen %d, hosted on %d gen %d", id, owner, row.Record.ObjectGeneration, hostedOn, hostedGen))
				}
			}
		}
		return bad
	}
	var bad []string
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if bad = check(); len(bad) == 0 {
			break
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}
