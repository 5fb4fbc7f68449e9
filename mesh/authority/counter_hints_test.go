package authority

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

var player2 = Object{ID: "user:43", Kind: record.ObjectActor, StableType: "Player"}

// countedHinted is a memory store with ownerA's lease, the same store
// counting its reads, a hints clock and a hinted executor over the
// counting store.
func countedHinted(t *testing.T) (locstore.Store, *countingStore, *manualNow, *Executor) {
	t.Helper()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	cs := &countingStore{Store: mem, reads: map[string]int{}}
	clock := &manualNow{}
	return mem, cs, clock, newExecutor(t, cs, hinted(clock))
}

// prefetchCounter reads the actors counter of nodeA (both rows) from the
// store, as the creation target does in its first call, and hands it to e.
// It returns the key of the active row, the one a Commit conditions.
func prefetchCounter(t *testing.T, s locstore.Store, e *Executor) string {
	t.Helper()
	for _, key := range []string{secKey(t, actorsOf(nodeA)), actKey(t, actorsOf(nodeA))} {
		rr, err := s.Read(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		e.ObserveCounter(key, rr)
	}
	return actKey(t, actorsOf(nodeA))
}

// reserveFor reserves obj on nodeA through e and returns the commit request.
func reserveFor(t *testing.T, e *Executor, obj Object, res string) CommitRequest {
	t.Helper()
	r, err := e.Reserve(context.Background(), ReserveRequest{Object: obj, Target: targetA(), Creation: pending(res)})
	if err != nil {
		t.Fatal(err)
	}
	return CommitRequest{Object: obj, ReservationID: res, Owner: ownerA,
		ObjectGeneration: uint64(r.Plan.Record.ObjectGeneration), IfVersion: r.Version}
}

// A counter the caller has just read spares the Commit its own read, once.
func TestPrefetchedCounterSparesARead(t *testing.T) {
	ctx := context.Background()
	mem, cs, _, e := countedHinted(t)
	commit := reserveFor(t, e, player, "res-1")
	key := prefetchCounter(t, mem, e)
	before := cs.reads[key]
	r, err := e.Commit(ctx, commit)
	if err != nil || r.Attempts != 1 {
		t.Fatalf("commit: %+v, %v", r, err)
	}
	if got := cs.reads[key] - before; got != 0 {
		t.Errorf("Commit read the prefetched counter %d times, want 0", got)
	}
	if u := readUsage(t, mem, actorsOf(nodeA)); u != (Usage{Active: 1}) {
		t.Errorf("counter after commit: %+v", u)
	}
	// Used once: the next operation on the counter reads it.
	if _, err := e.Delete(ctx, DeleteRequest{Object: player, ObjectGeneration: commit.ObjectGeneration, Owner: ownerA}); err != nil {
		t.Fatal(err)
	}
	if got := cs.reads[key] - before; got != 1 {
		t.Errorf("Delete after the Commit read the counter %d times, want 1", got)
	}
}

// When the prefetched counter is not used: after a batch of this executor
// moved it, while its lane is busy, and within counterQuiet of a batch that
// lost on it; and a stale value that is used costs one Conflict, never a
// wrong count.
func TestPrefetchedCounterRules(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// between runs after the prefetch, before the Commit.
		between       func(t *testing.T, mem locstore.Store, e *Executor, clock *manualNow)
		wantAttempts  int
		wantCountRead bool
		want          Usage
	}{
		{name: "own batch moved it", wantAttempts: 1, wantCountRead: true, want: Usage{Reserved: 1, Active: 1},
			between: func(t *testing.T, _ locstore.Store, e *Executor, _ *manualNow) {
				reserveFor(t, e, player2, "res-2")
			}},
		{name: "another writer moved its active row: one conflict", wantAttempts: 2, wantCountRead: true, want: Usage{Active: 2},
			between: func(t *testing.T, mem locstore.Store, _ *Executor, _ *manualNow) {
				other := newExecutor(t, mem)
				if _, err := other.Commit(context.Background(), reserveFor(t, other, player2, "res-2")); err != nil {
					t.Fatal(err)
				}
			}},
		// A Reserve moves only the secured row, which a Commit does not
		// condition: another creation's Reserve costs the Commit nothing.
		{name: "another writer's Reserve: no conflict", wantAttempts: 1, wantCountRead: false, want: Usage{Reserved: 1, Active: 1},
			between: func(t *testing.T, mem locstore.Store, _ *Executor, _ *manualNow) {
				reserveFor(t, newExecutor(t, mem), player2, "res-2")
			}},
		{name: "aged", wantAttempts: 1, wantCountRead: true, want: Usage{Active: 1},
			between: func(t *testing.T, _ locstore.Store, _ *Executor, clock *manualNow) {
				clock.advance(time.Second + time.Nanosecond)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, cs, clock, e := countedHinted(t)
			commit := reserveFor(t, e, player, "res-1")
			key := prefetchCounter(t, mem, e)
			tc.between(t, mem, e, clock)
			before := cs.reads[key]
			r, err := e.Commit(ctx, commit)
			if err != nil || r.Attempts != tc.wantAttempts {
				t.Fatalf("commit: attempts %d, %v; want %d", r.Attempts, err, tc.wantAttempts)
			}
			if read := cs.reads[key] > before; read != tc.wantCountRead {
				t.Errorf("counter read by the Commit: %v, want %v", read, tc.wantCountRead)
			}
			if u := readUsage(t, mem, actorsOf(nodeA)); u != tc.want {
				t.Errorf("counter after commit: %+v, want %+v", u, tc.want)
			}
		})
	}
}

