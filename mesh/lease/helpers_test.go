package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/lease/leasetest"
	"github.com/meshnode/meshnode/mesh/record"
)

const (
	sec    = time.Second
	start  = 100 * time.Second // the manual clock's first reading
	guard  = 10 * time.Second  // real-time safety net against a hung test, never a speed bound
	margin = lease.DefaultFencingMargin
)

var storeBase = time.UnixMilli(1_700_000_000_000).UTC()

// behavior is what flakyStore does with one call.
type behavior int

const (
	pass          behavior = iota // forward to the real store
	block                         // wait until the call's context ends, then fail
	fail                          // fail at once without forwarding
	applyThenFail                 // forward, then report a failure (a lost answer)
	hold                          // wait for a release (or the context), then forward: a slow answer
	refuse                        // refuse a write at once without forwarding (Redis out of memory)
	deny                          // fail a write at once for want of a permission (a Redis ACL rule)
)

// flakyStore wraps a real store and misbehaves on demand. One-shot
// behaviours queued with once* are used before the persistent mode.
type flakyStore struct {
	locstore.Store

	mu         sync.Mutex
	readMode   behavior
	writeMode  behavior
	readOnce   []behavior
	writeOnce  []behavior
	beforeOnce func() // runs once before the next forwarded write

	blocked chan string   // receives "read"/"write" each time a call starts blocking or holding
	release chan struct{} // lets one held call proceed
	reads   atomic.Int64
	writes  atomic.Int64
}

func newFlaky(s locstore.Store) *flakyStore {
	return &flakyStore{Store: s, blocked: make(chan string, 64), release: make(chan struct{})}
}

func (f *flakyStore) setModes(read, write behavior) {
	f.mu.Lock()
	f.readMode, f.writeMode = read, write
	f.mu.Unlock()
}

func (f *flakyStore) onceWrite(b ...behavior) {
	f.mu.Lock()
	f.writeOnce = append(f.writeOnce, b...)
	f.mu.Unlock()
}

func (f *flakyStore) next(op string) behavior {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, mode := &f.readOnce, f.readMode
	if op == "write" {
		q, mode = &f.writeOnce, f.writeMode
	}
	if len(*q) > 0 {
		b := (*q)[0]
		*q = (*q)[1:]
		return b
	}
	return mode
}

func (f *flakyStore) misbehave(ctx context.Context, op string, b behavior) error {
	switch b {
	case block:
		f.blocked <- op
		<-ctx.Done()
		return &locstore.ProviderError{Provider: "flaky", Op: op, Err: ctx.Err()}
	case fail, applyThenFail:
		return &locstore.ProviderError{Provider: "flaky", Op: op, Err: errors.New("connection reset")}
	case refuse:
		return &locstore.ProviderError{Provider: "flaky", Op: op, Refused: true, Err: errors.New("OOM command not allowed")}
	case deny:
		return &locstore.ProviderError{Provider: "flaky", Op: op, Denied: true,
			Err: errors.New("ERR The user executing the script can't run this command or subcommand")}
	}
	return nil
}

func (f *flakyStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	f.reads.Add(1)
	if b := f.next("read"); b != pass {
		if b == applyThenFail {
			_, _ = f.Store.Read(ctx, key)
		}
		return locstore.ReadResult{}, f.misbehave(ctx, "read", b)
	}
	return f.Store.Read(ctx, key)
}

func (f *flakyStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	f.writes.Add(1)
	b := f.next("write")
	if b == hold {
		f.blocked <- "write"
		select {
		case <-f.release:
		case <-ctx.Done():
			return locstore.WriteResult{}, &locstore.ProviderError{Provider: "flaky", Op: "write", Err: ctx.Err()}
		}
	}
	if b == block || b == fail || b == refuse || b == deny {
		return locstore.WriteResult{}, f.misbehave(ctx, "write", b)
	}
	f.mu.Lock()
	hook := f.beforeOnce
	f.beforeOnce = nil
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	res, err := f.Store.Write(ctx, req)
	if b == applyThenFail {
		if err != nil || !res.Applied {
			panic(fmt.Sprintf("flaky: applyThenFail on a write that did not apply: %v %+v", err, res))
		}
		return locstore.WriteResult{}, f.misbehave(ctx, "write", b)
	}
	return res, err
}

// env is one test's world: a manual local clock, a memory store whose clock
// follows it, a flaky wrapper, and the events of the managers made in it.
type env struct {
	t      *testing.T
	clock  *leasetest.ManualClock
	sclock *leasetest.StoreClock
	mem    *memory.Store
	store  *flakyStore
	timing lease.Timing
	events chan lease.Event
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := leasetest.NewManualClock(start)
	sc := c.StoreClock(storeBase.Add(-start))
	mem, err := memory.New(memory.WithClock(sc), memory.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	return &env{
		t: t, clock: c, sclock: sc, mem: mem, store: newFlaky(mem),
		timing: lease.DefaultTiming(),
		events: make(chan lease.Event, 1024),
	}
}

func (e *env) config() lease.Config {
	return lease.Config{
		Store:   e.store,
		Timing:  e.timing,
		Clock:   e.clock,
		Logger:  testLogger(),
		OnEvent: func(ev lease.Event) { e.events <- ev },
	}
}

func (e *env) acquire() *lease.Manager {
	e.t.Helper()
	return e.acquireWith(e.config())
}

// acquireWith acquires a lease with cfg (e.config() edited), closed at
// the test's end, and takes its EventAcquired.
func (e *env) acquireWith(cfg lease.Config) *lease.Manager {
	e.t.Helper()
	m, err := lease.Acquire(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("Acquire: %v", err)
	}
	e.t.Cleanup(func() { _ = m.Close() })
	e.expect(lease.EventAcquired)
	return m
}

// deleteLease deletes m's owner-lease record behind its back, as a store
// that lost its data.
func (e *env) deleteLease(m *lease.Manager) {
	e.t.Helper()
	key, _ := record.OwnerLeaseKey(m.OwnerID())
	if _, err := e.mem.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}}); err != nil {
		e.t.Fatal(err)
	}
}

