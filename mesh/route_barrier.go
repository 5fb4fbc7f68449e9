package mesh

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Per-sender order across a route switch (docs/RELOCATION.md "A sender's
// order across a route switch").
//
// A node sends an object's messages on the route it resolved. When the
// object moves, messages this node already sent to the previous owner are
// passed on by it (Message Follow, §7.3) over the previous owner's
// connection to the new owner. Once this node learns the new route (a
// command 50 dropped its cache entry, the entry aged out, or a refusal made
// it re-read the store) its next message would go straight to the new owner
// on another connection and could overtake the ones still being passed on.
//
// So a node switching an object's route sends a barrier first: a request
// with the control "barrier" on the route it used before. It travels behind
// this node's earlier messages on that connection, is passed on behind them
// when the object has moved, and is answered where it is admitted — by the
// host that queued (or relayed) everything sent before it, or by a previous
// owner that no longer knows the object (everything before it was refused
// there too, or passed on and, before it answers, confirmed in at the new
// owner: follow_expiry.go). A host still holding the object in a move keeps it until the
// move lets go of that hold (holdBarrier, messaging.go), and says so
// meanwhile (route_barrier_held.go). New messages to the object wait for that answer;
// the new owner's merge order (payload, relay, temporary queue, §9.2) then
// keeps them behind the earlier ones.
//
// A barrier is only needed when the previous route was used within
// MessageFollowDuration (later, nothing can still be in flight through it)
// and was another node (a local sender's held messages are relayed on this
// node's own connection to the new owner, ahead of anything it sends next).
// Bound Sessions keep their own route and switch by command 44 (session.go).

// controlBarrier is the meshnode.control value of a barrier request.
const controlBarrier = "barrier"

// barrierWait is how long a route switch waits for its barrier's answer
// while nothing moves on the link to the previous owner: a previous owner
// in its cutover holds arrivals up to cutoverWait, then passes them on
// within followSendWait. Past it with the link still the switch happens
// anyway (logged): the previous owner is gone or stuck, and order with
// messages it never passed on does not matter.
//
// While records do move on that link — the previous owner is alive and
// working through a backlog this node's earlier messages are part of — the
// wait goes on, a barrierWait at a time, up to barrierMaxWait (and the
// sender's own deadline). Before 2026-12-06 it ended at barrierWait from
// the moment the barrier was queued: under overload (a drain on one core,
// thousands of records queued on a link) the barrier was still behind this
// node's earlier messages when it ended, and the next messages overtook
// them on the direct route (a flake hunt: 5–13 reordered in a demo drain).
// So does it while the node keeping the barrier says it keeps it on
// purpose (a move's hold or cutover there: route_barrier_held.go).
const (
	barrierWait    = cutoverWait + followSendWait
	barrierMaxWait = 5 * barrierWait
)

// barrierStopReadWait bounds the descriptor read that tells a previous
// owner's clean stop from a lost link (prevStopped).
const barrierStopReadWait = 2 * time.Second

// sentRoutes is the route this node last used for each object it sent to,
// kept for MessageFollowDuration.
type sentRoutes struct {
	mu    sync.Mutex
	m     map[follow.Key]*sentRoute
	swept time.Duration // a reading of the node's clock
}

type sentRoute struct {
	r  follow.Ready
	at time.Duration // when it was last used (node clock)
	// lastOp is the operation id of the last message sent on r; settled
	// is set when that message is known to have been handled past the
	// previous owner (settle), so a switch away from r needs no barrier.
	lastOp  router.OperationID
	settled bool
	// sending counts this node's messages to the object past beforeSend
	// whose send has not returned yet (sent). unordered is set when one
	// passed beforeSend while another was still sending: which of them the
	// transport queued last is not known, so lastOp may not be the last
	// message on the connection, and settle must not take its answer for
	// "nothing of ours is still in flight" — until a later message passes
	// beforeSend with nothing else sending (it is queued behind them all).
	// Before 2026-12-07 lastOp alone decided: goroutine A passed
	// beforeSend, goroutine B passed it after A but was queued before A's
	// message, and B's command 50 settled the route while A's message was
	// still being passed on by the previous owner; A's next message went
	// straight to the new owner and ran first
	// (TestConcurrentSendersSettleOnlyTheLastQueued).
	sending   int
	unordered bool
	// oneWay counts the one-way messages among sending, and queued, when
	// not nil, is closed once none is left (sent): a switch with a barrier
	// waits for it first (awaitQueued). A one-way message that passed
	// beforeSend on the previous route and is not queued yet would
	// otherwise be queued behind the barrier: the barrier answered, the
	// switch done, its sender's next message went straight to the new
	// owner ahead of it, which the previous owner was still passing on
	// (before 2026-12-07; TestSwitchBarrierWaitsForSendsClaimedOnThePreviousRoute).
	// A request is not waited for: it counts as sending until answered
	// (the transport's Request does not say when it is queued), and its
	// sender sends nothing more before that answer, which comes from the
	// turn that ran it or a refusal (then it is sent again, after the
	// switch); a switch waiting for it would wait for its handler.
	oneWay int
	queued chan struct{}
	// via is the route the messages sent on r actually took when r is
	// this node's own and the object had left it (Message Follow from
	// this node, messaging.go): a switch away from r orders behind them.
	via *follow.Ready
	// switching is non-nil while a barrier for this object runs; other
	// senders to the object wait for it to close.
	switching chan struct{}
}

// beforeSend returns once a message of this node to t may take route r
// without overtaking one it sent on its previous route to t, sending the
// barrier when the route changed. It fails only with ctx. When it returns
// nil, the caller calls o.sent.sent(t.cacheKey(), request) once the
// message's send has returned (whatever its outcome); request tells a
// request from a one-way message.
func (o *objects) beforeSend(ctx context.Context, t msgTarget, r follow.Ready, request bool) error {
	window := o.n.cfg.Routing.MessageFollowDuration
	if window <= 0 {
		return nil // nothing is passed on: a message on a stale route is refused
	}
	key := t.cacheKey()
	s := &o.sent
	for {
		now := o.n.clock.Now()
		s.mu.Lock()
		e := s.m[key]
		switch {
		case e == nil:
			s.sweep(now, window)
			e = &sentRoute{r: r, at: now, lastOp: t.op}
			e.claim(request)
			s.m[key] = e
			s.mu.Unlock()
			return nil
		case e.switching != nil:
			ch := e.switching
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		case follow.FenceOf(e.r).Matches(r):
			e.at, e.lastOp, e.settled = now, t.op, false
			e.claim(request)
			s.mu.Unlock()
			return nil
		case e.settled || now-e.at > window || e.r.ObjectGeneration != r.ObjectGeneration ||
			(e.via != nil && follow.FenceOf(*e.via).Matches(r)):
			e.r, e.at, e.lastOp, e.settled, e.via = r, now, t.op, false, nil
			e.claim(request)
			s.mu.Unlock()
			return nil
		case o.isLocal(e.r) && e.via == nil:
			e.r, e.at, e.lastOp, e.settled, e.via = r, now, t.op, false, nil
			e.claim(request)
			s.mu.Unlock()
			if err := o.awaitLocalHold(ctx, t); err != nil {
				s.sent(key, request)
				return err
			}
			return nil
		}
		prev, ch := e.r, make(chan struct{})
		if e.via != nil {
			prev = *e.via
		}
		e.switching = ch
		var queued chan struct{}
		if e.oneWay > 0 && !inActivationTurnOf(ctx, t) {
			if e.queued == nil {
				e.queued = make(chan struct{})
			}
			queued = e.queued
		}
		s.mu.Unlock()
		if queued != nil {
			o.awaitQueued(ctx, t, queued)
		}
		o.barrier(ctx, t, prev, r)
		s.mu.Lock()
		e.r, e.at, e.lastOp, e.settled, e.switching, e.via = r, o.n.clock.Now(), t.op, false, nil, nil
		err := ctx.Err() // read once: a claim is made exactly when nil is returned
		if err == nil {
			e.claim(request)
		}
		close(ch)
		s.mu.Unlock()
		return err
	}
}

// claim counts a message past beforeSend on e (called with the sentRoutes'
// mutex held); sent ends it.
func (e *sentRoute) claim(request bool) {
	e.unordered = e.sending > 0
	e.sending++
	if !request {
		e.oneWay++
	}
}

// sent ends a message's claim (beforeSend returned nil for it, with the
// same request): its send returned, so a message passing beforeSend from
// now on is queued behind it.
func (s *sentRoutes) sent(key follow.Key, request bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil || e.sending == 0 {
		return
	}
	e.sending--
	if request || e.oneWay == 0 {
		return
	}
	if e.oneWay--; e.oneWay == 0 && e.queued != nil {
		close(e.queued)
		e.queued = nil
	}
}

// inActivationTurnOf reports whether ctx is a turn of t's Instance Spot
// activation queue (activationTurn). Such a switch does not wait for the
// one-way messages being queued (awaitQueued): a local one to the Spot
// waits behind the activation queue, this turn included (deliverLocal), and
// would hold the turn up to barrierMaxWait.
func inActivationTurnOf(ctx context.Context, t msgTarget) bool {
	inTurn, _ := ctx.Value(activationTurn{}).(string)
	return t.fam == familySpot && inTurn == t.id
}

// awaitQueued returns once queued is closed: no one-way message of this
// node to t that passed beforeSend before the switch is still being
// queued, so the barrier goes out behind them all. Queuing one takes no
// handler (a remote send never blocks, transport Send), so the wait is
// short; bounded by ctx and barrierMaxWait (then the switch goes on,
// logged, as after a barrier that went unanswered).
func (o *objects) awaitQueued(ctx context.Context, t msgTarget, queued <-chan struct{}) {
	o.hook().step(t.id, stepSwitchQueued)
	bound := time.NewTimer(barrierMaxWait)
	defer bound.Stop()
	select {
	case <-queued:
	case <-ctx.Done():
	case <-bound.C:
		o.stats.routeBarriersTimedOut.Add(1)
		o.log.Warn("route switch: a one-way message sent on the previous route was not queued in time; sending the barrier anyway (it may arrive after later messages)",
			"object", t.id, "waited", barrierMaxWait)
	}
}

// settle records that the message with operation op, sent on the route
// fence f, was handled past that route's node: refused there (its answer
// came back on the same ordered connection, behind everything sent
// before it; what that node passed on before is in at the new owner by
// then, follow_expiry.go), or queued at the new owner after being passed on (command
// 50, sent only then). When it was the last message sent on f, nothing of
// this node is still in flight through f, and a switch away from it needs
// no barrier.
func (s *sentRoutes) settle(key follow.Key, f follow.Fence, op router.OperationID) {
	if op.IsZero() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[key]; e != nil && e.switching == nil && !e.unordered && e.lastOp == op && (f.Matches(e.r) || e.via != nil && f.Matches(*e.via)) {
		e.settled = true
	}
}

// followed records that the message op, sent on this node's own route r,
// was passed on along via (the object had left this node).
func (s *sentRoutes) followed(key follow.Key, r, via follow.Ready) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.m[key]; e != nil && e.switching == nil && follow.FenceOf(e.r).Matches(r) {
		e.via = &via
	}
}

