package mesh

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// Application misbehaviour during a move (operator try-out 6): the
// snapshot adapter is application code like a handler or a factory, and
// its panic must not take the node down (spec §9.4: a failed move leaves
// the object served on its source).

const misbehaveType = "test.misbehave"

// misbehaveMode says what the snapshot adapter does for an id.
type misbehaveMode int

const (
	behave misbehaveMode = iota
	snapshotPanics
	snapshotFails
	snapshotFailsLong // an error text of 1 MiB
	restorePanics
	restoreNilHandler
)

// misbehaveCtl maps ids to what their adapter does; a count survives
// every restore that behaves.
type misbehaveCtl struct {
	mu    sync.Mutex
	modes map[string]misbehaveMode
}

func (c *misbehaveCtl) mode(id string) misbehaveMode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modes[id]
}

type misbehaveObj struct {
	id string
	n  int
}

func (o *misbehaveObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if string(env.Body) == "get" {
		return t.Reply([]byte(strconv.Itoa(o.n)))
	}
	o.n++
	if env.Kind == spot.Request {
		return t.Reply([]byte("ok"))
	}
	return nil
}

type misbehaveSnapshot struct{ c *misbehaveCtl }

func (a misbehaveSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	o := h.(*misbehaveObj)
	switch a.c.mode(o.id) {
	case snapshotPanics:
		panic("snapshot: nil map write in the application")
	case snapshotFails:
		return nil, errors.New("snapshot: state does not encode")
	case snapshotFailsLong:
		return nil, errors.New("snapshot: state does not encode: " + strings.Repeat("é", 1<<19))
	}
	return []byte(strconv.Itoa(o.n)), nil
}

func (a misbehaveSnapshot) Restore(_ context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	switch a.c.mode(req.ID) {
	case restorePanics:
		panic("restore: index out of range in the application")
	case restoreNilHandler:
		return nil, nil
	}
	n, err := strconv.Atoi(string(state))
	if err != nil {
		return nil, err
	}
	return &misbehaveObj{id: req.ID, n: n}, nil
}

// A snapshot adapter that panics, fails, or a Restore at the target that
// panics or returns no handler: the move ends NotMoved, the node is still
// up, the object stays served on its source with every accepted message
// counted once (also those sent during the move), and moving it again once
// the adapter behaves works. Before, a panic in Snapshot (source) or
// Restore (target) was not recovered and killed the process, and a nil
// handler from Restore was opened and failed every later turn.
func TestMoveWithMisbehavingSnapshotAdapterFailsCleanly(t *testing.T) {
	ctl := &misbehaveCtl{modes: map[string]misbehaveMode{}}
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: misbehaveType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
		Snapshot: misbehaveSnapshot{ctl},
		New: func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
			return &misbehaveObj{id: req.ID}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	tests := []struct {
		name   string
		mode   misbehaveMode
		reason relocation.Reason
		detail string // in the result's Detail
	}{
		{"snapshot panics", snapshotPanics, relocation.ReasonSnapshotFailed, "panicked: in Snapshot: snapshot: nil map write"},
		{"snapshot fails", snapshotFails, relocation.ReasonSnapshotFailed, "snapshot adapter: snapshot: state does not encode"},
		// An application's error text is bounded in the result (and so in
		// a host command's reasons, logs, /v1/status): 1 MiB went in whole.
		{"snapshot fails with a long error", snapshotFailsLong, relocation.ReasonSnapshotFailed, "snapshot adapter: snapshot: state does not encode: éé"},
		{"restore panics on the target", restorePanics, relocation.ReasonTargetFailed, "panicked: in Restore: restore: index out of range"},
		{"restore returns no handler", restoreNilHandler, relocation.ReasonTargetFailed, "Restore returned no handler"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			id := fmt.Sprintf("mis-%d", i)
			ref, err := c.m(0).CreateActor(ctx, id, misbehaveType)
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 3; j++ {
				if err := c.m(0).SendActor(ctx, ref, []byte("add")); err != nil {
					t.Fatal(err)
				}
			}
			src, dst := movePair(t, c, record.ObjectActor, id)
			before := rowOf(t, c, record.ObjectActor, id)
			ctl.mu.Lock()
			ctl.modes[id] = tc.mode
			ctl.mu.Unlock()
			res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
			if res.Outcome != NotMoved || res.Reason != tc.reason.String() || !strings.Contains(res.Detail, tc.detail) {
				t.Fatalf("outcome %v (%s: %.200q), want notMoved (%s: …%s…)", res.Outcome, res.Reason, res.Detail, tc.reason, tc.detail)
			}
			if len(res.Detail) > 4096 || !utf8.ValidString(res.Detail) {
				t.Fatalf("detail of %d bytes (valid UTF-8: %v), want at most 4 KiB of valid text", len(res.Detail), utf8.ValidString(res.Detail))
			}
			sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
			checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
			if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "3" {
				t.Fatalf("after the failed move: %q, %v; want 3", got, err)
			}
			// Its node and the target still serve the other objects.
			for _, n := range []int{src, dst} {
				if err := c.nodes[n].Ready(); err != nil {
					t.Fatalf("node %d not ready after the failed move: %v", n, err)
				}
			}
			ctl.mu.Lock()
			ctl.modes[id] = behave
			ctl.mu.Unlock()
			res = outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
			if res.Outcome != Moved {
				t.Fatalf("second move: %v (%s %s), want moved", res.Outcome, res.Reason, res.Detail)
			}
			if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "3" {
				t.Fatalf("after the second move: %q, %v; want 3", got, err)
			}
		})
	}
}

