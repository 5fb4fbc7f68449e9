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
	f := newFixture(t)
	kept := protocolCapabilities
	t.Cleanup(func() { protocolCapabilities = kept })
	c, _ := failClusterWith(t, f, f.loc, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		protocolCapabilities = kept // Start reads it: the client of an older version starts without
		if i == 0 && mode == heldOlder {
			protocolCapabilities = nil
		}
	})
	protocolCapabilities = kept
	ctx := ctxT(t, 60*time.Second)
	const id = "session-held"
	ref := recorder(t, ctx, c, id, failPreserveType)
	src, dst := movePair(t, c, record.ObjectActor, id)
	from := 0
	if fromSource {
		from = src
	}
	s, err := c.m(from).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Request(ctx, []byte("a")); err != nil { // sequence 1: the binding moves with the Actor
		t.Fatal(err)
	}
	const lastHeld = 4 // m3's sequence

	// The Session cuts its switch's wait after a slice without news; the
	// source tells it every heldEvery.
	const slice, heldEvery, heldNotices, stopAfter = 200 * time.Millisecond, 20 * time.Millisecond, 50, 25
	c.nodes[from].obj.barrierEvery = slice
	c.nodes[src].obj.barrierHeldEvery = heldEvery

	hooks := map[int]*testHooks{src: {}, dst: {}, from: {}}
	ends := watchArrivals(hooks[dst])
	atHold, goOn := make(chan struct{}), make(chan struct{})
	var resume sync.Once
	proceed := func() { resume.Do(func() { close(goOn) }) }
	defer proceed() // a failing test must not leave the move blocked
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
	// Once the move goes on, the Session switches one slice after the last
	// notice; the held messages are relayed or passed on at once. This
	// gate stands for that slice (12 s) being far longer than their trip
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
	for i := 1; i <= 3; i++ { // on the Session's route: held by the source's move
		if err := s.Send(ctx, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if e := waitEnd(t, ends, id); e.state != relocation.TgtOwner {
		t.Fatalf("the target attempt ended %s/%s, want owner (its grace commit)", e.state, e.failure)
	}
	waitUntil(t, "the Session's switch to wait for m3", s.pendingSwitch)
	sent := make(chan error, 1)
	go func() {
		for i := 1; i <= 3; i++ {
			if _, err := s.Request(ctx, []byte(fmt.Sprintf("r%d", i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	// switched waits for r1..r3 to return, the Session's route on the
	// target.
	switched := func(what string) {
		t.Helper()
		select {
		case err := <-sent:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal(what)
		}
		if got := c.indexOf(s.Actor().NodeRID); got != dst {
			t.Fatalf("the Session's route is on node %d, want the target %d", got, dst)
		}
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
	atCutover, goOn := make(chan struct{}), make(chan struct{})
	var resume sync.Once
	proceed := func() { resume.Do(func() { close(goOn) }) }
	defer proceed()
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got == id && step == stepSourceCutover {
			close(atCutover)
			<-goOn
		}
	}})
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
