package storetest

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshnode/meshnode/locstore"
)

// testConcurrentCAS: in each round every goroutine reads the key, then all
// of them (released together) write under IfVersion of what they read.
// Since no write happens between the reads and the release, all read the
// same version and exactly one write may win.
func testConcurrentCAS(t *testing.T, h Harness) {
	s := h.open(t)
	const key = "cas/k"
	goroutines, rounds := 16, 20
	if testing.Short() {
		rounds = 8
	}
	put(t, s, key, []byte("start"))
	for round := range rounds {
		var readWG, writeWG sync.WaitGroup
		release := make(chan struct{})
		seen := make([]string, goroutines)
		won := make([]string, goroutines) // winner's new version
		errs := make([]error, goroutines)
		for g := range goroutines {
			readWG.Add(1)
			writeWG.Go(func() {
				r, err := s.Read(t.Context(), key)
				readWG.Done()
				<-release
				if err != nil || !r.Found {
					errs[g] = fmt.Errorf("read: found %v, err %v", r.Found, err)
					return
				}
				seen[g] = r.Version
				res, err := s.Write(t.Context(), locstore.WriteRequest{
					Conditions: []locstore.Condition{locstore.IfVersion(key, r.Version)},
					Mutations:  []locstore.Mutation{locstore.Put(key, fmt.Appendf(nil, "round %d winner %d", round, g))},
				})
				if err != nil {
					errs[g] = err
					return
				}
				if res.Applied {
					won[g] = res.Versions[0]
				}
			})
		}
		readWG.Wait()
		close(release)
		writeWG.Wait()
		winners := 0
		winner := -1
		for g := range goroutines {
			if errs[g] != nil {
				t.Fatalf("round %d goroutine %d: %v", round, g, errs[g])
			}
			if seen[g] != seen[0] {
				t.Fatalf("round %d: goroutines read different versions %q and %q with no write in between", round, seen[0], seen[g])
			}
			if won[g] != "" {
				winners++
				winner = g
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d of %d CAS writes on version %q won, want exactly 1", round, winners, goroutines, seen[0])
		}
		r := read(t, s, key)
		if want := fmt.Sprintf("round %d winner %d", round, winner); string(r.Value) != want || r.Version != won[winner] {
			t.Fatalf("round %d: key holds %v, want the winner's %q version %q", round, stateOf(r), want, won[winner])
		}
	}
	t.Logf("%s: %d rounds x %d concurrent CAS, exactly one winner each", h.Name, rounds, goroutines)
}

// testCASCounter: goroutines increment a counter by read + IfVersion write
// with no coordination. A lost update (two increments applied on the same
// version) would leave the counter below the number of applied writes.
func testCASCounter(t *testing.T, h Harness) {
	s := h.open(t)
	const key = "cas/counter"
	goroutines, perG := 8, 25
	if testing.Short() {
		perG = 10
	}
	put(t, s, key, []byte("0"))
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	start := make(chan struct{})
	for range goroutines {
		wg.Go(func() {
			<-start
			for done := 0; done < perG; {
				r, err := s.Read(t.Context(), key)
				// Yield between read and write so that the goroutines
				// interleave even on a provider that answers in nanoseconds.
				runtime.Gosched()
				if err != nil || !r.Found {
					errs <- fmt.Errorf("read: found %v, err %v", r.Found, err)
					return
				}
				n, err := strconv.Atoi(string(r.Value))
				if err != nil {
					errs <- fmt.Errorf("counter holds %q", r.Value)
					return
				}
				res, err := s.Write(t.Context(), locstore.WriteRequest{
					Conditions: []locstore.Condition{locstore.IfVersion(key, r.Version)},
					Mutations:  []locstore.Mutation{locstore.Put(key, []byte(strconv.Itoa(n+1)))},
				})
				if err != nil {
					errs <- err
					return
				}
				if res.Applied {
					done++
				} else {
					conflicts.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if conflicts.Load() == 0 {
		t.Errorf("%d goroutines incremented without a single Conflict: the check did not interleave", goroutines)
	}
	want := strconv.Itoa(goroutines * perG)
	if r := read(t, s, key); string(r.Value) != want {
		t.Fatalf("counter is %q after %s applied increments: lost or phantom updates", r.Value, want)
	}
	t.Logf("%s: %d applied increments, %d conflicts retried", h.Name, goroutines*perG, conflicts.Load())
}
