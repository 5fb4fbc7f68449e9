package mesh

import (
	"sync/atomic"
	"testing"
	"time"
)

// One goroutine (g1) has its sequence number but has not yet handed its
// message to the transport when another goroutine's later message (g2)
// reaches the Actor. The move's commit then carries ReplayedHighWater =
// s.seq and the Session switches at once, although g1's message is about
// to be sent on the old route (and passed on by the previous owner), and
// g1's next message could go straight to the new owner and overtake it.
// One-way messages of a Session now leave in sequence order (one at a time
// from taking the sequence to the transport's queue), so the high water
// covers every one-way message below it.
func TestSessionOneWayMessagesLeaveInSequenceOrder(t *testing.T) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-inflight")
	if err := s.Send(ctx, []byte("s:g2:1")); err != nil {
		t.Fatal(err)
	}
	gate, entered := make(chan struct{}), make(chan struct{})
	var blocked atomic.Bool
	c.nodes[0].obj.hooks.Store(&testHooks{beforeRemoteSend: func(id string) error {
		if id == ref.ActorID && blocked.CompareAndSwap(false, true) {
			close(entered)
			<-gate
		}
		return nil
	}})
	g1 := make(chan error, 1)
	go func() { g1 <- s.Send(ctx, []byte("s:g1:1")) }() // seq 2, held before it leaves
	<-entered
	released := false
	g2 := make(chan error, 1)
	go func() { g2 <- s.Send(ctx, []byte("s:g2:2")) }() // seq 3
	select {
	case err := <-g2:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("g2's later message left while g1's was held")
	case <-time.After(200 * time.Millisecond):
		t.Logf("g2's message waits behind g1's")
		close(gate)
		released = true
		if err := <-g2; err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "seq 3 at the source", func() bool {
		return c.nodes[src].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)] == 3
	})
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepFollowPassOn {
			time.Sleep(300 * time.Millisecond)
		}
	}})
	res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	waitUntil(t, "the route on the target", func() bool { return string(s.Actor().NodeRID) == string(c.nodes[dst].RID()) })
	if !released {
		close(gate)
	}
	if err := <-g1; err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, []byte("s:g1:2")); err != nil { // g1's next: straight to the target
		t.Fatal(err)
	}
	var state seqState
	waitUntil(t, "both of g1's messages at the target", func() bool {
		state = sessionState(t, ctx, s)
		return state.Last["g1"] == 2 && (state.Gaps == 0 || state.Duplicates > 0)
	})
	if state.Duplicates != 0 || state.Gaps != 0 {
		t.Fatalf("g1's order broken across the switch: %+v", state)
	}
}
