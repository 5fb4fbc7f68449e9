package mesh

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Close returns with no goroutine of the node left (docs/EMBEDDING.md §10),
// also those the node starts in the background while a move holds what
// reaches an object: telling a Session its messages are held
// (tellSessionsHeld) or a barrier's sender that its barrier is (everyHeld),
// a barrier waiting for the move's ingress hold (holdBarrier), messages
// waiting for the object's cutover (runCutoverQueue), and the fresh
// command 44 commits after a move committed on its grace takes in a late
// relay (tellLateRelay); and those of Instance Spots: an activation
// queue's goroutine after its last activation (it runs on, counted by the
// activation's order) and the end of a first message (firstMessageDone).
// Each is put in its state on an otherwise idle
// node and is still there when the node halts. Until 2026-12-07 nothing
// waited for them: they ended on their own once they saw the halt, but
// Close could return before — made certain here by holding each, past the
// halt, until Close has stopped the objects, unless Close waits for the
// node's work (o.work: creations, closes and moves, and now these). A
// goroutine held that way is still there when the objects are stopped; one
// Close waits for ends at the halt, and none is left by then.
func TestCloseLeavesNoBackgroundGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   string // the goroutine's function, as its stack frame begins
		// start sets hold to be called in the goroutine (hooks) and
		// starts it on o.
		start func(o *objects, hooks *testHooks, hold func())
		// early: the goroutine calls hold before the halt too (else only
		// after it, having waited for it from its start on).
		early bool
	}{
		{"held session notices", "(*objects).tellSessionsHeld(", startSessionsHeld, true},
		{"late relay commits", "(*objects).tellLateRelay(", startLateRelay, true},
		{"held barrier notices", "(*objects).everyHeld.func", func(o *objects, hooks *testHooks, hold func()) {
			o.hooks.Store(hooks)
			o.everyHeld(hold) // not stopped: the barrier is still held when the node halts
		}, true},
		{"barrier waiting for a move's hold", "(*objects).holdBarrier.func", func(o *objects, hooks *testHooks, hold func()) {
			o.hooks.Store(hooks)
			o.holdBarrier(make(chan struct{}), hold) // the hold is never let go of
		}, false},
		{"messages waiting for a cutover", "(*objects).runCutoverQueue(", func(o *objects, hooks *testHooks, hold func()) {
			o.hooks.Store(hooks)
			w := cutoverWaiter{key: cutoverWaitKey{obj: actorKey("close-cutover-wait")},
				admit: func() <-chan struct{} { hold(); return nil }, refuse: func(error) {}}
			o.waitCutover(w, make(chan struct{})) // the cutover never comes
		}, false},
		{"end of an Instance Spot's first message", "(*objects).firstMessageDone(", func(o *objects, hooks *testHooks, hold func()) {
			hooks.activationStep = func(_, step string) {
				if step == stepFirstMessageDone {
					hold()
				}
			}
			o.hooks.Store(hooks)
			o.endFirstMessage("close-first-message", "demo.instance", 1, "ref")
		}, true},
		// Matched by run, not by the goroutine's own function: that frame stays
		// on the stack while its deferred Done runs and until it exits, a moment
		// after Close's wait (a fresh-clone CI run caught it there once).
		{"activation queue after its last activation", "(*activations).run(", startActivationQueue, true},
		{"moved request's answer waiting for room", "(*objects).sendPortableReply.func", func(o *objects, hooks *testHooks, hold func()) {
			hooks.portableReplySend = func(wait bool) error {
				if wait {
					hold()
				}
				return transport.ErrBackpressure
			}
			o.hooks.Store(hooks)
			o.sendPortableReply(replyRoute{fam: familyActor, gen: 1, corr: 1, rid: []byte{0xee}}, replyRecord(familyActor, 1, nil, nil))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, nil)
			n := c.nodes[0]
			o := n.obj
			running, objectsStopped := make(chan struct{}), make(chan struct{})
			var first sync.Once
			hold := func() {
				first.Do(func() { close(running) })
				<-o.halt.Done()
				if o.work.background() == 0 && !o.work.busy() { // not counted in o.work: Close does not wait for it
					<-objectsStopped // stands for a goroutine slower than Close
				}
			}
			// Counted from what runs there before: a node an earlier test
			// crashed (crash) never halts, nor do such goroutines of it.
			before := goroutinesIn(tc.fn)
			left := -1
			hooks := &testHooks{closeStep: func(step string) {
				if step == closeObjectsStopped {
					left = goroutinesIn(tc.fn) - before
					close(objectsStopped)
				}
			}}
			tc.start(o, hooks, hold)
			if tc.early {
				waitClosed(t, running, tc.name+": its goroutine running")
			}
			waitUntil(t, tc.name+": its goroutine seen in "+tc.fn, func() bool { return goroutinesIn(tc.fn) == before+1 })
			if err := n.Close(ctxT(t, 30*time.Second)); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if left != 0 {
				t.Fatalf("%d goroutines in %s still running once Close had stopped the objects, want none", left, tc.fn)
			}
			if got := goroutinesIn(tc.fn) - before; got != 0 {
				t.Fatalf("%d goroutines in %s after Close returned, want none", got, tc.fn)
			}
		})
	}
}