const blockingType = "test.blocking"

// blockingObj counts its messages; "block" waits for the test's release,
// "block until done" for its turn context to end (or the release). ctx is
// the blocked turn's context (set before started closes), cause what
// ended it.
type blockingObj struct {
	n       int
	started chan struct{}
	release chan struct{}
	ctx     context.Context
	cause   chan error
}

func (o *blockingObj) Receive(t *spot.Turn, env spot.Envelope) error {
	switch string(env.Body) {
	case "get":
		return t.Reply([]byte(strconv.Itoa(o.n)))
	case "block":
		o.ctx = t.Context()
		close(o.started)
		<-o.release
	case "block until done":
		o.ctx = t.Context()
		close(o.started)
		select {
		case <-o.ctx.Done():
			o.cause <- context.Cause(o.ctx)
		case <-o.release:
			o.cause <- errors.New("released by the test: the turn's context never ended")
		}
	}
	o.n++
	if env.Kind == spot.Request {
		return t.Reply([]byte("ok"))
	}
	return nil
}

type blockingSnapshot struct{ b *blockingObj }

func (a blockingSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	return []byte(strconv.Itoa(h.(*blockingObj).n)), nil
}

func (a blockingSnapshot) Restore(_ context.Context, _ spot.CreateRequest, state []byte) (spot.Handler, error) {
	n, err := strconv.Atoi(string(state))
	if err != nil {
		return nil, err
	}
	return &blockingObj{n: n, started: make(chan struct{}), release: make(chan struct{})}, nil
}

// A move of an object whose handler is stuck in a long turn ends at the
// move's deadline, NotMoved (deadlineExceeded): the object stays on its
// source, the turn finishes there, and what was sent meanwhile runs after
// it, in order. Before, the move waited for the turn without bound, past
// its deadline (and a drain's, holding its reservation on the target).
func TestMoveOfAnObjectInALongTurnEndsAtItsDeadline(t *testing.T) {
	obj := &blockingObj{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: blockingType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
		Snapshot: blockingSnapshot{obj},
		New:      func(context.Context, spot.CreateRequest) (spot.Handler, error) { return obj, nil }}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "blocked", blockingType)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("block")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, obj.started, "the long turn to start")
	src, dst := movePair(t, c, record.ObjectActor, "blocked")
	before := rowOf(t, c, record.ObjectActor, "blocked")
	mctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, "blocked", ref.ObjectGeneration)
	var res RelocationResult
	select {
	case o := <-moving:
		if o.err != nil {
			t.Fatalf("RelocateActor: %v", o.err)
		}
		res = o.res
	case <-time.After(20 * time.Second):
		close(obj.release)
		t.Fatal("the move did not end at its deadline while the turn ran")
	}
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonDeadline.String() {
		t.Fatalf("outcome %v (%s), want notMoved (deadlineExceeded)", res.Outcome, res.Reason)
	}
	if err := obj.ctx.Err(); err != nil {
		t.Fatalf("the move that gave up ended the running turn's context: %v", context.Cause(obj.ctx))
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("add")); err != nil {
		t.Fatal(err)
	}
	close(obj.release)
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "2" {
		t.Fatalf("after the failed move: %q, %v; want 2", got, err)
	}
	sameOwnership(t, before, rowOf(t, c, record.ObjectActor, "blocked"))
	checkOwners(t, c, record.ObjectActor, "blocked", src, before.Record.AuthorityOwnerGeneration, src)
	capAfter, rsv := capacityOf(t, f.loc)
	if rsv != 0 {
		t.Fatalf("%d relocation reservations left (capacity %v)", rsv, capAfter)
	}
}

