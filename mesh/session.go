package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Bound Sessions and command 44 (spec §7.2, §9.2, §9.4 step 3, §12;
// docs/RELOCATION.md "Bound Sessions"). A Session binds a session handle to
// one Actor: it resolves the Actor's route once and from then on sends
// straight to that binding route, never reading the Location Store. Every
// message carries the Session's tail (session RID, binding generation,
// sequence 1, 2, 3, …); the Actor's host records the binding, and the
// binding moves with the Actor in the Restore payload. When the Actor
// moves, the target sends command 44 commit one-way to the Session's owner
// after its owner CAS, and the Session switches its route; when a move is
// cancelled before relay-ready, the source sends 44 abort before it
// reopens and the route stays. Nobody waits for an apply reply.

// ErrSessionClosed is the answer of a closed Session's Send and Request. It
// also matches ErrInvalidOperation.
var ErrSessionClosed = fmt.Errorf("%w: session closed", ErrInvalidOperation)

// sessionRouteWait bounds the one-way commands 44 of one move.
const sessionRouteWait = 2 * time.Second

// Session is a handle bound to one Actor (Manager.BindSession). Its methods
// are safe for concurrent use; messages of one goroutine arrive in the
// order it sent them, across moves of the Actor.
type Session struct {
	o      *objects
	rid    []byte // SessionRID: 16 random bytes
	opHigh uint64 // the high half of every operation id it sends: rid[:8]
	id     string
	gen    uint64
	mesh   string

	// oneWay is held by a one-way message from the moment it takes its
	// sequence until the transport queued it (Send never blocks), and by
	// a request while it takes its sequence (nextFor), so that every
	// one-way message numbered below a message n left before n: a
	// commit's ReplayedHighWater or a command 50 about sequence n then
	// also covers every one-way message numbered below n.
	oneWay chan struct{}

	mu      sync.Mutex
	route   routeTo // the binding route
	bindGen uint64  // binding generation: 1, +1 per rebind from the store
	seq     uint64  // the last SourceSessionSequence handed out
	// open and sent account for the sequences handed out: open holds
	// those whose send has not returned yet, sent is the highest one
	// that left this node (or may have). A sequence whose message was
	// certainly not delivered (the transport refused it: backpressure, a
	// link that never took it; or the owner refused it) is in neither:
	// nothing with it is on its way, so no switch waits for it
	// (lastLocked).
	open    map[uint64]struct{}
	sent    uint64
	pending *sessionSwitch
	closed  bool
	// linkTo and linkSeq: the highest sequence this node sent along its
	// own (ordered) link to the Actor's new owner linkTo, following the
	// Actor that just left this node (deliverFollowing). A message sent
	// straight to linkTo later travels behind it on the same link.
	linkTo  routeTo
	linkSeq uint64
	// unbindDue: Close found sequences still open (a Send or Request of
	// another goroutine between taking its sequence and the transport's
	// answer); the unbind goes out when the last of them settles, so that
	// it travels behind them (unbindLocked).
	unbindDue bool
}

// sessionSwitch is a commit whose ReplayedHighWater was below the last
// sequence sent: the messages up to after are on their way through the
// previous owner, which passes them on in order. The route switches once
// the new owner admitted the one with sequence after (its command 50 says
// so), or after a barrier slice without it (barrierWait, 12 s: the
// cutover wait plus the follow send wait; Session.next) — a slice that
// starts again whenever the node holding its messages on purpose says so
// (Session.held), up to barrierMaxWait, as a route switch's barrier waits
// (route_barrier_held.go). Until then the Session sends nothing:
// a message sent on the old route meanwhile would still be on that way
// when the switch comes, and the first one sent straight to the new owner
// would overtake it (docs/RELOCATION.md "Bound Sessions").
type sessionSwitch struct {
	to    routeTo
	after uint64
	// have is the highest sequence known to have reached to (the
	// commit's ReplayedHighWater, a command 50 about an earlier message):
	// when a message numbered above it turns out never to have left
	// (Session.settle), after comes down and have may already cover it.
	have  uint64
	since time.Time
	// heard is when the wait last heard that a message of the Session
	// is held on purpose on its way (held): since then, or since, a
	// slice runs; notices counts them.
	heard   time.Time
	notices int
	done    chan struct{} // closed when the switch completes or is dropped
}

func newSessionSwitch(to routeTo, after, have uint64) *sessionSwitch {
	now := time.Now()
	return &sessionSwitch{to: to, after: after, have: have, since: now, heard: now, done: make(chan struct{})}
}

// BindSession binds a Session to the Actor ref: the Actor's route is
// resolved once (the route cache, else one Location Store read) and every
// message of the Session goes to that binding route. The Session gets a
// fresh random session RID and binding generation 1. Close it when done.
// Errors: as RequestActor's resolution (ErrNotFound, ErrStaleGeneration,
// ErrTypeMismatch, ErrUnavailable, ErrInvalidOperation, ErrNotConfigured).
func (m *Manager) BindSession(ctx context.Context, ref ActorRef) (*Session, error) {
	o := m.o
	own := o.n.cfg.Node.MeshName
	if _, err := resolveMesh(o.role(), own, nil); err != nil {
		return nil, err
	}
	if err := o.closedErr(); err != nil {
		return nil, err
	}
	if err := record.ValidateObjectID(ref.ActorID); err != nil {
		return nil, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
	}
	if !record.Generation(ref.ObjectGeneration).Valid() {
		return nil, fmt.Errorf("%w: ObjectGeneration %d", ErrInvalidOperation, ref.ObjectGeneration)
	}
	r, err := o.resolve(ctx, msgTarget{fam: familyActor, id: ref.ActorID, gen: ref.ObjectGeneration}, false)
	if err != nil {
		return nil, classify(ctx, err, "bind session to "+ref.ActorID)
	}
	s := &Session{o: o, id: ref.ActorID, gen: ref.ObjectGeneration, mesh: own, route: routeOf(r), bindGen: 1, oneWay: make(chan struct{}, 1),
		open: map[uint64]struct{}{}}
	o.sessions.add(s)
	return s, nil
}

// routeOf is the fence of a resolved route.
func routeOf(r follow.Ready) routeTo {
	return routeTo{nodeRID: append([]byte(nil), r.Route.NodeRID...), nodeGen: r.Route.NodeGeneration,
		ownerGen: r.AuthorityOwnerGeneration, leaseGen: r.Owner.LeaseGeneration}
}

// Send sends body one-way to the Actor (command 24 with the session tail)
// on the binding route. nil means the message left this node (or entered
// the mailbox here).
func (s *Session) Send(ctx context.Context, body []byte) error {
	_, err := s.deliver(ctx, body, false)
	return err
}

// Request sends body to the Actor (command 25 with the session tail) on the
// binding route and returns its reply.
func (s *Session) Request(ctx context.Context, body []byte) ([]byte, error) {
	return s.deliver(ctx, body, true)
}

// Actor returns the ref snapshot of the bound Actor: NodeRID is the binding
// route's node, updated when a command 44 commit switched it (§7.2). The
// route is never re-read from the Location Store for this.
func (s *Session) Actor() ActorRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ActorRef{ActorID: s.id, ObjectGeneration: s.gen, MeshName: s.mesh, NodeRID: append([]byte(nil), s.route.nodeRID...)}
}