// startActivationQueue queues an activation (an order, counted as one)
// on o's activation queue of an id, and behind it a turn counted by it
// (activations.after: a message waiting behind the activation) that
// holds: the queue's goroutine runs on after the activation's own turn.
func startActivationQueue(o *objects, hooks *testHooks, hold func()) {
	const id = "close-activation-queue"
	o.hooks.Store(hooks)
	if err := o.begin(); err != nil {
		panic(err)
	}
	queued := make(chan struct{})
	o.activating.enqueue(id, func() { <-queued }, o.work.Done)
	if !o.activating.after(id, hold) {
		panic("the activation queue ended before its activation ran")
	}
	close(queued)
}

// startSessionsHeld records a Session's message as held by a move of a
// (stand-in) Actor on o, which starts telling the Session so; the message
// came from o's own run, so it is told (hooks.sessionHeldSend: hold, then
// nothing sent).
func startSessionsHeld(o *objects, hooks *testHooks, hold func()) {
	o.barrierHeldEvery = time.Millisecond
	hooks.sessionHeldSend = func(string) bool {
		hold()
		return false
	}
	o.hooks.Store(hooks)
	key := spot.Key{ID: "close-held-session"}
	h := &hosted{kind: record.ObjectActor, state: hostMoving, holding: make(chan struct{}), objectGeneration: 1, ownerGeneration: 1}
	m := inMessage{fam: familyActor, id: key.ID, gen: 1, op: router.OperationID{High: 1, Low: 2}}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hosted[key] = h
	o.holdSessionLocked(h, &sessionTag{rid: []byte("session-1"), bindGen: 1, seq: 2}, m, origin{rid: o.n.run.rid, gen: o.n.run.lifecycleGeneration})
}

// startLateRelay opens a (stand-in) Actor on o as a move committed on its
// grace would, and has its source relay a Session message it had not
// accounted for: o owes the Session a fresh commit (hooks.relocationStep
// at stepSessionLateCommit: hold once it is sent).
func startLateRelay(o *objects, hooks *testHooks, hold func()) {
	const id = "close-late-relay"
	hooks.relocationStep = func(got, step string) {
		if got == id && step == stepSessionLateCommit {
			hold()
		}
	}
	o.hooks.Store(hooks)
	src := chunk.SourceFence{OwnerID: "source", LeaseGeneration: 1, NodeRID: "source-node", NodeGeneration: 1}
	h := &hosted{kind: record.ObjectActor, state: hostServing, objectGeneration: 1, ownerGeneration: 2,
		sessions: map[string]*sessionBinding{"session-1": {bindGen: 1, highest: 1}}}
	a := &arrival{o: o, kind: record.ObjectActor, key: spot.Key{ID: id}, h: h,
		bind: chunk.Binding{Relocation: router.RelocationID{Low: 1}, TargetAttempt: 1, Source: src}}
	a.prep.Object.ObjectID = id
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hosted[a.key] = h
	o.expectLateRelayLocked(a)
	h.sessions["session-1"].highest = 2 // the relayed message, admitted
	o.lateRelayedLocked(h, &sessionTag{rid: []byte("session-1"), bindGen: 1, seq: 2},
		transport.PeerInfo{RID: []byte(src.NodeRID), LifecycleGeneration: src.NodeGeneration}, 0)
}

// goroutinesIn counts the goroutines whose stack has a frame of the mesh
// function that fn begins ("(*objects).tellLateRelay(", "(*objects).everyHeld.func").
func goroutinesIn(fn string) int { return goroutinesWith("mesh." + fn) }

