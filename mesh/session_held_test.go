package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// A bound Session's route switch waits while a move keeps its messages on
// purpose at the previous owner. The Session sends m1..m3 one-way while the
// Actor's move is held — between relay-ready and the relay (the messages
// enter the source's ingress hold), or between the relay and the cutover
// (they wait there for the cutover) — and the target commits on its
// CutoverGrace: its command 44 accounts for none of them, so the Session's
// switch waits for the command 50 of m3, which cannot come while the move
// holds. The source tells the Session that its messages are held
// (barrier-held notices, as to a held barrier's sender) and the Session
// keeps waiting for many of its switch slices (barrierWait, 12 s; here
// shortened); r1..r3 then run after m1..m3. Before 2026-12-07 it switched
// after one slice and r1..r3 ran at the open target ahead of m1..m3
// (docs/RELOCATION.md §6). The same with the Session on the source node
// (its messages enter the hold directly; the notice is local).
//
// And a holder that stops telling (stuck, say) does not hang the Session:
// one slice after its last notice the Session switches anyway, with its
// messages still held (they then run after r1..r3: the known cost). A
// Session node of an older version (its admission does not list
// meshnode-barrier-held-v1) is told nothing and switches after one slice,
// as before.
func TestSessionSwitchWaitsWhileItsMessagesAreHeld(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source bool   // the Session is on the source node
		holdAt string // where the source's move stalls
		mode   heldMode
	}{
		{"client node, held by the move", false, stepSourceReady, heldTold},
		{"client node, held in the cutover", false, stepSourceCutover, heldTold},
		{"source node, held by the move", true, stepSourceReady, heldTold},
		{"client node, the holder stops telling", false, stepSourceReady, heldStops},
		{"client node of an older version", false, stepSourceReady, heldOlder},
	} {
		t.Run(tc.name, func(t *testing.T) { sessionHeldKeepsOrder(t, tc.source, tc.holdAt, tc.mode) })
	}
}

// heldMode is what the Session hears while its messages are held.
type heldMode int

const (
	heldTold  heldMode = iota // a notice every heldEvery while they are held
	heldStops                 // notices, then none while they are still held
	heldOlder                 // none: the Session's node does not list the capability
)

func sessionHeldKeepsOrder(t *testing.T, fromSource bool, holdAt string, mode heldMode) {
	kept := protocolCapabilities
	t.Cleanup(func() { protocolCapabilities = kept })
	const id = "session-held"
	hm := newHeldMove(t, id, fromSource, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		protocolCapabilities = kept // Start reads it: the client of an older version starts without
		if i == 0 && mode == heldOlder {
			protocolCapabilities = nil
		}
	})
	protocolCapabilities = kept
	c, ctx, ref, s, src, dst, from := hm.c, hm.ctx, hm.ref, hm.s, hm.src, hm.dst, hm.from
	const lastHeld = 4 // m3's sequence

	// The Session cuts its switch's wait after a slice without news; the
	// source tells it every heldEvery.
	const slice, heldEvery, heldNotices, stopAfter = 200 * time.Millisecond, 20 * time.Millisecond, 50, 25
	c.nodes[from].obj.barrierEvery = slice
	c.nodes[src].obj.barrierHeldEvery = heldEvery

	g := hm.gate(t)
	hooks, ends, atHold, goOn, proceed := g.hooks, g.ends, g.atHold, g.goOn, g.proceed
	notices := make(chan struct{}, heldNotices)
	var stopTelling, released atomic.Bool
	var asked atomic.Int64
	hooks[src].sessionHeldSend = func(string) bool {
		asked.Add(1)
		return !stopTelling.Load()
	}
	hooks[from].relocationStep = func(got, step string) {
		switch {
		case got != id:
		case step == holdAt && from == src:
			close(atHold)
			<-goOn
		case step == stepSessionHeldNotice:
			select {
			case notices <- struct{}{}:
			default:
			}
		}
	}
	if from != src {
		hooks[src].relocationStep = func(got, step string) {
			if got == id && step == holdAt {
				close(atHold)
				<-goOn
			}
		}
	}
	// Once the move goes on, the Session switches when the target says m3
	// arrived (a fresh commit for a relay, a command 50 for a pass-on) or
	// one slice after the last notice, whichever comes first; the held
	// messages are relayed or passed on at once. This gate stands for that
	// slice (12 s) being far longer than their trip
	// to the new owner, which a 200 ms one is not on a loaded machine:
	// the Session's first message straight to it waits until m3 is
	// admitted there. What the test checks is that nothing went out while
	// the move held.
	hooks[from].beforeRemoteSend = func(got string) error {
		if got != id || !released.Load() {
			return nil
		}
		deadline := time.Now().Add(30 * time.Second)
		for c.nodes[dst].obj.hostedSessions(actorKey(id))[string(s.rid)] < lastHeld {
			if time.Now().After(deadline) {
				return errors.New("test: the held messages never reached the new owner")
			}
			time.Sleep(time.Millisecond)
		}
		released.Store(false) // once: later sends (a closing node's own barriers) go on
		return nil
	}
	for i, h := range hooks {
		c.nodes[i].obj.hooks.Store(h)
	}

	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atHold, "the source's move held at "+holdAt)
	sent := hm.sendAroundGrace(t, ends)
	// switched waits for r1..r3 to return, the Session's route on the
	// target.
	switched := func(what string) {
		t.Helper()
		hm.switched(t, sent, what)
	}
	// Many slices pass with m1..m3 held: counted in the notices the
	// Session took, not in time slept.
	want := heldNotices
	switch mode {
	case heldStops:
		want = stopAfter
	case heldOlder:
		want = 0
	}
	for n := 0; n < want; {
		select {
		case <-notices:
			n++
		case err := <-sent:
			t.Fatalf("the Session switched after %d held notices (%d slices) with m1..m3 still held (err %v)",
				n, n*int(heldEvery)/int(slice), err)
		case <-time.After(30 * time.Second):
			t.Fatal("the Session neither switched nor was told its messages are held")
		}
	}
	if mode != heldTold {
		stopTelling.Store(true)
		// One slice after the last notice, the move still holding.
		switched("the Session kept waiting after the holder stopped telling")
	}
	if n := asked.Load(); mode == heldOlder && n != 0 {
		t.Fatalf("the source sent %d held notices to a node that does not list %s", n, router.CapabilityBarrierHeld)
	}
	released.Store(true)
	proceed()
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("the move ended %v (%s), want moved", res.Outcome, res.Reason)
	}
	if mode != heldTold {
		// Switched with m1..m3 still held: they ran after r1..r3.
		wantRan(t, ctx, c, ref, "a,r1,r2,r3,m1,m2,m3")
		return
	}
	switched("the Session's requests did not return")
	wantRan(t, ctx, c, ref, "a,m1,m2,m3,r1,r2,r3")
}

