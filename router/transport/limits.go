package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/meshnode/meshnode/internal/logbudget"
	"github.com/meshnode/meshnode/router"
)

// This file bounds what a connection that has not been admitted can cost
// (issue 12 item 5): the frame limit before hello, the caps on unadmitted
// connections and admitted peers, the rule for hellos claiming a RID that a
// live connection holds, and the node-wide rate limit of the log lines
// strangers can cause. docs/TRANSPORT.md "Limits before admission".

// Defaults of Config.MaxUnadmitted and Config.MaxPeers.
const (
	// DefaultMaxUnadmitted: a mesh node has few peers, and an honest peer
	// is unadmitted only for one round trip after connecting; 64 pending
	// connections cover a whole mesh restarting at once. At most
	// router.HelloMaxFrameBytes (1 MiB) each can be buffered, so the pending
	// connections together hold at most ~64 MiB of input.
	DefaultMaxUnadmitted = 64
	// DefaultMaxPeers: far above a mesh's size, low enough that each
	// admitted connection's buffers and queue (IOBufferBytes ×2 plus its
	// bounded reply queue) cannot add up to an unbounded amount.
	DefaultMaxPeers = 1024
	// DefaultIOBufferBytes is each connection's read buffer and write
	// buffer. Records larger than a buffer bypass it (bufio reads and
	// writes them directly), so it only decides how many small records
	// share one socket call. 16 KiB was as fast as the former 64 KiB for
	// 1 KiB and 64 KiB records one-way and for request/reply (4 alternating
	// runs each, docs/TRANSPORT.md) and holds 96 KiB less per connection —
	// per peer twice, since a node has its link and the peer's connection.
	DefaultIOBufferBytes = 16 << 10
)

// Handshake and admission failures are logged at most handshakeLogBurst
// lines per handshakeLogEvery, node-wide; the rest are counted and reported
// in one summary line per window.
const (
	handshakeLogBurst = 10
	handshakeLogEvery = 10 * time.Second
)

// The INFO lines of an admitted inbound connection — its admission, its
// close, its reaping as silent — are written at most connLogBurst times per
// connLogEvery each, node-wide. The count of those left out is written in a
// summary line (connLogSummary) once the window that left them out is over:
// carried by the next line of the same kind alone, it waited for a
// connection that might never come (a mesh of more than connLogBurst nodes
// starting at once logged connLogBurst admissions and nothing of the
// others). A real peer's connection is worth its lines, and a mesh of up to
// connLogBurst peers still logs each one's admission when it starts; but
// without CURVE a client that knows the mesh name is admitted, and an
// operator try-out's storm of such fake peers (1,100 connections, 136
// admitted, all closed within 17.5 s) wrote two or three lines per
// connection without limit. The events and counters still see every
// connection.
const (
	connLogBurst = 16
	connLogEvery = 10 * time.Second
)

// The per-connection INFO lines, and the summary of those left out.
const (
	connLineAdmitted = "transport: admitted inbound peer"
	connLineClosed   = "transport: inbound connection closed"
	connLineSilent   = "transport: closing silent inbound connection"
	connLogSummary   = "transport: per-connection log lines left out"
)

// connLog holds one budget per per-connection INFO line, and the pending
// summary of the lines they left out.
type connLog struct {
	admitted, closed, silent logbudget.Budget

	mu      sync.Mutex
	flushT  Timer // the pending summary; nil when none
	stopped bool  // Close ran: no more summaries are scheduled
}

// connInfo writes an INFO line of an inbound connection if b, the budget
// of that line, allows it now, with the count of those left out before it
// that no summary reported yet. A line left out schedules the summary.
func (n *Node) connInfo(b *logbudget.Budget, msg string, args ...any) {
	ok, suppressed := b.Allow(logbudget.At(n.clock.Now()), connLogBurst, connLogEvery)
	if !ok {
		n.connLog.mu.Lock()
		if n.connLog.flushT == nil && !n.connLog.stopped {
			// connLogEvery after a line left out is past the end of the
			// window that left it out.
			n.connLog.flushT = n.clock.AfterFunc(connLogEvery, n.flushConnLog)
		}
		n.connLog.mu.Unlock()
		return
	}
	n.log.Info(msg, append(args, "suppressed", suppressed)...)
}

