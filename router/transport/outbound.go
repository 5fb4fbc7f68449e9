package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshnode/meshnode/internal/logbudget"
	"github.com/meshnode/meshnode/router"
)

// link is this node's DEALER side towards one peer. Its run goroutine dials,
// says hello, waits for admit, then reads the connection (admit/reject,
// liveness acks, replies) until the session ends, and starts over with
// backoff. Every record this node originates to the peer goes through the
// current session's single queue and writer, so A→B records stay in order.
type link struct {
	n   *Node
	rid RID

	mu       sync.Mutex
	endpoint string
	sess     *session      // admitted session, nil otherwise
	lastErr  error         // why the last attempt or session ended
	change   chan struct{} // closed and replaced on every state change
	stopped  bool
	stopErr  error
	ctx      context.Context // ends on shutdown; aborts dials and admission
	cancel   context.CancelFunc
	done     chan struct{}
	peerGen  uint64 // highest lifecycle generation seen from this peer
	counters *peerCounters
	logLimit logbudget.Budget
	// seq numbers this link's one-way messages (router.LinkSequence),
	// made at its first admission (l.mu): after the sessions of an
	// earlier link to the peer ended, whose numbers it must start above.
	seq *outSeq
}

func newLink(n *Node, rid RID, endpoint string) *link {
	l := &link{
		n:        n,
		rid:      rid,
		endpoint: endpoint,
		change:   make(chan struct{}),
		done:     make(chan struct{}),
		counters: n.stats.acquire(string(rid)), // given back when Disconnect removes the link
	}
	l.ctx, l.cancel = context.WithCancel(n.ctx)
	return l
}

func (l *link) setEndpoint(ep string) {
	l.mu.Lock()
	l.endpoint = ep
	l.mu.Unlock()
}

// notifyLocked wakes WaitAdmitted callers; l.mu must be held.
func (l *link) notifyLocked() {
	close(l.change)
	l.change = make(chan struct{})
}

// shutdown stops the link for good: the current session ends with cause.
func (l *link) shutdown(cause error) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.stopped, l.stopErr = true, cause
	s := l.sess
	l.cancel()
	l.notifyLocked()
	l.mu.Unlock()
	if s != nil {
		s.end(cause)
	}
}

// peerGeneration is told the lifecycle generation of a hello the peer sent
// to our ROUTER. A newer generation than the one our session was admitted
// with means the peer restarted: the session (and its pending requests)
// belongs to the old run and ends now, before its TCP connection or
// liveness would notice.
func (l *link) peerGeneration(gen uint64) {
	l.mu.Lock()
	if gen > l.peerGen {
		l.peerGen = gen
	}
	s := l.sess
	l.mu.Unlock()
	if s != nil && gen > s.info.LifecycleGeneration {
		s.end(fmt.Errorf("%w: peer %s restarted (lifecycle generation %d → %d)", ErrPeerDown, l.rid, s.info.LifecycleGeneration, gen))
	}
}

// linkWarnEvery is how often a link that keeps failing logs a WARN line.
const linkWarnEvery = time.Minute

