package transport

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// PeerProgress stands still while the peer's reader takes nothing of what
// this node sent (its handler is held: the kernel buffers fill, the queue
// stays), and moves once it reads again — what a route switch's barrier
// tells a slow peer from a stuck one by.
func TestPeerProgressMovesAsTheReaderReads(t *testing.T) {
	gate := make(chan struct{})
	var openGate sync.Once
	defer openGate.Do(func() { close(gate) })
	p := newSeqPair(t, false, 30*time.Second, time.Second, 30*time.Second, func() { <-gate }, nil)
	a, b := p.a, p.b
	if _, ok := a.PeerProgress(RID("nobody")); ok {
		t.Fatal("progress of a peer without a link")
	}
	data := make([]byte, 1000)
	ctx := context.Background()
	// Until the link pushes back for a while: the receiver's kernel and
	// this node's queue are full.
	refused := 0
	for seq := uint64(1); refused < 200; {
		if sendSeq(ctx, a, b.RID(), seq, data) {
			seq, refused = seq+1, 0
		} else {
			refused++
		}
	}
	look := func() Progress {
		pr, ok := a.PeerProgress(b.RID())
		if !ok {
			t.Fatal("no progress for an admitted peer")
		}
		return pr
	}
	last := look()
	for end := time.Now().Add(10 * time.Second); ; {
		time.Sleep(100 * time.Millisecond)
		cur := look()
		if cur == last {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("progress never stood still with the reader held: %+v then %+v", last, cur)
		}
		last = cur
	}
	if last.RecordsOut == 0 {
		t.Fatalf("progress %+v: no record counted out", last)
	}
	openGate.Do(func() { close(gate) })
	for end := time.Now().Add(10 * time.Second); look() == last; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("progress did not move once the reader read again: %+v", last)
		}
	}
}