// flushConnLog writes one summary line per per-connection line that left
// some out since it was last written or summarized.
func (n *Node) flushConnLog() {
	n.connLog.mu.Lock()
	n.connLog.flushT = nil
	n.connLog.mu.Unlock()
	for _, l := range []struct {
		b   *logbudget.Budget
		msg string
	}{{&n.connLog.admitted, connLineAdmitted}, {&n.connLog.closed, connLineClosed}, {&n.connLog.silent, connLineSilent}} {
		if s := l.b.TakeSuppressed(); s > 0 {
			n.log.Info(connLogSummary, "line", l.msg, "suppressed", s, "window", connLogEvery, "burst", connLogBurst)
		}
	}
}

// stopConnLog cancels the pending summary (Close leaves no timer behind)
// and writes it at once.
func (n *Node) stopConnLog() {
	n.connLog.mu.Lock()
	n.connLog.stopped = true
	t := n.connLog.flushT
	n.connLog.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	n.flushConnLog()
}

// ErrUnadmittedLimit is matched by the close cause of a connection that
// broke a limit before its hello was admitted: a message larger than the
// largest valid hello (then it matches ErrFraming too), no hello within
// HandshakeTimeout, or arriving while MaxUnadmitted connections were
// already pending.
var ErrUnadmittedLimit = errors.New("transport: unadmitted connection over its limits")

// preHelloLimits are the frame limits of a connection before admission:
// nothing but a hello is useful then, so nothing larger than the largest
// hello the codec accepts is buffered (a stranger could otherwise make each
// connection allocate MaxMessageBytes, 128 MiB by default).
func preHelloLimits(lim frameLimits) frameLimits {
	lim.maxFrame = min(lim.maxFrame, router.HelloMaxFrameBytes)
	lim.maxMessage = min(lim.maxMessage, router.HelloMaxFrameBytes)
	return lim
}