func (l *link) run() {
	defer close(l.done)
	n := l.n
	backoff := n.cfg.ReconnectMin
	failures := 0 // consecutive failed attempts: the first, then one per linkWarnEvery, logged above debug
	var lastWarn time.Time
	// quietUntil: after a session ends, redials that fail stay DEBUG for
	// PeerTimeout. A peer that stops in order or restarts (every step of a
	// rolling restart) refuses them until it is back or discovery drops
	// the link; the session's end was already logged ("peer down"), and a
	// WARN per peer per step was noise. A peer still unreachable after
	// that is worth the WARN.
	var quietUntil time.Time
	for {
		l.mu.Lock()
		ep, stopped := l.endpoint, l.stopped
		l.mu.Unlock()
		if stopped {
			return
		}
		if !n.awaitDrain(l.ctx, l.rid) {
			return
		}
		s, err := l.connect(ep)
		if err != nil {
			l.mu.Lock()
			l.lastErr = err
			l.notifyLocked()
			stopped = l.stopped
			l.mu.Unlock()
			if stopped {
				return
			}
			var rej *RejectError
			if errors.As(err, &rej) {
				if !rej.Local && rej.Reason == router.RejectDuplicateConnection {
					n.noteRefusedAsDuplicate(l.rid)
				}
				n.emit(Event{Kind: EventRejected, Peer: PeerInfo{RID: l.rid}, Err: err})
			}
			level := slog.LevelDebug
			now := n.clock.Now()
			if justLeft := now.Before(quietUntil); !justLeft && (lastWarn.IsZero() || now.Sub(lastWarn) >= linkWarnEvery) {
				// Again now and then: a link that never comes up (a peer
				// that refuses this node's key, a wrong endpoint) is
				// otherwise silent after the first line.
				level, lastWarn = slog.LevelWarn, now
			}
			failures++
			n.log.Log(n.ctx, level, "transport: link attempt failed", "peer", l.rid.String(), "endpoint", ep,
				"err", err, "retry_in", backoff, "attempts", failures)
			if !l.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, n.cfg.ReconnectMax)
			continue
		}
		backoff, failures = n.cfg.ReconnectMin, 0
		cause := s.serve()
		quietUntil, lastWarn = n.clock.Now().Add(n.cfg.PeerTimeout), time.Time{}
		l.mu.Lock()
		if l.sess == s {
			l.sess = nil
		}
		l.lastErr = cause
		l.notifyLocked()
		l.mu.Unlock()
		// Records that did not leave this node: the requests among them
		// fail with ErrPeerDown; the one-way messages, whose senders were
		// told they were sent, wait for the next session to this peer run.
		if unsent := s.pc.takeUnsent(); len(unsent) > 0 {
			kept, dropped := n.keepUnsent(l.rid, s.info.LifecycleGeneration, unsent)
			// INFO: kept is not lost (the run may return); dropping them
			// is the WARN (dropKeptLocked), once it is a loss.
			n.log.Info("transport: peer down with records not sent; one-way messages are kept for its return, requests fail",
				"peer", l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "kept", kept, "unsent", dropped,
				"keep_for", n.keepFor(), "cause", cause)
		} else {
			n.log.Info("transport: peer down", "peer", l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "cause", cause)
		}
		close(s.keptDone)
		n.emit(Event{Kind: EventDown, Peer: s.info, Err: cause})
		// A short pause before redialling a peer that just went away keeps
		// a crash-looping peer from turning into a busy loop.
		if !l.sleep(n.cfg.ReconnectMin) {
			return
		}
	}
}

// sleep waits d (real time: reconnect pacing is not liveness) unless the
// link stops first.
func (l *link) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.ctx.Done():
		return false
	}
}

