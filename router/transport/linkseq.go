package transport

import (
	"sync/atomic"

	"github.com/meshnode/meshnode/router"
)

// Delivered once (docs/TRANSPORT.md): a link numbers the one-way messages
// it writes (router.LinkSequence before the first of a connection and
// wherever the numbers skip), and the receiver delivers each number of a
// peer run once. A give-up that cannot tell whether the peer read what its
// kernel had not acknowledged sends it again on the next connection; the
// peer, which reads the old connection to its end before the new one
// (inConn.after), drops what it already delivered.

// outSeq issues one link's message numbers. The first number of a link is
// above every number any link of this node issued before (Node.seqTop): one
// one-way message kept from an earlier link to the same peer run keeps its
// number and goes first on the next link's connection, so a new link must
// not start below it.
type outSeq struct {
	last atomic.Uint64 // the last number issued
	top  *atomic.Uint64
	run  uint64 // Node.seqRun
}

// newOutSeq starts a link's numbering above everything issued so far.
func (n *Node) newOutSeq() *outSeq {
	s := &outSeq{top: &n.seqTop, run: n.seqRun}
	s.last.Store(n.seqTop.Load())
	return s
}

// issue returns the next number and raises the node's highest.
func (s *outSeq) issue() uint64 {
	v := s.last.Add(1)
	for {
		t := s.top.Load()
		if v <= t || s.top.CompareAndSwap(t, v) {
			return v
		}
	}
}

// inSeq is what this node delivered of one peer run's numbered messages:
// the highest number. Connections of that run share it (the seen table);
// they deliver one after the other, so a number at or below it was
// delivered already. run is the sending process's nonce
// (router.LinkSequence.Run) once its first LinkSequence came (0 before;
// the connection's reader sets it).
type inSeq struct {
	high atomic.Uint64
	run  atomic.Uint64
}

// admit reports whether message seq is new, and records it delivered.
func (s *inSeq) admit(seq uint64) bool {
	for {
		h := s.high.Load()
		if seq <= h {
			return false
		}
		if s.high.CompareAndSwap(h, seq) {
			return true
		}
	}
}

// numbered reports whether the transport numbers records of command c:
// the one-way application messages, which a link keeps for its next
// connection (Node.send's keep) — one rule for both sides, so that the
// receiver counts exactly what the sender numbered.
func numbered(c router.Command) bool {
	return c == router.CmdActorSend || c == router.CmdSpotSend
}

// seqForLocked returns the delivered numbers of peer run gen (the seen table's,
// shared by that run's connections); n.mu is held. Past the table's bound
// a connection gets its own, which drops nothing another connection
// delivered.
func (n *Node) seqForLocked(ident string, gen uint64) *inSeq {
	if gr, ok := n.seen[ident]; ok && gr.gen == gen && gr.in != nil {
		return gr.in
	}
	return new(inSeq)
}

// takeSequence handles a LinkSequence record on inbound connection ic:
// the next numbered message on it is m.Next. A sending process other than
// the one whose numbers ic's peer run holds — the same RID and lifecycle
// generation presented by a new process — starts that run's record afresh
// (the seen table's too, for its later connections): its numbers start
// again at 1.
//
// The reader handles the record before it waits for the connection ic
// superseded (inConn.after), and that one's reader may not have reached
// its own first LinkSequence yet: markers of two connections of one RID
// arrive in either order. So ic joins the seen table's record when that
// is its process's (a first connection of a process read after its
// second one installed the record: apart, the second dropped nothing the
// first delivered, and messages sent again arrived twice), and only the
// RID's current connection installs a fresh record (a superseded
// connection of the earlier process, read late, replaced the newer
// process's record, and its next connection started afresh: again
// twice). TestRestartedSenderMarkersReadOutOfOrder.
func (n *Node) takeSequence(ic *inConn, m *router.LinkSequence) {
	ic.seqNext = m.Next
	in := ic.seqIn
	if in == nil || in.run.Load() == m.Run || in.run.CompareAndSwap(0, m.Run) {
		return
	}
	ic.mu.Lock()
	gen := ic.info.LifecycleGeneration
	ic.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	gr, ok := n.seen[ic.ident]
	ok = ok && gr.gen == gen && gr.in != nil
	if ok && (gr.in.run.Load() == m.Run || gr.in.run.CompareAndSwap(0, m.Run)) {
		ic.seqIn = gr.in
		return
	}
	fresh := new(inSeq)
	fresh.run.Store(m.Run)
	ic.seqIn = fresh
	if ok && n.rt.current(ic.ident) == ic {
		gr.in = fresh
		n.seen[ic.ident] = gr
	}
}

// duplicate reports whether a numbered message (command c) read on ic is to be
// dropped as already delivered; ic's reader calls it once the connection
// ic superseded was read to its end. Without a LinkSequence on the
// connection (a peer without the capability) nothing is dropped.
func (ic *inConn) duplicate(c router.Command) bool {
	if !numbered(c) || ic.seqNext == 0 || ic.seqIn == nil {
		return false
	}
	seq := ic.seqNext
	ic.seqNext++
	return !ic.seqIn.admit(seq)
}
