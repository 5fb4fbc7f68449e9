package transport

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

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

// noteAdmittedLocked records in the seen table the run of an admitted
// connection of ident (its generation and descriptor revision) and the
// record of delivered numbers it took (seqForLocked): the one place a row
// is written at an admission. The records other processes of the same
// run began apart stay (genRev.others); a new generation drops them. Past
// the table's bound the rows connected longest ago make room
// (pruneSeenLocked), and with none to spare the RID gets no row. n.mu is
// held.
func (n *Node) noteAdmittedLocked(ident string, gen, rev uint64, in *inSeq, now time.Time) {
	row, ok := n.seen[ident]
	if !ok && len(n.seen) >= maxSeenPeers {
		n.pruneSeenLocked()
	}
	if !ok && len(n.seen) >= maxSeenPeers {
		return
	}
	next := genRev{gen: gen, rev: rev, in: in, at: now}
	if ok && row.gen == gen {
		next.others = row.others
	}
	n.seen[ident] = next
}

// takeSequence handles a LinkSequence record on inbound connection ic:
// the next numbered message on it is m.Next. A sending process other than
// the one whose numbers ic's peer run holds — the same RID and lifecycle
// generation presented by a new process — has a record of its own: its
// numbers start again at 1.
//
// The reader handles the record before it waits for the connection ic
// superseded (inConn.after), and that one's reader may not have reached
// its own first LinkSequence yet: markers of a RID's connections arrive in
// any order. So a connection always joins its process's record when the
// seen table has one — the RID's record (genRev.in) or one begun apart
// (genRev.others) — and only the RID's current connection makes its
// process's record the RID's. Apart, two connections of one process drop
// nothing of each other's, and messages sent again arrive twice: a first
// connection of a process read after its second one installed the record;
// a superseded connection of the earlier process, read late, replacing
// the newer process's record (TestRestartedSenderMarkersReadOutOfOrder);
// and a first connection of a process, superseded by its second before
// either read its marker, that began a record the second did not find
// (TestRestartedSendersSupersededMarkerReadBeforeTheCurrentOnes).
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
	if !ok || gr.gen != gen || gr.in == nil {
		// Past the table's bound, or a later generation admitted since:
		// a record of its own, which drops nothing another connection
		// delivered.
		fresh := new(inSeq)
		fresh.run.Store(m.Run)
		ic.seqIn = fresh
		return
	}
	if gr.in.run.Load() == m.Run || gr.in.run.CompareAndSwap(0, m.Run) {
		ic.seqIn = gr.in
		return
	}
	mine := -1
	for i, r := range gr.others {
		if r.run.Load() == m.Run {
			mine = i
			break
		}
	}
	var rec *inSeq
	if mine >= 0 {
		rec = gr.others[mine]
		gr.others = slices.Delete(gr.others, mine, mine+1)
	} else {
		rec = new(inSeq)
		rec.run.Store(m.Run)
	}
	ic.seqIn = rec
	if n.rt.current(ic.ident) == ic {
		gr.others, gr.in = keepOther(gr.others, gr.in), rec
	} else {
		gr.others = keepOther(gr.others, rec)
	}
	n.seen[ic.ident] = gr
}

// maxOtherRuns bounds genRev.others: a RID's run presented by one new
// process after another needs the store to lose its data each time.
const maxOtherRuns = 4

// keepOther appends r to others, the oldest dropped past maxOtherRuns.
func keepOther(others []*inSeq, r *inSeq) []*inSeq {
	others = append(others, r)
	if len(others) > maxOtherRuns {
		others = slices.Delete(others, 0, len(others)-maxOtherRuns)
	}
	return others
}

// awaitSuperseded waits, on ic's reader, until the connection ic
// superseded was read to its end: it still delivers what its kernel
// acknowledged (its reader slow or its handler stuck past supersede's
// wait), and those records were sent first — also for the numbers they
// take in the peer run's record.
func (ic *inConn) awaitSuperseded() {
	if ic.after != nil {
		<-ic.after
		ic.after = nil
	}
}

// skipUndecodable keeps ic's count in step with the sender's when a record
// the sender numbered cannot be decoded here (a body this version does not
// read, or corrupted): its number is taken as if delivered — the record is
// dropped either way, counted as a protocol error — so that each later
// message keeps its own number. Before, every later message of the
// connection was recorded one number too low, and a message the sender
// gave up on and sent again on its next connection was delivered twice
// (TestAnUndecodableNumberedMessageKeepsTheCount).
func (ic *inConn) skipUndecodable(err error) {
	var pe *router.ProtocolError
	if !errors.As(err, &pe) || !numbered(pe.Command) {
		return
	}
	ic.mu.Lock()
	admitted := ic.admitted
	ic.mu.Unlock()
	if !admitted {
		return // numbers follow an admission (the first LinkSequence comes after it)
	}
	ic.awaitSuperseded()
	ic.duplicate(pe.Command)
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