// connect dials and runs admission. On success the session is installed
// and announced.
func (l *link) connect(ep string) (*session, error) {
	n := l.n
	ctx := l.ctx
	params := n.cfg.linkParams()
	zc, err := dialDealer(ctx, ep, l.rid, params)
	if err != nil {
		return nil, err
	}
	pc := newPeerConn(zc, n.cfg.SendQueueRecords, n.cfg.SendQueueBytes, n.cfg.WriteTimeout)
	pc.counters.Store(l.counters)
	pc.lingerOnTimeout(n.ctx, n.cfg.PeerTimeout)
	pc.start()
	fail := func(err error) (*session, error) {
		pc.close(err)
		pc.wait()
		return nil, err
	}
	hello, err := encodeInfra(&router.Hello{Admission: n.currentAdmission()})
	if err != nil {
		return fail(err)
	}
	if err := pc.enqueuePriority(hello); err != nil {
		return fail(err)
	}
	// Admission must complete within the handshake timeout; closing the
	// connection on ctx end (Disconnect/Close) unblocks the read too.
	_ = zc.raw.SetReadDeadline(time.Now().Add(n.cfg.HandshakeTimeout))
	stop := context.AfterFunc(ctx, func() { pc.close(ErrClosed) })
	defer stop()
	for {
		frames, err := zc.recv()
		if err != nil {
			return fail(fmt.Errorf("transport: waiting for admit from %s: %w", l.rid, err))
		}
		rec, err := router.Decode(frames)
		if err != nil {
			l.protocolError("malformed record before admit", err)
			continue
		}
		n.stats.received(l.counters, frames)
		switch rec.Command {
		case router.CmdReject:
			n.stats.rejectedByPeer.Add(1)
			return fail(&RejectError{Peer: l.rid, Reason: rec.Body.(*router.Reject).Reason})
		case router.CmdAdmit:
		default:
			l.protocolError("record before admit", errUnexpected(rec.Command))
			continue
		}
		adm := rec.Body.(*router.Admit).Admission
		rm := adm.RouteMesh
		ours := n.currentAdmission().RouteMesh
		var reason router.RejectReason
		switch {
		case adm.Topology != router.TopologyRouteMesh || rm == nil || rm.MeshName != ours.MeshName:
			reason = router.RejectTopologyMismatch
		case rm.SecurityIdentity != ours.SecurityIdentity:
			reason = router.RejectSecurityIdentityMismatch
		}
		if reason == 0 {
			l.mu.Lock()
			if rm.LifecycleGeneration < l.peerGen {
				reason = router.RejectLifecycleGenerationStale
			}
			l.mu.Unlock()
		}
		if reason != 0 {
			// The peer admitted us but is not a peer of our mesh; we refuse
			// to use the connection.
			n.stats.rejectedByPeer.Add(1)
			return fail(&RejectError{Peer: l.rid, Reason: reason, Local: true})
		}
		_ = zc.raw.SetReadDeadline(time.Time{})
		// Admitted: the connection's full frame limits, as an inbound one
		// gets at its admission (claim). Nothing else reads it yet.
		zc.g.lim = params.lim
		s := &session{
			l:        l,
			pc:       pc,
			info:     peerInfoFrom(l.rid, zc.raw.RemoteAddr().String(), rm),
			pending:  make(map[uint64]*Call),
			endCh:    make(chan struct{}),
			keptDone: make(chan struct{}),
			drained:  make(chan struct{}),
		}
		s.heard.Store(n.clock.Now().UnixNano())
		// The session ends with its connection, whoever ends that: a
		// writer's deadline drains the connection (failWrite) and its
		// reader may read on for a while; the session must not wait.
		endSession := s.end
		pc.onEnd.Store(&endSession)
		// What an earlier session to this peer run had not sent goes
		// first, queued before the session is published to senders (taken
		// before l.mu: admitInbound holds n.mu, then l.mu).
		kept := n.takeKept(l.rid, rm.LifecycleGeneration)
		// From here until it was read to its end, a link made later to
		// this peer (Disconnect, Connect) dials after it (awaitDrain).
		n.noteLive(l.rid, s.drained)
		l.mu.Lock()
		if l.stopped {
			l.mu.Unlock()
			n.keepUnsent(l.rid, rm.LifecycleGeneration, kept) // for the next link to it
			// Never served: nothing of it is read (a link waiting for it
			// goes on).
			close(s.drained)
			n.forgetLive(l.rid, s.drained)
			return fail(l.stopErr)
		}
		if rm.LifecycleGeneration > l.peerGen {
			l.peerGen = rm.LifecycleGeneration
		}
		if s.info.Has(router.CapabilityLinkSequence) {
			// Before anything is queued: the writer reads it for the
			// first data record (the queue's lock orders the two).
			if l.seq == nil {
				l.seq = n.newOutSeq()
			}
			pc.seq = l.seq
		}
		if len(kept) > 0 {
			// Counted before they are queued: the writer may send them
			// at once, and a peer that has them must find them counted.
			n.stats.resent.Add(uint64(len(kept)))
		}
		pc.requeue(kept)
		if len(kept) > 0 {
			n.log.Info("transport: one-way messages kept from the lost connection sent first", "peer", l.rid.String(),
				"count", len(kept))
		}
		l.sess = s
		l.lastErr = nil
		l.notifyLocked()
		s.startLiveness()
		l.mu.Unlock()
		n.log.Info("transport: peer admitted", "peer", l.rid.String(), "endpoint", ep,
			"peer_gen", s.info.LifecycleGeneration, "peer_rev", s.info.DescriptorRevision)
		n.emit(Event{Kind: EventAdmitted, Peer: s.info})
		return s, nil
	}
}