// goroutinesWith counts the goroutines whose stack has a frame that begins
// with frame, package included ("gopool.(*Pool).worker(").
func goroutinesWith(frame string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(frame)) {
			count++
		}
	}
	return count
}

// A context that ends when the node stops (stopContext: the discovery
// loop's, re-adoptions') takes no goroutine, which could outlive Close.
// Until 2026-12-07 each had one, waiting for the node's stop or its own
// cancel: the discovery loop cancelled its own as it ended, so that
// goroutine ended after the loop had — after Close had waited for it, and
// maybe after Close had returned.
func TestStopContextTakesNoGoroutine(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[0]
	const fn = "(*Node).stopContext"
	ctx, cancel := n.stopContext()
	defer cancel()
	if got := goroutinesIn(fn); got != 0 {
		t.Fatalf("%d goroutines in %s with one stop context open, want none", got, fn)
	}
	if err := n.Close(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the stop context did not end with Close")
	}
	if got := goroutinesIn(fn); got != 0 {
		t.Fatalf("%d goroutines in %s after Close returned, want none", got, fn)
	}
}

// A goroutine of the node's own (goWork) still running when Close's wait
// for the work under way ends is no application code: Close does not
// report it as a call into the application (ApplicationStuckError.Calls).
// It ends at the halt, but not always at once — a message waiting for a
// cutover that is passed on after it may wait for room on the link to the
// new owner (followSendWait, not bound to the halt), longer than the wait
// when shutdown_deadline is short — and a caller's context may be done on
// entry, when no goroutine had time to see the halt. Until 2026-12-07
// the work count held them with the orders in flight, and either made
// Close blame the application for the node's own goroutine. Here one of
// them waits until Close has stopped the objects (standing for the
// pass-on); the node has no order in flight.
func TestCloseBlamesNoApplicationForTheNodesGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(t *testing.T) context.Context
	}{
		{"context done on entry", func(*testing.T) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
		{"the deadline's share spent", func(t *testing.T) context.Context { return ctxT(t, 30*time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, func(_ int, cfg *config.Config) {
				cfg.ShutdownDeadline = time.Second
				cfg.Relocation.DrainOnShutdown = false
			})
			n := c.nodes[0]
			o := n.obj
			running, objectsStopped := make(chan struct{}), make(chan struct{})
			var first sync.Once
			o.hooks.Store(&testHooks{closeStep: func(step string) {
				if step == closeObjectsStopped {
					close(objectsStopped)
				}
			}})
			stop := o.everyHeld(func() {
				first.Do(func() { close(running) })
				<-objectsStopped
			})
			defer stop()
			waitClosed(t, running, "the node's goroutine running")
			err := n.Close(tc.ctx(t))
			if st := (*ApplicationStuckError)(nil); errors.As(err, &st) {
				t.Fatalf("Close = %v: the node's own goroutine reported as application code", err)
			}
		})
	}
}