// sweep drops the entries older than window, at most once per window.
// Called with s.mu held.
func (s *sentRoutes) sweep(now, window time.Duration) {
	if s.m == nil {
		s.m = map[follow.Key]*sentRoute{}
	}
	if now-s.swept < window {
		return
	}
	s.swept = now
	for k, e := range s.m {
		if e.switching == nil && e.sending == 0 && now-e.at > window {
			delete(s.m, k)
		}
	}
}

// awaitLocalHold returns once no move of t's object on this node holds
// what this node sent it: the object is not hosted here at t's
// ObjectGeneration, or is neither held by a move (hostMoving, until the
// move lets go of its ingress hold) nor relaying its hold (hostCutover,
// until the cutover is submitted). A local sender's held messages are
// relayed on this node's own link to the new owner, so once they are sent
// what it sends next on that link comes after them. Before 2026-12-06 it
// did not wait: when the target had committed on its CutoverGrace before
// the source relayed, the next message went straight to the open target
// and ran before the held ones. Bounded by ctx and barrierMaxWait (then
// it goes on, logged, as a barrier that went unanswered).
func (o *objects) awaitLocalHold(ctx context.Context, t msgTarget) error {
	key := spot.Key{Spot: t.fam == familySpot, ID: t.id}
	bound := time.NewTimer(barrierMaxWait)
	defer bound.Stop()
	var last chan struct{}
	for {
		var ch chan struct{}
		o.mu.Lock()
		if h, ok := o.hosted[key]; ok && h.objectGeneration == t.gen {
			switch h.state {
			case hostMoving:
				ch = h.holding
			case hostCutover:
				ch = h.cutoverDone
			}
		}
		o.mu.Unlock()
		if ch == nil || ch == last {
			return nil // not held here, or a state its move no longer ends
		}
		last = ch
		o.hook().step(t.id, stepSwitchHeld)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-bound.C:
			o.stats.routeBarriersTimedOut.Add(1)
			o.log.Warn("route switch: the move holding the object here did not let go of it in time; switching anyway",
				"object", t.id, "waited", barrierMaxWait)
			return nil
		}
	}
}