// A stale prefetched value that would refuse (the node looks full) is
// re-planned on a fresh read before the refusal is believed.
func TestPrefetchedCounterRefusalIsReread(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	e := newExecutor(t, mem, hinted(&manualNow{}))
	id := actorsOf(nodeA)
	e.ObserveCounter(secKey(t, id), locstore.ReadResult{Found: true, Value: secVal(t, id, 2), Version: "v-stale", StoreNow: storeNow})
	e.ObserveCounter(actKey(t, id), locstore.ReadResult{Found: true, Value: actVal(t, id, 2), Version: "v-stale", StoreNow: storeNow})
	tgt := targetA()
	tgt.Limits.Actors = 2
	r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: tgt, Creation: pending("res-1")})
	if err != nil || r.Attempts != 1 {
		t.Fatalf("reserve after a stale full counter: %+v, %v (want reserved in one batch)", r, err)
	}
}

// callCounter counts read calls; a ReadMany is one call.
type callCounter struct {
	locstore.Store
	calls int
}

func (c *callCounter) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	c.calls++
	return c.Store.Read(ctx, key)
}

func (c *callCounter) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	c.calls++
	return locstore.ReadMany(ctx, c.Store, keys)
}

// When the authority row comes from the hints, the counters it names are
// read in the same call as the other rows (here the target's lease), not in
// a call of their own after it.
func TestCountersJoinTheAnchorCall(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	putLease(t, mem, ownerB)
	cc := &callCounter{Store: mem}
	e := newExecutor(t, cc, hinted(&manualNow{}))
	commit := reserveFor(t, e, player, "res-1")
	c, err := e.Commit(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	before := cc.calls
	if _, err := e.NewOwner(ctx, NewOwnerRequest{Object: player, ObjectGeneration: commit.ObjectGeneration,
		IfVersion: c.Version, Target: targetB()}); err != nil {
		t.Fatal(err)
	}
	if got := cc.calls - before; got != 1 {
		t.Errorf("NewOwner on a hinted authority row made %d read calls, want 1 (target lease and both nodes' counters together)", got)
	}
	if u := readUsage(t, mem, actorsOf(nodeB)); u != (Usage{Active: 1}) {
		t.Errorf("target counter: %+v", u)
	}
}

// A counter's two rows are taken from a prefetch together or not at all:
// one row prefetched beside the other read now is no snapshot.
func TestPrefetchedCounterRowsAllOrNone(t *testing.T) {
	ctx := context.Background()
	_, cs, _, e := countedHinted(t)
	id := actorsOf(nodeA)
	e.ObserveCounter(actKey(t, id), locstore.ReadResult{StoreNow: storeNow}) // the secured row not handed over
	var r rowSet
	r.addCapacity(OpCommit, []CounterID{id})
	v := &view{hinted: true, counters: true}
	if _, err := e.fetch(ctx, v, OpCommit, r); err != nil {
		t.Fatal(err)
	}
	if v.used.Load() || cs.reads[actKey(t, id)] != 1 || cs.reads[secKey(t, id)] != 1 {
		t.Errorf("used %v, reads active %d secured %d; want both rows read from the store",
			v.used.Load(), cs.reads[actKey(t, id)], cs.reads[secKey(t, id)])
	}
}

// A hinted row that does not decode is not the store's answer: the
// operation reads again instead of failing.
func TestUndecodableHintIsReread(t *testing.T) {
	ctx := context.Background()
	mem, _, _, e := countedHinted(t)
	commit := reserveFor(t, e, player, "res-1")
	e.Observe(authKey(t, player), locstore.ReadResult{Found: true, Value: []byte("{not a record"), Version: "v-junk", StoreNow: storeNow})
	if r, err := e.Commit(ctx, commit); err != nil || r.Attempts != 1 {
		t.Fatalf("commit after an undecodable hint: %+v, %v", r, err)
	}
	if u := readUsage(t, mem, actorsOf(nodeA)); u != (Usage{Active: 1}) {
		t.Errorf("counter: %+v", u)
	}
}

// Prefetched values that mostly miss are not planned on: a batch planned on
// a stale one costs a refused batch and a read where reading costs one
// call. One miss is no reason to stop (with 8 concurrent creators a target
// misses now and then while nobody else moves its counter; a 1 s pause
// after every miss made every Commit read); a run of misses is, for
// counterQuiet after the last one; then the values are tried again.
func TestPrefetchedCounterSkippedWhileItMostlyMisses(t *testing.T) {
	ctx := context.Background()
	mem, cs, clock, e := countedHinted(t)
	other := newExecutor(t, mem)
	n := 0
	next := func() CommitRequest {
		n++
		return reserveFor(t, e, Object{ID: fmt.Sprintf("user:%d", 100+n), Kind: record.ObjectActor, StableType: "Player"}, fmt.Sprintf("res-%d", n))
	}
	// commit commits a new reservation on a fresh prefetch — made stale
	// first by another process's Commit when stale — and reports the
	// Commit's batches and whether it read the counter.
	commit := func(stale bool) (int, bool) {
		t.Helper()
		c := next()
		var behind CommitRequest
		if stale {
			behind = next()
		}
		key := prefetchCounter(t, mem, e)
		if stale {
			if _, err := other.Commit(ctx, behind); err != nil { // moves the active row behind e's back
				t.Fatal(err)
			}
		}
		before := cs.reads[key]
		r, err := e.Commit(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return r.Attempts, cs.reads[key] > before
	}
	if attempts, read := commit(true); attempts != 2 || !read {
		t.Fatalf("commit on a stale prefetch: %d batches, read %v (want a refused batch, then a read)", attempts, read)
	}
	if attempts, read := commit(false); attempts != 1 || read {
		t.Fatalf("after one miss: %d batches, read %v (want the prefetched values planned on)", attempts, read)
	}
	misses := 1
	for ; misses < 20; misses++ {
		attempts, read := commit(true)
		if attempts == 1 && read {
			break // skipped: read instead, and the other process's move cost nothing
		}
		if attempts != 2 {
			t.Fatalf("miss %d: %d batches", misses+1, attempts)
		}
	}
	if misses < 4 || misses > 10 {
		t.Errorf("prefetched values skipped after %d misses, want after a run of them (the miss rate above %v)", misses, maxMissRate)
	}
	if attempts, read := commit(false); attempts != 1 || !read {
		t.Errorf("within counterQuiet of the misses: %d batches, read %v (want a read)", attempts, read)
	}
	clock.advance(counterQuiet)
	if attempts, read := commit(false); attempts != 1 || read {
		t.Errorf("once counterQuiet has passed: %d batches, read %v (want the prefetched values tried again)", attempts, read)
	}
}

func TestPrefetchMissRate(t *testing.T) {
	h := &rowHints{}
	const key = "capacity:k"
	for i, tc := range []struct {
		refused  bool
		wantRate float64
		kept     bool
	}{
		{false, 0, false}, // a hit with no history: nothing kept
		{true, 1.0 / 8, true},
		{true, 1.0/8*7/8 + 1.0/8, true},
		{false, (1.0/8*7/8 + 1.0/8) * 7 / 8, true},
	} {
		h.missed(key, tc.refused, time.Duration(i))
		m, kept := h.misses[key]
		if kept != tc.kept || math.Abs(m.rate-tc.wantRate) > 1e-12 {
			t.Fatalf("step %d: rate %v kept %v, want %v %v", i, m.rate, kept, tc.wantRate, tc.kept)
		}
	}
	for range 40 { // hits: the rate decays and the entry goes
		h.missed(key, false, 0)
	}
	if _, kept := h.misses[key]; kept {
		t.Error("a counter that stopped missing is still remembered")
	}
}

// A prefetched counter is planned on even while another operation of the
// executor holds or waits for its lane: that plan only finds the lane busy
// and queues, and the operation plans again in its turn on what the holder
// left (carry.go); a read before queueing was a call for nothing.
func TestPrefetchedCounterPlannedOnABusyLane(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	cs := &countingStore{Store: mem, reads: map[string]int{}}
	e := newExecutor(t, cs, hinted(&manualNow{}))
	key := prefetchCounter(t, mem, e)
	h, err := e.lanes.acquire(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	defer h.release()
	var r rowSet
	r.add(key, false)
	v := &view{hinted: true, counters: true}
	if _, err := e.fetch(ctx, v, OpCommit, r); err != nil {
		t.Fatal(err)
	}
	if cs.reads[key] != 0 || !v.used.Load() || !v.prefetched {
		t.Errorf("counter reads: %d, used %v, prefetched %v; want the prefetched value", cs.reads[key], v.used.Load(), v.prefetched)
	}
}
