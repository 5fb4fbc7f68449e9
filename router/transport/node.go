package transport

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/router"
)

// PeerInfo describes an admitted peer: its RID and the route-mesh admission
// it presented (hello on our ROUTER, or admit on our DEALER).
type PeerInfo struct {
	RID                 RID
	MeshName            string
	SecurityIdentity    string
	LifecycleGeneration uint64
	DescriptorRevision  uint64
	Endpoint            string // advertised endpoint
	Remote              string // TCP address of this connection
	// Admission is the full route-mesh admission (channels, descriptor
	// extension) as received.
	Admission *router.RouteMeshAdmission
}

// Has reports whether the peer's admission lists the protocol capability
// c (descriptor extension field 6).
func (p PeerInfo) Has(c string) bool {
	return p.Admission != nil && slices.Contains(p.Admission.Extension.ProtocolCapabilities, c)
}

// EventKind says what changed about a peer.
type EventKind uint8

// Peer events.
const (
	// EventAdmitted: our link (DEALER) to the peer was admitted; Send and
	// Request to it work from now on. Peer is the peer's admit.
	EventAdmitted EventKind = iota + 1
	// EventDown: our admitted link to the peer is gone (liveness timeout,
	// connection loss, restart with a new lifecycle generation, Disconnect,
	// Close). Err says why; pending requests failed with ErrPeerDown.
	EventDown
	// EventRejected: the peer rejected our hello, or we refused its admit.
	// Err is a *RejectError. The link keeps retrying with backoff.
	EventRejected
	// EventInboundAdmitted: a peer's hello on our ROUTER was admitted.
	EventInboundAdmitted
	// EventInboundClosed: an admitted inbound connection closed.
	EventInboundClosed
)