// The §11 shutdown of a node one of whose objects is stuck in a turn ends
// within shutdown_deadline: the other steps (the sweep of its records, the
// stopped publish, the lease release) are done, and Close reports the turn
// it could not wait for (*ApplicationStuckError). Before, Close waited for the turn without bound
// (a SIGTERM'd meshnode run never exited, its lease and records kept).
func TestCloseWithAnObjectStuckInATurnEnds(t *testing.T) {
	obj := &blockingObj{started: make(chan struct{}), release: make(chan struct{})}
	defer close(obj.release)
	c, n := oneNodeInATurn(t, obj, time.Second, "stuck", "block")
	closed := make(chan error, 1)
	var err error
	go func() { closed <- n.Close(context.Background()) }()
	select {
	case err = <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while a turn was stuck")
	}
	var st *ApplicationStuckError
	if !errors.As(err, &st) || strings.Join(st.Turns, ",") != "actor stuck" || st.Calls {
		t.Fatalf("Close = %v, want an *ApplicationStuckError naming actor stuck", err)
	}
	var inc *ShutdownIncompleteError
	if errors.As(err, &inc) {
		t.Fatalf("store steps not done: %v", inc)
	}
	if row := rowOf(t, c, record.ObjectActor, "stuck"); row.Found {
		t.Fatalf("the stuck object's record was not swept: %+v", row.Record)
	}
}

// oneNodeInATurn starts one node (shutdown_deadline deadline, no drain
// on shutdown) whose actor id, a blockingObj, runs the turn of msg.
func oneNodeInATurn(t *testing.T, obj *blockingObj, deadline time.Duration, id, msg string) (*cluster, *Node) {
	t.Helper()
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: blockingType, Kind: spot.KindActor, Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return obj, nil }}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 1, func(_ int, cfg *config.Config) {
		cfg.ShutdownDeadline = deadline
		cfg.Relocation.DrainOnShutdown = false
	})
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, id, blockingType)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.m(0).SendActor(ctx, ref, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, obj.started, "the turn of "+msg+" to start")
	return c, c.nodes[0]
}

// A turn waiting on its context (a slow call made with t.Context()) ends
// when its node closes: the shutdown closes the objects, ending their turn
// contexts (cause spot.ErrRuntimeDown), and Close reports nothing stuck.
// Before, the turn context was context.Background(): the turn waited on,
// and Close reported it stuck.
func TestCloseEndsTheContextOfARunningTurn(t *testing.T) {
	obj := &blockingObj{started: make(chan struct{}), release: make(chan struct{}), cause: make(chan error, 1)}
	defer close(obj.release)
	_, n := oneNodeInATurn(t, obj, 5*time.Second, "waiting", "block until done")
	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v, want nil (the turn returned when its context ended)", err)
	}
	if cause := <-obj.cause; !errors.Is(cause, spot.ErrRuntimeDown) {
		t.Fatalf("the turn's context ended with %v, want spot.ErrRuntimeDown", cause)
	}
}

