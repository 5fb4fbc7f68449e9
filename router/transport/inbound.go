package transport

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshnode/meshnode/internal/logbudget"
	"github.com/meshnode/meshnode/router"
)

// This file is the node's side of the ROUTER: admission of peers' hellos,
// liveness acks, and delivery of their records to the Handler.

const logEvery = time.Second

// maxSeenPeers bounds the table of admitted (generation, revision) per RID
// used for the stale checks and the delivered message numbers
// (router.LinkSequence). When it is full, the RIDs whose last connection
// ended longest ago, holding no connection or link now, make room
// (pruneSeenLocked); only if
// none can is a new RID admitted without a row. A var for tests.
var maxSeenPeers = 1 << 16

func (n *Node) onInboundOpen(ic *inConn) {
	ic.lastSeen.Store(n.clock.Now().UnixNano())
	ic.pc.counters.Store(n.stats.detached())
}

func (n *Node) onInboundClose(ic *inConn, cause error) {
	n.stats.release(ic.ident, ic.row.Swap(nil))
	ic.mu.Lock()
	admitted, info := ic.admitted, ic.info
	ic.admitted = false
	ic.mu.Unlock()
	if admitted {
		// The row's age counts from the peer's last connection, not its
		// first admission: a peer linked for days whose connection just
		// dropped, its messages kept to be sent again, is the last to make
		// room (pruneSeenLocked), not the first.
		n.mu.Lock()
		if gr, ok := n.seen[ic.ident]; ok {
			gr.at = n.clock.Now()
			n.seen[ic.ident] = gr
		}
		n.mu.Unlock()
		n.connInfo(&n.connLog.closed, connLineClosed, "peer", info.RID.String(), "remote", ic.remote, "cause", cause)
		n.emit(Event{Kind: EventInboundClosed, Peer: info, Err: cause})
	}
}

// onInboundBad counts a connection-level failure (handshake or ZMTP framing)
// from a peer whose RID we may not know.
func (n *Node) onInboundBad(remote, ident string, err error) {
	if isProtocolViolation(err) {
		n.stats.protocolErrors.Add(1)
		if c := n.stats.known(ident); c != nil {
			c.protocolErrors.Add(1)
		}
	} else {
		n.stats.handshakeFailures.Add(1)
	}
	n.hsLog.warn("transport: inbound connection failed", "remote", remote, "peer", RID(ident).String(), "err", err)
}

// onInboundRefused logs a connection closed at accept (MaxUnadmitted); the
// router counts it.
func (n *Node) onInboundRefused(remote string, err error) {
	n.hsLog.warn("transport: inbound connection refused", "remote", remote, "err", err)
}

// protocolError drops one bad record from ic: counted (node and peer) and
// logged at most once per second per connection — or, before the
// connection's hello was admitted, within the node-wide budget of what
// strangers cause (hsLog): every new connection brings a fresh
// per-connection budget, and 200 strangers sending one malformed record
// each wrote 200 WARN lines (TestStrangersRecordsShareTheLogBudget).
func (n *Node) protocolError(ic *inConn, what string, err error) {
	n.stats.protocolErrors.Add(1)
	if c := ic.pc.counters.Load(); c != nil {
		c.protocolErrors.Add(1)
	}
	ic.mu.Lock()
	admitted := ic.admitted
	ic.mu.Unlock()
	if !admitted {
		n.hsLog.warn("transport: dropped record", "peer", RID(ic.ident).String(), "remote", ic.remote,
			"what", what, "err", err)
		return
	}
	if ok, suppressed := ic.logLimit.Allow(logbudget.At(n.clock.Now()), 1, logEvery); ok {
		n.log.Warn("transport: dropped record", "peer", RID(ic.ident).String(), "remote", ic.remote,
			"what", what, "err", err, "suppressed", suppressed)
	}
}

