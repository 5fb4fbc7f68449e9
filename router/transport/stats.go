package transport

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// maxPeerStats bounds the per-peer counter table: identities are chosen by
// remote peers, so an unbounded map would let a stream of short-lived
// connections with fresh identities grow memory. Beyond the bound only the
// node totals count.
const maxPeerStats = 4096

// maxRetiredPeerStats is how many rows of peers no link or admitted
// connection uses any more the table keeps (the oldest go first), so that
// a peer that reconnects soon keeps its counters. Without it, every peer
// run ever admitted — each run of a node without a fixed routing id has a
// fresh RID — kept its row, and its series on /metrics, for the life of the
// process: an operator try-out's 2,000 short-lived peers added 12,000
// lines to /metrics, and once 4096 RIDs had been seen no new peer was
// counted per peer at all.
const maxRetiredPeerStats = 64

// Stats is a snapshot of the node's counters.
type Stats struct {
	RecordsIn  uint64 // well-formed records received (all commands)
	RecordsOut uint64 // records written to a socket (all commands)
	// Flushes counts the socket writes of admitted links: the writer
	// coalesces the records queued at the same moment into one flush, so
	// RecordsOut / Flushes is how many records share a write.
	Flushes          uint64
	BytesIn          uint64 // frame bytes of the records received (ZMTP framing excluded)
	BytesOut         uint64 // frame bytes of the records written
	ProtocolErrors   uint64 // malformed records, misrouted commands, ZMTP framing violations
	NotAdmitted      uint64 // records dropped because their connection was not admitted
	Rejected         uint64 // hellos this node rejected
	RejectedByPeer   uint64 // our hellos a peer rejected (or admits we refused)
	Backpressure     uint64 // sends refused because a queue was full
	LateReplies      uint64 // replies no call accepted: request ended or completed, or a non-portable request's reply from another peer
	PortableReplies  uint64 // replies completing a portable request or reply slot from a node other than the one the request went to
	LocalReplies     uint64 // replies delivered by Complete
	SendWaits        uint64 // SendWait/Start sends that found the queue full and waited for room
	LivenessAcks     uint64 // liveness acks matching the outstanding probe
	StaleAcks        uint64 // liveness acks not matching the outstanding probe
	LivenessTimeouts uint64 // links declared down for missing acks
	Unsent           uint64 // records that did not leave this node when their link went down and were never sent: requests (their calls fail) and kept one-way messages dropped (their peer run did not come back within KeepUnsent, restarted, or this node closed)
	Resent           uint64 // one-way messages a link kept when its connection ended before they left, then sent on its next connection to the same peer run
	Duplicates       uint64 // one-way messages a peer sent again (its link gave a connection up) that this node had delivered already: dropped (router.LinkSequence)
	// HeldGiveUps counts connections given up (liveness, a write deadline,
	// Disconnect) with one-way messages in flight to a peer still taking
	// data: they count as
	// delivered, and the connection stays open until the peer acknowledged
	// them (docs/TRANSPORT.md). HeldLost counts those the peer never
	// acknowledged: it closed or reset the connection first, acknowledged
	// nothing for KeepUnsent, or this node closed.
	HeldGiveUps uint64
	HeldLost    uint64
	// InFlightLost counts one-way messages in flight to a peer that does
	// not drop copies (no router.LinkSequence) when its connection's read
	// failed for any reason but the peer's close or reset, a deadline or
	// this node's own close — the kernel giving the connection up
	// (ETIMEDOUT, EHOSTUNREACH), a framing error: the peer had not
	// acknowledged them, and they are not sent again (it may have read
	// them): they may be lost. To a peer that drops copies they are sent
	// again instead.
	InFlightLost      uint64
	HandshakeFailures uint64 // inbound ZMTP handshakes that failed or timed out, and hellos not sent within HandshakeTimeout
	Unhandled         uint64 // records dropped because no Handler is set
	InboundConns      int    // current inbound connections
	RefusedInbound    uint64 // inbound connections refused at MaxInboundConns
	RefusedUnadmitted uint64 // inbound connections refused at MaxUnadmitted
	// EvictedUnadmitted counts connections not admitted yet that were
	// closed, the MaxUnadmitted pool being full, to give a slot to a
	// connection from an address holding fewer (docs/TRANSPORT.md "Limits
	// before admission").
	EvictedUnadmitted uint64
	// ReadOutsCut counts superseded connections whose read to their end
	// was cut because their peer run reconnected again meanwhile (at most
	// one such connection per RID is read to its end; docs/TRANSPORT.md
	// "Deviations and known limitations").
	ReadOutsCut uint64
	Peers       map[string]PeerStats
}

// PeerStats are the counters of one peer RID (hex key in Stats.Peers), both
// directions together.
type PeerStats struct {
	RecordsIn  uint64
	RecordsOut uint64
	Flushes    uint64 // socket writes on the link to this peer (Stats.Flushes)
	BytesIn    uint64
	BytesOut   uint64
	// Queued is the records waiting on this node's link to the peer now
	// (transport.send_queue_limit bounds it).
	Queued         int
	ProtocolErrors uint64
	Backpressure   uint64
}

