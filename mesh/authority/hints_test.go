package authority

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// manualNow is a monotonic reading the test advances by hand.
type manualNow struct{ d atomic.Int64 }

func (m *manualNow) now() time.Duration      { return time.Duration(m.d.Load()) }
func (m *manualNow) advance(d time.Duration) { m.d.Add(int64(d)) }

// countingStore counts the reads of each key.
type countingStore struct {
	locstore.Store
	reads map[string]int
}

func (c *countingStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	c.reads[key]++
	return c.Store.Read(ctx, key)
}

func hinted(clock *manualNow) ExecutorOption { return WithRowHints(time.Second, clock.now) }

// Every operation of the lifecycle behaves the same with row hints.
func TestExecutorLifecycleMemoryHinted(t *testing.T) {
	s, _ := newMemory(t)
	runLifecycle(t, s, hinted(&manualNow{}))
}

func TestExecutorCapacityRaceMemoryHinted(t *testing.T) {
	s, _ := newMemory(t)
	runCapacityRace(t, s, 40, 7, hinted(&manualNow{}))
}

// The rows an operation wrote, and a row the caller observed, are not read
// again by the next operation's first attempt; counters always are.
func TestHintsSpareReads(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	cs := &countingStore{Store: mem, reads: map[string]int{}}
	e := newExecutor(t, cs, hinted(&manualNow{}))
	key := authKey(t, player)
	e.Observe(key, locstore.ReadResult{StoreNow: storeNow}) // the caller just read it: Missing
	r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
	if err != nil || r.Attempts != 1 {
		t.Fatalf("reserve: %+v, %v", r, err)
	}
	if cs.reads[key] != 0 {
		t.Errorf("Reserve read the observed authority row %d times", cs.reads[key])
	}
	lease, counter := leaseKey(t, ownerA.ID), actKey(t, actorsOf(nodeA))
	if cs.reads[lease] != 1 || cs.reads[counter] != 1 {
		t.Errorf("Reserve reads: lease %d, counter %d; want 1 each", cs.reads[lease], cs.reads[counter])
	}
	if _, err := e.Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA,
		ObjectGeneration: uint64(r.Plan.Record.ObjectGeneration), IfVersion: r.Version}); err != nil {
		t.Fatal(err)
	}
	if cs.reads[key] != 0 || cs.reads[lease] != 1 || cs.reads[counter] != 2 {
		t.Errorf("Commit reads: authority %d, lease %d, counter %d; want 0, 1, 2 (the counter again)", cs.reads[key], cs.reads[lease], cs.reads[counter])
	}
}

// A stale hint costs a refused batch and a re-read, never a second record:
// the row was created after the caller's read of it.
func TestHintStaleMissingConflicts(t *testing.T) {
	ctx := context.Background()
	s, _ := newMemory(t)
	putLease(t, s, ownerA)
	key := authKey(t, room)
	e := newExecutor(t, s, hinted(&manualNow{}))
	if _, err := e.Reserve(ctx, ReserveRequest{Object: room, Target: Target{Node: nodeA, Owner: ownerA}, Creation: pending("k-1")}); err != nil {
		t.Fatal(err)
	}
	first := readAuthorityRow(t, s, room)
	e.Observe(key, locstore.ReadResult{StoreNow: storeNow}) // stale: still says Missing
	_, err := e.Reserve(ctx, ReserveRequest{Object: room, Target: Target{Node: nodeA, Owner: ownerA}, Creation: pending("k-2")})
	var ae *Error
	if !errors.Is(err, ErrConflict) || !errors.As(err, &ae) || ae.Current == nil || ae.Current.Version != first.Version {
		t.Fatalf("reserve on a stale hint: %v, want ErrConflict carrying the current row", err)
	}
	if now := readAuthorityRow(t, s, room); now.Version != first.Version {
		t.Fatalf("a stale hint changed the record: version %s -> %s", first.Version, now.Version)
	}
}

// A decision that writes nothing is never taken on hints: a hint that says
// the record exists (it was deleted meanwhile) does not refuse a creation.
func TestHintedRefusalIsReread(t *testing.T) {
	ctx := context.Background()
	s, _ := newMemory(t)
	putLease(t, s, ownerA)
	ghost := activeRow(t, player, nodeA, ownerA, 7, 1, "v-gone")
	e := newExecutor(t, s, hinted(&manualNow{}))
	e.Observe(authKey(t, player), locstore.ReadResult{Found: true, Value: encodeAuth(t, ghost.Record), Version: "v-gone", StoreNow: storeNow})
	r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
	if err != nil || r.Attempts != 1 {
		t.Fatalf("reserve after a stale Found hint: %+v, %v (want created in one batch)", r, err)
	}
}

// An expired lease is not kept alive by a hint: the batch's condition on
// it fails in the store, and the fresh re-read decides.
func TestHintedExpiredLeaseRefused(t *testing.T) {
	ctx := context.Background()
	mem, clock := newMemory(t)
	putLease(t, mem, ownerA)
	e := newExecutor(t, mem, hinted(&manualNow{})) // the hints' clock stands still: every hint is fresh
	r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(leaseTTL + time.Second)
	before := readAuthorityRow(t, mem, player)
	_, err = e.Delete(ctx, DeleteRequest{Object: player, ObjectGeneration: uint64(r.Plan.Record.ObjectGeneration), Owner: ownerA})
	wantErr(t, err, ErrConflict)
	if after := readAuthorityRow(t, mem, player); after.Version != before.Version {
		t.Error("a Delete planned on an expired lease's hint changed the record")
	}
}

