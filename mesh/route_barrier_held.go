package mesh

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// A node that keeps a route switch's barrier on purpose — the object is
// held by a move here (holdBarrier) or in its cutover here, the barrier
// waiting for it off the reader (waitCutover) — tells the barrier's sender
// so, every barrierHeldEvery, until it admits the barrier again: a one-way
// message for the same object with the barrier's operation id and the
// control "barrier-held", addressed to the sender's node run (its origin).
// The sender counts it as progress of its wait (barrier, watchProgress): a
// previous owner that holds on purpose does not read the sender's link, so
// nothing there moves, and before 2026-12-06 the sender switched after one
// barrierWait (12 s) without progress; its next messages then ran at a
// target that had committed on its CutoverGrace ahead of the ones still
// held here (docs/RELOCATION.md §7). A previous owner that is stuck sends
// nothing and is still given up after one slice; the wait stays bounded by
// barrierMaxWait and the sender's context.

// controlBarrierHeld is the meshnode.control value of the notice that a
// barrier is held on purpose.
const controlBarrierHeld = "barrier-held"

// barrierHeldEvery is how often a node keeping a barrier on purpose tells
// its sender: a few times within the sender's barrierWait.
const barrierHeldEvery = barrierWait / 4

// barrierHeldSendWait bounds one notice's wait for room on the link to the
// sender: the next one follows anyway.
const barrierHeldSendWait = time.Second

// heldEvery is barrierHeldEvery (tests shorten it).
func (o *objects) heldEvery() time.Duration {
	if o.barrierHeldEvery > 0 {
		return o.barrierHeldEvery
	}
	return barrierHeldEvery
}

// tellBarrierHeld starts telling the sender of the barrier rec (a request
// of family fam that came from from) that this node keeps it on purpose,
// every heldEvery, until stop is called or the node halts. The first
// notice goes out at once: the sender's wait may have run a while before
// the barrier got here.
func (o *objects) tellBarrierHeld(from transport.PeerInfo, fam opFamily, rec *router.Record) (stop func()) {
	m, ok := messageOf(rec)
	org, err := originOf(rec, from)
	if !ok || err != nil || m.op.IsZero() {
		return func() {}
	}
	note := barrierHeldNotice(fam, m, org, entrySpotID(o.n.run))
	return o.everyHeld(func() {
		// Looked at for each notice, not once: the link to the origin may
		// be down (reconnecting) when the hold begins — a single look then
		// silenced the whole hold, and the origin gave this node up after
		// one barrier slice. A node of an older version would take the
		// notice for an application message; it waits for its barrier as
		// it always did.
		if o.canTellHeld(org) {
			o.sendHeld(org, m.id, note)
		}
	})
}

// canTellHeld reports whether org, the node run a held barrier or Session
// message came from, takes barrier-held notices: this node run itself (its
// own message, come back here by Message Follow, or a local Session's), or
// a peer whose admission lists router.CapabilityBarrierHeld.
func (o *objects) canTellHeld(org origin) bool {
	return o.isRun(org.rid, org.gen) || o.peerHas(org.rid, router.CapabilityBarrierHeld)
}

// sendHeld sends the barrier-held notice note about object id to org (to
// this node itself directly), waiting at most barrierHeldSendWait for room
// on the link: the next one follows anyway.
func (o *objects) sendHeld(org origin, id string, note *router.Record) {
	if o.isRun(org.rid, org.gen) {
		o.noticeBarrierHeld(note)
		return
	}
	ctx, cancel := context.WithTimeout(o.halt, barrierHeldSendWait)
	defer cancel()
	if err := o.n.tr.Send(ctx, transport.RID(org.rid), note); err != nil {
		o.log.Debug("barrier-held notice not sent", "object", id, "to", org.String(), "err", err)
	}
}

// everyHeld runs send at once and then every heldEvery until the returned
// stop is called or the node halts (Close waits for it: goWork; once the
// node halted, nothing is sent).
func (o *objects) everyHeld(send func()) (stop func()) {
	done := make(chan struct{})
	o.goWork(func() {
		t := time.NewTicker(o.heldEvery())
		defer t.Stop()
		for {
			send()
			select {
			case <-t.C:
			case <-done:
				return
			case <-o.halt.Done():
				return
			}
		}
	})
	return sync.OnceFunc(func() { close(done) })
}