type peerCounters struct {
	node *stats
	// users counts the links and admitted inbound connections holding the
	// row; retired is its place in stats.retired while none does. Both
	// under stats.mu.
	users          int
	retired        *list.Element
	recordsIn      atomic.Uint64
	recordsOut     atomic.Uint64
	flushes        atomic.Uint64
	bytesIn        atomic.Uint64
	bytesOut       atomic.Uint64
	protocolErrors atomic.Uint64
	backpressure   atomic.Uint64
}

type stats struct {
	recordsIn, recordsOut, flushes       atomic.Uint64
	bytesIn, bytesOut                    atomic.Uint64
	protocolErrors, notAdmitted          atomic.Uint64
	rejected, rejectedByPeer             atomic.Uint64
	backpressure, lateReplies, staleAcks atomic.Uint64
	livenessAcks                         atomic.Uint64
	livenessTimeouts, handshakeFailures  atomic.Uint64
	unhandled                            atomic.Uint64
	portableReplies, localReplies        atomic.Uint64
	sendWaits, unsent, resent            atomic.Uint64
	duplicates                           atomic.Uint64
	held, heldLost, inFlightLost         atomic.Uint64

	mu      sync.Mutex
	peers   map[string]*peerCounters
	retired *list.List // RIDs (string) of rows no one holds, oldest first
}

func (s *stats) init() {
	s.peers = make(map[string]*peerCounters)
	s.retired = list.New()
}

// acquire returns the counters of a RID for a link or an admitted inbound
// connection, which gives them back with release when it ends; or a
// detached set (counted only in the node totals) once the table is full.
func (s *stats) acquire(rid string) *peerCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.peers[rid]
	if c == nil {
		c = s.detached()
		if len(s.peers) >= maxPeerStats {
			return c
		}
		s.peers[rid] = c
	}
	c.users++
	if c.retired != nil {
		s.retired.Remove(c.retired)
		c.retired = nil
	}
	return c
}

// release gives back what acquire returned. A row no one holds any more
// is retired; beyond maxRetiredPeerStats retired rows the oldest is
// removed, its counters with it.
func (s *stats) release(rid string, c *peerCounters) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c == nil || s.peers[rid] != c || c.users == 0 {
		return // detached, or already given back
	}
	c.users--
	if c.users > 0 {
		return
	}
	c.retired = s.retired.PushBack(rid)
	for s.retired.Len() > maxRetiredPeerStats {
		old := s.retired.Remove(s.retired.Front()).(string)
		s.peers[old].retired = nil
		delete(s.peers, old)
	}
}

// known returns the counters of a RID already in the table, or nil.
func (s *stats) known(rid string) *peerCounters {
	if rid == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peers[rid]
}

// detached returns a set of per-peer counters outside the table: what it
// counts shows in the node totals only.
func (s *stats) detached() *peerCounters { return &peerCounters{node: s} }

// absorb adds what d counted to c (d's node totals already hold it).
func (c *peerCounters) absorb(d *peerCounters) {
	if d == nil || d == c {
		return
	}
	c.recordsIn.Add(d.recordsIn.Load())
	c.recordsOut.Add(d.recordsOut.Load())
	c.flushes.Add(d.flushes.Load())
	c.bytesIn.Add(d.bytesIn.Load())
	c.bytesOut.Add(d.bytesOut.Load())
	c.protocolErrors.Add(d.protocolErrors.Load())
	c.backpressure.Add(d.backpressure.Load())
}

