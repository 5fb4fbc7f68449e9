package transport

import (
	"context"
	"time"
)

// What an ended session leaves behind (docs/TRANSPORT.md, "What left the
// sender still arrives"): its connection, read to its end before the next
// session to that peer is dialled, and the one-way messages it had not
// sent, kept for the next session to the same peer run.

// noteDraining records that the connection of an ended session to peer is
// read to its end until drained closes.
func (n *Node) noteDraining(peer RID, drained chan struct{}) {
	n.mu.Lock()
	n.draining[string(peer)] = drained
	n.mu.Unlock()
	go func() {
		<-drained
		n.mu.Lock()
		if n.draining[string(peer)] == drained {
			delete(n.draining, string(peer))
		}
		n.mu.Unlock()
	}()
}

// noteLive records that a session to peer was admitted; forgetLive, once
// it was read to its end (drained closes), removes it.
func (n *Node) noteLive(peer RID, drained chan struct{}) {
	n.mu.Lock()
	n.live[string(peer)] = drained
	n.mu.Unlock()
}

func (n *Node) forgetLive(peer RID, drained chan struct{}) {
	n.mu.Lock()
	if n.live[string(peer)] == drained {
		delete(n.live, string(peer))
	}
	n.mu.Unlock()
}

// awaitDrain waits until the last session to peer has been read to its end
// — the peer read what we wrote on it, or the linger passed — so that a
// new connection's records cannot overtake the old one's (the peer reads
// each connection on its own goroutine), and so that what that session
// keeps for the peer (its unacknowledged one-way messages, kept as its
// reader ends) is kept before the next session takes the kept records:
// sent after newer ones, their numbers (router.LinkSequence) would be
// below what the peer delivered, and dropped. The session may belong to
// an earlier link (Disconnect, then Connect) whose end had not begun yet
// (noteLive). It reports false when ctx ended first.
func (n *Node) awaitDrain(ctx context.Context, peer RID) bool {
	n.mu.Lock()
	chs := []chan struct{}{n.draining[string(peer)], n.live[string(peer)]}
	n.mu.Unlock()
	for _, ch := range chs {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// keptRecords are the one-way messages an ended session to one peer run
// had not sent.
type keptRecords struct {
	gen   uint64 // the peer run's lifecycle generation
	items []outItem
	timer Timer
}

// keepFor is how long records kept from an ended session wait for the next
// session to the same peer run (Config.KeepUnsent), counted from when the
// connection that carried them was given up (keepUndelivered re-arms it).
// With the default, after the liveness deadline and the drain's linger
// (PeerTimeout each), a peer that stopped running for up to about four
// times PeerTimeout gets every one-way message that was sent to it.
func (n *Node) keepFor() time.Duration { return n.cfg.KeepUnsent }

// keepUnsent takes what an ended session to peer (run gen) had not sent:
// one-way application messages are kept for the next session to that run,
// after the ones already kept; the rest (requests, whose calls failed with
// the session) are dropped. A one-way message's sender was told it was
// sent, and giving up on a peer that is only stopped for a while lost
// every one of them still queued — ~10,000 with one of three servers
// SIGSTOPped 20 s under load. It returns how many it kept and dropped.
func (n *Node) keepUnsent(peer RID, gen uint64, items []outItem) (kept, dropped int) {
	var keep []outItem
	for _, it := range items {
		if it.keep {
			keep = append(keep, it)
		}
	}
	dropped = len(items) - len(keep)
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(keep) == 0 {
		n.stats.unsent.Add(uint64(dropped))
		return 0, dropped
	}
	k, ok := n.keptFor(peer, gen, len(keep))
	if !ok {
		n.stats.unsent.Add(uint64(dropped))
		return 0, len(items)
	}
	k.items = append(k.items, keep...)
	n.stats.unsent.Add(uint64(dropped))
	return len(keep), dropped
}

// keepUndelivered keeps, ahead of the records already kept for peer (run
// gen), one-way messages that left this node but never reached the peer
// (peerConn.undelivered): they were sent before those. It returns how many
// it kept.
func (n *Node) keepUndelivered(peer RID, gen uint64, items []outItem) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	k, ok := n.keptFor(peer, gen, len(items))
	if !ok {
		return 0
	}
	k.items = append(items, k.items...)
	// They wait keepFor from now, when their connection was given up, not
	// from when the session ended: a drain that waited out its linger for
	// a silent peer (PeerTimeout) would otherwise leave the peer only the
	// rest of the wait to be linked again.
	n.armKeptLocked(string(peer), k)
	return len(items)
}

// keptFor is the kept records of peer's run gen, created (with its expiry)
// when missing; records of another run are dropped first. With this node
// closed nothing is kept: count records are counted unsent and it reports
// false. n.mu is held.
func (n *Node) keptFor(peer RID, gen uint64, count int) (*keptRecords, bool) {
	if n.closed {
		n.stats.unsent.Add(uint64(count))
		return nil, false
	}
	k := n.kept[string(peer)]
	if k != nil && k.gen != gen {
		n.dropKeptLocked(string(peer), "the peer's run changed")
		k = nil
	}
	if k == nil {
		k = &keptRecords{gen: gen}
		n.kept[string(peer)] = k
		n.armKeptLocked(string(peer), k)
	}
	return k, true
}

// armKeptLocked (re)starts the wait of peer's kept records: they are
// dropped if no session to that run takes them within keepFor. n.mu is
// held.
func (n *Node) armKeptLocked(peer string, k *keptRecords) {
	if k.timer != nil {
		k.timer.Stop()
	}
	k.timer = n.clock.AfterFunc(n.keepFor(), func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.kept[peer] == k {
			n.dropKeptLocked(peer, "it did not come back in time")
		}
	})
}