// Close returns with none of the target pool's idle workers left
// (objects.gos, internal/gopool: the reads, commits and completions of
// moves and creations on this node run there, and a worker waits for more
// after any of them). Until 2026-12-07 Close ended them (gopool Close)
// without waiting for them. An idle worker ends at once, so this shows the
// wait only when its exit is slower than the rest of Close; the pool's own
// TestWaitEndsTheIdleWorkers shows it every time. (A worker still running
// a function at the halt — an owner CAS the store has not answered — is
// not waited for: its function is bounded by its own context.)
func TestCloseLeavesNoTargetPoolWorker(t *testing.T) {
	const worker = "gopool.(*Pool).worker("
	c := newCluster(t, 1, nil)
	n := c.nodes[0]
	o := n.obj
	// Counted from what runs there before: a node an earlier test
	// crashed (crash) never closes its pool.
	before := goroutinesWith(worker)
	left := -1
	o.hooks.Store(&testHooks{closeStep: func(step string) {
		if step == closeObjectsStopped {
			left = goroutinesWith(worker) - before
		}
	}})
	ran := make(chan struct{})
	o.gos.Go(func() { close(ran) })
	waitClosed(t, ran, "a function on the pool")
	waitUntil(t, "its worker seen", func() bool { return goroutinesWith(worker) == before+1 })
	if err := n.Close(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left != 0 {
		t.Fatalf("%d target pool workers still running once Close had stopped the objects, want none", left)
	}
	if got := goroutinesWith(worker) - before; got != 0 {
		t.Fatalf("%d target pool workers after Close returned, want none", got)
	}
}

// A host command given a Stop channel (Relocate, Drain) returns with the
// goroutine watching that channel (stopWith) ended: a Drain closes the
// node, and then none of its goroutines may be left. Until 2026-12-07 the
// command only cancelled it on return, and it ended afterwards. Run with
// one P: the cancelled watcher cannot run before the caller looks, unless
// the command waited for it.
func TestHostCommandLeavesNoStopWatcher(t *testing.T) {
	const fn = "stopWith.func"
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, n *Node, opts HostRelocateOptions) error
	}{
		{"relocate", func(ctx context.Context, n *Node, opts HostRelocateOptions) error {
			_, err := n.Relocate(ctx, opts)
			return err
		}},
		{"drain", func(ctx context.Context, n *Node, opts HostRelocateOptions) error {
			_, err := n.Drain(ctx, opts)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, nil)
			n := c.nodes[0]
			before := goroutinesIn(fn)
			stop := make(chan struct{})
			defer close(stop)
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			err := tc.run(ctxT(t, 30*time.Second), n, HostRelocateOptions{Stop: stop})
			left := goroutinesIn(fn) - before
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if left != 0 {
				t.Fatalf("%d goroutines in %s after the command returned, want none", left, fn)
			}
		})
	}
}

// Close returns with none of a running host command's workers left: a
// worker runs on after its move (it tells the command, takes the next
// object), and Relocate may run while the node closes. Until 2026-12-07 it
// was a plain goroutine; here it is held, once its move ended, past the
// halt until Close has stopped the objects, unless Close waits for it.
func TestCloseLeavesNoHostCommandWorker(t *testing.T) {
	const fn = "(*Node).hostRelocate.func"
	f := newFixture(t)
	registerSeqType(t, f) // movable
	c := newClusterOn(t, f, nil, 2, nil)
	n := c.nodes[1]
	o := n.obj
	ctx := ctxT(t, 30*time.Second)
	createUntil(t, ctx, c, "close-host", 1, 1)
	running, objectsStopped := make(chan struct{}), make(chan struct{})
	before := goroutinesIn(fn)
	left := -1
	o.hooks.Store(&testHooks{
		relocationStep: func(_, step string) {
			if step != stepHostFinish {
				return
			}
			close(running)
			<-o.halt.Done()
			if o.work.background() == 0 && !o.work.busy() { // not counted: Close does not wait for it
				<-objectsStopped
			}
		},
		closeStep: func(step string) {
			if step == closeObjectsStopped {
				left = goroutinesIn(fn) - before
				close(objectsStopped)
			}
		},
	})
	relocated := make(chan error, 1)
	go func() {
		_, err := n.Relocate(ctx, HostRelocateOptions{})
		relocated <- err
	}()
	select {
	case <-running:
	case err := <-relocated:
		t.Fatalf("Relocate ended before its worker's move did: %v", err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if left != 0 {
		t.Fatalf("%d host command workers still running once Close had stopped the objects, want none", left)
	}
	if got := goroutinesIn(fn) - before; got != 0 {
		t.Fatalf("%d host command workers after Close returned, want none", got)
	}
	if err := <-relocated; err != nil {
		t.Fatalf("Relocate: %v", err)
	}
}

// A route barrier's progress watch (watchProgress) has ended when its stop
// returns, so the barrier returns without it: until 2026-12-07 the stop
// only told it to end, and it could still run when Close had returned.
// Run with one P: the told watch cannot run before the caller looks,
// unless the stop waited for it.
func TestRouteBarrierWatchEndsWithItsStop(t *testing.T) {
	const fn = "watchProgress.func"
	before := goroutinesIn(fn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	looked := make(chan struct{})
	var once sync.Once
	stop := watchProgress(ctx, cancel, time.Hour, func() linkProgress {
		once.Do(func() { close(looked) })
		return linkProgress{up: true}
	})
	waitClosed(t, looked, "the watch running")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stop()
	if got := goroutinesIn(fn) - before; got != 0 {
		t.Fatalf("%d goroutines in %s after its stop returned, want none", got, fn)
	}
	if ctx.Err() != nil {
		t.Fatal("a stopped watch cut")
	}
}
