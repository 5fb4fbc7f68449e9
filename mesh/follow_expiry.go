package mesh

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/router/transport"
)

// A refusal behind what was passed on (docs/FOLLOW.md "Previous owner: a
// refusal behind its pass-ons").
//
// A previous owner passes an object's messages on to its new owner for
// MessageFollowDuration after the move; one arriving later finds no follow
// record and is refused as not hosted here. Its sender takes the refusal,
// which comes back on the ordered connection behind everything it sent
// before, for "everything before it was handled there" (sentRoutes.settle)
// and sends its retry, and what follows, straight to the new owner. But
// passed on is not admitted: what this node passed on just before the
// record expired may still be on its own connection to the new owner, and
// the retry ran ahead of it (until 2026-12-07, evening;
// TestRefusalAtFollowExpiryDoesNotOvertakeWhatWasPassedOn). A barrier of
// the sender's on the previous route was refused the same way.
//
// So a request (a barrier too) refused here as not hosted, with no follow
// route, for an object whose messages this node passed on within
// MessageFollowDuration, is answered only once a barrier of this node's
// own, sent on the route they took (behind them on that connection), is
// answered where they were admitted. It waits off the connection's reader,
// with the peer's later messages for the object behind it (waitCutover),
// as for a cutover, and is then refused as before. One barrier confirms
// everything passed on before it went out; what is passed on meanwhile
// (a relay of a later move) is confirmed by the next refusal's. The
// routes are confirmed at once, each bounded by barrierWait (then refused
// anyway, WARN). A one-way message is
// refused (dropped) at once: its sender hears nothing of it.

// stepRefusalConfirm: a request refused as not hosted waits for a barrier
// behind what was passed on for its object (a test hook step).
const stepRefusalConfirm = "follow:refusal-confirm"

// passOnConfirms are, per object, the routes its messages were last passed
// on by (Message Follow, a move's relay or leftovers) and not confirmed yet
// by a refusal's barrier, kept for MessageFollowDuration after the last
// one. Unlike passedOn's map (taken by a closing node's rounds) they are
// kept until confirmed or old.
type passOnConfirms struct {
	mu    sync.Mutex
	m     map[follow.Key]*passOnConfirm
	swept time.Duration // a reading of the node's clock
}

type passOnConfirm struct {
	t  msgTarget
	at time.Duration // the last pass-on noted (node clock)
	// to are the moves passed on along since the last confirmation began
	// (each new owner's route once).
	to []follow.Move
	// confirming is non-nil while a confirmation runs; closed once it ended.
	confirming chan struct{}
	// waitingOn are the moves that confirmation sent its barriers along,
	// each with a channel closed once its barrier was answered (or gave up).
	waitingOn []confirmingMove
}

type confirmingMove struct {
	m    follow.Move
	done chan struct{}
}

// note records that messages of t went to the new owner of move to.
func (c *passOnConfirms) note(now, window time.Duration, t msgTarget, to follow.Move) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[follow.Key]*passOnConfirm{}
	}
	if now-c.swept >= window {
		c.swept = now
		for k, e := range c.m {
			if now-e.at > window && e.confirming == nil {
				delete(c.m, k)
			}
		}
	}
	e := c.m[to.Key]
	if e == nil {
		e = &passOnConfirm{}
		c.m[to.Key] = e
	}
	e.t, e.at = t, now
	for _, m := range e.to {
		if follow.FenceOf(readyOf(m)).Matches(readyOf(to)) {
			return
		}
	}
	e.to = append(e.to, to)
}