// Close ends the Session: later Sends and Requests answer ErrSessionClosed
// and commands 44 for it are ignored. A Session that sent anything also
// tells the Actor's host to drop its binding (unbind, below), so that the
// binding no longer moves with the Actor nor gets a 44 per move — behind
// every message it sent: while another goroutine's Send or Request is
// still on its way to the transport, the unbind waits for it and leaves
// when it settles. Close never blocks. Idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.setPendingLocked(nil) // senders waiting for a switch answer ErrSessionClosed
	s.unbindDue = s.seq > 0
	t, to, ok := s.unbindLocked()
	s.mu.Unlock()
	s.o.sessions.remove(s)
	if ok {
		s.o.unbind(t, to, 0)
	}
}

// unbindLocked hands out the unbind of a closed Session once no sequence
// is open: a message whose send has not returned may not be queued on the
// link yet, and an unbind queued ahead of it dropped the binding that the
// message then recorded again on the host — for good. ok is false while
// one is open or when there is nothing (more) to unbind.
func (s *Session) unbindLocked() (t msgTarget, to routeTo, ok bool) {
	if !s.closed || !s.unbindDue || len(s.open) > 0 {
		return msgTarget{}, routeTo{}, false
	}
	s.unbindDue = false
	// A sequence of its own: the unbind's operation id is unique like
	// every message's (the host ignores the sequence).
	s.seq++
	t = msgTarget{fam: familyActor, id: s.id, gen: s.gen, control: controlUnbind,
		sess: &sessionTag{rid: s.rid, bindGen: s.bindGen, seq: s.seq}, op: router.OperationID{High: s.opHigh, Low: s.seq}}
	return t, s.route, true
}

// controlUnbind is the meshnode.control value of a closed Session's last
// message: a one-way command 24 with its tail and an empty body, sent on
// its binding route behind everything it sent there. The Actor's host
// drops the binding of that session RID (at that binding generation or
// older) where it admits it — it is never queued for the application — and
// an owner that no longer hosts the Actor passes it on by Message Follow
// like any message. Without it the wire had no unbind: the binding of a
// Session closed on a live node run moved with the Actor and got a 44 per
// move until that run ended, so a client binding a Session per request
// made the Actor's bindings grow. Best effort: an unbind that is lost (a
// link down, no follow record left, a move that captured the binding just
// before) leaves the binding as before, until the run ends.
const controlUnbind = "unbind"

// protocolCapabilities are the project capabilities this node's admission
// lists (transport.Config.Capabilities); a variable so that a test can
// start a node as one of an older version.
var protocolCapabilities = []string{router.CapabilitySessionUnbind, router.CapabilityBarrierHeld}

// unbind sends t, a closed Session's unbind, on route to (see
// controlUnbind). It never blocks: a one-way send only queues. A Session
// on the Actor's own node drops the binding directly; when the Actor has
// just left this node (its 44 not applied yet, or a switch pending), the
// unbind follows it along the recorded move, behind the messages the
// Session sent that way (deliverFollowing). An Actor moving away from this
// node is waited for (unbindLocal; waits counts those waits).
func (o *objects) unbind(t msgTarget, to routeTo, waits int) {
	r := follow.Ready{Key: t.cacheKey(), ObjectGeneration: t.gen, AuthorityOwnerGeneration: to.ownerGen,
		Owner: follow.Owner{LeaseGeneration: to.leaseGen}, Route: follow.Route{NodeRID: to.nodeRID, NodeGeneration: to.nodeGen}}
	if o.isRun(to.nodeRID, to.nodeGen) {
		hosted, wait := o.unbindLocal(t, waits)
		if wait != nil {
			o.holdBarrier(wait, func() { o.unbind(t, to, waits+1) })
			return
		}
		if hosted {
			return
		}
		fr, ok := o.followRoute(t, r)
		if !ok {
			return // not here, no move recorded: nothing to unbind that can be reached
		}
		r = fr
	}
	if !o.peerHas(r.Route.NodeRID, router.CapabilitySessionUnbind) {
		o.log.Debug("session unbind not sent: the Actor's host runs a version without it", "actor", t.id)
		return
	}
	if _, err := o.deliverRemote(context.Background(), t, r, nil, false); err != nil {
		o.log.Debug("session unbind not sent; the Actor keeps the binding until this node run ends", "actor", t.id, "err", err)
	}
}