func (o *objects) isLocal(r follow.Ready) bool {
	return bytes.Equal(r.Route.NodeRID, o.n.run.rid) && r.Route.NodeGeneration == o.n.run.lifecycleGeneration
}

// barrier sends the barrier request on prev and waits for its answer (any
// answer: admitted, refused, or passed on and admitted), at most
// barrierWait. When prev's run is gone it asks next, the route switched
// to, instead (barrierBehindEnded).
func (o *objects) barrier(ctx context.Context, t msgTarget, prev, next follow.Ready) {
	o.stats.routeBarriers.Add(1)
	o.hook().step(t.id, stepSenderBarrier)
	bctx, cancel := context.WithTimeout(ctx, barrierMaxWait)
	defer cancel()
	bt := msgTarget{fam: t.fam, id: t.id, gen: t.gen, control: controlBarrier, op: opIDOf(NewOperationID())}
	// A node that keeps the barrier on purpose says so (barrier-held
	// notices, route_barrier_held.go): progress as much as the link's.
	held, unregister := o.held.add(bt.op, t.id)
	defer unregister()
	look := o.linkProgress(prev)
	stopWatch := watchProgress(bctx, cancel, o.barrierSlice(), func() linkProgress {
		p := look()
		p.held = held.count.Load()
		return p
	})
	defer stopWatch()
	start := time.Now()
	// A full link to prev is full of this sender's earlier messages: the
	// barrier must queue behind them, not be taken for "nothing of ours in
	// flight" — switching then let the next message overtake them on the
	// direct route.
	err := o.sendBarrier(bctx, bt, prev)
	v := barrierVerdictOf(ctx.Err() != nil, bctx.Err() != nil, err, func() bool { return o.runLiveInList(prev) },
		func() bool { return o.prevStopped(ctx, prev) })
	o.logBarrierEnd(v, t.id, prev, time.Since(start), err)
	if v == barrierPrevGone {
		o.barrierBehindEnded(ctx, t, prev, next)
	}
}

