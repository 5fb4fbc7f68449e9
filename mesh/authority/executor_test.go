package authority

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/record"
)

const leaseTTL = time.Minute

// faultStore wraps a store to inject faults around writes. before runs
// before write n (1-based) and may fail it unapplied; after runs after
// write n applied and may replace its answer with an error (a lost result).
type faultStore struct {
	locstore.Store
	writes atomic.Int64
	before func(n int64) error
	after  func(n int64) error
	// onRead, when set, runs before each read of key (e.g. to let another
	// writer change the store between two reads of one snapshot).
	onRead func(key string)
}

func (f *faultStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if f.onRead != nil {
		f.onRead(key)
	}
	return f.Store.Read(ctx, key)
}

func (f *faultStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	n := f.writes.Add(1)
	if f.before != nil {
		if err := f.before(n); err != nil {
			return locstore.WriteResult{}, err
		}
	}
	res, err := f.Store.Write(ctx, req)
	if err == nil && f.after != nil {
		if lost := f.after(n); lost != nil {
			return locstore.WriteResult{}, lost
		}
	}
	return res, err
}

func lostAnswer() error {
	return &locstore.ProviderError{Provider: "test", Op: "write", Err: context.DeadlineExceeded}
}

// lostAfter returns a faultStore over s whose write n applies but answers
// with a provider error (a lost result).
func lostAfter(s locstore.Store, n int64) *faultStore {
	return &faultStore{Store: s, after: func(i int64) error {
		if i == n {
			return lostAnswer()
		}
		return nil
	}}
}

// lostBefore returns a faultStore over s whose write n fails unapplied with
// a provider error (the caller cannot tell the difference).
func lostBefore(s locstore.Store, n int64) *faultStore {
	return &faultStore{Store: s, before: func(i int64) error {
		if i == n {
			return lostAnswer()
		}
		return nil
	}}
}

// refusedWrite is a provider's refusal: nothing written.
func refusedWrite() error {
	return &locstore.ProviderError{Provider: "test", Op: "write", Refused: true, Err: errors.New("OOM command not allowed")}
}