// peerHas reports whether the node rid admitted this node with the
// protocol capability c (router.CapabilitySessionUnbind, …): a node of an
// older version would queue a project message it does not know for the
// application.
func (o *objects) peerHas(rid []byte, c string) bool {
	p, ok := o.n.tr.Peer(transport.RID(rid))
	return ok && p.Has(c)
}

// unbindLocal drops the binding of t's Session from the Actor when it is
// hosted here (a Session of this node run; the Actor arriving counts too:
// its hosted entry holds the bindings the payload brings). It reports
// whether the Actor is hosted here. An Actor that a move holds or is
// relaying away returns the channel to wait on instead, and nothing is
// dropped: the Session's earlier messages in its ingress hold reach the
// target with the relay and record the binding there again (the payload
// may carry it already), so the unbind must follow them; after
// unbindWaits waits it is dropped here all the same.
func (o *objects) unbindLocal(t msgTarget, waits int) (hosted bool, wait <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.hosted[spot.Key{ID: t.id}]
	if h == nil || h.objectGeneration != t.gen {
		return false, nil
	}
	if waits < unbindWaits && o.halt.Err() == nil {
		switch {
		case h.state == hostMoving && h.holding != nil:
			return true, h.holding
		case h.state == hostCutover && h.cutoverOpen:
			return true, h.cutoverDone
		}
	}
	o.unbindSessionLocked(h, t.sess)
	return true, nil
}

// unbindWaits bounds unbindLocal's waits: one for a move's hold, one for
// its cutover.
const unbindWaits = 2

// unbindSessionLocked drops h's binding of tag's session RID when it is of
// tag's binding generation or older; the caller holds objects.mu.
func (o *objects) unbindSessionLocked(h *hosted, tag *sessionTag) {
	if h == nil || tag == nil {
		return
	}
	if b := h.sessions[string(tag.rid)]; b != nil && b.bindGen <= tag.bindGen {
		delete(h.sessions, string(tag.rid))
		o.stats.sessionUnbound.Add(1)
	}
}

// deliver sends one message on the binding route. A refusal that proves
// the message was not delivered (the object is not there any more, a link
// that never took the record) falls back once to a store resolve and a
// rebind (binding generation + 1); that is the only store read a Session
// makes after it was bound.
func (s *Session) deliver(ctx context.Context, body []byte, request bool) ([]byte, error) {
	o := s.o
	if err := o.closedErr(); err != nil {
		return nil, err
	}
	if !request {
		select {
		case s.oneWay <- struct{}{}:
			defer func() { <-s.oneWay }()
		case <-ctx.Done():
			return nil, classify(ctx, ctx.Err(), "session message to "+s.id)
		}
	}
	for attempt := 0; ; attempt++ {
		t, to, err := s.nextFor(ctx, request)
		if err != nil {
			if ctx.Err() != nil {
				return nil, classify(ctx, err, "session message to "+s.id)
			}
			return nil, err
		}
		r := follow.Ready{Key: t.cacheKey(), ObjectGeneration: s.gen, AuthorityOwnerGeneration: to.ownerGen,
			Owner: follow.Owner{LeaseGeneration: to.leaseGen}, Route: follow.Route{NodeRID: to.nodeRID, NodeGeneration: to.nodeGen}}
		var reply []byte
		if o.isRun(to.nodeRID, to.nodeGen) {
			reply, err = o.deliverLocal(ctx, t, r, body, request)
			if errors.Is(err, ErrNotFound) {
				// The Actor just left this node and the store may not
				// name its new owner yet: follow it, as SendActor does.
				seq := t.sess.seq
				reply, err = o.deliverFollowing(ctx, t, r, body, request, err, func(fr follow.Ready) { s.sentOnLink(seq, routeOf(fr)) })
			}
		} else {
			reply, err = o.deliverRemote(ctx, t, r, body, request)
		}
		s.settle(t.sess.seq, err == nil || !notDelivered(err))
		switch {
		case err == nil:
			return reply, nil
		case attempt == 0 && notDelivered(err) && !errors.Is(err, transport.ErrBackpressure):
			if err := s.rebind(ctx, r, err); err != nil {
				return nil, err
			}
			continue
		}
		return nil, classify(ctx, err, "session message to "+s.id)
	}
}

// nextFor is next for a message: a one-way message holds the oneWay slot
// already (deliver); a request takes its sequence only while no one-way
// message is leaving — a one-way message numbered below it then left
// before it, and a command 50 or a commit's ReplayedHighWater about the
// request covers it. Until 2026-12-07 a request took its sequence beside
// a one-way message still on its way to the transport and could reach the
// wire first: a command 50 about it switched the route, and the one-way
// message's sender's next message, sent straight to the new owner, ran
// ahead of it (review, TestSessionRequestDoesNotCoverAnEarlierSendStillLeaving).
// The slot is not held while the request is sent: its caller waits for
// the answer, so nothing of that goroutine can overtake it.
func (s *Session) nextFor(ctx context.Context, request bool) (msgTarget, routeTo, error) {
	if request {
		select {
		case s.oneWay <- struct{}{}:
			defer func() { <-s.oneWay }()
		case <-ctx.Done():
			return msgTarget{}, routeTo{}, ctx.Err()
		}
	}
	return s.next(ctx)
}

