package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// handOver ends a move whose record names an owner the move did not make
// (SrcOwnedElsewhere: a recovery after this node's owner lease ended, a row
// written by hand). The source serves the object no more; what it took in
// during the move follows the object to that owner (§7.3), part by part as
// the machine's Handover says: passed on in the order it would have run
// here, or — a request the target was given but cannot have run — refused
// as not run, or left to a target that may have run it. A Message Follow
// entry to that owner replaces the one to the target, so what still
// arrives on the old route follows too; arrivals wait meanwhile (the
// object is in its cutover here), so they come after what is handed over.
// Before 2026-12-07 the source dropped it all: one-way messages its
// senders were told were accepted were lost, and the requests held were
// answered ErrClosed — also when the target had run them.
func (s *sourceMove) handOver() {
	o := s.o
	if s.leftToTarget {
		return // the node stopped first: nothing is read or dropped
	}
	plan := s.m.Handover()
	owner := authority.PartyOf(s.owner.Record)
	to := routeTo{nodeRID: owner.Node.RoutingID, nodeGen: owner.Node.LifecycleGeneration,
		ownerGen: uint64(s.owner.Record.AuthorityOwnerGeneration), leaseGen: owner.Owner.LeaseGeneration}

	// The object is still hosted here before relay-ready (held); after it,
	// it was retired at the cutover and is hosted again, in its cutover,
	// until the handover is done — unless something else took its key.
	o.mu.Lock()
	cur, taken := o.hosted[s.key]
	held := cur == s.h
	waiting := held || !taken
	if !taken {
		o.hosted[s.key] = s.h
	}
	if waiting {
		s.h.beginCutoverLocked()
	} else {
		s.h.letGoLocked()
	}
	o.mu.Unlock()
	hold := s.takeHold(held)
	relayed := s.takeRelayed()

	// Nothing goes to this node run, nor to the move's own target run: a
	// record naming it under this move's owner generation (written by
	// hand; its CAS did not apply) would have the message join the
	// temporary queue of the attempt this move cancelled, which drops
	// it unanswered.
	// Nor to a run of the owner's node other than the one admitted now
	// (endedRun): that node stopped and started again, and its new run
	// refused what was passed on as addressed to another run — a one-way
	// message dropped there while this handover counted it passed on.
	attempt := s.targetRoute()
	h := handing{s: s, to: to, nowhere: o.isRun(to.nodeRID, to.nodeGen) ||
		(bytes.Equal(to.nodeRID, attempt.nodeRID) && to.nodeGen == attempt.nodeGen && to.ownerGen == attempt.ownerGen)}
	// A later run than the link holds (endedRun) is the node's run now:
	// nothing is sent on the link yet, but the follow record is kept.
	// Asked before anything is sent (there may be nothing to send): the
	// follow record is kept or not by it. Each send checks the run again
	// (passOne); a run that ends meanwhile gets nothing more either.
	follows := !h.nowhere
	if err := o.endedRun(to.nodeRID, to.nodeGen); err != nil {
		h.nowhere, h.why = true, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), followSendWait)
	defer cancel()
	h.part(ctx, s.captured.Queue, plan.Captured)
	h.part(ctx, hold, plan.Held)
	h.part(ctx, relayed, plan.Relayed)
	follows = follows && !errors.Is(h.why, errRunEnded)

	m := follow.Move{Key: followKey(s.kind, s.id), ObjectGeneration: s.gen,
		PreviousAuthorityOwnerGeneration: uint64(s.row.Record.AuthorityOwnerGeneration), AuthorityOwnerGeneration: to.ownerGen,
		Owner: follow.Owner{ID: owner.Owner.ID, LeaseGeneration: owner.Owner.LeaseGeneration},
		Route: follow.Route{NodeRID: to.nodeRID, NodeGeneration: to.nodeGen}}
	if follows {
		if err := o.recordMove(m); err != nil {
			o.log.Warn("relocation: Message Follow to the owner the record names not recorded", "object", s.id, "err", err)
		}
	}
	o.mu.Lock()
	if o.hosted[s.key] == s.h {
		delete(o.hosted, s.key)
	}
	if waiting {
		s.h.endCutoverLocked()
	}
	o.mu.Unlock()
	if held {
		s.h.obj.Discard() // what it held was handed over, or is the target's
	}
	o.log.Warn("relocation: the object's record names an owner this move did not make (a recovery after this node's lease ended, "+
		"a row written by hand); not moved, and no longer served here: what it took in during the move follows it there",
		"object", s.id, "kind", s.kind, "generation", s.gen,
		"target", fmt.Sprintf("%x/%d", s.target.node.RoutingID, s.target.node.LifecycleGeneration),
		"owner", owner.String(), "owner_generation", to.ownerGen,
		"passed_on", h.passed, "refused", h.refused, "left_to_target", h.left, "lost", h.lost, "err", h.last)
}