func newMemory(t testing.TB) (*memory.Store, *memory.ManualClock) {
	t.Helper()
	clock := memory.NewManualClock(storeNow)
	s, err := memory.New(memory.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clock
}

func newExecutor(t testing.TB, s locstore.Store, opts ...ExecutorOption) *Executor {
	t.Helper()
	opts = append([]ExecutorOption{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)
	e, err := NewExecutor(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// putLease writes an owner-lease record as mesh/lease would, with the TTL
// as its retention.
func putLease(t testing.TB, s locstore.Store, o Owner) {
	t.Helper()
	v, err := record.OwnerLease{OwnerID: o.ID, LeaseGeneration: record.Generation(o.LeaseGeneration),
		AcquiredAt: record.EpochMillisOf(storeNow), UpdatedAt: record.EpochMillisOf(storeNow)}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.PutExpiring(leaseKey(t, o.ID), v, leaseTTL)}})
	if err != nil || !res.Applied {
		t.Fatalf("put lease: %v %v", res, err)
	}
}

func readUsage(t testing.TB, s locstore.Store, id CounterID) Usage {
	t.Helper()
	rows, err := ReadCounters(context.Background(), s, []CounterID{id})
	if err != nil {
		t.Fatal(err)
	}
	return rows[0].Usage
}

func readObjectCounter(t testing.TB, s locstore.Store) uint64 {
	t.Helper()
	rr, err := s.Read(context.Background(), objGenKey(t))
	if err != nil {
		t.Fatal(err)
	}
	row, err := CounterRowOf(objGenKey(t), rr)
	if err != nil {
		t.Fatal(err)
	}
	return row.Value
}

func readAuthorityRow(t testing.TB, s locstore.Store, o Object) AuthorityRow {
	t.Helper()
	rr, err := s.Read(context.Background(), authKey(t, o))
	if err != nil {
		t.Fatal(err)
	}
	row, err := AuthorityRowOf(authKey(t, o), rr)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func terminalFor(outcome Outcome, id byte, deadline time.Time) *TerminalResult {
	return &TerminalResult{
		Operation:     OperationRef{SourceRoutingID: []byte{0xc1}, SourceRunGeneration: 4, OperationID: [16]byte{id}},
		RequestSHA256: [32]byte{id, 0x55},
		Deadline:      deadline,
		Outcome:       outcome,
	}
}

// runLifecycle drives one User Spot through every operation against s:
// Reserve, Commit with the Created result, Preserve, SecureCapacity +
// NewOwner(PreSecured), Delete; and a second object through Reserve and
// Abort with a Rejected result. It checks the store after each step.
func runLifecycle(t *testing.T, s locstore.Store, opts ...ExecutorOption) {
	ctx := context.Background()
	putLease(t, s, ownerA)
	putLease(t, s, ownerB)
	e := newExecutor(t, s, opts...)
	roomA, typeA := spotsOf(nodeA), spotTypeOf(nodeA, record.ObjectUserSpot, "Room")
	roomB, typeB := spotsOf(nodeB), spotTypeOf(nodeB, record.ObjectUserSpot, "Room")

	res, err := e.Reserve(ctx, ReserveRequest{Object: room, Target: Target{Node: nodeA, Owner: ownerA, Limits: Limits{Spots: 5, SpotType: 2}}, Creation: pending("res-1")})
	if err != nil {
		t.Fatal(err)
	}
	objGen := uint64(res.Plan.Record.ObjectGeneration)
	if objGen != readObjectCounter(t, s) || res.Version == "" {
		t.Fatalf("reserve: generation %d, counter %d, version %q", objGen, readObjectCounter(t, s), res.Version)
	}
	if u := readUsage(t, s, roomA); u != (Usage{1, 0}) {
		t.Errorf("after Reserve spots = %+v", u)
	}

	deadline := res.StoreNow.Add(10 * time.Second)
	term := terminalFor(OutcomeCreated, 1, deadline)
	cres, err := e.Commit(ctx, CommitRequest{Object: room, ReservationID: "res-1", Owner: ownerA, ObjectGeneration: objGen, IfVersion: res.Version, Terminal: term})
	if err != nil {
		t.Fatal(err)
	}
	if u := readUsage(t, s, typeA); u != (Usage{0, 1}) {
		t.Errorf("after Commit spot type = %+v", u)
	}
	tr, err := e.LookupTerminal(ctx, term.Operation, term.RequestSHA256)
	if err != nil || tr.Outcome != OutcomeCreated || tr.Ref == nil || tr.Ref.ObjectGeneration != objGen {
		t.Fatalf("LookupTerminal = %+v, %v", tr, err)
	}
	if _, err := e.LookupTerminal(ctx, term.Operation, [32]byte{0xee}); !errors.Is(err, ErrInvalidOperation) {
		t.Errorf("another request read the stored result: %v", err)
	}

	pres, err := e.Preserve(ctx, PreserveRequest{Object: room, ObjectGeneration: objGen, Owner: ownerA, IfVersion: cres.Version, Payload: SetPayload([]byte("state"))})
	if err != nil {
		t.Fatal(err)
	}
	if row := readAuthorityRow(t, s, room); string(row.Record.Payload) != "state" || row.Version != pres.Version {
		t.Errorf("after Preserve: %+v", row)
	}

	bun, _ := BundleFor(room.Kind, room.StableType)
	if _, err := e.SecureCapacity(ctx, CapacityRequest{Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Spots: 1}}, Bundle: bun,
		Fences: []Fence{{Key: authKey(t, room), Version: pres.Version}}}); err != nil {
		t.Fatal(err)
	}
	if u := readUsage(t, s, roomB); u != (Usage{1, 0}) {
		t.Errorf("after SecureCapacity target spots = %+v", u)
	}
	// The node has a Spot limit of 1 and it is pre-secured: a second secure fails.
	if _, err := e.SecureCapacity(ctx, CapacityRequest{Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Spots: 1}}, Bundle: bun}); !errors.Is(err, ErrCapacityExhausted) {
		t.Errorf("second SecureCapacity: %v", err)
	}
	nres, err := e.NewOwner(ctx, NewOwnerRequest{Object: room, ObjectGeneration: objGen, IfVersion: pres.Version, Target: Target{Node: nodeB, Owner: ownerB, Limits: Limits{Spots: 1}}, PreSecured: true})
	if err != nil {
		t.Fatal(err)
	}
	if nres.Plan.Record.AuthorityOwnerGeneration != 2 || nres.Plan.Record.OwnerID != ownerB.ID {
		t.Errorf("NewOwner record %+v", nres.Plan.Record)
	}
	for _, w := range []struct {
		id   CounterID
		want Usage
	}{{roomA, Usage{}}, {typeA, Usage{}}, {roomB, Usage{0, 1}}, {typeB, Usage{0, 1}}} {
		if u := readUsage(t, s, w.id); u != w.want {
			t.Errorf("after NewOwner %s = %+v, want %+v", w.id, u, w.want)
		}
	}

	// The previous owner can no longer Delete; the new one can.
	if _, err := e.Delete(ctx, DeleteRequest{Object: room, ObjectGeneration: objGen, Owner: ownerA}); !errors.Is(err, ErrConflict) {
		t.Errorf("Delete by the previous owner: %v", err)
	}
	if _, err := e.Delete(ctx, DeleteRequest{Object: room, ObjectGeneration: objGen, Owner: ownerB}); err != nil {
		t.Fatal(err)
	}
	if row := readAuthorityRow(t, s, room); row.Found {
		t.Error("record still there after Delete")
	}
	if u := readUsage(t, s, roomB); u != (Usage{}) {
		t.Errorf("after Delete target spots = %+v", u)
	}
	if _, err := e.Delete(ctx, DeleteRequest{Object: room, ObjectGeneration: objGen, Owner: ownerB}); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}

	// Decline: Reserve then Abort with Rejected, in one batch each.
	rres, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: Target{Node: nodeA, Owner: ownerA}, Creation: pending("res-2")})
	if err != nil {
		t.Fatal(err)
	}
	rej := terminalFor(OutcomeRejected, 2, rres.StoreNow.Add(time.Second))
	rej.Reason = "no"
	if _, err := e.Abort(ctx, AbortRequest{Object: player, ReservationID: "res-2", Owner: &ownerA, Terminal: rej}); err != nil {
		t.Fatal(err)
	}
	if row := readAuthorityRow(t, s, player); row.Found {
		t.Error("record still there after Abort")
	}
	if u := readUsage(t, s, actorsOf(nodeA)); u != (Usage{}) {
		t.Errorf("after Abort actors = %+v", u)
	}
	if tr, err := e.LookupTerminal(ctx, rej.Operation, rej.RequestSHA256); err != nil || tr.Outcome != OutcomeRejected || *tr.Reason != "no" {
		t.Errorf("rejected result: %+v %v", tr, err)
	}
	// A re-created Id gets a new, larger ObjectGeneration from the same sequence.
	again, err := e.Reserve(ctx, ReserveRequest{Object: room, Target: Target{Node: nodeA, Owner: ownerA}, Creation: pending("res-3")})
	if err != nil {
		t.Fatal(err)
	}
	if got := uint64(again.Plan.Record.ObjectGeneration); got <= uint64(rres.Plan.Record.ObjectGeneration) {
		t.Errorf("re-created generation %d not above %d", got, rres.Plan.Record.ObjectGeneration)
	}
}