// next hands out the next sequence and the route to send it on. While a
// switch is pending it waits for it (at most a barrier slice from the
// commit or the last held notice, barrierMaxWait in all, or until ctx
// ends): see sessionSwitch.
func (s *Session) next(ctx context.Context) (msgTarget, routeTo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed {
			return msgTarget{}, routeTo{}, ErrSessionClosed
		}
		p := s.pending
		if p == nil {
			break
		}
		// A slice without the notice, or without word that a message of
		// its is held on purpose (held), as a route switch's barrier
		// waits; at most barrierMaxWait in all.
		waited := time.Since(p.since)
		left := min(s.o.barrierSlice()-time.Since(p.heard), barrierMaxWait-waited)
		if left <= 0 {
			s.o.log.Warn("session route switched without seeing its last message arrive", "actor", s.id, "after", p.after,
				"waited", waited.Round(time.Millisecond), "held_notices", p.notices)
			s.switchLocked(p.to)
			break
		}
		s.mu.Unlock()
		wait := time.NewTimer(left)
		var err error
		select {
		case <-p.done:
		case <-wait.C:
		case <-ctx.Done():
			err = ctx.Err()
		}
		wait.Stop()
		s.mu.Lock()
		if err != nil {
			return msgTarget{}, routeTo{}, fmt.Errorf("session to %s: waiting for its route to switch: %w", s.id, err)
		}
	}
	s.seq++
	s.open[s.seq] = struct{}{}
	tag := &sessionTag{rid: s.rid, bindGen: s.bindGen, seq: s.seq}
	return msgTarget{fam: familyActor, id: s.id, gen: s.gen, sess: tag, op: router.OperationID{High: s.opHigh, Low: s.seq}}, s.route, nil
}

// settle records the outcome of the send of sequence seq: left is false
// when the message certainly was not delivered (notDelivered), and then a
// pending switch no longer waits for it. Without this, a Send refused by
// the transport (backpressure) left its sequence as "the last one sent":
// the next commit's ReplayedHighWater was below it, and the Session sent
// nothing for a barrier slice (12 s), waiting for a command 50 about a message
// that never left.
func (s *Session) settle(seq uint64, left bool) {
	s.mu.Lock()
	s.settleLocked(seq, left)
	t, to, ok := s.unbindLocked() // the last message Close waited for
	s.mu.Unlock()
	if ok {
		s.o.unbind(t, to, 0)
	}
}

func (s *Session) settleLocked(seq uint64, left bool) {
	delete(s.open, seq)
	if left {
		s.sent = max(s.sent, seq)
		return
	}
	p := s.pending
	if p == nil || s.closed {
		return
	}
	if last := s.lastLocked(); last < p.after {
		p.after = last
		if s.covered(p.have, p.to) >= p.after {
			s.switchLocked(p.to)
		}
	}
}

// lastLocked is the highest sequence that may still be on its way (or
// has arrived): the highest sent, or one whose send has not returned yet.
// A switch waits for it, not for s.seq (see settle).
func (s *Session) lastLocked() uint64 {
	last := s.sent
	for q := range s.open {
		last = max(last, q)
	}
	return last
}

// rebind resolves the Actor from the store and binds the Session to what
// it finds under the next binding generation. prev is the route whose
// send failed with sendErr: when that showed prev's node run gone (a
// crash: its redial refused, no link, its run ended or not listed live),
// what prev passed on of this Session before it ended may still be
// unadmitted at the new owner, and the rebind first waits for it there as
// a plain sender's route switch does (barrierBehindEnded; until 2026-12-07
// the next message could run ahead of it — review,
// TestSessionRebindAfterACrashedPreviousOwnerKeepsItsPassOnAhead).
func (s *Session) rebind(ctx context.Context, prev follow.Ready, sendErr error) error {
	t := msgTarget{fam: familyActor, id: s.id, gen: s.gen}
	r, err := s.o.resolve(ctx, t, true)
	if err != nil {
		return classify(ctx, err, "rebind session to "+s.id)
	}
	if !follow.FenceOf(prev).Matches(r) && !s.o.isLocal(prev) && s.o.prevGoneBy(ctx, prev, sendErr) {
		s.o.barrierBehindEnded(ctx, t, prev, r)
	}
	s.mu.Lock()
	s.route = routeOf(r)
	s.setPendingLocked(nil)
	s.bindGen++
	s.mu.Unlock()
	s.o.stats.sessionRebinds.Add(1)
	return nil
}

// sentOnLink records a message sent along this node's link to to
// (deliverFollowing): a switch to to that waits for it completes.
func (s *Session) sentOnLink(seq uint64, to routeTo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sameRoute(s.linkTo, to) {
		s.linkTo, s.linkSeq = to, 0
	}
	s.linkSeq = max(s.linkSeq, seq)
	if p := s.pending; p != nil && !s.closed && sameRoute(p.to, to) && s.linkSeq >= p.after {
		s.switchLocked(p.to)
	}
}

// covered is the highest sequence known to have reached, or to be ahead of
// anything this node sends next to, the owner at route to: hw, or what
// this node itself sent along its link there.
func (s *Session) covered(hw uint64, to routeTo) uint64 {
	if sameRoute(s.linkTo, to) {
		return max(hw, s.linkSeq)
	}
	return hw
}

func sameRoute(a, b routeTo) bool {
	return bytes.Equal(a.nodeRID, b.nodeRID) && a.nodeGen == b.nodeGen && a.ownerGen == b.ownerGen
}

func (s *Session) switchLocked(to routeTo) {
	s.route = to
	s.linkTo, s.linkSeq = routeTo{}, 0
	s.setPendingLocked(nil)
	s.o.stats.sessionSwitches.Add(1)
}

// setPendingLocked replaces the pending switch, waking the senders that
// wait for the one it replaces.
func (s *Session) setPendingLocked(p *sessionSwitch) {
	if s.pending != nil {
		close(s.pending.done)
	}
	s.pending = p
}