// prevGoneBy reports whether sendErr, a send's error on route prev, shows
// prev's node run gone (barrierPrevGone), as a barrier's would.
func (o *objects) prevGoneBy(ctx context.Context, prev follow.Ready, sendErr error) bool {
	return barrierVerdictOf(false, false, sendErr, func() bool { return o.runLiveInList(prev) },
		func() bool { return o.prevStopped(ctx, prev) }) == barrierPrevGone
}

// barrierBehindEnded returns, in a route switch away from prev whose run
// is gone (barrierPrevGone), once the new owner on next has admitted what
// prev passed on to it before it ended (ended_run_reads.go): a barrier on
// next naming prev's run (metaBarrierAfterRun), answered there once that
// run's connections are read to their end and its messages for the object
// admitted. When next is this node, the same wait here. Bounded by ctx and
// barrierMaxWait, then logged as a barrier that went unanswered. A new
// owner of an older version answers at once, as before.
func (o *objects) barrierBehindEnded(ctx context.Context, t msgTarget, prev, next follow.Ready) {
	run := nodeRun{rid: string(prev.Route.NodeRID), gen: prev.Route.NodeGeneration}
	bctx, cancel := context.WithTimeout(ctx, barrierMaxWait)
	defer cancel()
	start := time.Now()
	var err error
	if o.isLocal(next) {
		if w := o.afterEndedRun(nil, run, spot.Key{Spot: t.fam == familySpot, ID: t.id}); w != nil {
			select {
			case <-w:
			case <-bctx.Done():
				err = bctx.Err()
			}
		}
	} else {
		bt := msgTarget{fam: t.fam, id: t.id, gen: t.gen, control: controlBarrier, op: opIDOf(NewOperationID()),
			afterRun: &origin{rid: prev.Route.NodeRID, gen: prev.Route.NodeGeneration}}
		err = o.sendBarrier(bctx, bt, next)
	}
	waited := time.Since(start).Round(time.Millisecond)
	switch {
	case err == nil, ctx.Err() != nil:
		o.log.Debug("route switch: the new owner has what the previous owner's ended run passed on", "object", t.id, "waited", waited)
	case bctx.Err() != nil, errors.Is(err, transport.ErrBackpressure):
		o.stats.routeBarriersTimedOut.Add(1)
		o.log.Warn("route switch: the new owner did not confirm in time that what the previous owner passed on before its run ended is in; switching anyway (it may arrive after later messages)",
			"object", t.id, "previous", transport.RID(prev.Route.NodeRID).String(), "waited", waited, "err", err)
	default:
		// Refused where it was admitted, after the wait; or the new
		// owner cannot be reached — the next message cannot either.
		o.log.Debug("route switch: the new owner's barrier behind the ended previous owner not answered", "object", t.id, "err", err)
	}
}