func (l *link) protocolError(what string, err error) {
	l.n.stats.protocolErrors.Add(1)
	l.counters.protocolErrors.Add(1)
	if ok, suppressed := l.logLimit.Allow(logbudget.At(l.n.clock.Now()), 1, logEvery); ok {
		l.n.log.Warn("transport: dropped record from peer", "peer", l.rid.String(), "what", what, "err", err, "suppressed", suppressed)
	}
}

// session is one admitted physical connection of a link.
type session struct {
	l    *link
	pc   *peerConn
	info PeerInfo

	mu          sync.Mutex
	ended       bool
	endErr      error
	pending     map[uint64]*Call // calls whose request went out on this session
	outstanding uint64           // probe id awaiting its ack, 0 if none
	heard       atomic.Int64     // clock UnixNano of admission or the last record received (identity rule)
	lastProbe   uint64
	probeT      Timer
	deadT       Timer
	deadGen     uint64
	deadAt      time.Time // when deadT is due
	graced      bool      // deadT is the grace after a late deadline (deadline)
	// probeAt is how many data records were written on the connection
	// before the outstanding probe (at least: those written when it was
	// first queued; it goes out behind them). readTo is the probeAt of the
	// last probe answered: the peer answers a probe only once its reader
	// has read it, in order, so its reader has read that many at least
	// (Progress.ReadRecords).
	probeAt uint64
	readTo  atomic.Uint64

	endCh    chan struct{} // closed by end
	keptDone chan struct{} // closed by the link once it kept what did not leave
	drained  chan struct{} // closed when the reader stopped and closed the socket
}

// serve starts the session's reader and returns once the session has ended,
// with its cause and the writer stopped. The reader may go on reading the
// connection after that (end drains it); drained is closed when it stops.
func (s *session) serve() error {
	n := s.l.n
	n.linkWG.Add(1)
	go func() {
		defer n.linkWG.Done()
		s.read()
	}()
	if s.pc.isClosed() { // ended before onEnd was set
		s.end(s.pc.closedErr())
	}
	<-s.endCh
	s.pc.wait()
	s.mu.Lock()
	cause := s.endErr
	s.mu.Unlock()
	return cause
}