func (n *Node) onInboundFrames(ic *inConn, frames [][]byte) {
	ic.lastSeen.Store(n.clock.Now().UnixNano())
	rec, err := router.Decode(frames)
	if err != nil {
		n.protocolError(ic, "malformed record", err)
		ic.skipUndecodable(err)
		return
	}
	n.stats.received(ic.pc.counters.Load(), frames)
	ic.mu.Lock()
	admitted, info := ic.admitted, ic.info
	ic.mu.Unlock()

	switch rec.Command {
	case router.CmdHello:
		if admitted {
			n.protocolError(ic, "hello on an admitted connection", errUnexpected(rec.Command))
			return
		}
		n.admitInbound(ic, rec.Body.(*router.Hello))
		return
	case router.CmdAdmit, router.CmdReject, router.CmdLivenessAck:
		// These travel ROUTER→DEALER only; on our ROUTER they are misrouted.
		n.protocolError(ic, "record in the wrong direction", errUnexpected(rec.Command))
		return
	}
	if !admitted {
		n.stats.notAdmitted.Add(1)
		n.hsLog.warn("transport: dropped record from unadmitted connection", "peer", RID(ic.ident).String(),
			"remote", ic.remote, "command", rec.Command.String())
		return
	}
	switch rec.Command {
	case router.CmdLivenessProbe:
		id := rec.Body.(*router.LivenessProbe).ProbeID
		frames, err := encodeInfra(&router.LivenessAck{ProbeID: id})
		if err == nil {
			err = ic.pc.enqueuePriority(frames)
		}
		if err != nil {
			n.stats.backpressure.Add(1)
			n.log.Debug("transport: liveness ack not sent", "peer", info.RID.String(), "err", err)
		}
		return
	case router.CmdReply, router.CmdRelocationReady:
		// Replies normally come back on our DEALER; a peer may also answer
		// on its own DEALER, which lands here — and so does the reply of a
		// portable request or reply slot sent by an object's new owner.
		// Match it the same way, through the node-wide table.
		n.deliverReply(RID(ic.ident), rec)
		return
	case router.CmdLinkSequence:
		n.takeSequence(ic, rec.Body.(*router.LinkSequence))
		return
	}
	ic.awaitSuperseded()
	if ic.duplicate(rec.Command) {
		// The peer gave a connection up and sent this again; the earlier
		// copy reached the handler (docs/TRANSPORT.md "Delivered once").
		n.stats.duplicates.Add(1)
		return
	}
	if n.cfg.Handler == nil {
		n.stats.unhandled.Add(1)
		return
	}
	n.cfg.Handler(n.ctx, info, rec, func(r *router.Record) error { return n.replyOn(ic, r) })
}

// admitWait bounds how long an admission waits for the connection it
// supersedes to be read to its end (supersede): below the peer's wait for
// the admit (HandshakeTimeout, the same in a mesh), with room for the
// round trip.
func (n *Node) admitWait() time.Duration {
	return min(n.cfg.PeerTimeout, n.cfg.HandshakeTimeout/2)
}

// replyOn sends r back to the sender of an inbound record, on the same
// connection (ROUTER to the sender's identity).
func (n *Node) replyOn(ic *inConn, r *router.Record) error {
	if r != nil && isInfrastructure(r.Command) {
		return fmt.Errorf("%w: %s is sent by the transport itself", ErrInvalidRecord, r.Command)
	}
	frames, err := router.Encode(r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := n.checkOutgoing(frames); err != nil {
		return err
	}
	if ic.superseed.Load() {
		// The identity reconnected; the reply belongs to a request sent on
		// the old connection, whose sender has already failed it.
		return fmt.Errorf("%w: connection of %s was superseded", ErrPeerDown, RID(ic.ident))
	}
	if err := ic.pc.enqueue(outItem{frames: frames, size: framesSize(frames)}); err != nil {
		return n.sendFailed(ic.pc.counters.Load(), err)
	}
	return nil
}

// ReplyInbound sends a reply (command 20) to the node run (peer, gen) on
// the admitted connection that run's own link holds to this node. It is for
// the answer to a request that reached this node from elsewhere (a request
// that moved here with its object, spec §7.3): the requester may have
// started less than a discovery round ago, so that no link of this node
// reaches it yet while its link to this node is admitted, and a reply
// arriving there completes its portable call like any other. ErrUnknownPeer
// when that run has no admitted connection here.
func (n *Node) ReplyInbound(peer RID, gen uint64, rec *router.Record) error {
	if rec == nil || rec.Command != router.CmdReply {
		return fmt.Errorf("%w: ReplyInbound sends replies only", ErrInvalidRecord)
	}
	ic := n.rt.current(string(peer))
	if ic == nil {
		return fmt.Errorf("%w: %s has no admitted connection to this node", ErrUnknownPeer, peer)
	}
	ic.mu.Lock()
	admitted, info := ic.admitted, ic.info
	ic.mu.Unlock()
	if !admitted || info.LifecycleGeneration != gen {
		return fmt.Errorf("%w: %s/%d has no admitted connection to this node", ErrUnknownPeer, peer, gen)
	}
	return n.replyOn(ic, rec)
}

// sendFailed counts backpressure and maps a closed connection to
// ErrPeerDown.
func (n *Node) sendFailed(c *peerCounters, err error) error {
	if errors.Is(err, ErrBackpressure) {
		n.stats.backpressure.Add(1)
		if c != nil {
			c.backpressure.Add(1)
		}
		return err
	}
	if errors.Is(err, ErrPeerDown) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrPeerDown, err)
}