// logBarrierEnd counts and logs how a route switch's barrier to prev ended
// (v), after waited, with the barrier request's error err.
func (o *objects) logBarrierEnd(v barrierVerdict, id string, prev follow.Ready, waited time.Duration, err error) {
	previous := transport.RID(prev.Route.NodeRID).String()
	waited = waited.Round(time.Millisecond)
	switch v {
	case barrierTimedOut:
		o.stats.routeBarriersTimedOut.Add(1)
		o.log.Warn("route switch: the previous owner did not answer the barrier in time; switching anyway",
			"object", id, "previous", previous, "waited", waited, "without_progress", o.barrierSlice())
	case barrierLinkLost:
		o.stats.routeBarriersTimedOut.Add(1)
		o.log.Warn("route switch: the link to the previous owner ended before it answered the barrier, and its run is still listed live; switching anyway (what this node sent it before may arrive after later messages)",
			"object", id, "previous", previous, "waited", waited, "err", err)
	case barrierLinkNotRestored:
		o.stats.routeBarriersTimedOut.Add(1)
		var dte *transport.DialTimeoutError
		within := time.Duration(0)
		if errors.As(err, &dte) {
			within = dte.Timeout
		}
		o.log.Warn("route switch: the link to the previous owner is down and could not be re-established (no connection within the dial timeout), and its run is still listed live; switching anyway (what this node sent it before may arrive after later messages)",
			"object", id, "previous", previous, "dial_timeout", within, "err", err)
	case barrierPrevStopped:
		// A clean stop: everything the previous owner read was passed on
		// or refused before its transport closed.
		o.log.Debug("route switch: the previous owner stopped cleanly before it answered the barrier; switching",
			"object", id, "previous", previous, "waited", waited, "err", err)
	case barrierRefused:
		// Refused behind everything this node sent prev.
		o.log.Debug("route switch: barrier refused", "object", id, "err", err)
	case barrierPrevGone:
		o.log.Debug("route switch: the previous owner's run is gone; asking the new owner for what it passed on", "object", id,
			"previous", previous, "err", err)
	}
}

// barrierVerdict is how a route switch's barrier ended.
type barrierVerdict int