// slowPeerLink links a node on a manual clock (PeerTimeout a minute: the
// test steps several probe intervals) to a fake peer whose reader reads a
// record only when the test takes it, and returns them with the link's
// session.
func slowPeerLink(t *testing.T) (*Node, *ManualClock, *fakePeer, *session) {
	t.Helper()
	f := newFakePeerReading(t, "slow", 1, 0)
	clk := NewManualClock(time.Unix(1, 0))
	cfg := testConfig("a", 1)
	cfg.Clock = clk
	cfg.PeerTimeout = time.Minute
	a := startNode(t, cfg)
	t.Cleanup(f.stopReading) // before a's Close, which the unread records would hold
	if err := a.Connect(f.rid, f.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.WaitAdmitted(ctx, f.rid); err != nil {
		t.Fatal(err)
	}
	l, err := a.link(f.rid)
	if err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	s := l.sess
	l.mu.Unlock()
	return a, clk, f, s
}

// sendSettled sends records seq+1..seq+k to the peer and waits until all
// are written and the peer's kernel acknowledged every byte written.
func sendSettled(t *testing.T, a *Node, s *session, peer RID, seq uint64, k int) {
	t.Helper()
	data := make([]byte, 1000)
	for i := 1; i <= k; i++ {
		if err := a.Send(context.Background(), peer, seqSend(peer, seq+uint64(i), data)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "everything written and acknowledged by the peer's kernel", func() bool {
		acked, ok := s.pc.zc.ack.acked()
		return s.pc.flushed() && (!ok || acked == s.pc.zc.g.left())
	})
}

// progressOf is a's progress on its link to peer, which must be admitted.
func progressOf(t *testing.T, a *Node, peer RID) Progress {
	t.Helper()
	p, ok := a.PeerProgress(peer)
	if !ok {
		t.Fatal("no progress for an admitted peer")
	}
	return p
}

// PeerProgress stands still while a stuck peer reads nothing, even though
// this node keeps writing to it — its liveness probes every probe interval,
// which the peer's kernel still acknowledges while its buffer has room,
// and the acks of the peer's own probes on the peer's connection to it.
// Until 2026-12-06 both counted: progress moved every probe interval and a
// route switch's barrier waited for a stuck previous owner up to its 60 s
// bound (barrierMaxWait) instead of one slice.
func TestPeerProgressStandsStillForAStuckPeer(t *testing.T) {
	a, clk, f, s := slowPeerLink(t)
	// The peer's reader takes the first record and is stuck there.
	sendSettled(t, a, s, f.rid, 0, 40)
	look := func() Progress { return progressOf(t, a, f.rid) }
	before := look()
	if before.RecordsOut < 40 {
		t.Fatalf("progress %+v: want the 40 records counted out", before)
	}
	// The peer's own connection to this node, probing it.
	z := dialAs(t, a, f.rid)
	if rec := sayHello(t, z, helloFrom(t, a, 1)); rec.Command != router.CmdAdmit {
		t.Fatalf("the peer's hello: %s, want admit", rec.Command)
	}
	c := s.pc.counters.Load()
	for i := uint64(1); i <= 3; i++ {
		out := c.recordsOut.Load()
		clk.Advance(a.cfg.ProbeInterval)
		waitFor(t, 10*time.Second, "this node's probe written", func() bool { return c.recordsOut.Load() > out })
		frames, err := encodeInfra(&router.LivenessProbe{ProbeID: i})
		if err != nil {
			t.Fatal(err)
		}
		if rec := sayHello(t, z, frames); rec.Command != router.CmdLivenessAck {
			t.Fatalf("the peer's probe answered with %s", rec.Command)
		}
		// Let the probe's bytes be acknowledged, as a kernel with room does.
		sendSettled(t, a, s, f.rid, 0, 0)
		cur := look()
		if !cur.Unanswered {
			t.Fatalf("after %d probe intervals: progress %+v: want this node's probe unanswered (the peer reads nothing)", i, cur)
		}
		if cur.Unanswered = before.Unanswered; cur != before {
			t.Fatalf("after %d probe intervals: progress %+v, then %+v with the peer reading nothing", i, before, cur)
		}
	}
}

// PeerProgress moves while the peer reads through a backlog the two
// kernels' buffers hold — everything written and acknowledged by the
// peer's kernel, this node's queue empty, so that neither the records out
// nor the acknowledged bytes can move — once the peer's reader answers a
// liveness probe lying inside that backlog (Progress.ReadRecords). Before,
// nothing moved until the peer had read all of it, and a route switch's
// barrier took a previous owner slow to read it for gone after 12 s.
func TestPeerProgressMovesThroughAKernelBacklog(t *testing.T) {
	a, clk, f, s := slowPeerLink(t)
	if _, ok := s.pc.zc.ack.acked(); !ok {
		t.Fatal("this system does not report acknowledged bytes: the test cannot tell that the peer's kernel holds the backlog")
	}
	const batch = 20 // 20 kB: the peer's kernel takes all of it
	sendSettled(t, a, s, f.rid, 0, batch)
	clk.Advance(a.cfg.ProbeInterval)          // a probe behind the first batch
	sendSettled(t, a, s, f.rid, batch, batch) // and a second batch behind it
	look := func() Progress { return progressOf(t, a, f.rid) }
	before := look()

	// The peer reads the first batch and the probe, and answers it; the
	// second batch stays in its kernel and its reader's buffer.
	for read := 0; ; read++ {
		r := recvWithin(t, f.recs, 10*time.Second, "a record at the peer")
		if p, ok := r.rec.Body.(*router.LivenessProbe); ok {
			if read != batch {
				t.Fatalf("the probe came after %d records, want %d", read, batch)
			}
			f.send(r.ic, &router.LivenessAck{ProbeID: p.ProbeID})
			break
		}
	}
	waitFor(t, 10*time.Second, "progress once the peer answered the probe inside the backlog", func() bool {
		return look() != before
	})
	after := look()
	want := before
	want.ReadRecords, want.Unanswered = batch, false
	if after != want {
		t.Fatalf("progress %+v, then %+v: want only the records read to move, to %d", before, after, batch)
	}
}

// PeerProgress says when a liveness probe awaits its answer (Unanswered):
// from the probe going out until the peer's ack of it, so a caller waiting
// for a silent peer leaves the verdict to the link's liveness while that
// judges it (a route switch's barrier, mesh/route_barrier.go).
func TestPeerProgressShowsAnUnansweredProbe(t *testing.T) {
	clk, fake, _, a := manualLink(t)
	unanswered := func() bool {
		t.Helper()
		p, ok := a.PeerProgress(fake.rid)
		if !ok {
			t.Fatal("no progress for an admitted link")
		}
		return p.Unanswered
	}
	if unanswered() {
		t.Fatal("unanswered before any probe")
	}
	clk.Advance(5 * time.Second)
	probe := fake.next(router.CmdLivenessProbe, 5*time.Second)
	if !unanswered() {
		t.Fatal("a probe went out and was not answered: want Unanswered")
	}
	fake.send(probe.ic, &router.LivenessAck{ProbeID: probe.rec.Body.(*router.LivenessProbe).ProbeID})
	waitFor(t, 5*time.Second, "the ack to clear Unanswered", func() bool { return !unanswered() })
}