func TestExecutorLifecycleMemory(t *testing.T) {
	s, _ := newMemory(t)
	runLifecycle(t, s)
}

// runCapacityRace starts n goroutines reserving distinct Actors on one node
// whose actor limit is k: exactly k succeed, the others see
// ErrCapacityExhausted, and the counter holds exactly k reserved slots.
func runCapacityRace(t *testing.T, s locstore.Store, n, k int, opts ...ExecutorOption) {
	ctx := context.Background()
	putLease(t, s, ownerA)
	e := newExecutor(t, s, append([]ExecutorOption{WithMaxAttempts(0)}, opts...)...)
	var ok, full atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := Object{ID: fmt.Sprintf("race:%d", i), Kind: record.ObjectActor, StableType: "Player"}
			_, err := e.Reserve(ctx, ReserveRequest{Object: obj, Target: Target{Node: nodeA, Owner: ownerA, Limits: Limits{Actors: k}}, Creation: pending(fmt.Sprint("r", i))})
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrCapacityExhausted):
				full.Add(1)
			default:
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	if ok.Load() != int64(k) || full.Load() != int64(n-k) {
		t.Errorf("%d succeeded and %d were refused, want %d and %d", ok.Load(), full.Load(), k, n-k)
	}
	if u := readUsage(t, s, actorsOf(nodeA)); u != (Usage{Reserved: k}) {
		t.Errorf("counter = %+v, want %d reserved", u, k)
	}
	page, err := s.Scan(ctx, locstore.ScanRequest{Prefix: record.KindPrefix(record.KindAuthority), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != k {
		t.Errorf("%d authority rows, want %d", len(page.Items), k)
	}
}

func TestExecutorCapacityRaceMemory(t *testing.T) {
	s, _ := newMemory(t)
	runCapacityRace(t, s, 40, 7)
}

// runSameIDRace starts n goroutines reserving the same Id, each on its own
// node run: exactly one wins, the others see ErrConflict carrying the
// winner's record, and only the winner's node holds a reserved slot.
func runSameIDRace(t *testing.T, s locstore.Store, n int) {
	ctx := context.Background()
	putLease(t, s, ownerA)
	e := newExecutor(t, s, WithMaxAttempts(0))
	var wg sync.WaitGroup
	type outcome struct {
		node int
		err  error
		res  Result
	}
	out := make(chan outcome, n)
	node := func(i int) Node {
		return Node{MeshName: "game", RoutingID: []byte{0xee, byte(i)}, LifecycleGeneration: 1}
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: Target{Node: node(i), Owner: ownerA}, Creation: pending(fmt.Sprint("same-", i))})
			out <- outcome{i, err, res}
		}()
	}
	wg.Wait()
	close(out)
	winners := 0
	winner := -1
	var winnerGen record.Generation
	var losers []outcome
	for o := range out {
		if o.err == nil {
			winners++
			winner, winnerGen = o.node, o.res.Plan.Record.ObjectGeneration
			continue
		}
		losers = append(losers, o)
	}
	if winners != 1 {
		t.Fatalf("%d Reserves of one Id succeeded, want exactly 1", winners)
	}
	for _, o := range losers {
		var ae *Error
		if !errors.Is(o.err, ErrConflict) || !errors.As(o.err, &ae) || ae.Current == nil || ae.Current.Record.ObjectGeneration != winnerGen {
			t.Errorf("loser %d: %v (want ErrConflict with the winner's record)", o.node, o.err)
		}
	}
	for i := range n {
		want := Usage{}
		if i == winner {
			want = Usage{Reserved: 1}
		}
		if u := readUsage(t, s, actorsOf(node(i))); u != want {
			t.Errorf("node %d counter = %+v, want %+v", i, u, want)
		}
	}
}