// admitInbound decides a peer's hello. Mapping to the schema's reasons:
// another topology or mesh name → topologyMismatch; another security
// identity → securityIdentityMismatch; a hello using our own RID →
// identityMismatch; a lifecycle generation below one already admitted for
// that RID → lifecycleGenerationStale; the same generation with a lower
// descriptor revision → descriptorRevisionStale; node closing →
// runtimeNotServing; the RID held by another live connection (the identity
// rule, heldElsewhere) → duplicateConnection; MaxPeers other RIDs admitted
// → resourceLimit. A rejected hello changes nothing kept for its RID.
func (n *Node) admitInbound(ic *inConn, h *router.Hello) {
	rm := h.Admission.RouteMesh
	reason := router.RejectReason(0)
	detail := ""
	now := n.clock.Now()
	n.mu.Lock()
	prev, seen := n.seen[ic.ident]
	closed := n.closed
	ours := n.admission
	l := n.links[ic.ident]
	held := ""
	if !closed && rm != nil && ic.ident != string(n.cfg.RID) {
		held = n.heldElsewhere(ic, rm.LifecycleGeneration, l, now)
	}
	switch {
	case closed:
		reason, detail = router.RejectRuntimeNotServing, "node closing"
	case h.Admission.Topology != router.TopologyRouteMesh || rm == nil:
		reason, detail = router.RejectTopologyMismatch, "not a route-mesh admission"
	case rm.MeshName != ours.MeshName:
		reason, detail = router.RejectTopologyMismatch, fmt.Sprintf("mesh %q, ours %q", rm.MeshName, ours.MeshName)
	case rm.SecurityIdentity != ours.SecurityIdentity:
		reason, detail = router.RejectSecurityIdentityMismatch, "security identity differs"
	case ic.ident == string(n.cfg.RID):
		reason, detail = router.RejectIdentityMismatch, "peer uses our own RID"
	case held != "":
		reason, detail = router.RejectDuplicateConnection, held
	case seen && rm.LifecycleGeneration < prev.gen:
		reason, detail = router.RejectLifecycleGenerationStale, fmt.Sprintf("generation %d, already admitted %d", rm.LifecycleGeneration, prev.gen)
	case seen && rm.LifecycleGeneration == prev.gen && rm.DescriptorRevision < prev.rev:
		reason, detail = router.RejectDescriptorRevisionStale, fmt.Sprintf("revision %d, already admitted %d", rm.DescriptorRevision, prev.rev)
	}
	var old *inConn
	if reason == 0 {
		var err error
		if old, err = n.rt.claim(ic); err != nil {
			reason, detail = router.RejectResourceLimit, err.Error()
		}
	}
	if reason == 0 {
		ic.seqIn = n.seqForLocked(ic.ident, rm.LifecycleGeneration)
		n.noteAdmittedLocked(ic.ident, rm.LifecycleGeneration, rm.DescriptorRevision, ic.seqIn, now)
	}
	n.mu.Unlock()

	if reason != 0 {
		n.stats.rejected.Add(1)
		n.hsLog.warn("transport: rejecting hello", "peer", RID(ic.ident).String(), "remote", ic.remote,
			"reason", reason.String(), "detail", detail)
		if frames, err := encodeInfra(&router.Reject{Reason: reason}); err == nil {
			// Close once the reject is flushed: the peer must hello again
			// on a new connection.
			_ = ic.pc.enqueue(outItem{frames: frames, size: framesSize(frames), closeAfter: true})
		}
		return
	}
	wait, readOut := n.admitWait(), time.Duration(0)
	if old != nil {
		old.mu.Lock()
		sameRun := old.admitted && old.info.LifecycleGeneration == rm.LifecycleGeneration
		old.mu.Unlock()
		if sameRun {
			// The peer run that reconnects is the one that may count what
			// its old socket still sends as delivered: read it to its end,
			// cut only once silent for PeerTimeout (a peer host gone). An
			// older run is gone; its connection is cut as before. The
			// admission does not wait for the read-out, which goes at the
			// handler's pace: the one-way messages the peer kept for this
			// connection expire meanwhile (KeepUnsent counts from the
			// give-up, and the live window and the drain's linger have
			// used most of it), and order does not need it (inConn.after).
			wait, readOut = 0, n.cfg.PeerTimeout
			if prev := n.rt.noteReadOut(old); prev != nil {
				n.rt.readOutsCut.Add(1)
				n.hsLog.warn("transport: cutting a superseded connection still being read to its end: its peer run reconnected twice since",
					"peer", RID(ic.ident).String(), "remote", prev.remote, "newest_remote", ic.remote)
				prev.pc.cutReadOut()
			}
		}
	}
	supersede(old, ic, wait, readOut)
	info := peerInfoFrom([]byte(ic.ident), ic.remote, rm)
	frames, err := encodeInfra(&router.Admit{Admission: n.currentAdmission()})
	if err != nil {
		n.log.Error("transport: cannot encode admit", "err", err)
		return
	}
	// From here the identity is a peer this node admitted: it gets its row
	// in the per-peer stats, with what the connection counted so far (its
	// hello). Nothing was written on it yet, so the writer counted nothing
	// in the detached set; the admit below counts in the row.
	if ic.row.Load() == nil {
		row := n.stats.acquire(ic.ident) // given back when the connection closes
		row.absorb(ic.pc.counters.Load())
		ic.pc.counters.Store(row)
		ic.row.Store(row)
	}
	// The run is noted on the connection before the admit goes out: once
	// the peer has it, it may send, and a caller waiting for what that
	// run sent (InboundReading) must find the connection from then on.
	ic.mu.Lock()
	ic.info = info
	ic.mu.Unlock()
	if err := ic.pc.enqueuePriority(frames); err != nil {
		n.log.Warn("transport: admit not sent", "peer", info.RID.String(), "err", err)
		return
	}
	ic.mu.Lock()
	ic.admitted = true
	ic.mu.Unlock()
	n.connInfo(&n.connLog.admitted, connLineAdmitted, "peer", info.RID.String(), "remote", ic.remote,
		"peer_gen", info.LifecycleGeneration, "peer_rev", info.DescriptorRevision)
	if l != nil {
		// A hello with a newer lifecycle generation proves the peer
		// restarted: our link's session belongs to the previous run.
		l.peerGeneration(info.LifecycleGeneration)
	}
	n.emit(Event{Kind: EventInboundAdmitted, Peer: info})
}