// apply takes a command 44 addressed to this Session; it returns why it was
// ignored ("" when applied). lease is the commit target's owner lease
// generation. A commit must come from the route's AuthorityOwnerGeneration
// (the pending switch's, if one waits) or a later one: each move's target
// sends its own, one-way on its own link, so the commits of two quick moves
// may come in either order (or one not at all), and the later one is the
// one to follow.
func (s *Session) apply(r *router.SessionRelocationRoute, lease uint64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.route
	if s.pending != nil {
		cur = s.pending.to // a commit of the next move chains on the pending one
	}
	switch {
	case s.closed:
		return "session closed"
	case r.Actor.ActorID != s.id || r.Actor.ObjectGeneration != s.gen:
		return fmt.Sprintf("names actor %s@%d, the session is bound to %s@%d", r.Actor.ActorID, r.Actor.ObjectGeneration, s.id, s.gen)
	case r.BindingGeneration != s.bindGen:
		return fmt.Sprintf("binding generation %d, the session is at %d", r.BindingGeneration, s.bindGen)
	}
	switch {
	case r.Route.Commit != nil && r.Route.Commit.TargetAuthorityOwnerGeneration == cur.ownerGen &&
		bytes.Equal(r.Route.Commit.TargetNodeRID, cur.nodeRID) && r.Route.Commit.TargetNodeGeneration == cur.nodeGen:
		// The commit of the move the Session already follows, learned from
		// a command 50 first (followed): nothing to change, except that a
		// pending switch may complete at once.
		if p := s.pending; p != nil {
			p.have = max(p.have, r.Route.Commit.ReplayedHighWater)
			if s.covered(p.have, p.to) >= p.after {
				s.switchLocked(p.to)
			}
		}
		return ""
	case r.Route.Commit != nil:
		c := r.Route.Commit
		if c.PreviousAuthorityOwnerGeneration < cur.ownerGen || c.TargetAuthorityOwnerGeneration <= c.PreviousAuthorityOwnerGeneration {
			// A move the route is already past: its commit came late
			// (44 is one-way, and each move's target sends its own, on
			// its own link), after the commit of a later move or a
			// command 50 from a later owner.
			return fmt.Sprintf("commit from AuthorityOwnerGeneration %d to %d, the route is at %d", c.PreviousAuthorityOwnerGeneration,
				c.TargetAuthorityOwnerGeneration, cur.ownerGen)
		}
		// PreviousAuthorityOwnerGeneration above the route's: the commits
		// of the moves in between are late or lost. This one names where
		// the Actor went last and what it accounts for there, and the
		// messages sent on the route are passed along the chain of moves,
		// so it is taken as the commit of the next move would be; the
		// earlier commits are ignored when they come.
		to := routeTo{nodeRID: append([]byte(nil), c.TargetNodeRID...), nodeGen: c.TargetNodeGeneration,
			ownerGen: c.TargetAuthorityOwnerGeneration, leaseGen: lease}
		last := s.lastLocked()
		if s.covered(c.ReplayedHighWater, to) >= last {
			s.switchLocked(to) // the target has everything sent so far
			return ""
		}
		s.setPendingLocked(newSessionSwitch(to, last, c.ReplayedHighWater))
		return ""
	case r.Route.Abort != nil:
		if a := r.Route.Abort; a.CurrentAuthorityOwnerGeneration != cur.ownerGen {
			return fmt.Sprintf("abort at AuthorityOwnerGeneration %d, the route is at %d", a.CurrentAuthorityOwnerGeneration, cur.ownerGen)
		}
		// §9.4: the owner kept the Actor; the route stays.
		s.o.stats.sessionAborts.Add(1)
		return ""
	}
	return "no route update"
}

// followed takes a command 50 about the Session's message seq, sent with
// the fence src and now admitted by the owner f names: a pending switch to
// that owner completes once the last message sent on the old route (or a
// later one) got there; so does one whose last message got to a later
// owner, switching there (the Actor moved on before the message caught up
// with it; the later move's commit may be late or lost).
//
// Without a pending switch, the notice is how a Session learns of a move
// no command 44 announced: the target sends 44 to the Sessions it knows at
// its owner change, and one whose first message reached the source after
// the capture became known to it only later, through Message Follow. Such
// a Session would otherwise send every message through the previous owner
// until its follow record expired, and then lose one-way messages to its
// refusals. A notice about a message sent on the current route, naming a
// newer owner generation, starts the same switch a commit below the last
// sequence does (the previous owner passes on in order; the Session waits
// for the notice of the last message it sent there).
func (s *Session) followed(seq uint64, src, f router.ActorRouteFence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Actor.ActorID != s.id || f.Actor.ObjectGeneration != s.gen || s.closed {
		return
	}
	to := routeTo{nodeRID: f.TargetNodeRID, nodeGen: f.TargetNodeGeneration, ownerGen: f.ExpectedAuthorityOwnerGeneration,
		leaseGen: f.ExpectedOwnerLeaseGeneration}
	p := s.pending
	if p == nil {
		cur := s.route
		if !bytes.Equal(src.TargetNodeRID, cur.nodeRID) || src.TargetNodeGeneration != cur.nodeGen ||
			src.ExpectedAuthorityOwnerGeneration != cur.ownerGen || to.ownerGen <= cur.ownerGen {
			return // about an earlier route, or not newer
		}
		to.nodeRID = append([]byte(nil), to.nodeRID...)
		last := s.lastLocked()
		if seq >= last {
			s.switchLocked(to) // nothing was sent after it
			return
		}
		s.setPendingLocked(newSessionSwitch(to, last, seq))
		return
	}
	if to.ownerGen > p.to.ownerGen {
		// A later owner than the pending switch's: the Actor moved on
		// before the last message sent on the old route caught up with
		// it, and that message was passed on along the moves (the
		// commit of the later move may be late or lost). Once it is the
		// last message, everything sent before it went the same way
		// ahead of it: switch straight to where it was admitted.
		if seq >= p.after {
			to.nodeRID = append([]byte(nil), to.nodeRID...)
			s.switchLocked(to)
		}
		return
	}
	if !bytes.Equal(to.nodeRID, p.to.nodeRID) || to.nodeGen != p.to.nodeGen || to.ownerGen != p.to.ownerGen {
		return
	}
	if seq < p.after {
		p.have = max(p.have, seq)
		return
	}
	s.switchLocked(p.to)
}