const (
	// barrierAnswered: prev answered (or the caller gave up: nothing to
	// report).
	barrierAnswered barrierVerdict = iota
	// barrierTimedOut: no answer while the link stood still, or at the
	// barrier's bound.
	barrierTimedOut
	// barrierLinkLost: the link to prev ended before it answered (or was
	// down when the barrier was to be sent), while prev's run is still
	// listed live and did not stop cleanly — a slow previous owner whose
	// connection liveness gave up may still read what this node sent it
	// and pass it on after the messages that follow the switch.
	barrierLinkLost
	// barrierLinkNotRestored: the barrier was not sent because the link to
	// prev is down and its last redial got no connection within the dial
	// timeout (transport.DialTimeoutError), while prev's run is still
	// listed live and did not stop cleanly. The same risk as a lost link;
	// it is not prev answering late (before 2026-12-06 it was logged as
	// "did not answer the barrier in time").
	barrierLinkNotRestored
	// barrierPrevStopped: the link to prev ended, or was down, because
	// prev's run stopped cleanly — its descriptor says stopped or was
	// removed (§11), and it was not this node giving up on a silent prev
	// (transport.ErrPeerSilent). A clean stop ends object work, publishes
	// stopped and removes the descriptor before the transport closes, so
	// what it read was passed on or refused by then. Not counted as timed
	// out; DEBUG.
	barrierPrevStopped
	// barrierRefused: prev refused it — behind everything this node sent
	// it, so nothing of this node's is being passed on through prev.
	barrierRefused
	// barrierPrevGone: not answered because prev's run is gone — nothing
	// listens at its endpoint any more (a refused redial), this node has
	// no link to its node (ErrUnknownPeer), or the link ended and the run
	// is no longer listed live. Prev passes nothing on any more, but what
	// it passed on before a crash may still be unread at the next owner
	// (no last barriers confirmed it, shutdown_passons.go): the switch
	// asks the new owner first (barrierBehindEnded).
	barrierPrevGone
)

// barrierVerdictOf classifies a barrier's end: callerDone when the
// caller's context ended, barrierDone when the barrier's own (cut by the
// progress watch, or at barrierMaxWait), err the barrier request's error.
// prevLive is asked only for a lost link, prevStopped only for a lost link
// of a run still listed live.
func barrierVerdictOf(callerDone, barrierDone bool, err error, prevLive, prevStopped func() bool) barrierVerdict {
	var dialTimeout *transport.DialTimeoutError
	switch {
	case err == nil, callerDone:
		return barrierAnswered
	case barrierDone, errors.Is(err, transport.ErrBackpressure):
		return barrierTimedOut
	case errors.Is(err, syscall.ECONNREFUSED):
		// The link is down and its last redial was refused: nothing
		// listens at prev's endpoint, so prev's process is gone, with what
		// it had read — and the messages the transport keeps for prev's
		// run will never be sent (only to that very run). What it passed
		// on before may not be in at the next owner yet.
		return barrierPrevGone
	case errors.Is(err, transport.ErrUnknownPeer):
		// No link at all: this node forgot prev's node, which left the
		// list (its run ended).
		return barrierPrevGone
	case errors.Is(err, errRunEnded):
		// Prev's node runs as a later run now (endedRun refused the
		// send): prev's run ended — cleanly or not, the new run cannot
		// tell.
		return barrierPrevGone
	case !errors.Is(err, transport.ErrPeerDown) && !errors.Is(err, transport.ErrNotAdmitted):
		// A deadline here is the request's own (a redial that timed out
		// is ErrNotAdmitted): prev read nothing in time.
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrDeadlineExceeded) {
			return barrierTimedOut
		}
		return barrierRefused
	case !prevLive():
		return barrierPrevGone
	case !errors.Is(err, transport.ErrPeerSilent) && prevStopped():
		return barrierPrevStopped
	case errors.As(err, &dialTimeout):
		return barrierLinkNotRestored
	default:
		// The link ended before the answer, or was already down when the
		// barrier was to be sent (ErrNotAdmitted, wrapping the session's
		// end until the first redial fails, that redial's error after),
		// while prev may still run (say, a stalled process whose kernel
		// accepts the redial but which answers no handshake): what prev
		// read before the link went down, and the one-way messages the
		// transport keeps for prev's return, may still be passed on behind
		// the messages that follow the switch.
		return barrierLinkLost
	}
}

// prevStopped reports whether prev's node run stopped cleanly, as a fresh
// read of its descriptor shows (directory.RunStopped); false when the
// store does not tell in time.
func (o *objects) prevStopped(ctx context.Context, prev follow.Ready) bool {
	ctx, cancel := context.WithTimeout(ctx, barrierStopReadWait)
	defer cancel()
	stopped, err := directory.RunStopped(ctx, o.n.loc, o.n.cfg.Node.MeshName, prev.Route.NodeRID, prev.Route.NodeGeneration)
	if err != nil {
		o.log.Debug("route switch: could not read the previous owner's descriptor", "previous", transport.RID(prev.Route.NodeRID).String(), "err", err)
		return false
	}
	return stopped
}

