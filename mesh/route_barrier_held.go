package mesh

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
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
	if bytes.Equal(org.rid, o.n.run.rid) && org.gen == o.n.run.lifecycleGeneration {
		// This node's own barrier, come back here by Message Follow.
		send := func() { o.noticeBarrierHeld(note) }
		return o.everyHeld(send)
	}
	if !o.peerHas(org.rid, router.CapabilityBarrierHeld) {
		// A node of an older version would take the notice for an
		// application message; it waits for its barrier as it always did.
		return func() {}
	}
	send := func() {
		ctx, cancel := context.WithTimeout(o.halt, barrierHeldSendWait)
		defer cancel()
		if err := o.n.tr.Send(ctx, transport.RID(org.rid), note); err != nil {
			o.log.Debug("route switch: barrier-held notice not sent", "object", m.id, "to", org.String(), "err", err)
		}
	}
	return o.everyHeld(send)
}

// everyHeld runs send at once and then every heldEvery until the returned
// stop is called or the node halts.
func (o *objects) everyHeld(send func()) (stop func()) {
	done := make(chan struct{})
	go func() {
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
	}()
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
	if b != nil && b.id == m.id {
		b.count.Add(1)
		o.hook().step(m.id, stepBarrierHeldNotice)
	}
	return true
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