// confirmPassOns returns, for a request from the node from about to be
// refused here as not hosted with no follow route, the channel to wait on
// before it is: closed once the messages of key this node passed on within
// window are confirmed admitted by their new owners (a barrier behind them
// answered), or that wait gave up. nil when there is nothing to confirm
// (or the node halted).
//
// A request from a node the running confirmation waits on does not wait
// for the barriers to that node: two previous owners that passed the
// object's messages on to each other confirm by barriers that are refused
// the same way, and each waited for the other's until barrierWait (12 s,
// then a WARN;
// TestRefusalConfirmationsBetweenTwoPreviousOwnersDoNotWaitForEachOther).
// The request came on that node's connection behind everything it passed
// on here, which this node has therefore read, and what this node passed
// on to it is what the running confirmation is confirming for the request
// that started it. It still waits for the barriers to the other new owners
// (refused at once only when there are none): what this node passed on to
// them may be that node's own messages, and until review L (2026-12-07,
// night) its retry overtook them
// (TestRefusalAtOnceForAConfirmedNodeDoesNotOvertakeAPassOnElsewhere). A
// longer cycle (three previous owners, each passing on to the next) still
// waits out barrierWait.
func (o *objects) confirmPassOns(key follow.Key, from transport.RID) <-chan struct{} {
	window := o.n.cfg.Routing.MessageFollowDuration
	if window <= 0 {
		return nil
	}
	c := &o.passed.confirms
	now := o.n.clock.Now()
	c.mu.Lock()
	e := c.m[key]
	switch {
	case e == nil:
		c.mu.Unlock()
		return nil
	case e.confirming != nil:
		ch := e.confirming
		var others []chan struct{}
		fromWaited := false
		for _, w := range e.waitingOn {
			if bytes.Equal(w.m.Route.NodeRID, from) {
				fromWaited = true
				continue
			}
			select {
			case <-w.done:
			default:
				others = append(others, w.done)
			}
		}
		c.mu.Unlock()
		if !fromWaited {
			return ch
		}
		// Not for the barriers to from, but for those to the other new
		// owners still unanswered: what this node passed on to them may be
		// from's own messages, which its retry must not overtake
		// (TestRefusalAtOnceForAConfirmedNodeDoesNotOvertakeAPassOnElsewhere).
		// Answered ones are not returned: the request, admitted again once
		// the channel is closed, would find it closed again, over and over
		// (TestRefusalConfirmationsBetweenTwoPreviousOwnersWithAThirdNewOwner).
		switch len(others) {
		case 0:
			return nil
		case 1:
			return others[0]
		}
		all := make(chan struct{})
		if !o.goWork(func() {
			for _, d := range others {
				<-d
			}
			close(all)
		}) {
			return nil
		}
		return all
	case now-e.at > window:
		delete(c.m, key)
		c.mu.Unlock()
		return nil
	case len(e.to) == 0:
		c.mu.Unlock()
		return nil
	}
	t, to, ch := e.t, e.to, make(chan struct{})
	waiting := make([]confirmingMove, len(to))
	for i, m := range to {
		waiting[i] = confirmingMove{m: m, done: make(chan struct{})}
	}
	e.to, e.confirming, e.waitingOn = nil, ch, waiting
	c.mu.Unlock()
	run := func() {
		// All at once: each may wait barrierWait for an owner that does
		// not answer, and one after another k of them made the request
		// wait k × barrierWait (TestRefusalConfirmsEveryNewOwnerAtOnce).
		var wg sync.WaitGroup
		for _, w := range waiting {
			wg.Go(func() {
				defer close(w.done)
				o.confirmPassOn(t, w.m)
			})
		}
		wg.Wait()
		c.mu.Lock()
		e.confirming, e.waitingOn = nil, nil
		close(ch)
		c.mu.Unlock()
	}
	if !o.goWork(run) {
		// The node halted: refused at once, as before.
		c.mu.Lock()
		e.confirming, e.waitingOn = nil, nil
		c.mu.Unlock()
		return nil
	}
	return ch
}

// confirmPassOn sends a barrier for t on the route to the new owner of m,
// behind what this node passed on along m, and waits for its answer (any:
// admitted, refused, passed on further), at most barrierWait.
func (o *objects) confirmPassOn(t msgTarget, m follow.Move) {
	o.hook().step(t.id, stepRefusalConfirm)
	ctx, cancel := context.WithTimeout(o.halt, barrierWait)
	defer cancel()
	start := time.Now()
	bt := msgTarget{fam: t.fam, id: t.id, gen: t.gen, control: controlBarrier}
	err := o.sendBarrier(ctx, bt, readyOf(m))
	waited := time.Since(start).Round(time.Millisecond)
	if err != nil && errorsIsAny(err, context.DeadlineExceeded, ErrDeadlineExceeded, transport.ErrBackpressure) && o.halt.Err() == nil {
		o.stats.routeBarriersTimedOut.Add(1)
		o.log.Warn("message follow: the new owner did not confirm in time what this node passed on before its follow record ended; refusing anyway (the sender's retry may arrive before it)",
			"object", t.id, "target", transport.RID(m.Route.NodeRID).String(), "waited", waited)
		return
	}
	o.log.Debug("message follow: what this node passed on is in at the new owner; refusing", "object", t.id, "waited", waited, "err", err)
}