// The same for a factory that does not return (it ignores its context):
// the node's Close still ends within shutdown_deadline, its store steps
// done, and reports the call it did not wait for. Before, Close waited for
// the factory without bound.
func TestCloseWithAFactoryStuckInNewEnds(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	var once sync.Once
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: blockingType, Kind: spot.KindActor, Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			once.Do(func() { close(started) })
			<-release
			return &blockingObj{}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 1, func(_ int, cfg *config.Config) {
		cfg.ShutdownDeadline = time.Second
		cfg.Relocation.DrainOnShutdown = false
	})
	n := c.nodes[0]
	cctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	created := make(chan error, 1)
	go func() {
		_, err := c.m(0).CreateActor(cctx, "never", blockingType)
		created <- err
	}()
	waitClosed(t, started, "the factory to start")
	closed := make(chan error, 1)
	go func() { closed <- n.Close(context.Background()) }()
	var err error
	select {
	case err = <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return while a factory was stuck")
	}
	var st *ApplicationStuckError
	if !errors.As(err, &st) || !st.Calls || len(st.Turns) != 0 {
		t.Fatalf("Close = %v, want an *ApplicationStuckError naming a call into the application", err)
	}
	if len(st.InCalls) != 1 || !strings.HasPrefix(st.InCalls[0], "New of actor never (running ") {
		t.Fatalf("Close = %v: calls %q, want the factory's New of actor never named", err, st.InCalls)
	}
	var inc *ShutdownIncompleteError
	if errors.As(err, &inc) {
		t.Fatalf("store steps not done: %v", inc)
	}
	if !n.obj.gos.Closed() {
		t.Fatal("the node's worker pool is still open after Close: its idle workers wait for the stuck call")
	}
	// The creation ran its factory in this process's own call (the node is
	// its own target): it returns once the factory does, at the release.
	_ = created
}

const lateType = "test.late"

// lateObj's "block" request waits for the test's release, then does what
// a turn may do through the node, recording the errors.
type lateObj struct {
	started, release, done chan struct{}
	m                      *Manager
	reply, timer, create   error
}

func (o *lateObj) Receive(t *spot.Turn, env spot.Envelope) error {
	close(o.started)
	<-o.release
	defer close(o.done)
	o.reply = t.Reply([]byte("late"))
	o.timer = t.SetTimer("tick", time.Millisecond, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, o.create = o.m.CreateActor(ctx, "another", lateType)
	return nil
}

// A stuck turn that returns after its node's Close gave up on it finds the
// node closed: its reply goes nowhere (the requester on another node is
// not answered by a closed node), SetTimer fails spot.ErrRuntimeDown, a
// Manager call fails ErrClosed — and nothing panics on the closed
// runtime, transport or stores (docs/OBJECTS.md §1, "Shutdown").
func TestStuckTurnReturningAfterCloseFindsTheNodeClosed(t *testing.T) {
	obj := &lateObj{started: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: lateType, Kind: spot.KindActor, Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return obj, nil }}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 2, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.ShutdownDeadline = time.Second
		cfg.Relocation.DrainOnShutdown = false
	})
	obj.m = c.m(1)
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "late", lateType)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = c.m(0).RequestActor(rctx, ref, []byte("block")) }()
	waitClosed(t, obj.started, "the stuck turn to start")
	var st *ApplicationStuckError
	if err := c.nodes[1].Close(ctx); !errors.As(err, &st) {
		t.Fatalf("Close = %v, want an *ApplicationStuckError", err)
	}
	close(obj.release)
	waitClosed(t, obj.done, "the late turn to return")
	if obj.reply != nil || !errors.Is(obj.timer, spot.ErrRuntimeDown) || !errors.Is(obj.create, ErrClosed) {
		t.Fatalf("late turn: Reply %v, SetTimer %v, CreateActor %v; want nil, spot.ErrRuntimeDown, ErrClosed",
			obj.reply, obj.timer, obj.create)
	}
}

// A Close whose context has already ended (a caller passing its cancelled
// signal context) on a node where no application code runs reports no
// *ApplicationStuckError: there was nothing to wait for. Before, the wait
// for orders in flight lost the race to the ended context every time and
// Close reported "a creation or move was still in a call into the
// application", logged at ERROR, though none was.
func TestCloseWithAnEndedContextReportsNothingStuckWhenNothingRuns(t *testing.T) {
	f := newFixture(t)
	c := newClusterOn(t, f, nil, 1, func(_ int, cfg *config.Config) {
		cfg.Relocation.DrainOnShutdown = false
	})
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.m(0).CreateActor(ctx, "idle", testActorType); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	err := c.nodes[0].Close(ended)
	var st *ApplicationStuckError
	if errors.As(err, &st) {
		t.Fatalf("Close = %v, want no *ApplicationStuckError", err)
	}
}