// held takes a barrier-held notice about the Session's message seq to the
// Actor id at gen: a move keeps it on purpose on its way to the Actor — in
// an ingress hold or waiting for a cutover (route_barrier_held.go) — so no
// command 50 about it comes before the move lets go of it. While a switch
// is pending and the message is not known to have reached its new owner,
// that is progress of the switch's wait (next), as for a route switch's
// barrier: switching meanwhile sent the next message straight to a target
// that had committed on its CutoverGrace, ahead of the held ones. It
// reports whether the notice counted; one for a Session that waits for no
// switch, or about a message already accounted for, is ignored.
func (s *Session) held(id string, gen, seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	if p == nil || s.closed || id != s.id || gen != s.gen || seq <= p.have || seq > p.after {
		return false
	}
	p.heard = time.Now()
	p.notices++
	return true
}

// sessionTable is the node's live Sessions, for commands 44 and 50.
type sessionTable struct {
	mu     sync.Mutex
	byHigh map[uint64]*Session // by opHigh, the first 8 bytes of the RID
}

// add gives s a fresh RID whose operation-id half no live Session uses.
func (t *sessionTable) add(s *Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byHigh == nil {
		t.byHigh = map[uint64]*Session{}
	}
	for {
		rid := make([]byte, 16)
		_, _ = rand.Read(rid)
		high := binary.BigEndian.Uint64(rid)
		if _, used := t.byHigh[high]; high != 0 && !used {
			s.rid, s.opHigh = rid, high
			t.byHigh[high] = s
			return
		}
	}
}

func (t *sessionTable) remove(s *Session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byHigh[s.opHigh] == s {
		delete(t.byHigh, s.opHigh)
	}
}

func (t *sessionTable) byOp(high uint64) *Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byHigh[high]
}

func (t *sessionTable) byRID(rid []byte) *Session {
	if len(rid) < 8 {
		return nil
	}
	if s := t.byOp(binary.BigEndian.Uint64(rid)); s != nil && bytes.Equal(s.rid, rid) {
		return s
	}
	return nil
}

// registerSessions adds command 44 to the dispatch table.
func (o *objects) registerSessions() {
	o.handle(router.CmdSessionRelocationRoute, func(_ context.Context, _ transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
		o.applySessionRoute(rec.Body.(*router.SessionRelocationRoute))
	})
}

// applySessionRoute is the Session owner's side of command 44: it must name
// this node run and host run and a live Session at its binding generation;
// a commit must follow on the route's AuthorityOwnerGeneration or a later
// one (Session.apply), an abort name it. Anything else is ignored and
// counted.
func (o *objects) applySessionRoute(r *router.SessionRelocationRoute) {
	why := ""
	self, lg := o.n.Owner()
	s := o.sessions.byRID(r.SessionRID)
	var lease uint64
	switch {
	case !o.isRun(r.SessionOwnerNodeRID, r.SessionOwnerNodeGeneration) || r.SessionOwnerID != self || r.SessionOwnerLeaseGeneration != lg:
		why = fmt.Sprintf("addressed to session owner %s/%d on %x/%d", r.SessionOwnerID, r.SessionOwnerLeaseGeneration,
			r.SessionOwnerNodeRID, r.SessionOwnerNodeGeneration)
	case s == nil:
		why = "no such session"
	case r.Route.Commit != nil:
		var ok bool
		if _, lease, ok = o.peerOwner(r.Route.Commit.TargetNodeRID, r.Route.Commit.TargetNodeGeneration); !ok {
			// The route fence needs the target's owner lease generation,
			// which 44 does not carry: without it the Session keeps its
			// route (Message Follow, then the store, still reach the
			// Actor).
			why = fmt.Sprintf("target node run %x/%d is not in the descriptor list", r.Route.Commit.TargetNodeRID, r.Route.Commit.TargetNodeGeneration)
		}
	}
	if why == "" {
		why = s.apply(r, lease)
	}
	if why != "" {
		o.stats.sessionIgnored.Add(1)
		if ok, suppressed := o.route44IgnoredLog.allow(); ok {
			o.log.Info("command 44 ignored", "actor", r.Actor.ActorID, "action", r.Route.Action, "sender", r.SenderRole, "why", why,
				"suppressed", suppressed)
		}
	}
}

// sessionFollowed takes a command 50 (or its local equivalent) about one of
// this node's messages, sent with source and admitted under target: a
// Session's route may switch (Session.followed).
func (o *objects) sessionFollowed(op router.OperationID, source, target router.MessageFollowRoute) {
	if target.Actor == nil || source.Actor == nil {
		return
	}
	if s := o.sessions.byOp(op.High); s != nil {
		s.followed(op.Low, *source.Actor, *target.Actor)
	}
}

// peerOwner returns the host run (OwnerId, LeaseGeneration) of a node run
// from the descriptor list discovery keeps — no store read — or this node's
// own. ok is false when the list does not have it.
func (o *objects) peerOwner(rid []byte, gen uint64) (string, uint64, bool) {
	if o.isRun(rid, gen) {
		id, lg := o.n.Owner()
		return id, lg, true
	}
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok {
		return "", 0, false
	}
	owner, ok := o.n.memo.runOwner(list, snap, rid, gen)
	return owner.ID, owner.LeaseGeneration, ok
}

// ---- the Actor's host: bindings on the hosted object ----

// sessionTag is the bound-session tail of an Actor message (commands 24/25).
type sessionTag struct {
	rid     []byte
	bindGen uint64
	seq     uint64
}

// tail is the wire tail (nil for no tag).
func (t *sessionTag) tail() *router.BoundSessionTail {
	if t == nil {
		return nil
	}
	return &router.BoundSessionTail{SourceSessionRID: t.rid, SourceBindingGeneration: t.bindGen, SourceSessionSequence: t.seq}
}