// read reads the admitted connection until it fails, or until the peer
// closes it after the session ended (end drains it), then closes it; one-way
// messages the peer never acknowledged before closing or resetting it are
// kept for the link's return (peerConn.undelivered), as they are when the
// read fails otherwise (a kernel timeout, a framing error) and the peer
// drops copies; to an older peer they are counted (Stats.InFlightLost).
func (s *session) read() {
	drained := sync.OnceFunc(func() {
		close(s.drained)
		s.l.n.forgetLive(s.l.rid, s.drained)
	})
	defer drained()
	err := s.readUntilError()
	s.end(fmt.Errorf("%w: connection to %s lost: %w", ErrPeerDown, s.l.rid, err))
	s.pc.wait()
	<-s.keptDone // the link kept what never left (keepUnsent): these came before
	late := s.pc.late
	resetWhy := ""   // why a silent connection is reset (abortIfUnaccepted)
	var held []int64 // ends of the one-way messages in flight at a graceful give-up
	lost := 0        // one-way messages an older peer may not get (default below)
	failed := false  // the read failed otherwise (default below)
	switch {
	case late != nil:
	case peerClosed(err):
		late = s.pc.undelivered()
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The drain's linger ran out: the peer is silent (stopped, or its
		// reader stuck). Closed gracefully, the socket would keep trying
		// to send what the peer has not acknowledged yet, which a peer
		// that runs again and answers with anything first (a liveness ack
		// it owes) makes this kernel discard with a reset, as does the
		// kernel giving the orphan up: lost, although counted delivered
		// (~18,000 records of TestStuckReceiverLongerThanTwoPeerTimeouts,
		// the peer also cutting what it found superseded then). When what
		// the peer has not acknowledged cannot reach it (nothing in
		// flight, or the peer took nothing through the linger and its
		// window is closed), a reset discards it here (the peer still
		// reads what it acknowledged), and it is kept to be sent again.
		// Otherwise the close stays graceful and the connection is held
		// (hold): a peer still taking data — or that may have taken what
		// is in flight, its acknowledgements not processed here yet —
		// reads the connection to its end, also once the next connection
		// supersedes it (peerConn.readOut).
		resetWhy, late = s.pc.abortIfUnaccepted()
		if resetWhy == "" {
			held = s.pc.givenUpEnds()
		}
	case errors.Is(err, net.ErrClosed):
		// This node closed the socket (it is closing, or a failed write
		// closed it and set late): what the kernel took counts as
		// delivered, as before.
	default:
		// Any other end of the read — the kernel giving the connection
		// up (ETIMEDOUT, EHOSTUNREACH), a framing error — says neither
		// that the peer closed nor that it is merely silent: what it did
		// not acknowledge may never reach it. A peer that drops copies
		// gets it again, as after its close; to an older peer it might
		// arrive twice, so it is not sent again but counted and named
		// (they fell through unnoticed before).
		late, failed = s.pc.undelivered(), true
		if s.pc.seq == nil {
			lost, late = len(late), nil
		}
	}
	if lost > 0 {
		n := s.l.n
		n.stats.inFlightLost.Add(uint64(lost))
		n.log.Warn("transport: the connection failed with one-way messages the peer never acknowledged; the peer does not drop copies, so they are not sent again and may be lost",
			"peer", s.l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "count", lost, "cause", err)
	}
	if len(held) > 0 {
		s.hold(held, drained)
	}
	s.pc.release()
	if len(late) > 0 {
		n := s.l.n
		kept := n.keepUndelivered(s.l.rid, s.info.LifecycleGeneration, late)
		switch {
		case resetWhy != "":
			n.log.Warn("transport: gave up a silent connection (reset); the one-way messages the peer never acknowledged are kept for its return",
				"peer", s.l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "kept", kept, "why", resetWhy)
		case failed:
			n.log.Warn("transport: the connection failed before the peer acknowledged one-way messages; they are kept and sent again on the next connection (the peer drops copies)",
				"peer", s.l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "kept", kept, "cause", err)
		default:
			// INFO as above: a peer that stopped cleanly (§11) closes
			// with this, and every step of a rolling restart logged a
			// WARN for a run that would never return, then another for
			// the loss.
			n.log.Info("transport: the peer closed the connection before acknowledging one-way messages; they are kept for its return",
				"peer", s.l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "kept", kept, "cause", err)
		}
	}
}

