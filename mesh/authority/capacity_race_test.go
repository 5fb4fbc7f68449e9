package authority

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// runCapacityChurn races creations, commits, aborts and deletes on one
// node's counter through two executors — a source that reserves and a
// target that commits, the two processes of a creation, whose batches
// condition different rows of the counter (AUTHORITY.md §2.2) — while a
// checker reads the counter in one snapshot and asserts 0 ≤ active ≤
// secured ≤ limit. At the end the counter equals what the authority rows
// hold: secured = Reserved + Active records, active = Active records.
func runCapacityChurn(t *testing.T, s locstore.Store, workers, rounds, limit int, opts ...ExecutorOption) {
	if workers <= limit {
		t.Fatalf("%d workers cannot meet a limit of %d at their first reservations", workers, limit)
	}
	ctx := context.Background()
	putLease(t, s, ownerA)
	opts = append([]ExecutorOption{WithMaxAttempts(0)}, opts...)
	source, target := newExecutor(t, s, opts...), newExecutor(t, s, opts...)
	id := actorsOf(nodeA)
	var stop atomic.Bool
	var checks atomic.Int64
	checkErr := make(chan error, 1)
	var checker sync.WaitGroup
	checker.Add(1)
	go func() {
		defer checker.Done()
		for !stop.Load() {
			rows, err := ReadCounters(ctx, s, []CounterID{id})
			if err == nil && (rows[0].Usage.Reserved < 0 || rows[0].Usage.Total() > limit) {
				err = fmt.Errorf("counter %+v outside 0 ≤ active ≤ secured ≤ %d", rows[0].Usage, limit)
			}
			if err != nil {
				select {
				case checkErr <- err:
				default:
				}
				return
			}
			checks.Add(1)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var full, created atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	// Every worker's first Reserve happens before any worker goes on, so
	// with more workers than the limit the limit is met at least once
	// whatever the scheduling (a fast store otherwise lets the workers run
	// one after the other, and the limit is never reached).
	var first sync.WaitGroup
	first.Add(workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for r := range rounds {
				obj := Object{ID: fmt.Sprintf("churn:%d:%d", w, r), Kind: record.ObjectActor, StableType: "Player"}
				res := fmt.Sprintf("c%d-%d", w, r)
				rr, err := source.Reserve(ctx, ReserveRequest{Object: obj, Target: Target{Node: nodeA, Owner: ownerA, Limits: Limits{Actors: limit}}, Creation: pending(res)})
				if r == 0 {
					first.Done()
					first.Wait()
				}
				if errors.Is(err, ErrCapacityExhausted) {
					full.Add(1)
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("reserve %s: %w", obj.ID, err)
					return
				}
				gen := uint64(rr.Plan.Record.ObjectGeneration)
				// Mostly transient objects, so that the limit is met by the
				// ones in flight again and again, and now and then one kept.
				switch n := rng.IntN(128); {
				case n < 40: // the target refuses: the reservation goes back
					_, err = target.Abort(ctx, AbortRequest{Object: obj, ReservationID: res, ObjectGeneration: gen, Owner: &ownerA})
				case n < 126: // created, then closed
					if _, err = target.Commit(ctx, CommitRequest{Object: obj, ReservationID: res, Owner: ownerA, ObjectGeneration: gen}); err == nil {
						_, err = target.Delete(ctx, DeleteRequest{Object: obj, ObjectGeneration: gen, Owner: ownerA})
					}
				case n == 126: // left Reserved
				default: // created and kept
					if _, err = target.Commit(ctx, CommitRequest{Object: obj, ReservationID: res, Owner: ownerA, ObjectGeneration: gen}); err == nil {
						created.Add(1)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", obj.ID, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	checker.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	select {
	case err := <-checkErr:
		t.Fatalf("during the churn: %v", err)
	default:
	}
	var reserved, active int
	page, err := s.Scan(ctx, locstore.ScanRequest{Prefix: record.KindPrefix(record.KindAuthority), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Items {
		a, err := record.DecodeAuthority(it.Value)
		if err != nil {
			t.Fatal(err)
		}
		if a.Allocation.State == record.AllocationActive {
			active++
		} else {
			reserved++
		}
	}
	if u := readUsage(t, s, id); u != (Usage{Reserved: reserved, Active: active}) {
		t.Errorf("counter %+v, the records hold %d Reserved and %d Active", u, reserved, active)
	}
	if int(created.Load()) != active {
		t.Errorf("%d kept creations, %d Active records", created.Load(), active)
	}
	t.Logf("%d refused as full, %d Reserved and %d Active left, %d checks", full.Load(), reserved, active, checks.Load())
	if full.Load() == 0 {
		t.Error("the limit was never reached: the race did not test it")
	}
}

func TestCapacityChurnMemory(t *testing.T) {
	s, _ := newMemory(t)
	runCapacityChurn(t, s, 16, 40, 14)
}

func TestCapacityChurnMemoryHinted(t *testing.T) {
	s, _ := newMemory(t)
	runCapacityChurn(t, s, 16, 40, 14, hinted(&manualNow{}))
}

func TestCapacityChurnRedis(t *testing.T) {
	runCapacityChurn(t, newRedis(t), 8, 25, 6, WithRowHints(time.Second, nil))
}
