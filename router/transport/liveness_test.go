package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// outstandingProbe reads the current session's outstanding probe id.
func outstandingProbe(n *Node, peer RID) (uint64, bool) {
	l, err := n.link(peer)
	if err != nil {
		return 0, false
	}
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	if s == nil {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.outstanding, true
}

func admitted(n *Node, peer RID) bool {
	_, ok := n.Peer(peer)
	return ok
}

// TestLivenessManualClock steps the schema's liveness profile on an
// injected clock: probe every 5 s independent of traffic, at most one
// outstanding id, retransmission of the same id, exact echo refreshes the
// 15 s deadline, anything else does not, and the deadline fails pending
// requests with ErrPeerDown (and ErrPeerSilent).
func TestLivenessManualClock(t *testing.T) {
	clk, fake, ev, a := manualLink(t)
	const quiet = 100 * time.Millisecond

	// Nothing before the first interval.
	clk.Advance(4 * time.Second)
	fake.none(router.CmdLivenessProbe, quiet)
	// t=5s: first probe, a fresh nonzero id.
	clk.Advance(time.Second)
	p1 := fake.next(router.CmdLivenessProbe, 5*time.Second)
	id1 := p1.rec.Body.(*router.LivenessProbe).ProbeID
	if id1 == 0 {
		t.Fatal("probe id 0")
	}
	// t=10s: not acked → the same id again, no second outstanding probe.
	clk.Advance(5 * time.Second)
	if got := fake.next(router.CmdLivenessProbe, 5*time.Second).rec.Body.(*router.LivenessProbe).ProbeID; got != id1 {
		t.Fatalf("retransmitted probe id %d, want %d", got, id1)
	}
	// A wrong id is ignored (counted), it does not refresh the deadline.
	fake.send(p1.ic, &router.LivenessAck{ProbeID: id1 + 1})
	waitFor(t, 5*time.Second, "stale ack counted", func() bool { return a.Stats().StaleAcks == 1 })
	// The exact echo refreshes the deadline: it now runs to t=10+15=25s.
	fake.send(p1.ic, &router.LivenessAck{ProbeID: id1})
	waitFor(t, 5*time.Second, "ack processed", func() bool { o, ok := outstandingProbe(a, fake.rid); return ok && o == 0 })
	// A duplicate of the already-acked id is stale.
	fake.send(p1.ic, &router.LivenessAck{ProbeID: id1})
	waitFor(t, 5*time.Second, "duplicate ack counted", func() bool { return a.Stats().StaleAcks == 2 })

	// t=15s: new id (the previous one was acked).
	clk.Advance(5 * time.Second)
	id2 := fake.next(router.CmdLivenessProbe, 5*time.Second).rec.Body.(*router.LivenessProbe).ProbeID
	if id2 == id1 || id2 == 0 {
		t.Fatalf("second probe id %d (first %d)", id2, id1)
	}
	// A request pending when the peer goes down fails with ErrPeerDown.
	errc := make(chan error, 1)
	go func() {
		_, err := a.Request(context.Background(), fake.rid, spotRequest(fake.rid, 1, nil))
		errc <- err
	}()
	fake.next(router.CmdSpotRequest, 5*time.Second)
	// Other traffic (a reply to nothing) never refreshes the deadline.
	fake.send(p1.ic, &router.Reply{Correlation: 999999, Result: router.ResultOK})
	// It is read asynchronously: wait until it was counted, so the deadline
	// check below really runs after that traffic arrived.
	waitFor(t, 5*time.Second, "late reply counted", func() bool { return a.Stats().LateReplies == 1 })
	// t=20s: retransmit id2; t=24.9s: still admitted.
	clk.Advance(5 * time.Second)
	fake.next(router.CmdLivenessProbe, 5*time.Second)
	clk.Advance(4900 * time.Millisecond)
	if !admitted(a, fake.rid) {
		t.Fatal("peer down before its deadline")
	}
	select {
	case err := <-errc:
		t.Fatalf("request ended early: %v", err)
	default:
	}
	// t=25s: 15 s after the last matching ack → down.
	clk.Advance(100 * time.Millisecond)
	e := ev.wait(t, EventDown, 5*time.Second)
	if !errors.Is(e.Err, ErrPeerDown) || !errors.Is(e.Err, ErrPeerSilent) || e.Peer.LifecycleGeneration != 9 {
		t.Fatalf("down event %+v", e)
	}
	select {
	case err := <-errc:
		// ErrPeerSilent: this node gave up on the peer, which may only be
		// slow (a route switch's barrier tells it from a clean stop).
		if !errors.Is(err, ErrPeerDown) || !errors.Is(err, ErrPeerSilent) {
			t.Fatalf("pending request err = %v, want ErrPeerDown and ErrPeerSilent", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending request not failed at peer down")
	}
	st := a.Stats()
	if st.LivenessTimeouts != 1 || st.LateReplies != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The link redials (real-time backoff) and is admitted again on a new
	// connection, whose probe ids start afresh.
	ev.wait(t, EventAdmitted, 5*time.Second)
}

// manualLink is node a on a ManualClock (probe every 5 s, peer timeout
// 15 s), admitted to a fake peer of lifecycle generation 9, with a's events
// recorded.
func manualLink(t *testing.T) (*ManualClock, *fakePeer, *eventLog, *Node) {
	t.Helper()
	clk := NewManualClock(time.Unix(5000, 0))
	fake := newFakePeer(t, "fake", 9)
	ev := newEventLog()
	cfg := testConfig("a", 1)
	cfg.Clock = clk
	cfg.ProbeInterval = 5 * time.Second
	cfg.PeerTimeout = 15 * time.Second
	cfg.RequestTimeout = time.Hour
	cfg.OnEvent = ev.on
	a := startNode(t, cfg)
	if err := a.Connect(fake.rid, fake.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := a.WaitAdmitted(ctx, fake.rid)
	if err != nil || info.LifecycleGeneration != 9 {
		t.Fatalf("WaitAdmitted = %+v, %v", info, err)
	}
	return clk, fake, ev, a
}

// TestLivenessRealTime runs the liveness machinery on the real clock with
// short intervals: two real nodes stay admitted across many probe rounds,
// and a peer whose process stops answering (simulated by a fake that stops
// acking) is declared down after the timeout.
func TestLivenessRealTime(t *testing.T) {
	b := startNode(t, testConfig("b", 1))
	cfg := testConfig("a", 1)
	cfg.ProbeInterval = 20 * time.Millisecond
	cfg.PeerTimeout = 2 * time.Second
	ev := newEventLog()
	cfg.OnEvent = ev.on
	a := startNode(t, cfg)
	connectAndWait(t, a, b)
	// Many probe rounds, each answered by the exact echo.
	waitFor(t, 20*time.Second, "30 liveness rounds", func() bool { return a.Stats().LivenessAcks >= 30 })
	if !admitted(a, b.RID()) || a.Stats().LivenessTimeouts != 0 {
		t.Fatalf("healthy peer declared down: %+v", a.Stats())
	}

	fake := newFakePeer(t, "mute", 1) // admits, never acks
	if err := a.Connect(fake.rid, fake.endpoint()); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, EventAdmitted, 5*time.Second)
	e := ev.wait(t, EventDown, 5*time.Second)
	if !e.Peer.RID.Equal(fake.rid) || !errors.Is(e.Err, ErrPeerDown) {
		t.Fatalf("down event %+v", e)
	}
	if !admitted(a, b.RID()) {
		t.Fatal("the healthy peer went down too")
	}
}

// A node whose own process did not run (SIGSTOP, a VM freeze) finds its
// liveness deadline long past when it runs again, while its peer's ack may
// sit unread in the socket buffer: the link gets one probe interval of
// grace instead of going down at once (it used to, and everything queued
// on it was thrown away — seen with a `meshnode run` server paused 20 s).
// An ack within the grace keeps it; without one it goes down at the grace's
// end. A deadline that fires on time is not graced.
func TestLivenessGraceAfterAStall(t *testing.T) {
	for _, acked := range []bool{true, false} {
		t.Run(fmt.Sprintf("acked=%v", acked), func(t *testing.T) {
			clk, fake, ev, a := manualLink(t)
			clk.Advance(5 * time.Second) // t=5: first probe
			p := fake.next(router.CmdLivenessProbe, 5*time.Second)
			id := p.rec.Body.(*router.LivenessProbe).ProbeID

			clk.Stall(25 * time.Second) // t=30: the deadline (t=15) is 15 s late
			clk.Advance(0)
			if !admitted(a, fake.rid) {
				t.Fatal("link down at once after this process's own stall")
			}
			if acked {
				fake.send(p.ic, &router.LivenessAck{ProbeID: id})
				waitFor(t, 5*time.Second, "ack processed", func() bool { o, ok := outstandingProbe(a, fake.rid); return ok && o == 0 })
			}
			clk.Advance(5 * time.Second) // t=35: the grace ends
			if acked {
				if !admitted(a, fake.rid) || a.Stats().LivenessTimeouts != 0 {
					t.Fatal("link down although the ack came within the grace")
				}
				return
			}
			e := ev.wait(t, EventDown, 5*time.Second)
			if !errors.Is(e.Err, ErrPeerDown) || a.Stats().LivenessTimeouts != 1 {
				t.Fatalf("down event %+v, timeouts %d", e, a.Stats().LivenessTimeouts)
			}
		})
	}
}

// The inbound side: a sweep that runs long after it was due (this process
// did not run) closes nothing — the peers' records are unread, not
// missing — and the next sweep, on time, judges with what the readers
// found meanwhile. A sweep on time still closes a silent connection.
func TestSweepAfterAStallClosesNothing(t *testing.T) {
	clk, cfg := sweepClockConfig("b")
	b := startNode(t, cfg)
	ev := newEventLog()
	acfg := testConfig("a", 1) // real clock: probes b every 200 ms
	acfg.OnEvent = ev.on
	a := startNode(t, acfg)
	connectAndWait(t, a, b)
	waitFor(t, 5*time.Second, "the inbound connection", func() bool { return b.Stats().InboundConns == 1 })

	down := ev.count(EventDown)
	clk.Stall(30 * time.Second) // the sweep due at +5 s runs 25 s late, lastSeen 30 s old
	clk.Advance(0)
	time.Sleep(300 * time.Millisecond) // a close would reach a by now
	if ev.count(EventDown) != down {
		t.Fatal("the late sweep closed a connection whose records were waiting to be read")
	}
	// a's next probe refreshes lastSeen; the next sweep, on time, keeps it.
	seen := func() int64 {
		b.rt.mu.Lock()
		defer b.rt.mu.Unlock()
		for ic := range b.rt.conns {
			return ic.lastSeen.Load()
		}
		return 0
	}
	waitFor(t, 5*time.Second, "a record read after the stall", func() bool { return seen() >= clk.Now().UnixNano() })
	clk.Advance(5 * time.Second)
	time.Sleep(300 * time.Millisecond)
	if ev.count(EventDown) != down {
		t.Fatal("the sweep after the stall closed a live connection")
	}
}

// A connection that never said hello is ended by the sweep and gives its
// slot back at once: the cut (peerConn.cut) shuts this side's reading
// too, so its reader ends as soon as it has read what the kernel held —
// it does not wait for the client, which here never closes.
func TestSweepClosesAnUnadmittedConnectionAtOnce(t *testing.T) {
	clk, cfg := sweepClockConfig("b")
	cfg.HandshakeTimeout = 30 * time.Second // the hello deadline (real time) must not be what closes it
	b := startNode(t, cfg)
	z := dialAs(t, b, RID("node-silent"))
	waitFor(t, 5*time.Second, "the connection to be served", func() bool { return b.rt.count() == 1 })
	for range 4 { // sweeps on time, the last one 20 s after the connection opened
		clk.Advance(5 * time.Second)
	}
	if !closedByPeer(z.raw, 5*time.Second) {
		t.Fatal("the sweep left a silent unadmitted connection open")
	}
	waitFor(t, 2*time.Second, "its slot to be given back", func() bool { return b.rt.count() == 0 })
}

// sweepClockConfig is a node config whose sweep runs on a manual clock:
// every 5 s of it, closing what was silent for 15 s.
func sweepClockConfig(name string) (*ManualClock, Config) {
	clk := NewManualClock(time.Unix(5000, 0))
	cfg := testConfig(name, 1)
	cfg.Clock = clk
	cfg.ProbeInterval = 5 * time.Second
	cfg.PeerTimeout = 15 * time.Second
	return clk, cfg
}