// runLiveInList reports whether the latest discovery list names prev's
// node run with a live lease.
func (o *objects) runLiveInList(prev follow.Ready) bool {
	if o.listedLook != nil {
		return o.listedLook(prev)
	}
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok {
		return false
	}
	listed, live := o.n.memo.runListed(list, snap, prev.Route.NodeRID, prev.Route.NodeGeneration)
	return listed && live
}

// controlOf is a message's meshnode.control value ("" when none).
func controlOf(rec *router.Record) string {
	if rec.Metadata == nil {
		return ""
	}
	v, _, err := metaValue(rec.Metadata, controlKey)
	if err != nil {
		return ""
	}
	return v
}

// linkProgress is what a barrier watch sees of this node's link to a node
// run at one look: whether it is up (that very run admitted) and how far
// what this node sends on it has got.
type linkProgress struct {
	up bool
	transport.Progress
	// held counts the notices that the barrier is held on purpose
	// (route_barrier_held.go): from the node keeping it, whatever link
	// they came on.
	held uint64
}

// moved reports whether the link took more of what this node sends since
// prev: records left for the peer (this node's queue drains as the peer
// reads), the peer's kernel acknowledged more bytes, or the peer's reader
// answered a liveness probe lying further on (it read through what the
// kernels' buffers held before it, when the other two stand still) — or
// the node keeping the barrier said again that it holds it on purpose
// (held).
// Records from the peer do not count: a peer busy with its own traffic may
// still not read this node's. A peer that is stuck stops reading, the
// window closes, and none moves.
func (cur linkProgress) moved(prev linkProgress) bool {
	return cur.held != prev.held || cur.up && prev.up && (cur.RecordsOut != prev.RecordsOut || cur.AckedBytes != prev.AckedBytes ||
		cur.ReadRecords != prev.ReadRecords)
}

// judgedByLiveness reports whether the link's liveness still judges the
// peer: a probe on it awaits its answer (transport.Progress.Unanswered).
// A peer reading through a backlog held in the two kernels' buffers that
// no probe lies inside — written within one probe interval — moves
// nothing a barrier can see until it reaches the probe written behind it;
// its answer then moves ReadRecords, or the liveness ends the session (no
// probe answered for transport.peer_timeout) and the barrier's request
// fails with it. Until 2026-12-06 a barrier cut such a link after one
// slice (12 s) without movement, so a previous owner that needed longer
// for that backlog, within the liveness's own bound, was taken for gone.
func (cur linkProgress) judgedByLiveness() bool { return cur.up && cur.Unanswered }

// linkProgress returns a look at this node's link to prev's node run.
func (o *objects) linkProgress(prev follow.Ready) func() linkProgress {
	if o.linkLook != nil {
		return o.linkLook
	}
	rid := transport.RID(prev.Route.NodeRID)
	return func() linkProgress {
		if o.n.tr == nil {
			return linkProgress{}
		}
		if p, ok := o.n.tr.Peer(rid); !ok || p.LifecycleGeneration != prev.Route.NodeGeneration {
			return linkProgress{}
		}
		p, ok := o.n.tr.PeerProgress(rid)
		return linkProgress{up: ok, Progress: p}
	}
}

// barrierSlice is how long a barrier waits without progress on the link
// (barrierWait; tests shorten it).
func (o *objects) barrierSlice() time.Duration {
	if o.barrierEvery > 0 {
		return o.barrierEvery
	}
	return barrierWait
}

// watchProgress cuts ctx (cut) when a slice passes in which look shows the
// link did not move and its liveness does not judge the peer
// (judgedByLiveness: then the session's end decides), and stops when ctx
// ends or the returned function is called. That function returns once the
// watch ended: the barrier returns after it. Until 2026-12-07 it only told
// the watch to end, which it did afterwards, maybe once Close had returned.
func watchProgress(ctx context.Context, cut context.CancelFunc, slice time.Duration, look func() linkProgress) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		last := look()
		t := time.NewTimer(slice)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur := look()
			if !cur.moved(last) && !cur.judgedByLiveness() {
				cut()
				return
			}
			last = cur
			t.Reset(slice)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-ended
	}
}