// barrierHeldNotice is the one-way message telling org that its barrier m
// (of family fam) is held on purpose (source: this node's Entry Spot id): same object and operation id, the
// fence naming org's node run (the owner generations are the barrier's
// own: the notice is not admitted anywhere as an object message).
func barrierHeldNotice(fam opFamily, m inMessage, org origin, source string) *router.Record {
	var b router.Body
	if fam == familyActor {
		b = &router.ActorSend{Operation: m.op, TargetActor: router.ActorRouteFence{
			Actor:         router.ActorRef{ActorID: m.id, ObjectGeneration: m.gen},
			TargetNodeRID: org.rid, TargetNodeGeneration: org.gen,
			ExpectedAuthorityOwnerGeneration: m.to.ownerGen, ExpectedOwnerLeaseGeneration: m.to.leaseGen}}
	} else {
		b = &router.SpotSend{Operation: m.op, SourceSpotID: source, TargetSpot: router.SpotRouteFence{
			Spot:          router.SpotRef{SpotID: m.id, ObjectGeneration: m.gen},
			TargetNodeRID: org.rid, TargetNodeGeneration: org.gen,
			ExpectedAuthorityOwnerGeneration: m.to.ownerGen, ExpectedOwnerLeaseGeneration: m.to.leaseGen}}
	}
	meta, _ := router.EncodeMetadata([]router.MetadataEntry{{Key: controlKey, Value: controlBarrierHeld}})
	return router.NewRecord(b, meta, &router.Payload{PacketName: PacketName, ContentType: ContentType})
}

// heldBarriers are this node's barriers waiting for an answer, by
// operation id: a barrier-held notice for one of them counts as progress.
type heldBarriers struct {
	mu sync.Mutex
	m  map[router.OperationID]*heldBarrier
}

type heldBarrier struct {
	id    string        // the object
	count atomic.Uint64 // notices received
}

// add registers the barrier op to object id; the returned function
// unregisters it.
func (h *heldBarriers) add(op router.OperationID, id string) (*heldBarrier, func()) {
	b := &heldBarrier{id: id}
	h.mu.Lock()
	if h.m == nil {
		h.m = map[router.OperationID]*heldBarrier{}
	}
	h.m[op] = b
	h.mu.Unlock()
	return b, func() {
		h.mu.Lock()
		delete(h.m, op)
		h.mu.Unlock()
	}
}

// noticeBarrierHeld takes a barrier-held notice (a one-way message with
// that control); it reports whether rec was one. A notice for no barrier
// waiting here (answered meanwhile) is ignored.
func (o *objects) noticeBarrierHeld(rec *router.Record) bool {
	if controlOf(rec) != controlBarrierHeld {
		return false
	}
	m, ok := messageOf(rec)
	if !ok {
		return true
	}
	o.held.mu.Lock()
	b := o.held.m[m.op]
	o.held.mu.Unlock()
	switch {
	case b != nil:
		if b.id == m.id {
			b.count.Add(1)
			o.hook().step(m.id, stepBarrierHeldNotice)
		}
	case m.fam == familyActor:
		// About a Session's message (its operation id is the Session's
		// and the sequence): progress of its pending route switch.
		if s := o.sessions.byOp(m.op.High); s != nil && s.held(m.id, m.gen, m.op.Low) {
			o.hook().step(m.id, stepSessionHeldNotice)
		}
	}
	return true
}

// A bound Session's pending route switch (session.go) waits for the command
// 50 of the last message it sent on the old route, and after a slice
// (barrierWait, 12 s) without it switches anyway. A Session's message that a
// move keeps on purpose — in its ingress hold, or waiting here for its
// cutover — is not passed on meanwhile, so no command 50 comes however long
// the move stalls, and before 2026-12-07 the Session switched after 12 s: its
// next messages ran at a target that had committed on its CutoverGrace ahead
// of those still held here (order, not loss). So the node holding them tells
// each such Session, every heldEvery, as it tells a held barrier's sender:
// the same barrier-held notice, with the operation id of the Session's
// latest message held here (its session RID's first 8 bytes and its
// sequence), to the Session's node run, only if it takes such notices
// (canTellHeld; a node of the capability's first version ignores one that
// names no barrier of its own). The Session counts it as progress of its
// switch's wait, bounded like a barrier's by barrierMaxWait and the caller's
// context. Not at once: the Session's wait starts at the commit and a slice
// is four notices long; most moves hold for milliseconds and send none.

