package authority

import (
	"context"
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

// After a batch lost on a counter, prefetched values of it are not used
// for counterQuiet; then they are again.
func TestPrefetchedCounterQuietAfterALoss(t *testing.T) {
	ctx := context.Background()
	mem, cs, clock, e := countedHinted(t)
	other := newExecutor(t, mem)
	c1 := reserveFor(t, e, player, "res-1")
	c2 := reserveFor(t, e, player2, "res-2")
	key := prefetchCounter(t, mem, e)
	if _, err := other.Commit(ctx, c2); err != nil { // moves the active row behind e's back
		t.Fatal(err)
	}
	if r, err := e.Commit(ctx, c1); err != nil || r.Attempts != 2 {
		t.Fatalf("commit on a stale prefetch: attempts %d, %v (want one conflict)", r.Attempts, err)
	}
	c2 = reserveFor(t, e, Object{ID: "user:45", Kind: record.ObjectActor, StableType: "Player"}, "res-5")
	prefetchCounter(t, mem, e)
	before := cs.reads[key]
	if _, err := e.Commit(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if cs.reads[key] == before {
		t.Error("a prefetched counter was used within counterQuiet of a loss on it")
	}
	clock.advance(counterQuiet)
	c3 := reserveFor(t, e, Object{ID: "user:44", Kind: record.ObjectActor, StableType: "Player"}, "res-3")
	prefetchCounter(t, mem, e)
	before = cs.reads[key]
	if r, err := e.Commit(ctx, c3); err != nil || r.Attempts != 1 {
		t.Fatalf("commit: %+v, %v", r, err)
	}
	if cs.reads[key] != before {
		t.Error("a prefetched counter was not used once the quiet time had passed")
	}
}

// A prefetched counter is not taken while another operation of the
// executor holds or waits for its lane (that one is about to move it).
func TestPrefetchedCounterNotUsedOnABusyLane(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	cs := &countingStore{Store: mem, reads: map[string]int{}}
	e := newExecutor(t, cs, hinted(&manualNow{}))
	key := prefetchCounter(t, mem, e)
	h, err := e.lanes.acquire(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	var r rowSet
	r.add(key, false)
	if _, err := e.fetch(ctx, &view{hinted: true, counters: true}, OpCommit, r); err != nil {
		t.Fatal(err)
	}
	h.release()
	if cs.reads[key] != 1 {
		t.Errorf("counter reads: %d, want 1 (fetch read it: its lane was busy)", cs.reads[key])
	}
	v := &view{hinted: true, counters: true}
	if _, err := e.fetch(ctx, v, OpCommit, r); err != nil {
		t.Fatal(err)
	}
	if cs.reads[key] != 1 || !v.used.Load() {
		t.Errorf("counter reads: %d, used %v; want the prefetched value once the lane is free", cs.reads[key], v.used.Load())
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