// discard ends a move whose object was removed from the mesh meanwhile
// (SrcRemoved): no record names this node, so it must not serve the
// object again — neither recoverLocal's rebuild nor a reopen — and there is
// nobody to pass anything on to. Before relay-ready the object is still
// hosted and held here: it is dropped, and the requests it held answered
// closed (spot.ErrClosed, as its Close would) — except, as the machine's
// Handover says, those a target that may have committed was given (the
// reservation found consumed after this node's lease ended): their answer
// is the target's (until 2026-12-07 they were answered closed although
// the target may have run them). After relay-ready it was retired
// already; the Message Follow entry to the target, which will not open it
// (its CAS cannot apply), is dropped.
func (s *sourceMove) discard() {
	o := s.o
	if s.leftToTarget {
		return // the node stopped first: nothing is read or dropped
	}
	plan := s.m.Handover()
	o.mu.Lock()
	held := o.hosted[s.key] == s.h
	if held {
		delete(o.hosted, s.key)
	}
	s.h.letGoLocked()
	o.mu.Unlock()
	hold := s.takeHold(held)
	if held {
		s.h.obj.Discard()
	}
	relayed := s.takeRelayed()
	h := handing{s: s, nowhere: true}
	h.part(context.Background(), s.captured.Queue, plan.Captured)
	h.part(context.Background(), hold, plan.Held)
	h.part(context.Background(), relayed, plan.Relayed)
	target := fmt.Sprintf("%x/%d", s.target.node.RoutingID, s.target.node.LifecycleGeneration)
	o.log.Warn("relocation: the object's record was removed from the store during its move (ctl reclaim, the reclaim sweep, a deleted row); "+
		"not moved, and served by no node: the state it held is lost", "object", s.id, "kind", s.kind, "generation", s.gen,
		"target", target, "closed", h.closed, "left_to_target", h.left)
}

// takeHold captures the ingress hold of the object this move still holds
// (held), once nothing is admitted to it any more.
func (s *sourceMove) takeHold(held bool) []spot.Envelope {
	if !held {
		return nil
	}
	c, err := s.h.obj.Capture()
	if err != nil {
		s.o.log.Error("relocation: ingress hold not captured", "object", s.id, "err", err)
	}
	return c.Queue
}

// takeRelayed drops the move's departure to the target and returns, in
// order, what the move gave the target after relay-ready: the relayed
// hold, the leftovers and the copies of the one-way messages passed on
// along that departure (takeCopies waits for the pass-ons under way; none
// can begin once the departure is gone).
func (s *sourceMove) takeRelayed() []spot.Envelope {
	o := s.o
	o.follow.Revert(s.followMove())
	passed := o.takeCopies(s)
	o.cache.Drop(followKey(s.kind, s.id))
	out := append(append(append([]spot.Envelope(nil), s.relayEnvs...), s.unrelayed...), passed...)
	s.unrelayed = nil
	return out
}

// handing is one handover's sends and counts.
type handing struct {
	s       *sourceMove
	to      routeTo
	nowhere bool  // nothing can be sent to the owner named
	why     error // why, when not because it is not hosted there
	// passed, refused, left, lost and closed count the messages passed
	// on, the requests refused as not run, those left to the target, the
	// one-way messages that could not be passed on, and those of an
	// object removed (requests answered closed, one-way messages dropped).
	passed, refused, left, lost, closed int
	last                                error
}

// part hands over one part of what the move took in, in order, as f says.
func (h *handing) part(ctx context.Context, envs []spot.Envelope, f relocation.Fate) {
	for _, env := range envs {
		d := f.OneWay
		if env.Kind == spot.Request {
			d = f.Requests
		}
		switch d {
		case relocation.PassOn:
			err := h.why
			switch {
			case !h.nowhere:
				if err = h.s.passOne(ctx, env, h.to); errors.Is(err, errRunEnded) {
					// The run ended after endedRun was asked: the
					// rest goes nowhere either.
					h.nowhere, h.why = true, err
				}
			case err == nil:
				err = errNotHosted(h.s.id)
			}
			if err == nil {
				h.passed++
				continue
			}
			h.last = err
			if env.Kind != spot.Request {
				h.lost++
				continue
			}
			h.refuse(env) // not sent: it did not run
		case relocation.RefuseNotRun:
			h.refuse(env)
		case relocation.LeaveToTarget:
			h.s.dropFastPath(env) // its answer comes from the target
			h.left++
		case relocation.Closed:
			h.closed++
			if env.Kind == spot.Request {
				h.s.o.Reply(env.ReplyRoute, nil, fmt.Errorf("%w: %s %q was removed from the store during its move; the request did not run",
					spot.ErrClosed, h.s.kind, h.s.id))
			}
		}
	}
}

// refuse answers a request that did not run with the typed refusal of a
// message whose object moved: not delivered (errRouteStale), so the
// requester's send reads the store and goes to the owner it names.
func (h *handing) refuse(env spot.Envelope) {
	if env.Kind != spot.Request {
		return
	}
	h.refused++
	h.s.o.Reply(env.ReplyRoute, nil, fmt.Errorf("%w: %w: %s %q changed owner during its move (now %x/%d); the request did not run",
		ErrMoving, errRouteStale, h.s.kind, h.s.id, h.to.nodeRID, h.to.nodeGen))
}

// passOne sends env, a message the move took in, to the object's owner at
// to, on this node's ordered link to it, as Message Follow passes on an
// arrival: the same operation id, correlation and origin. A request's answer
// then comes from there.
func (s *sourceMove) passOne(ctx context.Context, env spot.Envelope, to routeTo) error {
	o := s.o
	rec, err := envelopeRecord(s.h, s.id, entrySpotID(o.n.run), env, to, 0)
	if err == nil {
		// Only to that run (endedRun).
		err = o.n.tr.SendWaitRun(ctx, transport.RID(to.nodeRID), to.nodeGen, rec)
	}
	if ended := runRefused(err); ended != nil {
		return ended
	}
	if err != nil {
		return err
	}
	o.stats.followForwarded.Add(1)
	s.dropFastPath(env)
	return nil
}