// hold keeps a connection given up gracefully with one-way messages in
// flight open until the peer acknowledged them (holdUntilAcked): they
// count as delivered, and closed, the socket would lose them to the reset
// that the peer's first answer read from it makes this kernel send. The
// link may dial again meanwhile (drained is called first), though the
// peer refuses its hellos while this connection still delivers, and keeps
// the order when one supersedes it: nothing of the new connection is
// delivered before this one was read to its end.
func (s *session) hold(ends []int64, drained func()) {
	n := s.l.n
	n.log.Info("transport: gave up a silent connection with one-way messages in flight; they count as delivered, and the connection stays open until the peer acknowledges them",
		"peer", s.l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "count", len(ends))
	drained()
	n.stats.held.Add(1)
	// The one-way messages the link kept at the give-up (they had not left)
	// wait for the next connection to this peer run KeepUnsent from the
	// give-up, and again from each acknowledgement the hold sees: the peer
	// refuses the link's hellos while this connection still delivers
	// (heldElsewhere), which a slow receiver's hold can make last far
	// longer than KeepUnsent, and a run that is reading has not gone away.
	rearm := func() { n.rearmKept(s.l.rid, s.info.LifecycleGeneration) }
	rearm()
	// The peer refusing the link's hellos as duplicates is alive and reads
	// a connection of ours — an earlier one, read before this one, or this
	// one — so the bound counts from that too (noteRefusedAsDuplicate).
	alive := func() time.Time { return n.lastRefusedAsDuplicate(s.l.rid) }
	r := holdUntilAcked(n.ctx, s.pc.zc.raw, s.pc.zc.ack.acked, ends, max(n.cfg.PeerTimeout, n.cfg.KeepUnsent), rearm, alive)
	if r.pending == 0 {
		return
	}
	n.stats.heldLost.Add(uint64(r.pending))
	n.log.Warn("transport: one-way messages counted delivered when a silent connection was given up may not reach the peer",
		"peer", s.l.rid.String(), "peer_gen", s.info.LifecycleGeneration, "count", r.pending, "why", r.why)
}

// peerClosed reports a read that ended because the peer closed or reset
// the connection: what it had not acknowledged then never reached it. A
// read deadline (the drain's linger: the peer is silent, it may still read
// what it was sent) or this node closing the socket is not.
func peerClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// readUntilError reads the admitted connection and returns why it stopped.
// Replies still match their calls after the session ended (end drains the
// connection); acks are stale by then.
func (s *session) readUntilError() error {
	n := s.l.n
	for {
		frames, err := s.pc.zc.recv()
		if err != nil {
			return err
		}
		rec, err := router.Decode(frames)
		if err != nil {
			s.l.protocolError("malformed record", err)
			continue
		}
		n.stats.received(s.l.counters, frames)
		s.heard.Store(n.clock.Now().UnixNano())
		switch rec.Command {
		case router.CmdLivenessAck:
			s.onAck(rec.Body.(*router.LivenessAck).ProbeID)
		case router.CmdReply, router.CmdRelocationReady:
			n.deliverReply(s.l.rid, rec)
		default:
			// Peers originate records on their own DEALER; a ROUTER sends
			// us only admit/reject, acks and replies.
			s.l.protocolError("unexpected record on our DEALER", errUnexpected(rec.Command))
		}
	}
}

// send queues frames on the session's connection. With wait, a full queue
// is waited out until ctx ends (enqueueWait); without, it fails at once.
// keep marks a one-way message a later session may carry (keepUnsent).
func (s *session) send(ctx context.Context, frames [][]byte, wait, keep bool) error {
	it := outItem{frames: frames, size: framesSize(frames), keep: keep}
	var err error
	if wait {
		var waited bool
		waited, err = s.pc.enqueueWait(ctx, it)
		if waited {
			s.l.n.stats.sendWaits.Add(1)
		}
	} else {
		err = s.pc.enqueue(it)
	}
	if err != nil {
		return s.l.n.sendFailed(s.l.counters, err)
	}
	return nil
}

// end terminates the session once: timers stop, the writer stops and the
// connection is drained and closed, pending requests fail with cause
// (which wraps ErrPeerDown).
func (s *session) end(cause error) {
	if !errors.Is(cause, ErrPeerDown) {
		cause = fmt.Errorf("%w: %w", ErrPeerDown, cause)
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended, s.endErr = true, cause
	if s.probeT != nil {
		s.probeT.Stop()
	}
	if s.deadT != nil {
		s.deadT.Stop()
	}
	pend := s.pending
	s.pending = nil
	s.mu.Unlock()
	close(s.endCh)
	// What left this process still reaches a peer that is only slow or
	// stopped for a while (drainClose); the next session to this peer
	// waits until the peer has read it (Node.awaitDrain), so that it
	// arrives before anything sent later.
	n := s.l.n
	n.noteDraining(s.l.rid, s.drained)
	s.pc.drainClose(n.ctx, cause, n.cfg.PeerTimeout)
	for _, c := range pend {
		if c.portable {
			// The node it went to may have passed it on before its
			// connection went (a drained node stopping): the new owner's
			// answer can still come; give it PortableGrace.
			c := c
			s.l.n.clock.AfterFunc(s.l.n.cfg.PortableGrace, func() { c.finish(nil, cause) })
			continue
		}
		c.finish(nil, cause)
	}
}

// Liveness (schema livenessProfile). Admission starts the peer-timeout
// deadline. Every ProbeInterval, independent of traffic, a probe goes out:
// a new connection-local id when none is outstanding, otherwise the same
// id again (at most one outstanding). Only an ack echoing the outstanding
// id refreshes the deadline; other acks and all other traffic do not.

// startLiveness arms the timers; the caller holds l.mu (not s.mu).
func (s *session) startLiveness() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armDeadlineLocked()
	s.probeT = s.l.n.clock.AfterFunc(s.l.n.cfg.ProbeInterval, s.tick)
}