func TestExecutorSameIDRaceMemory(t *testing.T) {
	s, _ := newMemory(t)
	runSameIDRace(t, s, 50)
}

func TestExecutorLostResult(t *testing.T) {
	ctx := context.Background()

	t.Run("applied but the answer was lost: the re-read decides success", func(t *testing.T) {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		fs := lostAfter(mem, 1)
		e := newExecutor(t, fs)
		res, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Recovered || fs.writes.Load() != 1 {
			t.Errorf("recovered=%v after %d writes, want a re-read and no second write", res.Recovered, fs.writes.Load())
		}
		if readObjectCounter(t, mem) != 1 || readUsage(t, mem, actorsOf(nodeA)) != (Usage{Reserved: 1}) {
			t.Error("the batch did not apply exactly once")
		}
		if row := readAuthorityRow(t, mem, player); res.Version != row.Version {
			t.Errorf("version %q, row has %q", res.Version, row.Version)
		}
	})

	t.Run("not applied and the answer was lost: re-read, plan again, apply once", func(t *testing.T) {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		fs := lostBefore(mem, 1)
		e := newExecutor(t, fs)
		res, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Recovered || fs.writes.Load() != 2 || readObjectCounter(t, mem) != 1 {
			t.Errorf("recovered=%v writes=%d counter=%d", res.Recovered, fs.writes.Load(), readObjectCounter(t, mem))
		}
	})

	t.Run("Commit with a final result: decided by the stored result", func(t *testing.T) {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		e := newExecutor(t, mem)
		r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if err != nil {
			t.Fatal(err)
		}
		fs := &faultStore{Store: mem, after: func(int64) error { return lostAnswer() }}
		term := terminalFor(OutcomeCreated, 7, r.StoreNow.Add(time.Second))
		res, err := newExecutor(t, fs).Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA, Terminal: term})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Recovered || fs.writes.Load() != 1 || readUsage(t, mem, actorsOf(nodeA)) != (Usage{Active: 1}) {
			t.Errorf("recovered=%v writes=%d usage=%+v", res.Recovered, fs.writes.Load(), readUsage(t, mem, actorsOf(nodeA)))
		}
	})

	t.Run("Delete lost: the missing record decides", func(t *testing.T) {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		e := newExecutor(t, mem)
		r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA}); err != nil {
			t.Fatal(err)
		}
		fs := &faultStore{Store: mem, after: func(int64) error { return lostAnswer() }}
		res, err := newExecutor(t, fs).Delete(ctx, DeleteRequest{Object: player, ObjectGeneration: uint64(r.Plan.Record.ObjectGeneration), Owner: ownerA})
		if err != nil || !res.Recovered {
			t.Fatalf("Delete: %+v %v", res, err)
		}
		if readUsage(t, mem, actorsOf(nodeA)) != (Usage{}) {
			t.Error("capacity not returned")
		}
	})

	t.Run("capacity-only batch lost: reported unknown, not retried", func(t *testing.T) {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerB)
		fs := &faultStore{Store: mem, after: func(int64) error { return lostAnswer() }}
		_, err := newExecutor(t, fs).SecureCapacity(ctx, CapacityRequest{Target: targetB(), Bundle: Bundle{Actors: 1}})
		if !errors.Is(err, locstore.ErrUnavailable) || fs.writes.Load() != 1 {
			t.Errorf("err=%v writes=%d", err, fs.writes.Load())
		}
	})

	t.Run("a store refusing every write at once: paced, one warning", func(t *testing.T) {
		// Reads answer, writes fail at once (out of memory, a read-only
		// replica): the operation retried up to 256 times in a tight loop,
		// each with a WARN line.
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		var logs syncbuf.Buffer
		fs := &faultStore{Store: mem, before: func(int64) error { return lostAnswer() }}
		e, err := NewExecutor(fs, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
		defer cancel()
		_, err = e.Reserve(cctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if !errors.Is(err, locstore.ErrUnavailable) {
			t.Fatalf("err = %v, want an unknown outcome", err)
		}
		if n := fs.writes.Load(); n > 12 {
			t.Errorf("%d writes in 600 ms: not paced", n)
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
			t.Errorf("%d WARN lines, want 1:\n%s", n, logs.String())
		}
	})

	t.Run("a write cut by the caller's own deadline: no warning", func(t *testing.T) {
		// The caller's context ends while the write is on its way (a
		// drain's moves at their deadline): the provider's error (Redis:
		// "i/o timeout") says nothing about the store, and the caller
		// reports its deadline. Before, each such write logged WARN
		// "write result lost", which reads as a Redis fault.
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		var logs syncbuf.Buffer
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		fs := &faultStore{Store: mem, before: func(int64) error { cancel(); return lostAnswer() }}
		e, err := NewExecutor(fs, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err = e.Reserve(cctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")}); err == nil {
			t.Fatal("Reserve succeeded with its context ended")
		}
		if got := logs.String(); strings.Contains(got, "level=WARN") {
			t.Errorf("a WARN for a write its caller's deadline cut:\n%s", got)
		}
	})

	t.Run("a write refused outright: reported at once, not retried", func(t *testing.T) {
		// The store says it wrote nothing (Redis out of memory, a
		// read-only replica): no re-read, no retry until the deadline.
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		fs := &faultStore{Store: mem, before: func(int64) error { return refusedWrite() }}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		start := time.Now()
		_, err := newExecutor(t, fs).Reserve(cctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if !errors.Is(err, locstore.ErrWriteRefused) || !errors.Is(err, locstore.ErrUnavailable) {
			t.Fatalf("err = %v, want a refusal", err)
		}
		if n := fs.writes.Load(); n != 1 || time.Since(start) > 5*time.Second {
			t.Errorf("%d writes in %v, want one at once", n, time.Since(start))
		}
		if readObjectCounter(t, mem) != 0 {
			t.Error("the refused Reserve moved the generation counter")
		}
	})

	t.Run("a refusal after a lost result: not reported as nothing written", func(t *testing.T) {
		// The first write's answer was lost (it may still apply), then the
		// store refuses writes: the operation's outcome stays unknown — a
		// plain refusal would tell the caller nothing happened.
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		fs := &faultStore{Store: mem, before: func(n int64) error {
			if n == 1 {
				return lostAnswer()
			}
			return refusedWrite()
		}}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := newExecutor(t, fs).Reserve(cctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "outcome unknown") || fs.writes.Load() < 2 {
			t.Fatalf("err = %v after %d writes, want an unknown outcome", err, fs.writes.Load())
		}
	})

	t.Run("re-read impossible: outcome unknown, no guess", func(t *testing.T) {
		mem, _ := newMemory(t)
		putLease(t, mem, ownerA)
		cctx, cancel := context.WithCancel(ctx)
		fs := &faultStore{Store: mem, after: func(int64) error { cancel(); return lostAnswer() }}
		_, err := newExecutor(t, fs).Reserve(cctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, locstore.ErrUnavailable) {
			t.Errorf("err = %v, want an unknown outcome wrapping the provider error", err)
		}
	})
}

func TestExecutorConflictRetry(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	// Before the first write, the owner renews its lease (new version):
	// that batch conflicts, and the executor re-reads and applies.
	fs := &faultStore{Store: mem, before: func(n int64) error {
		if n == 1 {
			putLease(t, mem, ownerA)
		}
		return nil
	}}
	res, err := newExecutor(t, fs).Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
	if err != nil {
		t.Fatal(err)
	}
	// write 1 = the renewal inside the hook counts on mem, not fs
	if res.Attempts != 2 || fs.writes.Load() != 2 || readObjectCounter(t, mem) != 1 {
		t.Errorf("attempts=%d writes=%d counter=%d", res.Attempts, fs.writes.Load(), readObjectCounter(t, mem))
	}

	t.Run("bounded attempts", func(t *testing.T) {
		fs := &faultStore{Store: mem, before: func(int64) error { putLease(t, mem, ownerA); return nil }}
		e := newExecutor(t, fs, WithMaxAttempts(3), WithBackoff(func(int) time.Duration { return 0 }))
		_, err := e.Reserve(ctx, ReserveRequest{Object: shard, Target: targetA(), Creation: pending("res-x")})
		wantErr(t, err, ErrConflict)
		if fs.writes.Load() != 3 {
			t.Errorf("%d writes, want 3", fs.writes.Load())
		}
	})
}

func TestExecutorLeaseAndTime(t *testing.T) {
	ctx := context.Background()
	mem, clock := newMemory(t)
	putLease(t, mem, ownerA)
	e := newExecutor(t, mem)
	r, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
	if err != nil {
		t.Fatal(err)
	}
	term := terminalFor(OutcomeCreated, 3, r.StoreNow.Add(time.Second))
	if _, err := e.Commit(ctx, CommitRequest{Object: player, ReservationID: "res-1", Owner: ownerA, Terminal: term}); err != nil {
		t.Fatal(err)
	}

	// The stored final result stays until deadline + 5 min by store time.
	clock.Advance(time.Second + 5*time.Minute - time.Millisecond)
	if _, err := e.LookupTerminal(ctx, term.Operation, term.RequestSHA256); err != nil {
		t.Errorf("final result gone before deadline+5min: %v", err)
	}
	clock.Advance(2 * time.Millisecond)
	if _, err := e.LookupTerminal(ctx, term.Operation, term.RequestSHA256); !errors.Is(err, ErrNotFound) {
		t.Errorf("final result after deadline+5min: %v", err)
	}

	// The owner lease has expired by now (TTL 1 min): Delete is Conflict
	// and nothing changes.
	before := readAuthorityRow(t, mem, player)
	_, err = e.Delete(ctx, DeleteRequest{Object: player, ObjectGeneration: uint64(r.Plan.Record.ObjectGeneration), Owner: ownerA})
	wantErr(t, err, ErrConflict)
	if after := readAuthorityRow(t, mem, player); after.Version != before.Version || readUsage(t, mem, actorsOf(nodeA)) != (Usage{Active: 1}) {
		t.Error("a refused Delete changed the store")
	}
}

func TestExecutorGenerationExhausted(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	cv := counterValue(t, gen.MaxIssued)
	if res, err := mem.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(objGenKey(t), cv)}}); err != nil || !res.Applied {
		t.Fatal(err)
	}
	before, _ := mem.Read(ctx, objGenKey(t))
	fs := &faultStore{Store: mem}
	e := newExecutor(t, fs)
	for range 2 { // repeated calls give the same result
		_, err := e.Reserve(ctx, ReserveRequest{Object: player, Target: targetA(), Creation: pending("res-1")})
		wantErr(t, err, ErrGenerationExhausted)
		if !errors.Is(err, gen.ErrGenerationExhausted) {
			t.Error("not gen.ErrGenerationExhausted")
		}
	}
	after, _ := mem.Read(ctx, objGenKey(t))
	if fs.writes.Load() != 0 || after.Version != before.Version || readAuthorityRow(t, mem, player).Found {
		t.Errorf("exhaustion wrote to the store (%d writes)", fs.writes.Load())
	}
}
