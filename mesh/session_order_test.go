package mesh

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// Found by review (bound Sessions, 2026-12-07; fixed the same day: nextFor).
// A Request of a Session did not leave "one at a time" with its one-way
// messages (Session.oneWay), so it could take a
// higher sequence than a one-way message of another goroutine and reach the
// wire — and the Actor's new owner — first. The command 50 (or a commit's
// ReplayedHighWater) about the Request's sequence then counts as covering
// the one-way message still leaving: the route switches, and the next
// message of the goroutine that sent the one-way one goes straight to the
// new owner, ahead of that message, which is still on its way through the
// previous owner. The Session promises that "messages of one goroutine
// arrive in the order it sent them, across moves of the Actor" (session.go,
// Session; docs/RELOCATION.md §6 "Sequence order on the wire").
//
// Here: the Actor moved before the Session sent anything (no command 44;
// the Session learns the move from command 50). Goroutine g1's Send "1" has
// taken sequence 1 and not reached the transport yet; goroutine g2's
// Request takes sequence 2, is passed on by the previous owner and answered
// by the new one, whose command 50 about sequence 2 switches the route. g1's
// "1" then leaves on the old route (the previous owner is slow to pass it
// on), and g1's "2" goes straight to the new owner and runs first.
func TestSessionRequestDoesNotCoverAnEarlierSendStillLeaving(t *testing.T) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-req-overtakes")
	if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}

	// g1's first Send is held between taking its sequence and the
	// transport.
	var armed atomic.Bool
	entered, leave := make(chan struct{}), make(chan struct{})
	c.nodes[0].obj.hooks.Store(&testHooks{beforeRemoteSend: func(id string) error {
		if id == ref.ActorID && armed.CompareAndSwap(true, false) {
			close(entered)
			<-leave
		}
		return nil
	}})
	// The previous owner passes on the first message at once (g2's
	// Request) and holds the second (g1's "1") until released.
	var passOns atomic.Int32
	holding, passOn := make(chan struct{}), make(chan struct{})
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepFollowPassOn && passOns.Add(1) == 2 {
			close(holding)
			<-passOn
		}
	}})
	released := false
	release := func() {
		if !released {
			released = true
			close(passOn)
		}
	}
	t.Cleanup(release)

	armed.Store(true)
	g1 := make(chan error, 1)
	g1first := make(chan struct{})
	go func() {
		if err := s.Send(ctx, []byte("s:g1:1")); err != nil {
			g1 <- err
			return
		}
		close(g1first)
		g1 <- s.Send(ctx, []byte("s:g1:2"))
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("g1's first Send never reached the transport hook")
	}
	g2 := make(chan error, 1)
	go func() {
		_, err := s.Request(ctx, []byte("r:g2:1"))
		g2 <- err
	}()
	// Before the fix g2's Request overtook g1's "1" and was answered
	// meanwhile; now it takes its sequence only once "1" has left. Bounded
	// only to choose when "1" is let go.
	g2done := false
	select {
	case err := <-g2:
		if err != nil {
			t.Fatalf("g2's request: %v", err)
		}
		g2done = true
	case <-time.After(3 * time.Second):
	}
	close(leave) // g1's "1" goes out, on the route it took with its sequence
	// The previous owner passes "1" on and holds the next message it
	// passes on (g2's Request or g1's "2", whichever took the old route
	// next) — unless the command 50 about "1" switched the route before
	// either took its sequence: then both go straight to the new owner,
	// behind "1", and nothing more is passed on (a switch completes only
	// once the last message sent on the old route was passed on; a loaded
	// machine scheduled g2 late enough for this in CI, 2026-12-07).
	waitUntil(t, "a second message held at the previous owner's pass-on, or the route switched after the first", func() bool {
		select {
		case <-holding:
			return true
		default:
		}
		return passOns.Load() == 1 && string(s.Actor().NodeRID) == string(c.nodes[dst].RID())
	})
	<-g1first
	// g1's "2": sent (the route switched) or waiting for the switch.
	done := false
	waitUntil(t, "g1's second Send sent, or waiting for the route switch", func() bool {
		select {
		case err := <-g1:
			if err != nil {
				t.Fatalf("g1: %v", err)
			}
			done = true
			return true
		default:
		}
		return s.pendingSwitch()
	})
	if done && string(s.Actor().NodeRID) == string(c.nodes[dst].RID()) {
		// Sent straight to the new owner (the route switched): what
		// reached it runs first — this Request follows g1's "2" on the
		// same link. (Sent on the old route, "2" waits behind "1" at the
		// previous owner, whose reader is held.)
		sessionState(t, ctx, s)
	}
	release()
	if !done {
		if err := <-g1; err != nil {
			t.Fatalf("g1: %v", err)
		}
	}
	if !g2done {
		if err := <-g2; err != nil {
			t.Fatalf("g2's request: %v", err)
		}
	}
	var st seqState
	waitUntil(t, "both of g1's messages run", func() bool {
		st = sessionState(t, ctx, s)
		return st.Last["g1"] == 2 && st.Gaps == st.Duplicates
	})
	if st.Gaps != 0 || st.Duplicates != 0 || st.Last["g2"] != 1 {
		t.Fatalf("state %+v: g1's messages ran out of order (want s:g1:1 before s:g1:2)", st)
	}
	if string(s.Actor().NodeRID) != string(c.nodes[dst].RID()) {
		t.Fatal("the Session's route did not switch to the new owner")
	}
}