func (k EventKind) String() string {
	switch k {
	case EventAdmitted:
		return "admitted"
	case EventDown:
		return "down"
	case EventRejected:
		return "rejected"
	case EventInboundAdmitted:
		return "inbound-admitted"
	case EventInboundClosed:
		return "inbound-closed"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is a peer state change.
type Event struct {
	Kind EventKind
	Peer PeerInfo
	Err  error
}

// Node is one meshnode's transport: a ROUTER bound at its endpoint and one
// DEALER link per peer it talks to. It carries bytes only; it knows nothing
// of owners or objects.
type Node struct {
	cfg      Config
	log      *slog.Logger
	clock    Clock
	rt       *routerSock
	endpoint string // bound, with the real port
	adv      string // advertised

	ctx    context.Context
	cancel context.CancelFunc
	// hsLog rate-limits the lines strangers can cause (handshake and
	// admission failures, records before hello, refused connections).
	hsLog *logGate
	// connLog budgets the INFO lines each admitted inbound connection
	// writes (limits.go, connInfo).
	connLog connLog

	mu        sync.Mutex
	links     map[string]*link
	seen      map[string]genRev // highest admitted (generation, revision) per inbound RID
	admission router.RouteMeshAdmission
	closed    bool
	sweepT    Timer
	sweepDue  time.Time // when sweepT is due
	linkWG    sync.WaitGroup
	// draining holds, per peer RID, the drained channel of the ended
	// session whose connection is still being read to its end (session.end);
	// the next session to that peer starts after it (awaitDrain).
	draining map[string]chan struct{}
	// live holds, per peer RID, the drained channel of the last admitted
	// session, from its admission until it was read to its end (noteLive):
	// a link made after Disconnect waits for it too (awaitDrain), also
	// when that session's end had not begun yet, or had begun without its
	// noteDraining, when the new link dialled.
	live map[string]chan struct{}
	// kept holds, per peer RID, the one-way messages an ended session had
	// not sent, for the next session to the same peer run (keepUnsent).
	kept map[string]*keptRecords
	// refusedAsDuplicate holds, per peer RID, when (real time) the peer
	// last refused this node's hello because a connection of ours is
	// still live there (noteRefusedAsDuplicate).
	refusedAsDuplicate map[string]time.Time

	corr atomic.Uint64
	// seqTop is the highest message number any link issued (outSeq);
	// seqRun, drawn at New, names this process in router.LinkSequence.
	seqTop atomic.Uint64
	seqRun uint64
	calls  callTable
	stats  stats
}

// genRev is what this node admitted of one inbound RID: its run and
// revision, and the numbered messages delivered from that run (inSeq).
type genRev struct {
	gen, rev uint64
	in       *inSeq
	// others are the records of other sending processes of this run (the
	// same RID and generation, a store that lost its data handing the
	// generation out again) that a connection of theirs began apart from
	// in, newest last (takeSequence); at most maxOtherRuns.
	others []*inSeq
	at     time.Time // last admitted, or its connection ended (pruneSeenLocked)
}

// New binds the ROUTER and returns a running Node.
func New(cfg Config) (*Node, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := c.Logger.With("rid", c.RID.String(), "mesh", c.MeshName, "gen", c.LifecycleGeneration)
	rt, err := listenRouter(c.Endpoint, c.linkParams(), log)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      c,
		log:      log,
		clock:    c.Clock,
		rt:       rt,
		links:    make(map[string]*link),
		draining: make(map[string]chan struct{}),
		live:     make(map[string]chan struct{}),
		kept:     make(map[string]*keptRecords),
		seen:     make(map[string]genRev),
		hsLog:    newLogGate(c.Clock, log, handshakeLogBurst, handshakeLogEvery),

		refusedAsDuplicate: make(map[string]time.Time),
	}
	n.stats.init()
	n.calls.init()
	n.endpoint = boundEndpoint(c.Endpoint, rt.ln.Addr())
	n.adv = c.AdvertisedEndpoint
	if n.adv == "" {
		n.adv = n.endpoint
	}
	n.admission = defaultAdmission(&c, n.adv)
	if _, err := encodeInfra(&router.Hello{Admission: n.currentAdmissionLocked()}); err != nil {
		_ = rt.ln.Close()
		return nil, fmt.Errorf("%w: admission: %w", ErrConfig, err)
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	// Names this process, not secret (math/rand/v2 seeds itself); a
	// nonzero-u64 is 1..2^63-1 on the wire.
	n.seqRun = 1 + rand.Uint64N(router.MaxGeneration)
	rt.onOpen = n.onInboundOpen
	rt.onFrames = n.onInboundFrames
	rt.onClose = n.onInboundClose
	rt.onBad = n.onInboundBad
	rt.onRefuse = n.onInboundRefused
	rt.start()
	n.mu.Lock()
	n.armSweepLocked()
	n.mu.Unlock()
	if c.curve != nil {
		n.log.Info("transport: listening", "endpoint", n.endpoint, "advertised", n.adv,
			"security", "CURVE", "public_key", c.Curve.KeyPair.Public.String(), "allowed_keys", len(c.curve.allowed))
	} else {
		n.log.Info("transport: listening", "endpoint", n.endpoint, "advertised", n.adv, "security", "NULL")
		if !isLoopbackEndpoint(c.Endpoint) {
			n.log.Warn("transport: SECURITY WARNING: listening on a non-loopback address WITHOUT CURVE: "+
				"anyone who reaches this port can join the mesh as any node, read every record and forge replies; "+
				"enable transport.curve (docs/OPERATIONS.md, Link security) or bind loopback only",
				"endpoint", n.endpoint)
		}
	}
	return n, nil
}

// boundEndpoint renders the listener address as tcp://host:port, keeping the
// configured host (so "localhost" stays "localhost") but the real port.
func boundEndpoint(configured string, a net.Addr) string {
	addr, _ := splitEndpoint(configured)
	host, _, _ := net.SplitHostPort(addr)
	_, port, _ := net.SplitHostPort(a.String())
	if host == "" {
		if ta, ok := a.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
			host = ta.IP.String()
		} else {
			host = "127.0.0.1"
		}
	}
	return "tcp://" + net.JoinHostPort(host, port)
}

// defaultAdmission is the route-mesh admission this node presents. The
// descriptor extension fields the transport does not own get neutral values
// (serving, server role, no capacity limit) unless Config.Admission sets
// them; the mesh layer supplies the real descriptor there.
func defaultAdmission(c *Config, adv string) router.RouteMeshAdmission {
	var a router.RouteMeshAdmission
	if c.Admission != nil {
		a = *c.Admission
		a.Extension.ProtocolCapabilities = capabilities(a.Extension.ProtocolCapabilities)
	} else {
		a.Extension = router.DescriptorExtension{
			RuntimeState:         router.RuntimeServing,
			ProtocolCapabilities: capabilities(c.Capabilities),
			ObjectRole:           router.ObjectRoleServer,
			PlacementWeight:      router.WeightMax,
			ActiveCapacityLimit:  router.ObjectTypeCapacityMaximum,
		}
	}
	a.MeshName = c.MeshName
	a.SecurityIdentity = c.SecurityIdentity
	a.LifecycleGeneration = c.LifecycleGeneration
	a.DescriptorRevision = c.DescriptorRevision
	a.AdvertisedEndpoint = adv
	return a
}

// capabilities is the sorted, unique protocolCapabilities list of extra
// with the required capability and the transport's own.
func capabilities(extra []string) []string {
	out := append([]string{router.RequiredProtocolCapability, router.CapabilityLinkSequence}, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}

// RID returns this node's RoutingId.
func (n *Node) RID() RID { return append(RID(nil), n.cfg.RID...) }

// Endpoint returns the bound endpoint with its real port.
func (n *Node) Endpoint() string { return n.endpoint }

// AdvertisedEndpoint returns the endpoint presented in hello/admit.
func (n *Node) AdvertisedEndpoint() string { return n.adv }

// LifecycleGeneration returns this node run's generation.
func (n *Node) LifecycleGeneration() uint64 { return n.cfg.LifecycleGeneration }

// SetDescriptorRevision updates the revision (and optionally the descriptor
// extension) presented in hello/admit from now on. Established admissions
// are not renegotiated (command 4 update is not spoken yet).
func (n *Node) SetDescriptorRevision(rev uint64, ext *router.DescriptorExtension) error {
	if rev == 0 || rev > router.MaxGeneration {
		return fmt.Errorf("%w: descriptor revision must be 1..2^63-1", ErrConfig)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if rev < n.admission.DescriptorRevision {
		return fmt.Errorf("%w: descriptor revision %d is below the current %d", ErrConfig, rev, n.admission.DescriptorRevision)
	}
	next := n.admission
	next.DescriptorRevision = rev
	if ext != nil {
		next.Extension = *ext
		next.Extension.ProtocolCapabilities = capabilities(ext.ProtocolCapabilities)
	}
	if _, err := encodeInfra(&router.Hello{Admission: router.ServiceAdmission{Topology: router.TopologyRouteMesh, RouteMesh: &next}}); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	n.admission = next
	return nil
}

func (n *Node) currentAdmission() router.ServiceAdmission {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.currentAdmissionLocked()
}

func (n *Node) currentAdmissionLocked() router.ServiceAdmission {
	a := n.admission
	return router.ServiceAdmission{Topology: router.TopologyRouteMesh, RouteMesh: &a}
}

func (n *Node) emit(ev Event) {
	if n.cfg.OnEvent != nil {
		n.cfg.OnEvent(ev)
	}
}

// Connect creates the link to a peer: a DEALER that dials endpoint, says
// hello and, once admitted, carries every record this node originates to
// that peer. It returns at once; the link connects, reconnects and
// re-admits in the background until Disconnect or Close. Use WaitAdmitted
// or OnEvent to learn when the peer is usable. Calling Connect again for a
// known peer only updates the endpoint used by the next dial.
func (n *Node) Connect(peer RID, endpoint string) error {
	if err := validRID(peer); err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if _, err := splitEndpoint(endpoint); err != nil {
		return err
	}
	if peer.Equal(n.cfg.RID) {
		return fmt.Errorf("%w: cannot connect to our own RID", ErrConfig)
	}
	if n.cfg.curve != nil {
		// Fail now rather than on every redial: the peer's key (its RID)
		// must be trusted.
		if _, err := n.cfg.curve.clientMechanism(peer); err != nil {
			return err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if l := n.links[string(peer)]; l != nil {
		l.setEndpoint(endpoint)
		return nil
	}
	l := newLink(n, append(RID(nil), peer...), endpoint)
	n.links[string(peer)] = l
	n.linkWG.Add(1)
	go func() {
		defer n.linkWG.Done()
		l.run()
	}()
	return nil
}

// Disconnect tears down the link to a peer: its pending requests have
// failed with ErrPeerDown when it returns, and queued records are dropped
// (what was already written still reaches the peer: the connection is
// drained, not reset). The link's goroutines finish in the background
// (Close waits for them), so Disconnect may be called from OnEvent.
func (n *Node) Disconnect(peer RID) error {
	n.mu.Lock()
	l := n.links[string(peer)]
	delete(n.links, string(peer))
	n.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w: %s", ErrUnknownPeer, peer)
	}
	l.shutdown(fmt.Errorf("%w: disconnected", ErrPeerDown))
	n.stats.release(string(l.rid), l.counters)
	return nil
}

// Peers lists the peers whose links are admitted now.
func (n *Node) Peers() []PeerInfo {
	n.mu.Lock()
	links := make([]*link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	var out []PeerInfo
	for _, l := range links {
		l.mu.Lock()
		if l.sess != nil {
			out = append(out, l.sess.info)
		}
		l.mu.Unlock()
	}
	return out
}

// WaitAdmitted blocks until the link to peer is admitted (returning the
// peer's admission) or ctx ends. After a rejection it keeps waiting (the
// link retries); the last rejection is wrapped into the ctx error.
func (n *Node) WaitAdmitted(ctx context.Context, peer RID) (PeerInfo, error) {
	l, err := n.link(peer)
	if err != nil {
		return PeerInfo{}, err
	}
	for {
		l.mu.Lock()
		s, ch, last, stopped := l.sess, l.change, l.lastErr, l.stopped
		l.mu.Unlock()
		if s != nil {
			return s.info, nil
		}
		if stopped {
			return PeerInfo{}, fmt.Errorf("%w: link to %s stopped", ErrPeerDown, peer)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if last != nil {
				return PeerInfo{}, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), last)
			}
			return PeerInfo{}, ctx.Err()
		}
	}
}

// Peer returns the admitted state of the link to peer.
func (n *Node) Peer(peer RID) (PeerInfo, bool) {
	l, err := n.link(peer)
	if err != nil {
		return PeerInfo{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sess == nil {
		return PeerInfo{}, false
	}
	return l.sess.info, true
}

func (n *Node) link(peer RID) (*link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	l := n.links[string(peer)]
	if l == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknownPeer, peer)
	}
	return l, nil
}

// peerRun is the run of a peer a record is meant for: with set, only a
// session admitted with lifecycle generation gen may carry it.
type peerRun struct {
	gen uint64
	set bool
}

// anyRun lets whichever run of the peer is admitted carry a record.
var anyRun = peerRun{}

// session returns the admitted session of the link to peer, which must be
// of run when run is set (*RunError otherwise). The session is the one the
// caller queues on: a session's run never changes, and a record queued on
// it reaches that run or no run (its queue is closed when it ends, and what
// it kept goes to a later session of the same run only, keepUnsent), so
// checking here leaves no moment in which another run can be admitted
// between the check and the send.
func (n *Node) session(peer RID, run peerRun) (*session, error) {
	l, err := n.link(peer)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	s, last := l.sess, l.lastErr
	l.mu.Unlock()
	if s == nil {
		if last != nil {
			return nil, fmt.Errorf("%w: %s (%w)", ErrNotAdmitted, peer, last)
		}
		return nil, fmt.Errorf("%w: %s", ErrNotAdmitted, peer)
	}
	if run.set && s.info.LifecycleGeneration != run.gen {
		return nil, &RunError{Peer: l.rid, Named: run.gen, Admitted: s.info.LifecycleGeneration}
	}
	return s, nil
}

// Send queues rec for peer on the ordered A→B connection. It never blocks:
// a full queue fails at once with ErrBackpressure; a link that is not
// admitted fails with ErrNotAdmitted. A nil error means queued, not
// delivered: when the connection dies first, a one-way application message
// (ActorSend, SpotSend) waits for the link's next connection to the same
// peer run (Config.KeepUnsent), anything else is dropped.
func (n *Node) Send(ctx context.Context, peer RID, rec *router.Record) error {
	return n.send(ctx, peer, anyRun, rec, false)
}

// SendRun is Send of a record meant for one run of peer, the one admitted
// with lifecycle generation gen (a record naming that run, which another
// run refuses): it is queued only on a session of that run. A session of
// another run fails it with a *RunError — ErrRunEnded when a later run is
// admitted, ErrNotAdmitted when the link still holds an earlier one —
// checked on the session the record would be queued on, so no other run
// can be admitted between the check and the send.
func (n *Node) SendRun(ctx context.Context, peer RID, gen uint64, rec *router.Record) error {
	return n.send(ctx, peer, peerRun{gen: gen, set: true}, rec, false)
}

// SendWait is Send for a caller that would rather wait than shed: when the
// peer's send queue is full it waits for room (woken by the writer, not by
// polling) until ctx ends, then fails with an error wrapping both
// ErrBackpressure and ctx.Err(). A record larger than the whole byte budget
// (SendQueueBytes) is admitted once the queue is empty, so one relocation
// chunk (router.RelocationChunkBytes of data) always gets through. A link
// that is not admitted fails at once as in Send; the connection going down
// while waiting fails with ErrPeerDown. Records of one caller stay in the
// order its SendWait/Send calls returned; concurrent callers are not
// ordered among themselves.
func (n *Node) SendWait(ctx context.Context, peer RID, rec *router.Record) error {
	return n.send(ctx, peer, anyRun, rec, true)
}

// SendWaitRun is SendWait of a record meant for the run gen of peer, checked
// as SendRun checks it.
func (n *Node) SendWaitRun(ctx context.Context, peer RID, gen uint64, rec *router.Record) error {
	return n.send(ctx, peer, peerRun{gen: gen, set: true}, rec, true)
}

func (n *Node) send(ctx context.Context, peer RID, run peerRun, rec *router.Record, wait bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if rec != nil && isInfrastructure(rec.Command) {
		return fmt.Errorf("%w: %s is sent by the transport itself", ErrInvalidRecord, rec.Command)
	}
	frames, err := router.Encode(rec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := n.checkOutgoing(frames); err != nil {
		return err
	}
	s, err := n.session(peer, run)
	if err != nil {
		return err
	}
	// Only one-way application messages outlive their connection
	// (keepUnsent): the protocol records have their own recovery, and a
	// reply travels on the connection its request came on. They are the
	// ones a link numbers, and the receiver counts (numbered).
	keep := numbered(rec.Command)
	return s.send(ctx, frames, wait, keep)
}

// nextCorrelation returns a node-wide nonzero correlation in 1..2^63-1.
func (n *Node) nextCorrelation() uint64 {
	for {
		c := n.corr.Add(1) & router.MaxGeneration
		if c != 0 {
			return c
		}
	}
}

// Flush waits until every record already queued on this node's
// connections (links and inbound) was written to its socket, or ctx ends
// (then an error wrapping ctx.Err()). Close drops what is still queued: a
// node that answered work before it stops calls Flush first, so that the
// answers leave. Records queued while Flush waits are waited for too.
func (n *Node) Flush(ctx context.Context) error {
	for {
		pending := 0
		n.mu.Lock()
		for _, l := range n.links {
			l.mu.Lock()
			if l.sess != nil && !l.sess.pc.flushed() {
				pending++
			}
			l.mu.Unlock()
		}
		n.mu.Unlock()
		n.rt.mu.Lock()
		for ic := range n.rt.conns {
			if !ic.pc.flushed() {
				pending++
			}
		}
		n.rt.mu.Unlock()
		if pending == 0 {
			return nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("transport: %d connections still writing: %w", pending, ctx.Err())
		}
	}
}

// Close stops every goroutine, timer and socket of the node. Pending
// requests fail with ErrPeerDown (wrapping ErrClosed), reply slots
// (ExpectReply) with ErrClosed. Handlers see their
// context cancelled and must return for Close to complete.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	links := make([]*link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.links = map[string]*link{}
	if n.sweepT != nil {
		n.sweepT.Stop()
	}
	n.mu.Unlock()
	n.cancel()
	for _, l := range links {
		l.shutdown(fmt.Errorf("%w: %w", ErrPeerDown, ErrClosed))
	}
	// Reply slots (ExpectReply) and portable calls whose session is gone
	// already failed above; what is left can no longer be answered.
	n.calls.close(fmt.Errorf("transport: reply slot: %w", ErrClosed), fmt.Errorf("%w: %w", ErrPeerDown, ErrClosed))
	n.rt.close()
	n.linkWG.Wait()
	n.mu.Lock()
	for peer := range n.kept {
		n.dropKeptLocked(peer, "this node closed")
	}
	n.mu.Unlock()
	n.hsLog.stop()
	n.stopConnLog()
	n.log.Info("transport: closed")
	return nil
}

// sweep closes inbound connections that went silent: an admitted peer
// probes every ProbeInterval, so PeerTimeout without any record means its
// process or network is gone even if TCP has not noticed; an unadmitted
// connection that has not said hello within PeerTimeout is dropped too.
//
// A sweep that runs a probe interval or more after it was due means this
// process did not run meanwhile (a SIGSTOP, a VM freeze, starvation): the
// silence it would see is its own, and what its peers sent is still
// unread in the socket buffers — closing now would throw that away. It
// closes nothing then and judges again one interval later, once the
// readers have caught up.
func (n *Node) sweep() {
	n.mu.Lock()
	due := n.sweepDue
	n.mu.Unlock()
	if late := n.stalledSince(due); late > 0 {
		n.log.Warn("transport: this process did not run for a while (paused or starved); silent connections are judged again after one probe interval",
			"late", late.Round(time.Millisecond))
	} else {
		n.closeSilent()
	}
	n.mu.Lock()
	if !n.closed {
		n.armSweepLocked()
	}
	n.mu.Unlock()
}

func (n *Node) armSweepLocked() {
	n.sweepDue = n.clock.Now().Add(n.cfg.ProbeInterval)
	n.sweepT = n.clock.AfterFunc(n.cfg.ProbeInterval, n.sweep)
}

// closeSilent closes the inbound connections with no record for
// PeerTimeout.
func (n *Node) closeSilent() {
	now := n.clock.Now().UnixNano()
	n.rt.mu.Lock()
	var idle []*inConn
	for ic := range n.rt.conns {
		if ic.pc.readingOut.Load() {
			// Superseded, read to its end: its reader has its own bound,
			// idleness while it waits for the peer (readSource) — a
			// sweep's "no record" would also end a reader that is only
			// slow, its handler stuck, and its cut would do nothing now
			// (the connection has ended).
			continue
		}
		if time.Duration(now-ic.lastSeen.Load()) >= n.cfg.PeerTimeout {
			idle = append(idle, ic)
		}
	}
	n.rt.mu.Unlock()
	for _, ic := range idle {
		// Bytes this kernel holds unread are not silence: this node's
		// reader is behind (starved), and the peer — which saw them
		// acknowledged — would never send them again if the socket were
		// closed now (TestPausedSenderLosesNothing lost 1 to 46 one-way
		// records now and then on a loaded machine, its sender having
		// resumed and written just before a late sweep). Judged again at
		// the next sweep, once the reader has caught up.
		if unread, ok := unreadBytes(ic.pc.zc.raw); ok && unread > 0 {
			n.log.Debug("transport: silent inbound connection has unread bytes; judged again at the next sweep",
				"peer", RID(ic.ident).String(), "unread", unread)
			continue
		}
		n.connInfo(&n.connLog.silent, connLineSilent, "peer", RID(ic.ident).String(), "remote", ic.remote)
		// Cut, not closed: bytes arriving between the check above and
		// the close were acknowledged and then discarded by it, and the
		// sender, which saw them acknowledged, never sent them again. A
		// cut keeps readable what was acknowledged and refuses the rest.
		ic.pc.cut(fmt.Errorf("%w: no record for %s", ErrPeerDown, n.cfg.PeerTimeout))
	}
}

// stalledSince reports how late a timer due at due fired, when that is a
// probe interval or more (this process did not run), else 0. Timers on a
// busy machine are late by milliseconds; a whole probe interval (5 s by
// default) is a process that was stopped.
func (n *Node) stalledSince(due time.Time) time.Duration {
	if late := n.clock.Now().Sub(due); late >= n.cfg.ProbeInterval {
		return late
	}
	return 0
}

// isInfrastructure reports the commands only the transport sends.
func isInfrastructure(c router.Command) bool {
	switch c {
	case router.CmdHello, router.CmdAdmit, router.CmdReject, router.CmdLivenessProbe, router.CmdLivenessAck,
		router.CmdLinkSequence:
		return true
	}
	return false
}

// encodeInfra encodes a record the transport builds itself. Its inputs are
// validated at New (the admission) or are counters, so an error here is a
// bug; it is returned, never panicked.
func encodeInfra(body router.Body) ([][]byte, error) {
	frames, err := router.Encode(router.NewRecord(body, nil, nil))
	if err != nil {
		return nil, fmt.Errorf("transport: encoding own %s: %w", body.Command(), err)
	}
	return frames, nil
}

func framesSize(frames [][]byte) int64 {
	var n int64
	for _, f := range frames {
		n += int64(len(f))
	}
	return n
}

func peerInfoFrom(rid []byte, remote string, a *router.RouteMeshAdmission) PeerInfo {
	return PeerInfo{
		RID:                 append(RID(nil), rid...),
		MeshName:            a.MeshName,
		SecurityIdentity:    a.SecurityIdentity,
		LifecycleGeneration: a.LifecycleGeneration,
		DescriptorRevision:  a.DescriptorRevision,
		Endpoint:            a.AdvertisedEndpoint,
		Remote:              remote,
		Admission:           a,
	}
}

// CheckRecord reports whether the transport would send rec at all: nil, or
// the ErrInvalidRecord a send of it would fail with before anything is
// queued (an encode failure, a frame or record over the limits the peer's
// frame guard enforces). It lets a node refuse, with the same error, a
// message it delivers without the wire but may have to send later (a
// local message its object's move relays). The payload's bytes are sized,
// not copied: the check costs the same for any body.
func (n *Node) CheckRecord(rec *router.Record) error {
	probe, data := rec, 0
	if rec != nil && rec.Payload != nil && len(rec.Payload.Data) > 0 {
		p, r := *rec.Payload, *rec
		data, p.Data = len(p.Data), nil
		r.Payload = &p
		probe = &r
	}
	frames, err := router.Encode(probe)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	sizes := make([]uint64, len(frames))
	for i, f := range frames {
		sizes[i] = uint64(len(f))
	}
	if data > 0 {
		// The payload frame is the last; its body is data bytes longer.
		sizes[len(sizes)-1] += uint64(data)
	}
	return n.checkSizes(sizes)
}

// WithinLimits reports whether every record of at most frames frames,
// none longer than largest bytes and total bytes in all, passes this
// node's frame limits: what CheckRecord would say of any such record,
// without building one. A caller that knows such bounds for the records it
// builds (mesh: an object message is its body plus a bounded head) checks
// a small body for the price of three comparisons instead of an encoding.
func (n *Node) WithinLimits(frames int, largest, total uint64) bool {
	lim := n.cfg.limits()
	return frames <= lim.maxFrames && largest <= lim.maxFrame && total <= lim.maxMessage
}

// checkOutgoing refuses a record the peer's frame guard would refuse (the
// mesh shares one configuration): sent, it would close the connection at
// its header, and a one-way message kept and resent would do so again on
// every next connection.
func (n *Node) checkOutgoing(frames [][]byte) error {
	sizes := make([]uint64, len(frames))
	for i, f := range frames {
		sizes[i] = uint64(len(f))
	}
	return n.checkSizes(sizes)
}

// checkSizes is checkOutgoing for frames of the sizes given.
func (n *Node) checkSizes(sizes []uint64) error {
	lim := n.cfg.limits()
	if len(sizes) > lim.maxFrames {
		return fmt.Errorf("%w: %d frames, at most %d", ErrInvalidRecord, len(sizes), lim.maxFrames)
	}
	var total uint64
	for _, f := range sizes {
		if f > lim.maxFrame {
			return fmt.Errorf("%w: frame of %d bytes, at most %d (transport MaxFrameBytes)", ErrInvalidRecord, f, lim.maxFrame)
		}
		total += f
	}
	if total > lim.maxMessage {
		return fmt.Errorf("%w: record of %d bytes, at most %d (transport MaxMessageBytes)", ErrInvalidRecord, total, lim.maxMessage)
	}
	return nil
}