// sessionTagOf reads the tail of an Actor message; nil when it has none.
func sessionTagOf(rec *router.Record) *sessionTag {
	var t *router.BoundSessionTail
	switch b := rec.Body.(type) {
	case *router.ActorSend:
		t = b.BoundSession
	case *router.ActorRequest:
		t = b.BoundSession
	}
	if t == nil {
		return nil
	}
	// Decoded byte fields alias the frame: keep a copy.
	return &sessionTag{rid: append([]byte(nil), t.SourceSessionRID...), bindGen: t.SourceBindingGeneration, seq: t.SourceSessionSequence}
}

// sessionBinding is one bound Session of a hosted Actor, as its messages
// showed it: the owner node run (their origin), its host run from the
// descriptor list ("" when unknown), the binding generation and the highest
// sequence seen. It moves with the Actor (chunk.SessionBinding).
type sessionBinding struct {
	owner    origin
	ownerID  string
	leaseGen uint64
	bindGen  uint64
	highest  uint64
	// list is the number of the node's descriptor list current when the
	// binding's latest message was admitted (or it arrived with a move):
	// only a list read after that one can show its owner run gone
	// (sessionsOf).
	list uint64
}

// bindSessionLocked records the Session of a message admitted for h; the
// caller holds objects.mu (the admission's critical section). The owner's
// host run is looked up later, outside the lock (sessionsOf).
func (o *objects) bindSessionLocked(h *hosted, tag *sessionTag, org origin) {
	if h == nil || tag == nil || h.kind != record.ObjectActor {
		return
	}
	o.mergeSessionLocked(h, string(tag.rid), sessionBinding{owner: org, bindGen: tag.bindGen, highest: tag.seq, list: o.n.listSeq.Load()})
}

// mergeSessionLocked adds nb to h's bindings: a newer binding generation
// replaces the entry, the same one raises its highest sequence (and fills
// the owner's host run if it was unknown), an older one is ignored (a
// message of a binding the Session has left). The caller holds objects.mu.
func (o *objects) mergeSessionLocked(h *hosted, key string, nb sessionBinding) {
	if h.sessions == nil {
		h.sessions = map[string]*sessionBinding{}
	}
	b := h.sessions[key]
	switch {
	case b == nil || nb.bindGen > b.bindGen:
		if b != nil {
			nb.highest = max(nb.highest, b.highest) // the sequence runs on across rebinds
		}
		h.sessions[key] = &nb
	case nb.bindGen == b.bindGen:
		b.highest = max(b.highest, nb.highest)
		b.list = max(b.list, nb.list)
		if b.ownerID == "" {
			b.ownerID, b.leaseGen = nb.ownerID, nb.leaseGen
		}
	}
}

func (g origin) same(o origin) bool { return g.gen == o.gen && bytes.Equal(g.rid, o.rid) }

// sessionEntry is one binding of a snapshot.
type sessionEntry struct {
	rid string
	b   sessionBinding
}

// sessionsOf is a snapshot of h's bindings in session RID order, with the
// owner's host run looked up where it was not known. Bindings whose
// Session's node run is gone are dropped from h and left out (ownerGone).
func (o *objects) sessionsOf(h *hosted) []sessionEntry {
	o.mu.Lock()
	out := make([]sessionEntry, 0, len(h.sessions))
	for k, b := range h.sessions {
		out = append(out, sessionEntry{rid: k, b: *b})
	}
	o.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].rid < out[j].rid })
	kept := out[:0]
	var gone []sessionEntry
	for _, e := range out {
		if o.ownerGone(e.b) {
			gone = append(gone, e)
			continue
		}
		if b := &e.b; b.ownerID == "" {
			b.ownerID, b.leaseGen, _ = o.peerOwner(b.owner.rid, b.owner.gen)
		}
		kept = append(kept, e)
	}
	if len(gone) > 0 {
		o.pruneSessions(h, gone)
	}
	return kept
}

// ownerGone reports whether b's Session belongs to a node run that is
// gone: a descriptor list read after b's latest message (two lists later:
// the next one may come from a round that began before it) lists that run
// without a live lease, or no longer lists it (it stopped, its descriptor
// was reclaimed, or a new run of its RID took it over). Such a Session
// cannot send again — a node's Sessions end with its run — and a 44 could
// not reach it. Without this an Actor carried the bindings of every
// Session ever bound to it from move to move, and sent each a 44 per move
// (a client restarting, or binding Sessions from short-lived processes).
// A run missing from one list while it is alive (its descriptor removed
// for a moment) loses its bindings too: its Sessions' next messages then
// reach the previous owner and are passed on (Message Follow) or rebind.
func (o *objects) ownerGone(b sessionBinding) bool {
	if o.isRun(b.owner.rid, b.owner.gen) {
		return false
	}
	// Discovery rounds, not changes of the list (a peer's refusal changes
	// it too); read before the list, which is then of this round or later.
	round := o.n.listSeq.Load()
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok || round < b.list+2 {
		return false
	}
	listed, live := o.n.memo.runListed(list, snap, b.owner.rid, b.owner.gen)
	return !listed || !live
}

// pruneSessions drops the gone bindings from h, each only if no message
// renewed it since the snapshot (its list stamp unchanged).
func (o *objects) pruneSessions(h *hosted, gone []sessionEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range gone {
		if b := h.sessions[e.rid]; b != nil && b.bindGen == e.b.bindGen && b.list == e.b.list {
			delete(h.sessions, e.rid)
			o.stats.sessionPruned.Add(1)
			o.log.Debug("bound session dropped: its node run is gone", "session_owner", e.b.owner.String())
		}
	}
}

// payloadSessions are h's bindings for the Restore payload.
func (o *objects) payloadSessions(h *hosted) []chunk.SessionBinding {
	var out []chunk.SessionBinding
	for _, e := range o.sessionsOf(h) {
		out = append(out, chunk.SessionBinding{SessionRID: []byte(e.rid), OwnerNodeRID: e.b.owner.rid, OwnerNodeGeneration: e.b.owner.gen,
			OwnerID: e.b.ownerID, OwnerLeaseGeneration: e.b.leaseGen, BindingGeneration: e.b.bindGen, HighestSequence: e.b.highest})
	}
	return out
}