// Stats returns a snapshot of the counters.
func (n *Node) Stats() Stats {
	s := &n.stats
	out := Stats{
		RecordsIn:         s.recordsIn.Load(),
		RecordsOut:        s.recordsOut.Load(),
		Flushes:           s.flushes.Load(),
		BytesIn:           s.bytesIn.Load(),
		BytesOut:          s.bytesOut.Load(),
		ProtocolErrors:    s.protocolErrors.Load(),
		NotAdmitted:       s.notAdmitted.Load(),
		Rejected:          s.rejected.Load(),
		RejectedByPeer:    s.rejectedByPeer.Load(),
		Backpressure:      s.backpressure.Load(),
		LateReplies:       s.lateReplies.Load(),
		PortableReplies:   s.portableReplies.Load(),
		LocalReplies:      s.localReplies.Load(),
		SendWaits:         s.sendWaits.Load(),
		LivenessAcks:      s.livenessAcks.Load(),
		StaleAcks:         s.staleAcks.Load(),
		LivenessTimeouts:  s.livenessTimeouts.Load(),
		Unsent:            s.unsent.Load(),
		Resent:            s.resent.Load(),
		Duplicates:        s.duplicates.Load(),
		HeldGiveUps:       s.held.Load(),
		HeldLost:          s.heldLost.Load(),
		InFlightLost:      s.inFlightLost.Load(),
		HandshakeFailures: s.handshakeFailures.Load(),
		Unhandled:         s.unhandled.Load(),
		InboundConns:      n.rt.count(),
		RefusedInbound:    n.rt.refusedFull.Load(),
		RefusedUnadmitted: n.rt.refusedUnadmitted.Load(),
		EvictedUnadmitted: n.rt.evictedUnadmitted.Load(),
		ReadOutsCut:       n.rt.readOutsCut.Load(),
		Peers:             make(map[string]PeerStats),
	}
	s.mu.Lock()
	for rid, c := range s.peers {
		out.Peers[RID(rid).String()] = PeerStats{
			RecordsIn:      c.recordsIn.Load(),
			RecordsOut:     c.recordsOut.Load(),
			Flushes:        c.flushes.Load(),
			BytesIn:        c.bytesIn.Load(),
			BytesOut:       c.bytesOut.Load(),
			ProtocolErrors: c.protocolErrors.Load(),
			Backpressure:   c.backpressure.Load(),
		}
	}
	s.mu.Unlock()
	n.mu.Lock()
	links := make([]*link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, l := range links {
		l.mu.Lock()
		if l.sess != nil {
			k := l.rid.String()
			ps := out.Peers[k]
			ps.Queued = l.sess.pc.q.len()
			out.Peers[k] = ps
		}
		l.mu.Unlock()
	}
	return out
}

// framesLen is the bytes a record's frames carry.
func framesLen(frames [][]byte) uint64 {
	var n uint64
	for _, f := range frames {
		n += uint64(len(f))
	}
	return n
}

// received counts one well-formed record of frames from a peer (c may be
// nil before the peer is known).
func (s *stats) received(c *peerCounters, frames [][]byte) {
	b := framesLen(frames)
	s.recordsIn.Add(1)
	s.bytesIn.Add(b)
	if c != nil {
		c.recordsIn.Add(1)
		c.bytesIn.Add(b)
	}
}

// flushed counts one socket write of the link to a peer.
func (c *peerCounters) flushed() {
	c.flushes.Add(1)
	c.node.flushes.Add(1)
}

// sent counts one record of frames written to a peer.
func (c *peerCounters) sent(frames [][]byte) {
	b := framesLen(frames)
	c.recordsOut.Add(1)
	c.bytesOut.Add(b)
	c.node.recordsOut.Add(1)
	c.node.bytesOut.Add(b)
}

// Progress is how far this node's link to a peer has got with what this
// node sends on its current connection: the records written (which leave
// the queue as the peer's reader makes room), and the bytes of them the
// peer's kernel acknowledged (which move only as far as the peer's reader
// makes room). Liveness records do not count — this node probes every
// ProbeInterval, and answers the peer's probes on its other connection,
// whether or not the peer reads — nor does anything sent on that other
// connection (replies to the peer's requests).
type Progress struct {
	RecordsOut uint64
	AckedBytes int64 // -1 when this system cannot tell
	// ReadRecords is how many of those records the peer's reader has read
	// at least: the liveness probe it last answered was written behind
	// them, and a peer answers a probe only once its reader reaches it. It
	// moves while the peer reads through a backlog the two kernels'
	// buffers hold — everything written and acknowledged, the queue
	// empty — when the other two stand still; at most once per
	// ProbeInterval (the probes are the liveness probes: no traffic of its
	// own), and only past probes lying inside that backlog.
	ReadRecords uint64
	// Unanswered is true while a liveness probe on the link awaits its
	// answer: the peer's reader has not reached it yet. The link's
	// liveness judges such a peer — it ends the session when no probe is
	// answered for PeerTimeout — so a caller waiting for progress can
	// leave the verdict on a silent peer to it: a peer reading through a
	// backlog that no probe lies inside answers the probe written behind
	// it once it gets there, or the session ends.
	Unanswered bool
}

// PeerProgress returns the progress of the link to peer, false without an
// admitted session on it. A caller waiting behind what it sent to a busy
// peer tells a slow one from a stuck one by whether it moves (a route
// switch's barrier, mesh/route_barrier.go). Until 2026-12-06 it counted
// every record to the peer, liveness probes and acks included, so it moved
// every probe interval while the peer read nothing: a barrier waited for a
// stuck previous owner up to its 60 s bound instead of one 12 s slice.
func (n *Node) PeerProgress(peer RID) (Progress, bool) {
	l, err := n.link(peer)
	if err != nil {
		return Progress{}, false
	}
	l.mu.Lock()
	sess := l.sess
	l.mu.Unlock()
	if sess == nil {
		return Progress{}, false
	}
	p := Progress{RecordsOut: sess.pc.dataOut.Load(), AckedBytes: -1, ReadRecords: sess.readTo.Load()}
	sess.mu.Lock()
	p.Unanswered = sess.outstanding != 0 && !sess.ended
	sess.mu.Unlock()
	if a, ok := sess.pc.zc.ack.acked(); ok {
		// Not past the last data record: what the kernel acknowledged of
		// the probes behind it says nothing of the peer's reader.
		p.AckedBytes = min(a, sess.pc.dataEnd.Load())
	}
	return p, true
}