// Found by review (2026-12-07; fixed the same day: Session.rebind waits as
// barrierBehindEnded). A Session's rebind (a send on its route proven
// undelivered: here the link to its crashed previous owner, whose redial is
// refused) resolved the store and sent straight to the new owner, with no
// barrier of any kind. What the crashed previous owner had passed on before it
// ended — the Session's earlier message, read by the new owner from the
// previous owner's connection and not yet handed on — then runs after the
// message that followed the rebind. A plain sender is kept in order there
// (barrierBehindEnded, TestCrashedPreviousOwnerPassOnStaysAheadOfTheSwitch);
// a Session, which promises per-sender order across moves, was not (docs/RELOCATION.md §6
// "Binding": the fallback to a store resolve and rebind; §7 "Bound Sessions
// ... send no barrier").
func TestSessionRebindAfterACrashedPreviousOwnerKeepsItsPassOnAhead(t *testing.T) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-crash-rebind")
	// Moved before the Session sent anything: no command 44; its first
	// message goes to the previous owner, which passes it on.
	if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	arrived, releaseOnce := holdFirstFollowArrival(c.nodes[dst], ref.ActorID)
	defer releaseOnce()
	if err := s.Send(ctx, []byte("s:g:1")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, arrived, "message 1 passed on to the new owner")
	before := c.nodes[dst].ObjectStats()

	crashUntilRedialRefused(t, ctx, c.nodes[src], c.nodes[0], ref)

	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, []byte("s:g:2")) }()
	// Bounded only to choose when 1 is let go: a fixed Session keeps 2
	// back until 1 is in.
	deadline := time.Now().Add(3 * time.Second)
	for c.nodes[dst].ObjectStats().Delivered == before.Delivered && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	releaseOnce()
	if err := <-sent; err != nil {
		t.Fatalf("message 2: %v", err)
	}
	if n := c.nodes[0].ObjectStats().SessionRebinds; n != 1 {
		t.Logf("%d rebinds", n)
	}
	var st seqState
	waitUntil(t, "both messages run", func() bool {
		st = sessionState(t, ctx, s)
		return st.Last["g"] == 2 && st.Gaps == st.Duplicates
	})
	if st.Gaps != 0 || st.Duplicates != 0 {
		t.Fatalf("state %+v: message 2 ran before 1, which the crashed previous owner had passed on", st)
	}
}

// holdFirstFollowArrival holds, on n's reader, the first message of the
// object id passed on to n (Message Follow) until release is called:
// arrived is closed when it is held.
func holdFirstFollowArrival(n *Node, id string) (arrived chan struct{}, release func()) {
	arrived, ch := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	release = sync.OnceFunc(func() { close(ch) })
	n.obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepFollowArrive && held.CompareAndSwap(false, true) {
			close(arrived)
			<-ch
		}
	}})
	return arrived, release
}

// crashUntilRedialRefused crashes prev and waits until from's redial to the
// crashed run is refused (ECONNREFUSED): nothing listens there any more.
func crashUntilRedialRefused(t *testing.T, ctx context.Context, prev, from *Node, ref ActorRef) {
	t.Helper()
	prevRID, prevGen := transport.RID(prev.RID()), prev.LifecycleGeneration()
	prev.crash()
	probe := router.NewRecord(&router.ActorSend{Operation: opIDOf(NewOperationID()), TargetActor: router.ActorRouteFence{
		Actor: router.ActorRef{ActorID: ref.ActorID, ObjectGeneration: ref.ObjectGeneration}, TargetNodeRID: prevRID,
		TargetNodeGeneration: prevGen, ExpectedAuthorityOwnerGeneration: 1, ExpectedOwnerLeaseGeneration: 1}}, nil,
		&router.Payload{PacketName: PacketName, ContentType: ContentType})
	eventually(t, 10*time.Second, "the redial to the crashed previous owner to be refused", func() bool {
		return errors.Is(from.tr.SendRun(ctx, prevRID, prevGen, probe), syscall.ECONNREFUSED)
	})
}