// unadmittedCause classifies why a connection that was never admitted
// closed: it returns an error wrapping ErrUnadmittedLimit when the cause is
// one of the pre-admission limits, nil otherwise.
func unadmittedCause(ic *inConn, cause error) error {
	if !ic.unadmitted.Load() {
		return nil
	}
	switch {
	case ic.slot != nil && ic.slot.evicted.Load():
		return fmt.Errorf("%w: closed to make room for a connection from another address: %w", ErrUnadmittedLimit, cause)
	case errors.Is(cause, ErrFraming):
		return fmt.Errorf("%w: before hello: %w", ErrUnadmittedLimit, cause)
	case errors.Is(cause, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: no hello within the handshake timeout: %w", ErrUnadmittedLimit, cause)
	}
	return nil
}

// refuseUnadmitted closes a connection accepted while MaxUnadmitted others
// are pending: nothing is read from it, so it costs one accept and a close.
func (r *routerSock) refuseUnadmitted(raw net.Conn) {
	r.refusedUnadmitted.Add(1)
	r.refuse(raw, fmt.Errorf("%w: %d connections pending hello (transport.max_unadmitted)", ErrUnadmittedLimit, r.p.maxUnadmitted))
}

// refuseFull closes a connection accepted while MaxInboundConns are open.
// It was counted only, and an operator whose peers could not connect found
// no line saying why (TestInboundConnCapIsLogged).
func (r *routerSock) refuseFull(raw net.Conn) {
	r.refusedFull.Add(1)
	r.refuse(raw, fmt.Errorf("transport: %d inbound connections open (transport.Config.MaxInboundConns)", r.p.maxInbound))
}

// refuse closes raw at accept and reports it (rate-limited by the node).
func (r *routerSock) refuse(raw net.Conn, err error) {
	remote := raw.RemoteAddr().String()
	_ = raw.Close()
	if r.onRefuse != nil {
		r.onRefuse(remote, err)
	}
}

// errPeersFull is claim's answer when MaxPeers distinct RIDs are admitted.
var errPeersFull = errors.New("transport: admitted peer limit reached")

// claim makes ic the admitted connection of its identity, unless that
// would exceed MaxPeers distinct identities. It returns the connection it
// replaces (the caller closes it with supersede). The node layer has
// already applied the identity rule (heldElsewhere). It must run on ic's
// reading goroutine (admission does, from onFrames): it lifts the pre-hello
// frame limits and the hello deadline, which that goroutine owns.
func (r *routerSock) claim(ic *inConn) (old *inConn, err error) {
	r.mu.Lock()
	if ic.slot != nil && ic.slot.evicted.Load() {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: evicted from the unadmitted pool", ErrUnadmittedLimit)
	}
	old = r.byID[ic.ident]
	if old == nil && len(r.byID) >= r.p.maxPeers {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %d peers (transport.max_peers)", errPeersFull, r.p.maxPeers)
	}
	r.byID[ic.ident] = ic
	ic.unadmitted.Store(false)
	r.releaseSlotLocked(ic.slot)
	r.mu.Unlock()
	ic.pc.zc.g.lim = r.p.lim
	_ = ic.pc.zc.raw.SetReadDeadline(time.Time{})
	return old, nil
}

// supersede ends the connection a newer admitted one of the same identity
// replaced (libzmq's ROUTER_HANDOVER; zmq4 keeps both and writes replies to
// each). Replacement happens only at admission, and admission refuses a
// hello while the old connection is live (heldElsewhere), so merely
// connecting, or a forged hello, cannot knock a live peer off.
//
// With idle > 0 — the new connection comes from the same peer run — the
// old one is read to its end (peerConn.readOut): the peer's link dials
// again only once it closed the old socket, and what that socket still
// holds the peer may count as delivered. Otherwise (the peer restarted:
// its old run is gone) the old connection is cut (peerConn.cut), not
// closed: what its kernel acknowledged still reaches the handler.
//
// Either way the new connection delivers nothing before the old one was
// read to its end (inConn.after), so order does not depend on supersede's
// wait: it waits, at most wait, for the old reader only so that a short
// end (a dead run's socket, a cut one) is over before the peer is
// admitted and its new session's liveness starts. The wait must stay
// below the peer's handshake timeout (its wait for the admit): a longer
// one would fail the peer's connection attempt, and its next hellos
// would be refused while the unanswered connection looks live.
func supersede(old, ic *inConn, wait, idle time.Duration) {
	if old == nil || old == ic {
		return
	}
	old.superseed.Store(true)
	ic.after = old.readDone
	cause := fmt.Errorf("%w: superseded by a newer connection with the same identity", ErrPeerDown)
	if idle > 0 {
		old.pc.readOut(cause, idle)
	} else {
		old.pc.cut(cause)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-old.readDone:
	case <-t.C:
	}
}

// noteReadOut records old, superseded by a newer connection of the same
// peer run, as that identity's connection being read to its end, and
// returns the one it replaces there when that one is still being read: the
// caller cuts it (peerConn.cutReadOut).
//
// One read-out per identity: the read-out is bounded only by idleness (a
// read that waited PeerTimeout for nothing), so a peer run that reconnects
// once its connection is out of the live window and trickles a byte into
// every old connection kept all of them open — one more per reconnect, up
// to MaxInboundConns (TestSupersededReadOutsAreBounded). A real peer's
// kernel still sends on its last given-up socket, the one the newest
// connection superseded; by the time a third connection of the run is
// admitted the one before was superseded a live window or more ago, and
// whatever it still delivers after that is cut — what this kernel
// acknowledged of it is still read. A receiver whose handler is stuck that
// long refuses what the peer's kernel still held for the older socket
// (docs/TRANSPORT.md, "One read-out per RID").
func (r *routerSock) noteReadOut(old *inConn) (prev *inConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev = r.readOuts[old.ident]
	r.readOuts[old.ident] = old
	if prev == nil || prev == old {
		return nil
	}
	select {
	case <-prev.readDone:
		return nil
	default:
		return prev
	}
}

// current returns the admitted connection of an identity, if any.
func (r *routerSock) current(ident string) *inConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[ident]
}

// liveWindow is how recently a connection must have delivered a record to
// count as live for the identity rule: an admitted peer probes every
// ProbeInterval whatever its traffic (and its ROUTER acks ours), so two
// silent probe intervals mean nobody is speaking on it any more.
func (n *Node) liveWindow() time.Duration {
	return min(2*n.cfg.ProbeInterval, n.cfg.PeerTimeout)
}

