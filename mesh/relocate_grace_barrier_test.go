package mesh

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
)

// A sender's order is kept when the target commits on its CutoverGrace
// before the source relays its hold. The source is held between the
// target's relay-ready and its relay; a client sends m1..m3 one-way on its
// cached route (they enter the source's ingress hold); the target commits
// on the grace and opens; the client then learns the new route and sends
// r1..r3. Its route switch sends a barrier to the source, which still holds
// m1..m3 unrelayed. Until 2026-12-06 the source answered the barrier at
// once (it holds the object), the client sent r1..r3 straight to the open
// target, and the relay of m1..m3 ran after them (a demo drain met it:
// "reordered 24", each move's relayed count). Now the source answers it
// only once its hold has left: it is passed on to the target behind the
// relay.
//
// The same with the sender on the source node: it sends no barrier (its
// previous route is this node), and until 2026-12-06 its next message went
// straight to the open target on this node's own link ahead of the relay;
// now it waits for the move to let go of the object here first.
//
// And when the source keeps the barrier for many of the client's barrier
// slices — its move stalled between relay-ready and the relay (the barrier
// waits for the ingress hold), or between the relay and the cutover (the
// barrier waits for the cutover behind m1..m3, which arrived after the
// hold was relayed): nothing moves on the client's link to it, but the
// source tells the client that it keeps the barrier on purpose
// (barrier-held notices), and the client keeps waiting. Before 2026-12-06
// the client gave the source up after one slice (barrierWait, 12 s; here
// shortened) and sent r1..r3 straight to the open target ahead of m1..m3
// (docs/RELOCATION.md §7).
func TestGraceCommitKeepsTheHeldMessagesAheadOfTheRouteSwitch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source bool   // the sender is the source node itself
		holdAt string // where the source's move stalls
		long   bool   // for many of the client's barrier slices
	}{
		{"client node", false, stepSourceReady, false},
		{"source node", true, stepSourceReady, false},
		{"client node, held by the move for many slices", false, stepSourceReady, true},
		{"client node, held in the cutover for many slices", false, stepSourceCutover, true},
	} {
		t.Run(tc.name, func(t *testing.T) { graceCommitKeepsOrder(t, tc.source, tc.holdAt, tc.long) })
	}
}

func graceCommitKeepsOrder(t *testing.T, fromSource bool, holdAt string, longHold bool) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "grace-barrier"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	from := 0
	if fromSource {
		from = src
		if _, err := c.m(from).RequestActor(ctx, ref, []byte("s")); err != nil { // its route: this node
			t.Fatal(err)
		}
	}
	hooks := &testHooks{}
	ends := watchArrivals(hooks)
	c.nodes[dst].obj.hooks.Store(hooks)
	atReady, goOn, barrierHeld := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var resume, held sync.Once
	proceed := func() { resume.Do(func() { close(goOn) }) }
	defer proceed() // a failing test must not leave the move blocked
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		switch {
		case got != id:
		case step == holdAt:
			close(atReady)
			<-goOn
		case step == stepSwitchHeld:
			held.Do(func() { close(barrierHeld) })
		}
	}})
	// The long hold: the client cuts a barrier after a slice without
	// progress; the source tells it the barrier is held every heldEvery.
	const slice, heldEvery, heldNotices = 200 * time.Millisecond, 20 * time.Millisecond, 50
	notices := make(chan struct{}, heldNotices)
	if longHold {
		c.nodes[from].obj.barrierEvery = slice
		c.nodes[src].obj.barrierHeldEvery = heldEvery
		c.nodes[from].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
			if got == id && step == stepBarrierHeldNotice {
				select {
				case notices <- struct{}{}:
				default:
				}
			}
		}})
	}
	mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atReady, "the target's relay-ready")
	for i := 1; i <= 3; i++ { // on the cached route: into the source's hold
		if err := c.m(from).SendActor(ctx, ref, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if e := waitEnd(t, ends, id); e.state != relocation.TgtOwner {
		t.Fatalf("the target attempt ended %s/%s, want owner (its grace commit)", e.state, e.failure)
	}
	// The client learns the new route (its entry aged out, say): the next
	// message resolves the target from the store and switches.
	c.nodes[from].obj.cache.Drop(followKey(record.ObjectActor, id))
	sent := make(chan error, 1)
	go func() {
		for i := 1; i <= 3; i++ {
			if _, err := c.m(from).RequestActor(ctx, ref, []byte(fmt.Sprintf("r%d", i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	var sentErr error
	sentFirst := false
	if !longHold {
		select {
		case <-barrierHeld: // the source keeps the answer until its hold has left
		case sentErr = <-sent: // the barrier was answered with m1..m3 still held
			sentFirst = true
		case <-time.After(30 * time.Second):
			t.Fatal("the client's route switch neither finished nor reached the source")
		}
	}
	// Many slices pass with the barrier held: counted in the source's
	// notices (one every heldEvery), not in time slept.
	for n := 0; longHold && n < heldNotices && !sentFirst; {
		select {
		case <-notices:
			n++
		case sentErr = <-sent:
			sentFirst = true
			t.Errorf("the client's route switch went out after %d barrier-held notices (%d slices) with m1..m3 still held (err %v, barriers timed out %d)",
				n, n*int(heldEvery)/int(slice), sentErr, c.stats(from).RouteBarriersTimedOut)
		case <-time.After(30 * time.Second):
			t.Fatal("the client's route switch neither finished nor was told its barrier is held")
		}
	}
	proceed()
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("the move ended %v (%s), want moved", res.Outcome, res.Reason)
	}
	if !sentFirst {
		select {
		case sentErr = <-sent:
		case <-time.After(30 * time.Second):
			t.Fatal("the client's requests did not return")
		}
	}
	if sentErr != nil {
		t.Fatal(sentErr)
	}
	want := "a,m1,m2,m3,r1,r2,r3"
	if fromSource {
		want = "a,s,m1,m2,m3,r1,r2,r3"
	}
	wantRan(t, ctx, c, ref, want)
}