// A Session's message that reaches a previous owner in its cutover but is
// refused there — more than cutoverWaitMax messages already wait for
// cutovers on that node — is held nowhere: the node does not tell its
// Session that it holds it. Before, it was recorded as held all the same
// (after the refusal), and the Session's pending switch kept waiting for a
// one-way message that had been dropped, as long as the cutover lasted.
// Two Sessions on the client: A's request comes while the source is over
// the bound and is refused; B's message comes behind it on the same link
// once the bound is back, waits, and is recorded — by then the source's
// reader is done with A's.
func TestSessionMessageRefusedAtACutoverIsNotHeld(t *testing.T) {
	f := newFixture(t)
	c, _ := failClusterOf(t, f, f.loc, 3)
	ctx := ctxT(t, 60*time.Second)
	const id = "session-refused-at-cutover"
	ref := recorder(t, ctx, c, id, failPreserveType)
	src, dst := movePair(t, c, record.ObjectActor, id)
	bind := func() *Session {
		s, err := c.m(0).BindSession(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, b := bind(), bind()
	atCutover, proceed := holdAtStep(t, c, src, id, stepSourceCutover)
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atCutover, "the source's move held in its cutover")

	o := c.nodes[src].obj
	o.mu.Lock()
	o.cutoverWaiting += cutoverWaitMax // full: the next arrival to wait is refused
	o.mu.Unlock()
	// A request, so that its refusal comes back: one-way, it would be
	// dropped and counted only.
	if _, err := a.Request(ctx, []byte("a1")); err == nil {
		t.Fatal("A's request was answered, want refused (too many wait for cutovers)")
	}
	o.mu.Lock()
	o.cutoverWaiting -= cutoverWaitMax
	o.mu.Unlock()
	// The source reads the link in order: once B's b1, sent behind A's
	// request, is recorded, the source is done with A's.
	if err := b.Send(ctx, []byte("b1")); err != nil {
		t.Fatal(err)
	}
	key := spot.Key{ID: id}
	waitUntil(t, "B's message recorded as held", func() bool { return o.heldSessionSeqs(key)[string(b.rid)] > 0 })
	if seq, ok := o.heldSessionSeqs(key)[string(a.rid)]; ok {
		t.Fatalf("A's message %d, refused at the source, is recorded as held there: its Session is told so", seq)
	}
	proceed()
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("the move ended %v (%s), want moved", res.Outcome, res.Reason)
	}
}