// heldElsewhere applies the identity rule to a hello on ic claiming
// lifecycle generation gen: it describes the live connection that holds
// ic's RID against that hello, or returns "" when none does. A RID is held
//   - by another admitted inbound connection of that identity that is open
//     and delivered a record within liveWindow, against every hello;
//   - by our own admitted link to that RID that received a record within
//     liveWindow, against a hello of another generation than the link's
//     peer (we dialled its advertised endpoint, so only the real peer
//     answers on it, and it is running that generation). A hello of the
//     same generation is the peer's own DEALER reaching our ROUTER — the
//     normal second direction of a mesh — and changes nothing on the link.
//
// While the RID is held, no hello from another connection changes anything
// kept for it, whatever lifecycle generation it claims: without
// authenticated identities a hello is only a claim, and the live
// connection is evidence the claimed restart did not happen. A restarted
// peer is admitted once its old connections are gone (a dead process's
// sockets close at once) or silent for liveWindow (a hung or cut-off one).
// n.mu is held by the caller.
func (n *Node) heldElsewhere(ic *inConn, gen uint64, l *link, now time.Time) string {
	window := n.liveWindow()
	if cur := n.rt.current(ic.ident); cur != nil && cur != ic && !cur.pc.isClosed() {
		if ago := now.Sub(time.Unix(0, cur.lastSeen.Load())); ago < window {
			return fmt.Sprintf("RID held by the live inbound connection from %s (last record %s ago)", cur.remote, ago)
		}
	}
	if l != nil {
		l.mu.Lock()
		s := l.sess
		l.mu.Unlock()
		if s != nil && s.info.LifecycleGeneration != gen {
			if ago, ok := s.heardWithin(now, window); ok {
				return fmt.Sprintf("RID held by our live link to it, generation %d (last record %s ago)", s.info.LifecycleGeneration, ago)
			}
		}
	}
	return ""
}

// heardWithin reports how long ago the session last received a record and
// whether that is within window and the session has not ended.
func (s *session) heardWithin(now time.Time, window time.Duration) (time.Duration, bool) {
	s.mu.Lock()
	ended := s.ended
	s.mu.Unlock()
	ago := now.Sub(time.Unix(0, s.heard.Load()))
	return ago, !ended && ago < window
}

// isClosed reports whether the connection has been torn down.
func (pc *peerConn) isClosed() bool {
	select {
	case <-pc.done:
		return true
	default:
		return false
	}
}

// logGate rate-limits one class of log lines node-wide: at most burst lines
// per window; the lines it drops are counted and reported by one summary
// line when the window ends. A per-connection limit is no defence here:
// every half-open connection is a new connection.
type logGate struct {
	clock Clock
	log   *slog.Logger
	burst int
	every time.Duration

	mu         sync.Mutex
	start      time.Time // of the current window
	used       int       // lines logged in the current window
	suppressed int       // lines dropped since the last summary
	flushT     Timer
	closed     bool
}

func newLogGate(clock Clock, log *slog.Logger, burst int, every time.Duration) *logGate {
	return &logGate{clock: clock, log: log, burst: burst, every: every}
}

// warn logs msg at Warn level unless the window's budget is spent.
func (g *logGate) warn(msg string, args ...any) {
	g.mu.Lock()
	now := g.clock.Now()
	if g.start.IsZero() || now.Sub(g.start) >= g.every {
		g.start, g.used = now, 0
	}
	if g.used >= g.burst {
		g.suppressed++
		if g.flushT == nil && !g.closed {
			g.flushT = g.clock.AfterFunc(g.every-now.Sub(g.start), g.flush)
		}
		g.mu.Unlock()
		return
	}
	g.used++
	g.mu.Unlock()
	g.log.Warn(msg, args...)
}

// flush writes the summary of the dropped lines, if any.
func (g *logGate) flush() {
	g.mu.Lock()
	g.flushT = nil
	s := g.suppressed
	g.suppressed = 0
	g.mu.Unlock()
	if s > 0 {
		g.log.Warn("transport: suppressed similar log lines", "suppressed", s, "window", g.every, "burst", g.burst)
	}
}

// stop cancels the summary timer (Close leaves no timer behind) and writes
// the pending summary at once.
func (g *logGate) stop() {
	g.mu.Lock()
	g.closed = true
	t := g.flushT
	g.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	g.flush()
}
