package mesh

import (
	"bytes"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/router/transport"
)

// A target that commits on its CutoverGrace opens the object before the
// source's cutover came, so the source may still relay its ingress hold
// afterwards (a move stalled between relay-ready and the relay, or slow to
// relay). The target's command 44 commit then accounted for none of those
// messages, and a bound Session whose last messages are among them waits for
// its route switch (docs/RELOCATION.md §6): the relay is not Message Follow,
// so no command 50 comes for them, and before 2026-12-07 the Session sent
// nothing until one slice (barrierWait, 12 s) after the last barrier-held
// notice of the stalled source — a stall of 12 s in a path those notices had
// just made reachable more often. So, until the source's cutover arrives, a
// relayed Session message the target takes in that raises what the target
// accounts for gets that Session a fresh command 44 commit of the same move,
// whose ReplayedHighWater covers it: the Session switches at once when it
// covers the last sequence it sent (Session.apply, "the commit of the move
// the Session already follows"). It is plain command 44, so it needs no
// capability: a Session past that move ignores it, and a Session node of a
// version before 2026-12-04 (which took no second commit of a move) ignores
// and counts it, and waits its slice as before. Relayed messages come from the source's node run with hop 0;
// a Session on the source node that already switched sends the same way, and
// may get a redundant commit meanwhile, which changes nothing.

// lateRelay is the state of one move that committed here on its grace, on
// its hosted object, until the source's cutover came or barrierMaxWait
// passed (by then every Session waiting for this move switched anyway).
type lateRelay struct {
	a    *arrival
	next uint64 // the AuthorityOwnerGeneration the move opened the object at
	// told is, per session RID, the highest sequence the commits of this
	// move accounted for (at most: the binding's when the object opened);
	// dirty are the Sessions owed a fresh commit, sent by one goroutine
	// at a time (sending). All under objects.mu.
	told    map[string]uint64
	dirty   map[string]struct{}
	sending bool
	// end ends it at barrierMaxWait; stopped when it ends before (the
	// cutover, the node's stop): a pending timer kept the whole closed
	// node reachable for that long.
	end *time.Timer
}

// expectLateRelayLocked notes that a's object opened here before the
// source's cutover; objects.mu is held. Nothing is noted once the node
// stops (endLateRelaysLocked ran or runs).
func (o *objects) expectLateRelayLocked(a *arrival) {
	if o.closing {
		return
	}
	lr := &lateRelay{a: a, next: a.h.ownerGeneration, told: map[string]uint64{}, dirty: map[string]struct{}{}}
	for k, b := range a.h.sessions {
		lr.told[k] = b.highest
	}
	a.h.lateRelay = lr
	if o.lateRelays == nil {
		o.lateRelays = map[chunk.Binding]*lateRelay{}
	}
	o.lateRelays[a.bind] = lr
	lr.end = time.AfterFunc(barrierMaxWait, func() { o.endLateRelay(a.bind) })
}

// endLateRelay ends the late relay of the move bind: its cutover came (the
// relay is complete: it travels ahead of the cutover on the same link), or
// barrierMaxWait passed. Commits owed already are still sent.
func (o *objects) endLateRelay(bind chunk.Binding) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lr := o.lateRelays[bind]; lr != nil {
		delete(o.lateRelays, bind)
		lr.endLocked()
	}
}

// endLateRelaysLocked ends every late relay when the node stops (objects.mu
// is held): Close returns with no timer of this node left.
func (o *objects) endLateRelaysLocked() {
	for bind, lr := range o.lateRelays {
		delete(o.lateRelays, bind)
		lr.endLocked()
	}
}

// endLocked stops lr's timer and detaches it from its object; objects.mu
// is held.
func (lr *lateRelay) endLocked() {
	lr.end.Stop()
	if h := lr.a.h; h.lateRelay == lr {
		h.lateRelay = nil
	}
}

// lateRelayFrom reports whether a message admitted for h from from (hop:
// its MessageFollowHopCount) is relayed by the source of the move that
// committed here on its grace, before its cutover came: work the source
// accepted already, which the target appends outside the mailbox limit
// (spot.Object.Append) as it does the relay merged at the open. Called
// under objects.mu. After barrierMaxWait the late relay ends and a relay
// still to come is Posted (refused past the limit); a Session on the
// source node that already switched sends the same way and is appended
// too until then — bounded by what that node can send in that time.
func lateRelayFrom(h *hosted, from transport.PeerInfo, hop uint8) bool {
	if h == nil || h.lateRelay == nil || hop != 0 {
		return false
	}
	src := h.lateRelay.a.bind.Source
	return bytes.Equal(from.RID, []byte(src.NodeRID)) && from.LifecycleGeneration == src.NodeGeneration
}

// lateRelayedLocked takes a Session message (tag) admitted for h from from
// (hop: its MessageFollowHopCount): when it is relayed by the source of the
// move that committed here on its grace and raised the Session's binding
// above what that move's commits told it, the Session is owed a fresh
// commit. Called in the admission's critical section, after the binding was
// recorded and before the message is posted: the commit is sent by another
// goroutine once it has objects.mu, so after the message is in the mailbox.
func (o *objects) lateRelayedLocked(h *hosted, tag *sessionTag, from transport.PeerInfo, hop uint8) {
	if tag == nil || !lateRelayFrom(h, from, hop) {
		return
	}
	lr := h.lateRelay
	k := string(tag.rid)
	b := h.sessions[k]
	if b == nil || b.highest <= lr.told[k] {
		return
	}
	lr.told[k] = b.highest
	lr.dirty[k] = struct{}{}
	if !lr.sending {
		lr.sending = o.goWork(func() { o.tellLateRelay(lr) })
	}
}

// tellLateRelay sends the commits lr owes, until it owes none or the node
// halts (Close waits for it: goWork; what it still owes then is moot,
// its sends end with o.halt anyway).
func (o *objects) tellLateRelay(lr *lateRelay) {
	for {
		o.mu.Lock()
		only := lr.dirty
		if len(only) == 0 || o.halt.Err() != nil {
			lr.sending = false
			o.mu.Unlock()
			return
		}
		lr.dirty = map[string]struct{}{}
		o.mu.Unlock()
		lr.a.sendCommits(lr.next, only)
		o.hook().step(lr.a.prep.Object.ObjectID, stepSessionLateCommit)
	}
}
