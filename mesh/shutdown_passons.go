package mesh

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/router/transport"
)

// A stopping node's messages passed on are in order at their new owners
// before its transport closes (docs/RELOCATION.md §7, "A previous owner
// that stopped cleanly").
//
// A sender whose route switch's barrier to a previous owner fails because
// that owner stopped cleanly (barrierPrevStopped), or that is no longer
// listed live (refused), switches at once: what the previous owner read
// of it was passed on or refused before its transport closed. But passed
// on is not yet read: before 2026-12-06 the sender's next message, sent
// straight to the new owner on another connection, could be read there
// ahead of what the previous owner had just passed on over its own
// connection (still in the kernels' buffers, or in a cutover wait queue
// there), and ran first.
//
// So a node closing (Node.Close, §11) sends, just before it flushes and
// closes its transport, a barrier of its own for every object whose
// messages it passed on to a new owner (relay, the move's leftovers,
// Message Follow) within MessageFollowDuration: on the route it passed
// them on, behind them on the same connection, answered where they were
// admitted in the object's order (a barrier waits in a cutover queue,
// behind a move's hold, and is passed on along further moves like any
// message, messaging.go). The sender learns of the stop only when its link
// to this node ends, after that. Barriers go out in rounds while new
// pass-ons come in; the last round first seals pass-ons: a message read
// after the seal is still passed on (dropping it would lose what its
// sender's Send accepted), but no barrier confirms it; how many were is
// logged once the transport closed (reportLate).
// Bounded by passOnSettleWait and the shutdown deadline; what is not
// confirmed then is logged (WARN).

// passOnSettleWait bounds a closing node's wait for its pass-ons'
// barriers.
const passOnSettleWait = 5 * time.Second

// passOnSettleRounds bounds the rounds of barriers while pass-ons keep
// coming in; the last one seals them.
const passOnSettleRounds = 3

// passOnSettleParallel bounds the barriers of one round in flight at once.
const passOnSettleParallel = 16

// passedOn are the objects whose messages this node passed on to a new
// owner since the last round of settle, with the route they took.
type passedOn struct {
	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to 0
	sealed   bool
	gaveUp   bool // the seal stopped waiting with sends under way (its ctx ended)
	inflight int  // Message Follow sends under way (begin..end)
	m        map[follow.Key]passedTo
	swept    time.Duration // a reading of the node's clock
	// late counts messages passed on after the seal: sent, not confirmed
	// (reportLate).
	late atomic.Uint64
	// confirms are the same pass-ons for a refusal's confirmation
	// (follow_expiry.go), not taken by the rounds.
	confirms passOnConfirms
}

// passedTo is one object's messages passed on: the object and the move
// they followed, last at at (node clock).
type passedTo struct {
	t  msgTarget
	to follow.Move
	at time.Duration
}

// begin registers a Message Follow send about to go out; false once the
// pass-ons are sealed (the message is then passed on unregistered: no
// barrier confirms it).
func (p *passedOn) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sealed {
		return false
	}
	p.inflight++
	return true
}

// end ends a send begin registered, noting it when it went out (sent).
func (p *passedOn) end(now, window time.Duration, sent bool, t msgTarget, to follow.Move) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case sent && p.gaveUp:
		p.late.Add(1) // the seal's last round is gone
	case sent:
		p.noteLocked(now, window, t, to)
	}
	p.inflight--
	if p.inflight == 0 && p.idle != nil {
		p.idle.Broadcast()
	}
}

// note records that messages of t went to the new owner of move to (a
// move's relay or leftovers).
func (p *passedOn) note(now, window time.Duration, t msgTarget, to follow.Move) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noteLocked(now, window, t, to)
}

func (p *passedOn) noteLocked(now, window time.Duration, t msgTarget, to follow.Move) {
	if p.m == nil {
		p.m = map[follow.Key]passedTo{}
	}
	if now-p.swept >= window {
		// Nothing passed on longer ago can still be followed by a barrier
		// of its sender (route_barrier.go: MessageFollowDuration).
		p.swept = now
		for k, e := range p.m {
			if now-e.at > window {
				delete(p.m, k)
			}
		}
	}
	p.m[to.Key] = passedTo{t: t, to: to, at: now}
	p.confirms.note(now, window, t, to)
}

// seal takes no more Message Follow sends and waits for those under way,
// until ctx ends (the settle's wait, the shutdown deadline): a send each
// waits up to followSendWait for room on a full link, and Close must not
// wait that past its deadline. A send still under way then is counted late
// when it ends (reportLate), as one begun after the seal.
func (p *passedOn) seal(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sealed = true
	if p.idle == nil {
		p.idle = sync.NewCond(&p.mu)
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.idle.Broadcast()
	})
	defer stop()
	for p.inflight > 0 && ctx.Err() == nil {
		p.idle.Wait()
	}
	p.gaveUp = p.inflight > 0
}

