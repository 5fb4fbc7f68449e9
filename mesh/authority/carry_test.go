package authority

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// gateStore counts the reads of each key and runs hooks around the n-th
// write (1-based): before it is sent (to hold it) and after it applied.
type gateStore struct {
	locstore.Store
	mu     sync.Mutex
	reads  map[string]int
	writes int
	before func(n int)
	after  func(n int)
}

func (g *gateStore) count(keys ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, k := range keys {
		g.reads[k]++
	}
}

func (g *gateStore) readsOf(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reads[key]
}

func (g *gateStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	g.count(key)
	return g.Store.Read(ctx, key)
}

func (g *gateStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	g.count(keys...)
	return locstore.ReadMany(ctx, g.Store, keys)
}

func (g *gateStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	g.mu.Lock()
	g.writes++
	n := g.writes
	g.mu.Unlock()
	if g.before != nil {
		g.before(n)
	}
	wr, err := g.Store.Write(ctx, req)
	if g.after != nil {
		g.after(n)
	}
	return wr, err
}

// queuedOn waits until n operations of e hold or wait for the lane of key.
func queuedOn(t *testing.T, e *Executor, key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		e.lanes.mu.Lock()
		ln := e.lanes.m[key]
		refs := 0
		if ln != nil {
			refs = ln.refs
		}
		e.lanes.mu.Unlock()
		if refs >= n {
			return
		}
	}
	t.Fatalf("fewer than %d operations on the lane of %s", n, key)
}

// laneTurns plays two turns on the lanes of a Reserve on target: a holder
// whose batch (user:1) applies and leaves its rows, then the Reserve of
// user:2, queued behind it. setup runs first; between runs after the first
// batch applied and before the second Reserve's turn — another process's
// writes. It returns the second Reserve's result and how many times its
// turn read the ObjectGeneration counter.
func laneTurns(t *testing.T, target Target, setup, between func(store locstore.Store)) (locstore.Store, Result, int, error) {
	t.Helper()
	return laneTurnsWith(t, laneScene{target: target, setup: setup, between: between})
}

// laneScene is what laneTurnsWith plays: laneTurns's arguments, the
// executor's options, and what the first holder does to its lanes before
// it leaves its rows.
type laneScene struct {
	target         Target
	setup, between func(store locstore.Store)
	opts           []ExecutorOption
	beforeLeave    func(h *hold)
	statsOf        func(e *Executor) // after the second Reserve
}

func laneTurnsWith(t *testing.T, sc laneScene) (locstore.Store, Result, int, error) {
	t.Helper()
	ctx := context.Background()
	target, setup, between := sc.target, sc.setup, sc.between
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	if setup != nil {
		setup(mem)
	}
	g := &gateStore{Store: mem, reads: map[string]int{}}
	e := newExecutor(t, g, sc.opts...)
	gen := objGenKey(t)
	h, err := e.lanes.acquire(ctx, []string{gen, secKey(t, actorsOf(target.Node))})
	if err != nil {
		t.Fatal(err)
	}
	var second Result
	var secondErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		obj := Object{ID: "user:2", Kind: record.ObjectActor, StableType: "Player"}
		second, secondErr = e.Reserve(ctx, ReserveRequest{Object: obj, Target: target, Creation: pending("res-2")})
	}()
	queuedOn(t, e, gen, 2) // user:2 read, planned and queued behind h
	// h's turn, as run takes it: plan on a fresh read, write, leave.
	first := ReserveRequest{Object: Object{ID: "user:1", Kind: record.ObjectActor, StableType: "Player"}, Target: target, Creation: pending("res-1")}
	v := &view{}
	v.seen = make([]keyRow, 0, batchRows)
	p, err := PlanReserve(first, reserveSnapshot(t, e, v, first))
	if err != nil {
		t.Fatal(err)
	}
	wr, err := mem.Write(ctx, p.Request)
	if err != nil || !wr.Applied {
		t.Fatalf("first batch: %+v, %v", wr, err)
	}
	if sc.beforeLeave != nil {
		sc.beforeLeave(h)
	}
	h.leave(v.seen, p.Request, wr)
	if between != nil {
		between(mem)
	}
	readsBefore := g.readsOf(gen)
	h.release()
	<-done
	if sc.statsOf != nil {
		sc.statsOf(e)
	}
	return mem, second, g.readsOf(gen) - readsBefore, secondErr
}

