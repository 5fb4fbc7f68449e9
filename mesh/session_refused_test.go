package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router/transport"
)

// A Session Send the transport refuses (backpressure: the link to the
// Actor's owner is full) has taken a sequence number that never leaves.
// The move's commit accounts for everything that did (ReplayedHighWater =
// the last sequence the Actor saw), and that must be enough to switch the
// route: nothing else is on its way. Before, the Session compared it with
// the last sequence handed out, waited for a command 50 about the refused
// message that could never come, and sent nothing for a barrier slice
// (12 s) — the retry of the refused message included. Both orders: the
// refusal before the move, and the commit arriving while the refused
// message is between taking its sequence and the transport's answer.
func TestSessionRefusedSendDoesNotHoldTheRouteSwitch(t *testing.T) {
	t.Run("refused before the move", func(t *testing.T) { runRefusedSend(t, false) })
	t.Run("refused while the move commits", func(t *testing.T) { runRefusedSend(t, true) })
}

func runRefusedSend(t *testing.T, duringMove bool) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-refused")
	for i := 1; i <= 3; i++ {
		if err := s.Send(ctx, []byte(fmt.Sprintf("s:sess:%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the binding on the source", func() bool {
		return c.nodes[src].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)] == 3
	})
	entered, release := make(chan struct{}), make(chan struct{})
	var refused atomic.Bool
	c.nodes[0].obj.hooks.Store(&testHooks{beforeRemoteSend: func(id string) error {
		if id != ref.ActorID || !refused.CompareAndSwap(false, true) {
			return nil
		}
		if duringMove {
			close(entered)
			<-release
		}
		return fmt.Errorf("queue full (test): %w", transport.ErrBackpressure)
	}})
	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, []byte("s:sess:4")) }()
	move := func() {
		if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID())); err != nil || res.Outcome != Moved {
			t.Fatalf("move: %+v, %v", res, err)
		}
		waitUntil(t, "the commit at the session's owner", func() bool {
			st := c.nodes[0].ObjectStats()
			return st.SessionRouteSwitches+st.SessionRoutesIgnored > 0 || s.pendingSwitch()
		})
	}
	if duringMove {
		<-entered
		move()
		if !s.pendingSwitch() {
			t.Fatal("the commit did not wait for the message whose send had not returned")
		}
		close(release)
	}
	if err := <-sent; !errors.Is(err, transport.ErrBackpressure) {
		t.Fatalf("the refused Send answered %v", err)
	}
	if !duringMove {
		move()
	}
	// The caller sends the refused message again: it must not wait for
	// the route switch.
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Send(sctx, []byte("s:sess:4")); err != nil {
		t.Fatalf("the Send after the refusal: %v (after %v; pending switch: %v)", err, time.Since(start).Round(time.Millisecond), s.pendingSwitch())
	}
	if got := c.indexOf(s.Actor().NodeRID); got != dst {
		t.Errorf("the route is on node %d, the Actor on %d", got, dst)
	}
	st := sessionState(t, ctx, s)
	if st.Gaps != 0 || st.Duplicates != 0 || st.Last["sess"] != 4 {
		t.Fatalf("state %+v: want messages 1..4 once, in order", st)
	}
}

// pendingSwitch reports whether a route switch waits (tests).
func (s *Session) pendingSwitch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending != nil
}