// take returns what was passed on since the last take and forgets it.
// Entries older than window are left out: nothing passed on that long ago
// can still be followed by a barrier of its sender, and a node that passed
// nothing on lately would otherwise send a barrier for each at its close
// (the sweep in noteLocked runs only when something new is noted).
func (p *passedOn) take(now, window time.Duration) map[follow.Key]passedTo {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.m
	p.m = nil
	for k, e := range m {
		if now-e.at > window {
			delete(m, k)
		}
	}
	return m
}

// pending reports whether anything was passed on since the last take.
func (p *passedOn) pending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m) > 0
}

// notePassedOn records that messages of the object t went to the new
// owner of move to.
func (o *objects) notePassedOn(t msgTarget, to follow.Move) {
	o.passed.note(o.n.clock.Now(), o.n.cfg.Routing.MessageFollowDuration, t, to)
}

// settlePassOns sends a barrier for every object whose messages this node
// passed on, on the route they took, and waits for the answers: in rounds
// while more are passed on, the last sealing the pass-ons (see the top of
// this file). Called by Node.Close just before the transport closes.
func (o *objects) settlePassOns(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, passOnSettleWait)
	defer cancel()
	start := time.Now()
	var sent, unconfirmed int
	for round := 1; ; round++ {
		last := round >= passOnSettleRounds || !o.passed.pending()
		if last {
			o.passed.seal(ctx)
		}
		if batch := o.passed.take(o.n.clock.Now(), o.n.cfg.Routing.MessageFollowDuration); len(batch) > 0 {
			if h := o.hook().closeStep; h != nil {
				h(closeSettlePassOns)
			}
			sent += len(batch)
			unconfirmed += o.settleRound(ctx, batch)
		}
		if last {
			break
		}
	}
	switch {
	case unconfirmed > 0:
		o.log.Warn("shutdown: messages passed on to new owners not confirmed in order there before the transport closes; a sender switching to them may see them after its next ones",
			"objects", unconfirmed, "of", sent, "waited", time.Since(start).Round(time.Millisecond))
	case sent > 0:
		o.log.Debug("shutdown: messages passed on are in order at their new owners", "objects", sent,
			"waited", time.Since(start).Round(time.Millisecond))
	}
}

// settleRound sends the barriers of one round, at most
// passOnSettleParallel at once, and returns how many got no answer in
// time (their new owner's link up).
func (o *objects) settleRound(ctx context.Context, batch map[follow.Key]passedTo) int {
	var mu sync.Mutex
	unconfirmed := 0
	slots := make(chan struct{}, passOnSettleParallel)
	var wg sync.WaitGroup
	for _, e := range batch {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			bt := msgTarget{fam: e.t.fam, id: e.t.id, gen: e.t.gen, control: controlBarrier}
			err := o.sendBarrier(ctx, bt, readyOf(e.to))
			if err == nil || !errorsIsAny(err, context.DeadlineExceeded, context.Canceled, ErrDeadlineExceeded, transport.ErrBackpressure) {
				// Answered (admitted, refused), or the new owner's link is
				// gone: then nothing of it waits to be read there either.
				if err != nil {
					o.log.Debug("shutdown: barrier behind messages passed on not answered", "object", e.t.id, "err", err)
				}
				return
			}
			mu.Lock()
			unconfirmed++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return unconfirmed
}

// reportLate logs the messages passed on after the last round of
// settlePassOns (called once the transport closed): they went out, but a
// sender switching may see them after its next ones.
func (o *objects) reportLate() {
	if n := o.passed.late.Load(); n > 0 {
		o.log.Warn("shutdown: messages passed on after the last confirmation round; a sender switching to their new owner may see them after its next ones",
			"messages", n)
	}
}

// readyOf is the route to the new owner of move m.
func readyOf(m follow.Move) follow.Ready {
	return follow.Ready{Key: m.Key, ObjectGeneration: m.ObjectGeneration, AuthorityOwnerGeneration: m.AuthorityOwnerGeneration,
		Owner: m.Owner, Route: m.Route}
}

// sendBarrier sends the barrier bt on route r and waits for its answer,
// within ctx. A full link is full of what this node sent before: the
// barrier waits for room behind it, never taken for an answer.
func (o *objects) sendBarrier(ctx context.Context, bt msgTarget, r follow.Ready) error {
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		_, err := o.deliverRemote(ctx, bt, r, nil, true)
		if !errors.Is(err, transport.ErrBackpressure) {
			return err
		}
		if ctxsleep.For(ctx, pause) != nil {
			return err
		}
	}
}