// pruneSeenLocked makes room in the full seen table: it drops the eighth
// of its rows last connected longest ago (admitted, or their connection
// ended: genRev.at) among the RIDs with no current inbound connection and
// no link (n.mu held). Before, the table kept every RID ever
// admitted and, once full, admitted new ones without a row — a server
// outliving 65,536 client runs with random RIDs checked no later one for
// staleness, and delivered what such a peer sent again after a give-up
// twice. A dropped RID's earlier runs are forgotten: one that comes back is
// admitted as a new peer.
func (n *Node) pruneSeenLocked() {
	type row struct {
		rid string
		at  time.Time
	}
	var idle []row
	for rid, gr := range n.seen {
		if n.links[rid] == nil && n.rt.current(rid) == nil {
			idle = append(idle, row{rid, gr.at})
		}
	}
	slices.SortFunc(idle, func(a, b row) int { return a.at.Compare(b.at) })
	for _, r := range idle[:min(len(idle), max(1, maxSeenPeers/8))] {
		delete(n.seen, r.rid)
	}
}

type unexpectedError struct{ cmd router.Command }

func (e unexpectedError) Error() string { return "transport: unexpected " + e.cmd.String() }

func errUnexpected(c router.Command) error { return unexpectedError{c} }

// InboundReading returns a channel closed once the reader of an inbound
// connection that peer run (peer, gen) was admitted on has stopped —
// every record of it that will ever reach the Handler has, the Handler
// returned for each — or nil when no such connection is being read.
// One connection at a time: a caller waits for it and asks again.
//
// A node that learns a peer run ended (it crashed, and its next run was
// admitted or its lease lapsed) may still hold what that run sent it, read
// from the kernel and not yet handed on, or still in the kernel's buffer:
// an ended run's connection ends only once its reader reaches the end. A
// caller about to let something overtake what the ended run sent — a
// message readmitted here, a sender's route switch answered here
// (mesh/ended_run_reads.go) — waits for this first.
func (n *Node) InboundReading(peer RID, gen uint64) <-chan struct{} {
	if n.rt == nil {
		return nil
	}
	r := n.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	for ic := range r.conns {
		if ic.ident != string(peer) {
			continue
		}
		ic.mu.Lock()
		run := ic.info.LifecycleGeneration
		ic.mu.Unlock()
		if run != gen {
			continue
		}
		select {
		case <-ic.readDone:
		default:
			return ic.readDone
		}
	}
	return nil
}