// restoreSessions records the payload's bindings on the arriving object.
func (o *objects) restoreSessions(h *hosted, ps []chunk.SessionBinding) {
	list := o.n.listSeq.Load() // judged by this node's lists from now on
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range ps {
		// Payload byte fields alias the assembled buffer: copy.
		o.mergeSessionLocked(h, string(p.SessionRID), sessionBinding{owner: origin{rid: append([]byte(nil), p.OwnerNodeRID...), gen: p.OwnerNodeGeneration},
			ownerID: p.OwnerID, leaseGen: p.OwnerLeaseGeneration, bindGen: p.BindingGeneration, highest: p.HighestSequence,
			list: list})
	}
}

// sendSessionRoutes sends command 44 one-way to the owner of every Session
// bound to h, or of those in only when it is not nil (a Session owned by
// this node run takes it directly). The
// coordinator fence names the move's source, which coordinates it, and the
// StoreVersion the sender's step was conditioned on. A binding whose
// owner's host run is unknown cannot be addressed and is logged.
func (o *objects) sendSessionRoutes(ctx context.Context, h *hosted, only map[string]struct{}, id string, bind router.RelocationBinding,
	version string, role router.RelocationRole, update func(sessionBinding) router.SessionRouteUpdate) {
	for _, e := range o.sessionsOf(h) {
		if _, ok := only[e.rid]; only != nil && !ok {
			continue
		}
		b := e.b
		if b.ownerID == "" {
			o.log.Warn("command 44 not sent: the session owner's host run is unknown", "actor", id, "session_owner", b.owner.String())
			continue
		}
		body := &router.SessionRelocationRoute{Relocation: bind.Relocation,
			Coordinator: router.RelocationCoordinatorFence{CoordinatorOwnerID: bind.Source.SourceOwnerID,
				CoordinatorLeaseGeneration: bind.Source.SourceOwnerLeaseGeneration, CoordinatorNodeRID: bind.Source.SourceNodeRID,
				CoordinatorNodeGeneration: bind.Source.SourceNodeGeneration, ExpectedAuthorityStoreVersion: version},
			SenderRole: role, Actor: router.ActorRef{ActorID: id, ObjectGeneration: h.objectGeneration},
			SessionOwnerNodeRID: b.owner.rid, SessionOwnerNodeGeneration: b.owner.gen, SessionOwnerID: b.ownerID,
			SessionOwnerLeaseGeneration: b.leaseGen, SessionRID: []byte(e.rid), BindingGeneration: b.bindGen, Route: update(b)}
		if o.isRun(b.owner.rid, b.owner.gen) {
			o.stats.sessionRoutesSent.Add(1)
			o.applySessionRoute(body)
			continue
		}
		if h := o.hook().holdSessionRoute; h != nil && h(id, body) {
			continue
		}
		if err := o.n.tr.SendWait(ctx, transport.RID(b.owner.rid), router.NewRecord(body, nil, nil)); err != nil {
			o.log.Warn("command 44 not sent", "actor", id, "session_owner", b.owner.String(), "err", err)
			continue
		}
		o.stats.sessionRoutesSent.Add(1)
	}
}

// sessionAbort is §9.4 step 3 on the source: command 44 abort to every
// bound Session's owner, sent before the source reopens; the owner keeps
// its route. Nobody waits for an apply reply.
func (s *sourceMove) sessionAbort() {
	if s.kind != record.ObjectActor {
		return
	}
	ctx, cancel := s.bg(sessionRouteWait)
	defer cancel()
	cur := uint64(s.row.Record.AuthorityOwnerGeneration)
	s.o.sendSessionRoutes(ctx, s.h, nil, s.id, s.bind.Wire(), s.row.Version, router.RoleSource, func(sessionBinding) router.SessionRouteUpdate {
		return router.SessionRouteUpdate{Action: router.RouteAbort, Abort: &router.SessionRouteAbort{CurrentAuthorityOwnerGeneration: cur}}
	})
}

// sessionCommit runs on the target after its owner CAS, once dispatch is
// open (§9.2: the 44 route update does not block message processing):
// command 44 commit to every bound Session's owner. ReplayedHighWater is the
// highest sequence of the Session this node accounts for at the owner
// change — run on the source or moved in the payload queue, the relay or
// the temporary queue.
func (a *arrival) sessionCommit() {
	if a.kind != record.ObjectActor {
		return
	}
	a.sendCommits(a.h.ownerGeneration, nil)
}

// sendCommits sends the command 44 commit of this move, the object at
// AuthorityOwnerGeneration next here, to the owners of the Sessions bound
// to it — of those in only, when only is not nil (session_late_relay.go).
func (a *arrival) sendCommits(next uint64, only map[string]struct{}) {
	o := a.o
	ctx, cancel := context.WithTimeout(o.halt, sessionRouteWait)
	defer cancel()
	prev := a.prep.Object.ExpectedAuthorityOwnerGeneration
	o.sendSessionRoutes(ctx, a.h, only, a.prep.Object.ObjectID, a.prep.Binding, a.version, router.RoleTarget, func(b sessionBinding) router.SessionRouteUpdate {
		return router.SessionRouteUpdate{Action: router.RouteCommit, Commit: &router.SessionRouteCommit{PreviousAuthorityOwnerGeneration: prev,
			TargetAuthorityOwnerGeneration: next, TargetNodeRID: o.n.run.rid, TargetNodeGeneration: o.n.run.lifecycleGeneration,
			ReplayedHighWater: b.highest}}
	})
}

// hostedSessions is a test and operator view: the session RIDs bound to the
// object key, with their highest sequences.
func (o *objects) hostedSessions(key spot.Key) map[string]uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.hosted[key]
	if !ok {
		return nil
	}
	out := make(map[string]uint64, len(h.sessions))
	for k, b := range h.sessions {
		out[k] = b.highest
	}
	return out
}