// heldSessionSeqs is, for the object key, the sequence of each Session's
// latest message a move here holds on purpose (tests).
func (o *objects) heldSessionSeqs(key spot.Key) map[string]uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]uint64{}
	if h := o.hosted[key]; h != nil {
		for k, hs := range h.heldSessions {
			out[k] = hs.m.op.Low
		}
	}
	return out
}

// heldMove is the scene of the tests of a Session whose messages a move
// holds: a client and two servers, the Actor id on server src (dst is the
// other), and a Session bound to it on node from — the client, or src —
// that sent "a" (sequence 1: its binding moves with the Actor).
type heldMove struct {
	c              *cluster
	ctx            context.Context
	ref            ActorRef
	s              *Session
	src, dst, from int
}

// newHeldMove sets the scene up; edit is applied to each node's
// configuration (clientRole0 or one that calls it).
func newHeldMove(t *testing.T, id string, fromSource bool, edit func(int, *config.Config)) heldMove {
	t.Helper()
	f := newFixture(t)
	hm := heldMove{ctx: ctxT(t, 90*time.Second)}
	hm.c, _ = failClusterWith(t, f, f.loc, 3, edit)
	hm.ref = recorder(t, hm.ctx, hm.c, id, failPreserveType)
	hm.src, hm.dst = movePair(t, hm.c, record.ObjectActor, id)
	if fromSource {
		hm.from = hm.src
	}
	s, err := hm.c.m(hm.from).BindSession(hm.ctx, hm.ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Request(hm.ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	hm.s = s
	return hm
}

// sendAroundGrace sends m1..m3 one-way on the Session's route while the
// source's move holds them, waits for the target to commit on its grace
// (ends: its arrivals) and the Session's switch to wait for m3, and then
// sends r1..r3 as requests from another goroutine: their outcome comes on
// the channel.
func (hm heldMove) sendAroundGrace(t *testing.T, ends <-chan arrivalEnd) <-chan error {
	t.Helper()
	for i := 1; i <= 3; i++ {
		if err := hm.s.Send(hm.ctx, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if e := waitEnd(t, ends, hm.ref.ActorID); e.state != relocation.TgtOwner {
		t.Fatalf("the target attempt ended %s/%s, want owner (its grace commit)", e.state, e.failure)
	}
	waitUntil(t, "the Session's switch to wait for m3", hm.s.pendingSwitch)
	sent := make(chan error, 1)
	go func() {
		for i := 1; i <= 3; i++ {
			if _, err := hm.s.Request(hm.ctx, []byte(fmt.Sprintf("r%d", i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	return sent
}

// switched waits for r1..r3 (sent) to return, failing with what if they do
// not within 30 s, and checks the Session's route is on the target.
func (hm heldMove) switched(t *testing.T, sent <-chan error, what string) {
	t.Helper()
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
	if got := hm.c.indexOf(hm.s.Actor().NodeRID); got != hm.dst {
		t.Fatalf("the Session's route is on node %d, want the target %d", got, hm.dst)
	}
}

// heldGate is the hooks of a heldMove's nodes (one for each; from may be
// src), the target's arrivals ends, and a gate for the move: the hook that
// holds it closes atHold and waits for goOn, which proceed closes (at the
// test's end at the latest: a failing test must not leave the move
// blocked).
type heldGate struct {
	hooks   map[int]*testHooks
	ends    <-chan arrivalEnd
	atHold  chan struct{}
	goOn    <-chan struct{}
	proceed func()
}

func (hm heldMove) gate(t *testing.T) heldGate {
	g := heldGate{hooks: map[int]*testHooks{hm.src: {}, hm.dst: {}, hm.from: {}}, atHold: make(chan struct{})}
	g.ends = watchArrivals(g.hooks[hm.dst])
	goOn := make(chan struct{})
	var resume sync.Once
	g.goOn, g.proceed = goOn, func() { resume.Do(func() { close(goOn) }) }
	t.Cleanup(g.proceed)
	return g
}

// moveHeldAtReady starts the move of hm's Actor with g's hooks (the
// source's held at relay-ready until proceed) and waits until it is held
// there; it returns the move's outcome.
func (g heldGate) moveHeldAtReady(t *testing.T, hm heldMove) <-chan relocateOutcome {
	t.Helper()
	id := hm.ref.ActorID
	g.hooks[hm.src].relocationStep = func(got, step string) {
		if got == id && step == stepSourceReady {
			close(g.atHold)
			<-g.goOn
		}
	}
	for i, h := range g.hooks {
		hm.c.nodes[i].obj.hooks.Store(h)
	}
	moving := relocateAsync(hm.ctx, hm.c, hm.src, hm.dst, record.ObjectActor, id, hm.ref.ObjectGeneration)
	waitClosed(t, g.atHold, "the source's move held at relay-ready")
	return moving
}