// The holder after a holder whose batch applied plans on the counter rows
// that batch left: its turn reads nothing, and the counters come out exact.
func TestLaneHolderPlansOnWhatTheLastBatchLeft(t *testing.T) {
	mem, second, reads, err := laneTurns(t, targetA(), nil, nil)
	if err != nil || second.Attempts != 1 {
		t.Fatalf("second Reserve: %d batches, %v (want one batch)", second.Attempts, err)
	}
	if reads != 0 {
		t.Errorf("the next holder read the ObjectGeneration counter %d times in its turn, want 0 (it was left the rows)", reads)
	}
	if got := second.Plan.Record.ObjectGeneration; got != 2 {
		t.Errorf("second ObjectGeneration %d, want 2", got)
	}
	if u := readUsage(t, mem, actorsOf(nodeA)); u != (Usage{Reserved: 2}) {
		t.Errorf("counter: %+v, want 2 reserved", u)
	}
}

// Within counterQuiet of a batch losing on a lane, its holders read the
// counters in their turn rather than plan on a hand-over: another process
// is moving them, and a stale hand-over would cost a refused batch.
func TestContendedLaneReadsInsteadOfHandOver(t *testing.T) {
	for _, tc := range []struct {
		name      string
		after     time.Duration
		wantReads int
	}{
		{"just after the loss", 0, 1},
		{"within the quiet time", counterQuiet - time.Millisecond, 1},
		{"once it has passed", counterQuiet, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &manualNow{}
			_, second, reads, err := laneTurnsWith(t, laneScene{target: targetA(), opts: []ExecutorOption{hinted(clock)},
				beforeLeave: func(h *hold) {
					h.drop(true) // an earlier batch on these lanes lost
					clock.advance(tc.after)
				}})
			if err != nil || second.Attempts != 1 {
				t.Fatalf("second Reserve: %d batches, %v", second.Attempts, err)
			}
			if reads != tc.wantReads {
				t.Errorf("counter reads in the turn: %d, want %d", reads, tc.wantReads)
			}
		})
	}
}

