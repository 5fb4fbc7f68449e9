package authority

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

func TestHotKeys(t *testing.T) {
	obj := authKey(t, Object{Kind: "actor", ID: "a", StableType: "T"})
	gen := objGenKey(t)
	capA := secKey(t, actorsOf(nodeA))
	lease := leaseKey(t, ownerA.ID)
	req := locstore.WriteRequest{Conditions: []locstore.Condition{
		locstore.IfMissing(obj), locstore.IfVersion(capA, "1"), locstore.IfVersion(lease, "2"), locstore.IfVersion(gen, "3"), locstore.IfVersion(capA, "1"),
	}}
	got := hotKeys(req)
	want := sortedKeys(capA, gen)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hotKeys = %v, want %v (counters only, sorted, once each)", got, want)
	}
}

func TestLanesExclusiveOrderedCancellable(t *testing.T) {
	var l lanes
	ctx := context.Background()
	// Overlapping key sets taken in key order never deadlock, and no two
	// holders of one key overlap.
	var inside [3]atomic.Int32
	var wg sync.WaitGroup
	sets := [][]string{{"a", "b"}, {"b", "c"}, {"a", "c"}, {"a", "b", "c"}}
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := sets[i%len(sets)]
			h, err := l.acquire(ctx, keys)
			if err != nil {
				t.Error(err)
				return
			}
			for _, k := range keys {
				if inside[k[0]-'a'].Add(1) != 1 {
					t.Errorf("two holders of lane %s", k)
				}
			}
			time.Sleep(100 * time.Microsecond)
			for _, k := range keys {
				inside[k[0]-'a'].Add(-1)
			}
			h.release()
		}()
	}
	wg.Wait()
	if len(l.m) != 0 {
		t.Fatalf("lanes left after every release: %v", l.m)
	}
	// A waiter whose context ends gives up and leaves nothing behind.
	h, err := l.acquire(ctx, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if !l.busy([]string{"x"}) || l.busy([]string{"y"}) {
		t.Fatal("busy must report held lanes only")
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(cctx, []string{"w", "x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting past the deadline: %v", err)
	}
	h.release()
	if len(l.m) != 0 || l.busy([]string{"w", "x"}) {
		t.Fatalf("lanes left: %v", l.m)
	}
}

// slowWrites widens the window between an operation's read and its batch,
// as a remote store does, and counts conflicts.
type slowWrites struct {
	locstore.Store
	conflicts atomic.Int64
}

func (s *slowWrites) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	time.Sleep(time.Millisecond)
	res, err := s.Store.Write(ctx, req)
	if err == nil && !res.Applied {
		s.conflicts.Add(1)
	}
	return res, err
}

// Concurrent operations of one executor on one counter take turns instead
// of making each other lose: the same 24 capacity reservations on one node
// conflict far less with the lanes than without, and every one applies
// either way (capacity is exact).
func TestLanesCutConflictsOnAHotCounter(t *testing.T) {
	run := func(opts ...ExecutorOption) int64 {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerB)
		s := &slowWrites{Store: mem}
		e := newExecutor(t, s, append([]ExecutorOption{WithBackoff(func(int) time.Duration { return 0 })}, opts...)...)
		var wg sync.WaitGroup
		for range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.SecureCapacity(context.Background(), CapacityRequest{Target: targetB(), Bundle: Bundle{Actors: 1}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if u := readUsage(t, mem, actorsOf(nodeB)); u != (Usage{Reserved: 24}) {
			t.Fatalf("usage %+v, want 24 reserved", u)
		}
		return s.conflicts.Load()
	}
	with, without := run(), run(WithoutLanes())
	t.Logf("conflicts: %d with lanes, %d without", with, without)
	if with*3 > without || with > 2*24 {
		t.Fatalf("conflicts with lanes %d, without %d: the lanes must take turns", with, without)
	}
}