// heldSession is the latest message of one Session that a move here keeps
// on purpose: the message's object, operation id and fence, and the node
// run it came from.
type heldSession struct {
	m   inMessage
	org origin
}

// holdSessionLocked records that a move here keeps the Session message m,
// of tag, that came from org, when h is held on purpose (heldLocked), and
// starts telling the Sessions so when nothing tells them yet; objects.mu
// is held.
func (o *objects) holdSessionLocked(h *hosted, tag *sessionTag, m inMessage, org origin) {
	if h == nil || tag == nil || m.op.IsZero() || h.kind != record.ObjectActor || !h.heldLocked() {
		return
	}
	if cur, ok := h.heldSessions[string(tag.rid)]; ok && cur.m.op.Low >= m.op.Low {
		return
	}
	if h.heldSessions == nil {
		h.heldSessions = map[string]heldSession{}
	}
	h.heldSessions[string(tag.rid)] = heldSession{m: m, org: org}
	if !h.telling {
		key := spot.Key{ID: m.id}
		h.telling = o.goWork(func() { o.tellSessionsHeld(key, h) })
	}
}

// heldLocked reports whether a move keeps what reaches h on purpose: its
// ingress hold (hostMoving, until it lets go of it) or its cutover
// (hostCutover, until the cutover is submitted); objects.mu is held.
func (h *hosted) heldLocked() bool {
	return h.state == hostMoving && h.holding != nil || h.state == hostCutover && h.cutoverOpen
}

// holdWaitingSession records a Session's message rec (from from) that
// waits here for the cutover of its object (waitCutover).
func (o *objects) holdWaitingSession(from transport.PeerInfo, rec *router.Record) {
	tag := sessionTagOf(rec)
	if tag == nil {
		return
	}
	m, ok := messageOf(rec)
	org, err := originOf(rec, from)
	if !ok || err != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.hosted[spot.Key{ID: m.id}]; h != nil && h.objectGeneration == m.gen {
		o.holdSessionLocked(h, tag, m, org)
	}
}

// tellSessionsHeld tells the Sessions of h.heldSessions, every heldEvery,
// that their messages are held here, until there are none (the move let
// go of them), h is no longer hosted under key, or the node halts (Close
// waits for it: goWork).
func (o *objects) tellSessionsHeld(key spot.Key, h *hosted) {
	t := time.NewTicker(o.heldEvery())
	defer t.Stop()
	source := entrySpotID(o.n.run)
	for {
		select {
		case <-t.C:
		case <-o.halt.Done():
			return
		}
		o.mu.Lock()
		if o.hosted[key] != h || len(h.heldSessions) == 0 {
			h.telling = false
			o.mu.Unlock()
			return
		}
		held := make([]heldSession, 0, len(h.heldSessions))
		for _, hs := range h.heldSessions {
			held = append(held, hs)
		}
		o.mu.Unlock()
		for _, hs := range held {
			if !o.canTellHeld(hs.org) {
				continue // an older version: it switches after a slice, as it always did
			}
			if f := o.hook().sessionHeldSend; f != nil && !f(hs.m.id) {
				continue
			}
			o.sendHeld(hs.org, hs.m.id, barrierHeldNotice(familyActor, hs.m, hs.org, source))
		}
	}
}

// heldTeller tells a barrier's sender that it is held while it waits for
// a cutover here: from begin (once it is queued) until the waiter is
// admitted (passed on, answered) or refused — which may come first, and
// then begin does nothing. Its methods do nothing on nil (not a barrier).
type heldTeller struct {
	mu    sync.Mutex
	ended bool
	stop  func()
}

// begin starts telling (tell starts it and returns its stop).
func (h *heldTeller) begin(tell func() (stop func())) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ended && h.stop == nil {
		h.stop = tell()
	}
}

// end stops telling, for good.
func (h *heldTeller) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ended = true
	if h.stop != nil {
		h.stop()
	}
}

// until is w ending h when it is admitted or refused.
func (h *heldTeller) until(w cutoverWaiter) cutoverWaiter {
	admit, refuse := w.admit, w.refuse
	w.admit = func() <-chan struct{} {
		again := admit()
		if again == nil {
			h.end()
		}
		return again
	}
	w.refuse = func(err error) {
		h.end()
		refuse(err)
	}
	return w
}