// A hint older than its maximum age is read again.
func TestHintMaxAge(t *testing.T) {
	ctx := context.Background()
	_, cs, clock, e := countedHinted(t)
	key := authKey(t, player)
	e.Observe(key, locstore.ReadResult{StoreNow: storeNow})
	clock.advance(time.Second + time.Nanosecond)
	if _, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")}); err != nil {
		t.Fatal(err)
	}
	if cs.reads[key] != 1 {
		t.Errorf("an aged hint: the authority row was read %d times, want 1", cs.reads[key])
	}
}

// A remembered decode is only reused for the same version of the row.
func TestHintDecodedPerVersion(t *testing.T) {
	s, _ := newMemory(t)
	e := newExecutor(t, s, hinted(&manualNow{}))
	key := authKey(t, player)
	v1 := activeRow(t, player, nodeA, ownerA, 7, 1, "v1")
	rr1 := locstore.ReadResult{Found: true, Value: encodeAuth(t, v1.Record), Version: "v1", StoreNow: storeNow}
	first, err := e.ObserveAuthority(key, rr1)
	if err != nil || first.Record.AuthorityOwnerGeneration != 1 {
		t.Fatalf("v1: %+v, %v", first, err)
	}
	v2 := activeRow(t, player, nodeB, ownerB, 7, 2, "v2")
	rr2 := locstore.ReadResult{Found: true, Value: encodeAuth(t, v2.Record), Version: "v2", StoreNow: storeNow}
	second, err := e.ObserveAuthority(key, rr2)
	if err != nil || second.Record.AuthorityOwnerGeneration != 2 || second.Version != "v2" {
		t.Fatalf("v2 after v1: %+v, %v (a decode of another version was reused)", second, err)
	}
	// A reader holding the older result still gets its own decode.
	again, err := e.authorityRowOf(key, rr1)
	if err != nil || again.Record.AuthorityOwnerGeneration != 1 {
		t.Fatalf("v1 again: %+v, %v", again, err)
	}
}

// Rows not put again within maxAge are forgotten at the next put, so that
// the hints hold what recent operations touched, not every object a node
// ever created or moved; a row put again stays; the queue of puts does not
// grow beyond the puts of one maxAge.
func TestHintsExpireWhenIdle(t *testing.T) {
	clock := &manualNow{}
	h := &rowHints{maxAge: time.Second, now: clock.now, rows: map[string]rowHint{}}
	rr := locstore.ReadResult{Found: true, Value: []byte("v"), Version: "1", StoreNow: storeNow}
	for i := range 100 {
		h.put("idle/"+strconv.Itoa(i), rr)
	}
	clock.advance(600 * time.Millisecond)
	h.put("busy", rr)
	clock.advance(600 * time.Millisecond) // the idle rows are 1.2 s old, busy 0.6 s
	h.put("busy", rr)
	h.put("new", rr)
	if len(h.rows) != 2 {
		t.Fatalf("%d rows remembered after the idle ones aged, want busy and new", len(h.rows))
	}
	for _, k := range []string{"busy", "new"} {
		if _, ok := h.get(k); !ok {
			t.Errorf("%s forgotten", k)
		}
	}
	if _, ok := h.get("idle/0"); ok {
		t.Error("an idle row is still a hint")
	}
	// The first put of busy is dropped when it ages; its later put keeps
	// the row.
	clock.advance(500 * time.Millisecond)
	h.put("other", rr)
	if _, ok := h.get("busy"); !ok {
		t.Error("busy forgotten by the expiry of its earlier put")
	}

	// One put per millisecond for 20 s: the queue holds about one maxAge of
	// puts (1,000), and the map no more.
	for i := range 20_000 {
		clock.advance(time.Millisecond)
		h.put("stream/"+strconv.Itoa(i), rr)
	}
	if n := len(h.order) - h.head; n > 1_001 {
		t.Errorf("%d puts queued, want at most one maxAge of them (1,001)", n)
	}
	if cap(h.order) > 4_096 {
		t.Errorf("queue capacity %d: it grows with every put", cap(h.order))
	}
	if len(h.rows) > 1_001 {
		t.Errorf("%d rows remembered, want at most one maxAge of puts", len(h.rows))
	}

	// After a burst has expired the rows move to a map of their size (a Go
	// map keeps the storage of its largest size).
	for i := range 10_000 {
		h.put("burst/"+strconv.Itoa(i), rr)
	}
	clock.advance(2 * time.Second)
	h.put("after", rr)
	if len(h.rows) != 1 || h.peak > 1 {
		t.Errorf("after the burst expired: %d rows, peak %d; want 1 and a new map (peak at most 1)", len(h.rows), h.peak)
	}
}

// ExpireHints lets an idle executor's rows go without another operation.
func TestExpireHintsWhenIdle(t *testing.T) {
	clock := &manualNow{}
	s, _ := newMemory(t)
	e := newExecutor(t, s, hinted(clock))
	rr := locstore.ReadResult{Found: true, Value: []byte("v"), Version: "1", StoreNow: storeNow}
	for i := range 5_000 {
		e.Observe("row/"+strconv.Itoa(i), rr)
	}
	e.ExpireHints() // nothing is old yet
	if n := len(e.hints.rows); n != 5_000 {
		t.Fatalf("%d rows after an early expiry, want 5000", n)
	}
	clock.advance(time.Second + time.Nanosecond)
	e.ExpireHints()
	if n, q := len(e.hints.rows), len(e.hints.order)-e.hints.head; n != 0 || q != 0 || e.hints.peak != 0 {
		t.Fatalf("after the age: %d rows, %d puts queued, peak %d; want none (and a new map)", n, q, e.hints.peak)
	}
	newExecutor(t, s).ExpireHints() // without hints: nothing to do
}