// expect returns the next event, failing unless it has the given kind.
func (e *env) expect(kind lease.EventKind) lease.Event {
	e.t.Helper()
	select {
	case ev := <-e.events:
		if ev.Kind != kind {
			e.t.Fatalf("event %v (deadline %v, err %v), want %v", ev.Kind, ev.Deadline, ev.Err, kind)
		}
		return ev
	case <-time.After(guard):
		e.t.Fatalf("no %v event", kind)
	}
	return lease.Event{}
}

// expectSet returns the next len(kinds) events, in any order, failing unless
// they are exactly those kinds (for events that happen at the same instant
// on different goroutines, e.g. expiry and a renew tick).
func (e *env) expectSet(kinds ...lease.EventKind) map[lease.EventKind]lease.Event {
	e.t.Helper()
	got := map[lease.EventKind]lease.Event{}
	var order []lease.EventKind
	for range kinds {
		select {
		case ev := <-e.events:
			got[ev.Kind] = ev
			order = append(order, ev.Kind)
		case <-time.After(guard):
			e.t.Fatalf("events so far %v, want %v", order, kinds)
		}
	}
	for _, k := range kinds {
		if _, ok := got[k]; !ok {
			e.t.Fatalf("events %v, want %v", order, kinds)
		}
	}
	return got
}

// noEvent checks that nothing happened (after the code under test has
// settled on its timers).
func (e *env) noEvent() {
	e.t.Helper()
	select {
	case ev := <-e.events:
		e.t.Fatalf("unexpected event %v (err %v)", ev.Kind, ev.Err)
	default:
	}
}

// waitBlocked waits until a store call of op is blocking.
func (e *env) waitBlocked(op string) {
	e.t.Helper()
	select {
	case got := <-e.store.blocked:
		if got != op {
			e.t.Fatalf("blocked %s, want %s", got, op)
		}
	case <-time.After(guard):
		e.t.Fatalf("no %s blocked", op)
	}
}

// waitIdle waits until the renew loop is parked on its next tick (plus the
// gate's expiry timer when the gate is open), i.e. nothing is in flight.
func (e *env) waitIdle(m *lease.Manager, want int) {
	e.t.Helper()
	if !e.clock.WaitFor(func(n int) bool { return n == want }, guard) {
		e.t.Fatalf("pending timers = %d, want %d", e.clock.Pending(), want)
	}
}

func (e *env) readRecord(m *lease.Manager) (record.OwnerLease, locstore.ReadResult) {
	e.t.Helper()
	key, err := record.OwnerLeaseKey(m.OwnerID())
	if err != nil {
		e.t.Fatal(err)
	}
	rr, err := e.mem.Read(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	if !rr.Found {
		return record.OwnerLease{}, rr
	}
	l, err := record.DecodeOwnerLease(rr.Value)
	if err != nil {
		e.t.Fatal(err)
	}
	return l, rr
}

func counterKey(t *testing.T) string {
	t.Helper()
	k, err := record.CounterKey(record.CounterLeaseGeneration)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (e *env) counter() (uint64, bool) {
	e.t.Helper()
	rr, err := e.mem.Read(context.Background(), counterKey(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	if !rr.Found {
		return 0, false
	}
	c, err := record.DecodeCounter(rr.Value)
	if err != nil {
		e.t.Fatal(err)
	}
	return uint64(c.Value), true
}

func (e *env) put(key string, value []byte, retention time.Duration) {
	e.t.Helper()
	res, err := e.mem.Write(context.Background(), locstore.WriteRequest{
		Mutations: []locstore.Mutation{{Kind: locstore.MutPut, Key: key, Value: value, Retention: retention}},
	})
	if err != nil || !res.Applied {
		e.t.Fatalf("put: %v %+v", err, res)
	}
}

// snapshot lists every live key of the store with version and value.
func (e *env) snapshot() []string {
	e.t.Helper()
	var out []string
	req := locstore.ScanRequest{Limit: 1000}
	for {
		page, err := e.mem.Scan(context.Background(), req)
		if err != nil || page.Expired {
			e.t.Fatalf("scan: %v %+v", err, page)
		}
		for _, it := range page.Items {
			out = append(out, fmt.Sprintf("%s@%s=%s", it.Key, it.Version, it.Value))
		}
		if page.Next == "" {
			slices.Sort(out)
			return out
		}
		req.Cursor = page.Next
	}
}

// testLogger discards logs unless LEASE_TEST_LOG=1, which prints them (to
// debug a failing test).
func testLogger() *slog.Logger {
	if os.Getenv("LEASE_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