func (s *session) armDeadlineLocked() {
	s.graced = false
	s.armLocked(s.l.n.cfg.PeerTimeout)
}

func (s *session) armLocked(d time.Duration) {
	if s.deadT != nil {
		s.deadT.Stop()
	}
	s.deadGen++
	gen := s.deadGen
	s.deadAt = s.l.n.clock.Now().Add(d)
	s.deadT = s.l.n.clock.AfterFunc(d, func() { s.deadline(gen) })
}

// deadline ends the session when no matching ack came within PeerTimeout.
// A deadline that fires a probe interval or more late means this process
// did not run meanwhile (stalledSince): the peer's ack may well be unread
// in the socket buffer, so the session gets one probe interval of grace
// for the reader to catch up before it is judged.
func (s *session) deadline(gen uint64) {
	s.mu.Lock()
	stale := s.ended || gen != s.deadGen
	if !stale && !s.graced {
		if late := s.l.n.stalledSince(s.deadAt); late > 0 {
			s.graced = true
			s.armLocked(s.l.n.cfg.ProbeInterval)
			s.mu.Unlock()
			s.l.n.log.Info("transport: liveness deadline passed while this process did not run; judged again after one probe interval",
				"peer", s.l.rid.String(), "late", late.Round(time.Millisecond))
			return
		}
	}
	s.mu.Unlock()
	if stale {
		return
	}
	s.l.n.stats.livenessTimeouts.Add(1)
	s.end(fmt.Errorf("%w: %w: no liveness ack from %s within %s", ErrPeerDown, ErrPeerSilent, s.l.rid, s.l.n.cfg.PeerTimeout))
}

func (s *session) tick() {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	if s.outstanding == 0 {
		s.lastProbe++
		if s.lastProbe > router.MaxGeneration {
			s.lastProbe = 1
		}
		s.outstanding = s.lastProbe
		// A probe sent again with the same id is answered first for its
		// first copy, the one read first: the ack proves that position.
		s.probeAt = s.pc.dataOut.Load()
	}
	id := s.outstanding
	s.probeT = s.l.n.clock.AfterFunc(s.l.n.cfg.ProbeInterval, s.tick)
	s.mu.Unlock()
	frames, err := encodeInfra(&router.LivenessProbe{ProbeID: id})
	if err == nil {
		err = s.pc.enqueuePriority(frames)
	}
	if err != nil {
		s.l.n.log.Debug("transport: probe not queued", "peer", s.l.rid.String(), "err", err)
	}
}

func (s *session) onAck(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || s.outstanding == 0 || id != s.outstanding {
		s.l.n.stats.staleAcks.Add(1)
		return
	}
	s.outstanding = 0
	s.readTo.Store(max(s.readTo.Load(), s.probeAt))
	s.l.n.stats.livenessAcks.Add(1)
	s.armDeadlineLocked()
}

func (s *session) addPending(c *Call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return s.endErr
	}
	s.pending[c.corr] = c
	return nil
}

func (s *session) removePending(corr uint64) {
	s.mu.Lock()
	delete(s.pending, corr)
	s.mu.Unlock()
}