// rearmKept restarts the wait of the records kept for peer's run gen, if
// any (session.hold: that run is still taking data).
func (n *Node) rearmKept(peer RID, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if k := n.kept[string(peer)]; k != nil && k.gen == gen && !n.closed {
		n.armKeptLocked(string(peer), k)
	}
}

// noteRefusedAsDuplicate is told that peer refused this node's hello with
// duplicateConnection: a connection of ours is still live there — the
// peer is alive and reading what we sent it before, a connection it reads
// to its end before it takes a new one (the identity rule). So the peer
// run the one-way messages kept for it were meant for is still there, and
// their wait starts again, as for a held connection the peer acknowledges
// (rearmKept); a hold of this peer's connection counts the refusal as a
// sign of life too (lastRefusedAsDuplicate). Whatever generation they
// were kept for: only the run holding our connection refuses so. Under
// load a slow receiver took longer to read a connection that had been
// given up than KeepUnsent, and the messages kept at the give-up were
// dropped while it refused the link's hellos every few milliseconds
// (TestSlowReceiverLosesNothing: 4,267 of 6,000 counted unsent).
func (n *Node) noteRefusedAsDuplicate(peer RID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	now := time.Now()
	if len(n.refusedAsDuplicate) >= refusedAsDuplicatePrune {
		// An entry older than a hold's bound extends nothing (a hold
		// counts idleness from the later of it and the last
		// acknowledgement); peers that refused and never came back —
		// runs that ended — would otherwise leave one each for good.
		bound := max(n.cfg.PeerTimeout, n.cfg.KeepUnsent)
		for rid, at := range n.refusedAsDuplicate {
			if now.Sub(at) > bound {
				delete(n.refusedAsDuplicate, rid)
			}
		}
	}
	n.refusedAsDuplicate[string(peer)] = now
	if k := n.kept[string(peer)]; k != nil {
		n.armKeptLocked(string(peer), k)
	}
}

// refusedAsDuplicatePrune is the size of refusedAsDuplicate from which a
// new entry first drops those too old to matter.
const refusedAsDuplicatePrune = 64

// lastRefusedAsDuplicate is when peer last refused a hello of ours with
// duplicateConnection (zero: not since its last admission).
func (n *Node) lastRefusedAsDuplicate(peer RID) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refusedAsDuplicate[string(peer)]
}

// dropKeptLocked drops the records kept for peer, counting them unsent.
func (n *Node) dropKeptLocked(peer, why string) {
	k := n.kept[peer]
	if k == nil {
		return
	}
	delete(n.kept, peer)
	k.timer.Stop()
	n.stats.unsent.Add(uint64(len(k.items)))
	n.log.Warn("transport: one-way messages kept for a peer dropped (lost)", "peer", RID(peer).String(),
		"peer_gen", k.gen, "count", len(k.items), "why", why)
}

// takeKept returns the records kept for peer when the new session's peer
// run (gen) is the one they were sent to; those kept for another run are
// dropped.
func (n *Node) takeKept(peer RID, gen uint64) []outItem {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.refusedAsDuplicate, string(peer)) // admitted again
	k := n.kept[string(peer)]
	if k == nil {
		return nil
	}
	if k.gen != gen {
		n.dropKeptLocked(string(peer), "the peer restarted")
		return nil
	}
	delete(n.kept, string(peer))
	k.timer.Stop()
	return k.items
}