// reserveOther is another process's Reserve of obj on target.
func reserveOther(t *testing.T, store locstore.Store, obj Object, target Target, res string) Result {
	t.Helper()
	r, err := newExecutor(t, store, WithoutLanes()).Reserve(context.Background(), ReserveRequest{Object: obj, Target: target, Creation: pending(res)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Rows another process moved after they were left cost the next holder one
// refused batch and a fresh read, never a wrong commit; what it was left is
// dropped with the refused batch (or it would be refused again and again).
func TestLeftRowsMovedByAnotherProcessCostAConflict(t *testing.T) {
	other := func(store locstore.Store) {
		reserveOther(t, store, Object{ID: "user:3", Kind: record.ObjectActor, StableType: "Player"}, targetA(), "res-3")
	}
	mem, second, _, err := laneTurns(t, targetA(), nil, other)
	if err != nil || second.Attempts != 2 {
		t.Fatalf("second Reserve: %d batches, %v (want a refused batch, then one planned on a fresh read)", second.Attempts, err)
	}
	if got := second.Plan.Record.ObjectGeneration; got != 3 {
		t.Errorf("second ObjectGeneration %d, want 3 (after the other process's 2)", got)
	}
	if u := readUsage(t, mem, actorsOf(nodeA)); u != (Usage{Reserved: 3}) {
		t.Errorf("counter: %+v, want 3 reserved", u)
	}
}

// A refusal planned on left rows is not believed: here they say the node
// is full, but another process has given a slot back since, and the
// Reserve plans again on a fresh read and takes it.
func TestRefusalOnLeftRowsIsReplannedOnAFreshRead(t *testing.T) {
	tgt := targetA()
	tgt.Limits.Actors = 2
	zero := Object{ID: "user:0", Kind: record.ObjectActor, StableType: "Player"}
	var zeroGen uint64
	setup := func(store locstore.Store) {
		zeroGen = uint64(reserveOther(t, store, zero, tgt, "res-0").Plan.Record.ObjectGeneration)
	}
	giveBack := func(store locstore.Store) {
		e2 := newExecutor(t, store, WithoutLanes())
		if _, err := e2.Abort(context.Background(), AbortRequest{Object: zero, ReservationID: "res-0", ObjectGeneration: zeroGen}); err != nil {
			t.Fatal(err)
		}
	}
	mem, _, _, err := laneTurns(t, tgt, setup, giveBack)
	if err != nil {
		t.Fatalf("second Reserve refused on left rows: %v", err)
	}
	if u := readUsage(t, mem, actorsOf(nodeA)); u != (Usage{Reserved: 2}) {
		t.Errorf("counter: %+v, want 2 reserved (user:1 and user:2)", u)
	}
}

// reserveSnapshot reads a Reserve's rows through v, as Executor.Reserve's
// reader does.
func reserveSnapshot(t *testing.T, e *Executor, v *view, req ReserveRequest) Snapshot {
	t.Helper()
	key, _ := req.Object.Key()
	gen := objGenKey(t)
	ids := CountersFor(req.Target.Node, Bundle{Actors: 1})
	var r rowSet
	ai, ci := r.add(key, true), r.add(gen, false)
	li := r.addLease(OpReserve, req.Target.Owner.ID)
	capAt := r.addCapacity(OpReserve, ids)
	got, err := e.fetch(context.Background(), v, OpReserve, r)
	if err != nil {
		t.Fatal(err)
	}
	s := Snapshot{StoreNow: got.now}
	if s.Authority, err = e.authorityAt(OpReserve, key, got.rr[ai]); err != nil {
		t.Fatal(err)
	}
	if s.ObjectGeneration, err = CounterRowOf(gen, got.rr[ci]); err != nil {
		t.Fatal(err)
	}
	if s.TargetLease, err = got.lease(OpReserve, r, li); err != nil {
		t.Fatal(err)
	}
	if s.Capacity, err = capacityAt(OpReserve, ids, got, capAt); err != nil {
		t.Fatal(err)
	}
	return s
}

// runGenerationRace has two processes (executors, with hints as a node
// runs them) reserve distinct objects on one node from many goroutines
// each: both move the ObjectGeneration counter, so each one's lanes are
// contended by the other's batches and hand-overs go stale now and then.
// Whatever the interleaving, the generations issued are exactly 1..n (one
// store-wide increasing sequence, none issued twice, none lost) and the
// counters hold exactly what the records say.
func runGenerationRace(t *testing.T, s locstore.Store, perProcess, workers int) {
	ctx := context.Background()
	putLease(t, s, ownerA)
	procs := []*Executor{
		newExecutor(t, s, WithMaxAttempts(0), WithRowHints(time.Second, nil)),
		newExecutor(t, s, WithMaxAttempts(0), WithRowHints(time.Second, nil)),
	}
	n := perProcess * len(procs)
	gens := make([]uint64, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for p, e := range procs {
		next := make(chan int, perProcess)
		for i := range perProcess {
			next <- p*perProcess + i
		}
		close(next)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					obj := Object{ID: fmt.Sprintf("user:%d", i), Kind: record.ObjectActor, StableType: "Player"}
					r, err := e.Reserve(ctx, ReserveRequest{Object: obj, Target: targetA(), Creation: pending(fmt.Sprintf("res-%d", i))})
					if err != nil {
						errs <- fmt.Errorf("%s: %w", obj.ID, err)
						continue
					}
					gens[i] = uint64(r.Plan.Record.ObjectGeneration)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sorted := slices.Clone(gens)
	slices.Sort(sorted)
	for i, g := range sorted {
		if g != uint64(i+1) {
			t.Fatalf("generations issued: %v…, want exactly 1..%d", sorted[:min(len(sorted), i+3)], n)
		}
	}
	rr, err := s.Read(ctx, objGenKey(t))
	if err != nil {
		t.Fatal(err)
	}
	ctr, err := CounterRowOf(objGenKey(t), rr)
	if err != nil || ctr.Value != uint64(n) {
		t.Errorf("ObjectGeneration counter %+v, %v; want %d", ctr, err, n)
	}
	if u := readUsage(t, s, actorsOf(nodeA)); u != (Usage{Reserved: n}) {
		t.Errorf("counter %+v, want %d reserved", u, n)
	}
}

func TestGenerationRaceMemory(t *testing.T) {
	s, _ := newMemory(t)
	runGenerationRace(t, &slowWrites{Store: s}, 200, 8)
}

func TestGenerationRaceRedis(t *testing.T) { runGenerationRace(t, newRedis(t), 150, 8) }

// The executor counts, by operation, the batches the store refused and the
// waits on hot counters' lanes (what an operator sees as metrics).
func TestStatsCountConflictsAndLaneWaits(t *testing.T) {
	other := func(store locstore.Store) {
		reserveOther(t, store, Object{ID: "user:3", Kind: record.ObjectActor, StableType: "Player"}, targetA(), "res-3")
	}
	_, second, _, err := laneTurnsWith(t, laneScene{target: targetA(), between: other, statsOf: func(e *Executor) {
		st := e.Stats()[OpReserve]
		if st.Conflicts != 1 || st.LaneWaits != 1 || st.LaneWait <= 0 {
			t.Errorf("reserve stats %+v, want 1 conflict and 1 lane wait with its time", st)
		}
	}})
	if err != nil || second.Attempts != 2 {
		t.Fatalf("second Reserve: %d batches, %v", second.Attempts, err)
	}
}

// A hand-over whose rows do not fit the operation's own read — here the
// active count it was left is above the secured count the operation read
// before it queued (another process's Reserve and this process's Commit
// moved the two rows in between) — is not the store's answer: the
// operation reads the store once and goes on. It used to plan on the same
// misfit again and again, holding the lanes until its deadline (found in
// a churn try-out: every creation and destroy of the node queued behind
// it timed out together).
func TestMisfitHandOverIsReadOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	// player is Active on node A: secured 1, active 1.
	other := newExecutor(t, mem, WithoutLanes())
	res := reserveOther(t, mem, player, targetA(), "res-1")
	if _, err := other.Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA}); err != nil {
		t.Fatal(err)
	}
	g := &gateStore{Store: mem, reads: map[string]int{}}
	e := newExecutor(t, g)
	id := actorsOf(nodeA)
	keys := []string{secKey(t, id), actKey(t, id)}
	slices.Sort(keys)
	h, err := e.lanes.acquire(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	var del Result
	var delErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		del, delErr = e.Delete(ctx, DeleteRequest{Object: player, ObjectGeneration: uint64(res.Plan.Record.ObjectGeneration), Owner: ownerA})
	}()
	queuedOn(t, e, keys[0], 2) // the Delete read (secured 1), planned and queued
	// The lanes were left a pair the store never held: active 2, secured 1
	// (rows of two batches, or a row read unconditioned, moved since by
	// another process).
	left := &leftRows{seq: e.lanes.seq.Add(1), rows: map[string]locstore.ReadResult{
		secKey(t, id): {Found: true, Value: secVal(t, id, 1), Version: "998", StoreNow: storeNow},
		actKey(t, id): {Found: true, Value: actVal(t, id, 2), Version: "999", StoreNow: storeNow},
	}}
	for _, ln := range h.lanes {
		ln.left = left
	}
	before := g.readsOf(actKey(t, id))
	h.release()
	<-done
	if delErr != nil || del.Attempts != 1 {
		t.Fatalf("Delete after a misfit hand-over: %d batches, %v", del.Attempts, delErr)
	}
	if n := g.readsOf(actKey(t, id)) - before; n != 1 {
		t.Errorf("the Delete read the active row %d times in its turn, want 1", n)
	}
	if u := readUsage(t, mem, id); u != (Usage{}) {
		t.Errorf("counter after the Delete: %+v, want empty", u)
	}
}
