package mesh

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/mesh/activation"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/relocstore"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// The activating node's side of Instance Spots (spec §7.1; docs/
// INSTANCE-SPOTS.md). Order of a cold activation, each step only after the
// one before succeeded:
//
//  1. the activation record (creation info + first message) is stored in
//     the Relocation Store under its fixed reference and read back and
//     verified (§10: stored and re-verified before the Location Store
//     points at it);
//  2. Reserve: a Creating record naming this node run as owner, with the
//     capacity, whose pendingCreation references that payload — when
//     several nodes race, exactly one Reserve succeeds and only that node
//     runs the factory; a loser deletes its own payload and delivers to the
//     winner;
//  3. factory, then the instance is opened held with the first message
//     already at the head of its queue;
//  4. Commit: Ready with the capacity in use, keeping pendingCreation (the
//     recovery info stays until the first message is done);
//  5. dispatch opens; after the first message's turn: Preserve clearing
//     pendingCreation (end of use recorded in the Location Store), then the
//     payload is deleted from the Relocation Store.

// activationRetention is how long a stored activation record lives: it
// must outlast the first message's turn and a restart of its node (the
// restart table restores from it), and an orphan (stored, never pointed at)
// goes when it ends.
const activationRetention = 24 * time.Hour

// maxActivationWait bounds one activation's work on this node whatever
// deadline its sender gave (4× DefaultInstanceTimeout).
const maxActivationWait = 4 * DefaultInstanceTimeout

// activationDeadline is how long this node works on rec: the sender's
// deadline, but never longer than maxActivationWait from now (a peer's
// far-future deadline must not hold a goroutine here).
func activationDeadline(rec activation.Record) time.Time {
	deadline := time.UnixMilli(int64(min(rec.DeadlineUnixMs, 1<<62)))
	if limit := time.Now().Add(maxActivationWait); deadline.After(limit) {
		return limit
	}
	return deadline
}

// payloadRereads bounds the re-reads of a payload that is not visible
// (§10: "re-read only a limited number of times").
const payloadRereads = 3

// firstTurn calls fn once, after the first turn of a cold-activated
// instance ran (its first message, at the head of the queue).
type firstTurn struct {
	once sync.Once
	fn   func()
}

func (f *firstTurn) over() { f.once.Do(f.fn) }

// activations are the cold activations in progress on this node, by SpotId:
// a second message for the same id waits for the first's outcome instead
// of racing it through the store. Messages for one id run one after the
// other in the order they arrived (enqueue): the first activates the Spot,
// the next find it Ready and are delivered behind it, so one sender's
// messages keep their order across the activation.
type activations struct {
	mu sync.Mutex
	m  map[string]chan struct{}
	// queues are the activations waiting per id, run by one goroutine per
	// id while any is queued.
	queues map[string][]queuedTurn
}

// queuedTurn is one turn of an id's activation queue: f, and done ending
// the count that shutdown waits for (an order's o.work, a pass-on's
// passOns), or nil for a turn counted by those before it (after).
type queuedTurn struct {
	f, done func()
}

// enqueue runs f after every activation of id enqueued before it, on a
// goroutine of its own (it reads and writes the stores), then calls done.
// The queue's goroutine is counted by the turns it runs: it calls a
// turn's done only once the next counted turn begins, or once it is ending
// itself — it keeps running after its last turn, and until 2026-12-07
// done came first, so Close could return before that goroutine had ended.
func (a *activations) enqueue(id string, f, done func()) {
	a.mu.Lock()
	if a.queues == nil {
		a.queues = map[string][]queuedTurn{}
	}
	q, running := a.queues[id]
	a.queues[id] = append(q, queuedTurn{f: f, done: done})
	a.mu.Unlock()
	if running {
		return
	}
	go func() {
		var counted func() // the done of the last counted turn run
		defer func() {
			if counted != nil {
				counted()
			}
		}()
		a.run(id, &counted)
	}()
}

// run runs id's queue until it is empty; counted is the done of the last
// counted turn, which the caller ends after run returned.
func (a *activations) run(id string, counted *func()) {
	for {
		a.mu.Lock()
		q := a.queues[id]
		if len(q) == 0 {
			delete(a.queues, id)
			a.mu.Unlock()
			return
		}
		next := q[0]
		a.queues[id] = q[1:]
		a.mu.Unlock()
		if next.done != nil {
			if *counted != nil {
				(*counted)()
			}
			*counted = next.done
		}
		next.f()
	}
}

// after queues f behind the activations of id still queued or running and
// reports true, or reports false (f not run) when there are none. A message
// that reaches an Instance Spot by its usual route (its sender saw the
// record Ready) must not overtake one its sender handed to the activation
// route just before (command 39, queued here until the activation ends):
// both come from one sender over one ordered connection, or from this
// node's own Manager, so queueing behind is what keeps their order.
func (a *activations) after(id string, f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	q, running := a.queues[id]
	if !running {
		return false
	}
	a.queues[id] = append(q, queuedTurn{f: f}) // counted by the turns before it
	return true
}

// activationTurn is the context key marking a turn of an id's activation
// queue (its value: the SpotId).
type activationTurn struct{}

// claim returns (nil, true) when the caller now activates id (it must call
// release), or the channel closed when the activation in progress ends.
func (a *activations) claim(id string) (chan struct{}, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, busy := a.m[id]; busy {
		return ch, false
	}
	if a.m == nil {
		a.m = map[string]chan struct{}{}
	}
	a.m[id] = make(chan struct{})
	return nil, true
}

func (a *activations) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.m[id]; ok {
		close(ch)
		delete(a.m, id)
	}
}

// registerInstance adds command 39 to the dispatch table.
func (o *objects) registerInstance() {
	o.handle(router.CmdInstanceSpot, func(_ context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		o.inboundInstance(from, rec, reply)
	})
}

// inboundInstance handles command 39. A Ready route is a Spot message under
// an exact authority fence: it takes the Spot path (fence check, mailbox,
// Message Follow). A cold-activation route starts an activation here.
func (o *objects) inboundInstance(from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
	b := rec.Body.(*router.InstanceSpot)
	corr, _ := transport.RequestCorrelation(rec)
	refuse := func(err error) {
		o.stats.instanceRefused.Add(1)
		if corr != 0 {
			o.sendReply(reply, replyRecord(familySpot, corr, nil, err))
			return
		}
		o.log.Warn("instance spot message refused", "peer", from.RID.String(), "err", err)
	}
	if r := b.Route.Ready; r != nil {
		fence := router.SpotRouteFence{Spot: router.SpotRef{SpotID: r.TargetSpotID, ObjectGeneration: r.Authority.ObjectGeneration},
			TargetNodeRID: r.TargetNodeRID, TargetNodeGeneration: r.TargetNodeGeneration,
			ExpectedAuthorityOwnerGeneration: r.Authority.AuthorityOwnerGeneration, ExpectedOwnerLeaseGeneration: r.Authority.LeaseGeneration}
		var body router.Body = &router.SpotSend{Operation: b.Operation, SourceSpotID: b.SourceSpotID, TargetSpot: fence}
		if corr != 0 {
			body = &router.SpotRequest{Correlation: corr, Operation: b.Operation, SourceSpotID: b.SourceSpotID, TargetSpot: fence}
		}
		o.inboundSpot(from, fence, corr, router.NewRecord(body, rec.Metadata, rec.Payload), reply)
		return
	}
	c := b.Route.Cold
	if c == nil {
		refuse(fmt.Errorf("%w: command 39 without a route", ErrInvalidOperation))
		return
	}
	if err := sourceIsPeer(from, b.SourceNodeRID, b.SourceNodeGeneration); err != nil {
		refuse(err)
		return
	}
	var body []byte
	if rec.Payload != nil {
		body = append([]byte(nil), rec.Payload.Data...)
	}
	var op [16]byte
	putUint64(op[:8], b.Operation.High)
	putUint64(op[8:], b.Operation.Low)
	ar := activation.Record{SpotID: c.TargetSpotID, StableType: c.StableType, MeshName: c.TargetMeshName,
		TargetRID: c.TargetNodeRID, TargetGen: c.TargetNodeGeneration, SourceRID: b.SourceNodeRID, SourceGen: b.SourceNodeGeneration,
		SourceSpotID: b.SourceSpotID, Operation: op, Request: corr != 0, ReplyRouteID: corr, DeadlineUnixMs: c.DeadlineUnixMs,
		Metadata: rec.Metadata, Body: body}
	if err := o.startActivation(ar, origin{rid: from.RID, gen: from.LifecycleGeneration}, reply); err != nil {
		if errors.Is(err, errRouteStale) && o.passOnActivation(ar, reply) {
			return
		}
		refuse(err)
	}
}

// passOnActivation hands a cold activation that this node refused because
// it is emptying itself (a host relocation or a drain under way, or its
// shutdown begun) to another node offering the type, as its sender would
// have done with a current descriptor list, and reports whether it took it
// over. Senders place activations on the nodes their last list shows
// serving, so until their next discovery round they keep choosing a node
// whose drain has begun, and a sender that handed an id's activation here
// sends that id's next cold messages here too (sentActivations) until the
// store shows the Spot. A one-way message's refusal reaches nobody (§7.3):
// before 2026-12-06 it was dropped (10 to 13 of 20 in
// TestOneWayActivationReachingADrainingNodeIsPassedOn). A request's refusal
// makes its sender try another node — but its next message for the id
// comes here first (it follows its first to the node it chose,
// sentActivations), and refused, it raced the one-way message passed on
// before it and could activate the Spot first; so a request is passed on
// too, behind it, and its answer relayed back (reply).
//
// This node becomes the activation's source (the target checks that the
// source is the peer it came from); the operation id stays. It runs as a
// turn of the id's activation queue, so one sender's messages for the id
// are passed on in the order they arrived, and the later ones follow the
// first to the node it chose. Placement leaves this node out while it
// empties itself, so a message cannot come back here; two nodes draining
// at once that still list each other serving may hand it back and forth
// until one of them has seen the other draining, within the message's
// deadline.
//
// Pass-ons are not object work: a node whose Close has begun (object work
// stopped, §11) still passes on what reaches it — it only reads the store,
// places from its last list and sends — until endPassOns, just before its
// lease and transport go. Before 2026-12-06 they were, and a closing node
// passed nothing on: a one-way first message reaching it then was lost
// (TestOneWayActivationReachingAClosingNodeIsPassedOn). One that arrives
// after endPassOns cannot be sent on any more: a request is refused (its
// sender tries another node), a one-way message is counted dropped and
// logged.
func (o *objects) passOnActivation(rec activation.Record, reply func(*router.Record) error) bool {
	if !o.emptying() || (rec.Request && reply == nil) {
		return false
	}
	ctx, done, ok := o.passOns.begin()
	if !ok {
		if rec.Request {
			return false
		}
		o.stats.instanceDropped.Add(1)
		o.log.Warn("instance spot first message reached this node as its transport closes, and is not passed on",
			"spot", rec.SpotID)
		return true
	}
	deadline := activationDeadline(rec)
	c := &instanceMsg{id: rec.SpotID, stableType: rec.StableType, mesh: rec.MeshName, body: rec.Body, request: rec.Request,
		op: rec.Operation, deadline: deadline}
	o.activating.enqueue(rec.SpotID, func() {
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		// A turn of the id's queue: a local delivery (the Spot Ready here
		// after all) must not wait behind itself (deliver).
		ctx = context.WithValue(ctx, activationTurn{}, rec.SpotID)
		answer, err := o.runInstance(ctx, c, false, nil)
		if rec.Request {
			// The answer, or why there is none, goes to the sender.
			o.sendReply(reply, replyRecord(familySpot, rec.ReplyRouteID, answer, classify(ctx, err, "instance spot "+rec.SpotID)))
		}
		if err != nil {
			if !rec.Request {
				o.stats.instanceDropped.Add(1)
				o.log.Warn("instance spot first message refused while this node empties itself, and not passed on",
					"spot", rec.SpotID, "err", err)
			}
			return
		}
		o.stats.instancePassedOn.Add(1)
		o.log.Debug("instance spot message passed on: this node empties itself", "spot", rec.SpotID, "request", rec.Request)
	}, done)
	return true
}

// handOn runs rec's message from this node as its sender would, with this
// node run left out of the placement, and returns the answer (a request's,
// relayed by the caller; nil for a one-way message once it was handed on).
// Two callers, both in the id's activation turn, so one sender's messages
// queued behind here follow the first to the node it chose
// (sentActivations):
//
//   - a one-way cold activation that this node accepted but then did not
//     take (refused "not taken" after storing its record: the Reserve found
//     the type's room gone, the owner-lease gate shut, a Conflict with no
//     current record, or a read-back that failed; its record is deleted).
//     A request's refusal goes back to its sender, which excludes this node
//     and tries another, but a one-way message's sender returned once the
//     message left it (§7.3: the refusal reaches nobody). Until 2026-12-07
//     such a message was counted dropped and never ran, although another
//     node had room (TestOneWayActivationRefusedAfterStoreIsPassedOn);
//   - a later message for that id from the same sender run (activate,
//     handedOn), which would otherwise race the one handed on if this node
//     had room again (TestMessageAfterAPassedOnActivationFollowsIt).
//
// Two nodes that both refuse after their stores (both full) may hand a
// one-way message back and forth within its deadline, as two draining
// nodes may (passOnActivation); each hop makes the passing node the
// source, so a hop never counts as "the same sender" to follow.
//
// As in passOnActivation this node becomes the activation's source and the
// operation id stays.
func (o *objects) handOn(ctx context.Context, rec activation.Record) ([]byte, error) {
	c := &instanceMsg{id: rec.SpotID, stableType: rec.StableType, mesh: rec.MeshName, body: rec.Body, request: rec.Request,
		op: rec.Operation, deadline: activationDeadline(rec)}
	reply, err := o.runInstance(ctx, c, false, map[string]exclusion{o.selfCandidate().key(): excludedFailed})
	if err != nil {
		return nil, err
	}
	o.stats.instancePassedOn.Add(1)
	o.log.Debug("instance spot message passed on: this node did not take its activation", "spot", rec.SpotID, "request", rec.Request)
	return reply, nil
}

// handedOn remembers, per Instance Spot id, the sender run whose one-way
// first message this node handed on (handOn) after refusing it, until the
// store shows the Spot or DefaultInstanceTimeout passes: that sender's next
// messages for the id come here (its sentActivations) and follow the first
// instead of racing it.
type handedOn struct {
	m expiring[string] // id → the sender run (sourceKey)
}

// sourceKey names rec's sender run.
func sourceKey(rec activation.Record) string {
	return hex.EncodeToString(rec.SourceRID) + "@" + strconv.FormatUint(rec.SourceGen, 10)
}

func (h *handedOn) note(id, source string) { h.m.put(id, source) }

func (h *handedOn) follows(id, source string) bool {
	s, ok := h.m.get(id)
	return ok && s == source
}

func (h *handedOn) forget(id string) { h.m.forget(id) }

// selfCandidate is this node run as placement names it (its key).
func (o *objects) selfCandidate() candidate {
	return candidate{node: authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid, LifecycleGeneration: o.n.run.lifecycleGeneration}, local: true}
}

// emptying reports whether this node is emptying itself: a host command
// runs (hostMove, held by a drain until its Close), it published draining,
// or its Close has begun.
func (o *objects) emptying() bool {
	return o.hostMove.Load() || o.stopping.Load() || o.n.State() == record.StateDraining
}

// passOnLife is the lifetime of the pass-ons (passOnActivation): from the
// node's start until endPassOns, independent of object work (stop).
type passOnLife struct {
	mu     sync.Mutex
	ended  bool
	wg     sync.WaitGroup
	ctx    context.Context // cancelled when endPassOns gives up waiting
	cancel context.CancelFunc
}

// begin registers one pass-on; false once endPassOns began.
func (p *passOnLife) begin() (context.Context, func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return nil, nil, false
	}
	p.wg.Add(1)
	return p.ctx, p.wg.Done, true
}

// passOnCloseWait bounds how long a closing node waits for its pass-ons
// before it cancels them (each is one store read, a placement from the
// last list and a send, unless its target is hard to find).
const passOnCloseWait = 5 * time.Second

// endPassOns takes no more pass-ons and waits for those under way — until
// ctx ends, at most passOnCloseWait — then cancels what is left (a one-way
// message among them is counted dropped and logged). Idempotent.
func (o *objects) endPassOns(ctx context.Context) {
	p := &o.passOns
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	all := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(all)
	}()
	wait := time.NewTimer(passOnCloseWait)
	defer wait.Stop()
	select {
	case <-all:
	case <-ctx.Done():
	case <-wait.C:
	}
	p.cancel()
	<-all
}

// startActivation checks what can be checked at once and runs the
// activation on its own goroutine (it reads and writes the stores and runs
// a factory; it must not hold up the connection it came on). A request's
// answer — success or failure — goes through its reply route: to the
// connection it came on (reply), or to the local waiter the sender
// registered (reply nil).
func (o *objects) startActivation(rec activation.Record, org origin, reply func(*router.Record) error) error {
	if err := o.activationRefusal(rec); err != nil {
		return err
	}
	landed, ok := o.arriving()
	if !ok {
		return fmt.Errorf("%w: %w: a host relocation is emptying this node", ErrUnavailable, errRouteStale)
	}
	if err := o.begin(); err != nil {
		landed()
		return fmt.Errorf("%w: %w: node closing: %w", ErrUnavailable, errRouteStale, err)
	}
	var route []byte
	if rec.Request {
		r := replyRoute{fam: familySpot, gen: org.gen, corr: rec.ReplyRouteID, rid: org.rid}
		route = r.encode()
		if reply != nil {
			o.mu.Lock()
			o.remotes[r.key()] = remoteReply{reply: reply}
			o.mu.Unlock()
		}
	}
	o.activating.enqueue(rec.SpotID, func() {
		defer landed()
		o.activate(rec, org, route)
	}, o.work.Done)
	return nil
}

// activationRefusal is every check that needs no store: the activation is
// addressed to this node run in its mesh, this node can activate the type
// now, and the deadline has not passed. A refusal here means nothing was
// stored or run (errRouteStale: the sender may try another node).
func (o *objects) activationRefusal(rec activation.Record) error {
	stale := func(format string, a ...any) error {
		return fmt.Errorf("%w: %w: %s", ErrUnavailable, errRouteStale, fmt.Sprintf(format, a...))
	}
	if err := record.ValidateObjectID(rec.SpotID); err != nil {
		return fmt.Errorf("%w: spot id: %w", ErrInvalidOperation, err)
	}
	if strings.HasPrefix(rec.SpotID, entrySpotPrefix) {
		return fmt.Errorf("%w: SpotId %q uses the Entry Spot prefix %q", ErrInvalidOperation, rec.SpotID, entrySpotPrefix)
	}
	if !bytes.Equal(rec.TargetRID, o.n.run.rid) || rec.TargetGen != o.n.run.lifecycleGeneration {
		return stale("activation addressed to node run %x/%d, this is %x/%d", rec.TargetRID, rec.TargetGen, o.n.run.rid, o.n.run.lifecycleGeneration)
	}
	if rec.MeshName != o.n.cfg.Node.MeshName {
		return stale("activation in mesh %q, this node is in %q", rec.MeshName, o.n.cfg.Node.MeshName)
	}
	if err := o.instanceRole(); err != nil {
		return err
	}
	if st := o.n.State(); st != record.StateServing {
		return stale("node is %s, not serving", st)
	}
	if o.hostMove.Load() {
		return stale("a host relocation is emptying this node")
	}
	if err := o.n.lease.Gate().Admit(); err != nil {
		return stale("owner lease: %v", err)
	}
	if f, ok := o.registry[rec.StableType]; !ok || f.Kind != spot.KindInstanceSpot {
		return stale("no Instance Spot factory %q on this node", rec.StableType)
	}
	if time.Now().After(time.UnixMilli(int64(min(rec.DeadlineUnixMs, 1<<62)))) {
		return deadlineErr("activation of %s: deadline passed before it arrived", rec.SpotID)
	}
	return nil
}

// activate runs one activation to its end and answers it exactly once.
func (o *objects) activate(rec activation.Record, org origin, route []byte) {
	ctx, cancel := context.WithDeadline(o.halt, activationDeadline(rec))
	defer cancel()
	// This runs as a turn of id's activation queue: a local delivery from
	// here must not queue behind itself (deliverLocal).
	ctx = context.WithValue(ctx, activationTurn{}, rec.SpotID)
	answer := func(body []byte, err error) {
		if route != nil {
			if err != nil {
				o.log.Debug("Instance Spot request failed", "object", rec.SpotID, "type", rec.StableType, "err", err)
			}
			o.Reply(route, body, err)
			return
		}
		if err != nil {
			o.stats.instanceDropped.Add(1)
			o.log.Warn("one-way message to an Instance Spot not delivered", "object", rec.SpotID, "type", rec.StableType,
				"source", hex.EncodeToString(rec.SourceRID), "err", err)
		}
	}
	for {
		wait, mine := o.activating.claim(rec.SpotID)
		if mine {
			break
		}
		// Another message for the same id is activating it here: its
		// outcome decides (Ready: deliver; failed: try ourselves).
		select {
		case <-wait:
		case <-ctx.Done():
			answer(nil, ctxErr(ctx, "instance spot %s: waiting for its activation", rec.SpotID))
			return
		}
	}
	defer o.activating.release(rec.SpotID)
	wait := newBackoff()
	for {
		if ctx.Err() != nil {
			answer(nil, ctxErr(ctx, "activation of %s", rec.SpotID))
			return
		}
		row, _, err := o.readAuthorityAt(ctx, record.ObjectInstanceSpot, rec.SpotID)
		if err != nil {
			answer(nil, classify(ctx, err, "activation of "+rec.SpotID))
			return
		}
		if row.Found {
			o.handedOn.forget(rec.SpotID) // the record shows: the usual paths keep the order
			m := &instanceMsg{id: rec.SpotID, stableType: rec.StableType, claimed: true}
			ready, err := o.instanceRow(ctx, m, row)
			if err != nil {
				answer(nil, err)
				return
			}
			if !ready {
				if err := wait.sleep(ctx); err != nil {
					answer(nil, ctxErr(ctx, "instance spot %s: waiting for its activation", rec.SpotID))
					return
				}
				continue
			}
			// Already Ready (another node won, or it existed): the message is
			// delivered once to the current owner (§7.1).
			reply, err := o.deliver(ctx, instanceTarget(rec.SpotID, uint64(row.Record.ObjectGeneration), opIDOf(rec.Operation)), rec.Body, rec.Request)
			answer(reply, err)
			return
		}
		if o.handedOn.follows(rec.SpotID, sourceKey(rec)) {
			// This node handed on a one-way first message of the same
			// sender for this id a moment ago: activating here (it may
			// have room again) could run this message before that one, so
			// it goes after it, as a sender's next message follows its
			// first (sentActivations). Messages of other senders are not
			// ordered against it and activate as usual.
			if h := o.hook().activationStep; h != nil {
				h(rec.SpotID, stepFollowsPassedOn)
			}
			answer(o.handOn(ctx, rec))
			return
		}
		done, err := o.coldActivate(ctx, rec, org, route)
		if err != nil && route == nil && notTaken(err) {
			// A one-way first message this node did not take after all:
			// its refusal reaches nobody, so it is handed on here.
			if _, perr := o.handOn(ctx, rec); perr != nil {
				err = fmt.Errorf("not taken here (%w), and not passed on: %w", err, perr)
			} else {
				o.handedOn.note(rec.SpotID, sourceKey(rec))
				err = nil
			}
			answer(nil, err)
			return
		}
		if err != nil {
			answer(nil, err)
			return
		}
		if done {
			return // the first message is queued; its turn answers it
		}
		// Another node's Reserve won: read again and deliver to it.
	}
}

// coldActivate runs steps 1–5 (see the top of this file). done reports that
// the first message is queued on the new instance (its turn answers it); a
// false done with a nil error means another activation got the record
// first.
func (o *objects) coldActivate(ctx context.Context, rec activation.Record, org origin, route []byte) (bool, error) {
	n := o.n
	payload, err := rec.Encode()
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	ref := activation.Reference(rec) // one per attempt: see activation.Reference
	sum := activation.Checksum(payload)
	if err := o.storeActivation(ctx, ref, payload, sum); err != nil {
		return false, err
	}
	if h := o.hook().activationStep; h != nil {
		h(rec.SpotID, "stored")
	}
	ownerID, leaseGen := n.Owner()
	self := authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}
	node := authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration}
	obj := authority.Object{ID: rec.SpotID, Kind: record.ObjectInstanceSpot, StableType: rec.StableType}
	rsv := NewOperationID()
	rsvID := hex.EncodeToString(rsv[:])
	if err := n.lease.Gate().Admit(); err != nil {
		o.forgetPayload(ref)
		return false, fmt.Errorf("%w: %w: owner lease: no reservation: %w", ErrUnavailable, errRouteStale, err)
	}
	res, err := o.exec.Reserve(ctx, authority.ReserveRequest{Object: obj,
		Target:   authority.Target{Node: node, Owner: self, Limits: o.instanceLimits(rec.StableType)},
		Creation: record.PendingCreation{ReservationID: rsvID, RequestContentReference: ref, RequestSHA256: sum, RequestEncodedSize: len(payload)}})
	if err != nil {
		var ae *authority.Error
		switch {
		case errors.Is(err, authority.ErrTypeMismatch):
			o.forgetPayload(ref)
			return false, err
		case errors.Is(err, authority.ErrCapacityExhausted):
			o.forgetPayload(ref)
			return false, fmt.Errorf("%w: %w: %w", ErrUnavailable, errRouteStale, err)
		case errors.As(err, &ae) && ae.Kind == authority.ErrConflict && ae.Current != nil:
			o.forgetPayload(ref) // lost the race: nothing points at our payload
			return false, nil
		case errors.As(err, &ae) && (ae.Kind == authority.ErrConflict || ae.Kind == authority.ErrContended):
			o.forgetPayload(ref)
			return false, fmt.Errorf("%w: %w: reservation refused: %w", ErrUnavailable, errRouteStale, err)
		}
		// Unknown outcome: the record may be there, pointing at the
		// payload (which its retention deals with); the record is returned
		// once the store answers, or it blocks the Id (settle.go).
		o.returnReservationLater(authority.AbortRequest{Object: obj, ReservationID: rsvID, Owner: &self}, err)
		return false, classify(ctx, err, "reserve "+rec.SpotID)
	}
	objGen, ownerGen := uint64(res.Plan.Record.ObjectGeneration), uint64(res.Plan.Record.AuthorityOwnerGeneration)
	version := res.Version
	if version == "" {
		row, _, err := o.readAuthorityAt(ctx, record.ObjectInstanceSpot, rec.SpotID)
		if err != nil {
			o.returnReservationLater(authority.AbortRequest{Object: obj, ReservationID: rsvID, ObjectGeneration: objGen, Owner: &self}, err)
			return false, classify(ctx, err, "re-read "+rec.SpotID)
		}
		if !row.Found || row.Record.PendingCreation == nil || row.Record.PendingCreation.ReservationID != rsvID {
			return false, nil
		}
		version = row.Version
	}
	if h := o.hook().activationStep; h != nil {
		h(rec.SpotID, "reserved")
	}
	abort := func(why error) error {
		wctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		later := authority.AbortRequest{Object: obj, ReservationID: rsvID, ObjectGeneration: objGen, Owner: &self}
		if err := n.lease.Gate().Admit(); err != nil {
			o.returnReservationLater(later, err)
			return why
		}
		if _, err := o.exec.Abort(wctx, authority.AbortRequest{Object: obj, ReservationID: rsvID, ObjectGeneration: objGen,
			IfVersion: version, Owner: &self}); err != nil {
			if !errors.Is(err, authority.ErrConflict) {
				o.returnReservationLater(later, err)
			}
			return why
		}
		o.forgetPayload(ref)
		return why
	}
	return true, o.openInstance(ctx, instanceBuild{rec: rec, org: org, route: route, ref: ref, objGen: objGen, ownerGen: ownerGen,
		commit: func(ctx context.Context) (string, error) {
			r, err := o.exec.Commit(ctx, authority.CommitRequest{Object: obj, ReservationID: rsvID, ObjectGeneration: objGen,
				Owner: self, IfVersion: version, KeepPendingCreation: true})
			return r.Version, err
		}, undo: abort})
}

// instanceBuild is what openInstance needs: the activation record, its
// reply route and reference, the generations the record names, and how to
// make the instance Ready (commit) or give the record back (undo).
type instanceBuild struct {
	rec              activation.Record
	org              origin
	route            []byte
	ref              string
	objGen, ownerGen uint64
	// commit records Ready (or, when resuming, is nil: the record already
	// is Ready and owned here) and returns the StoreVersion.
	commit func(context.Context) (string, error)
	undo   func(why error) error
	// version is the StoreVersion when commit is nil.
	version string
	// noFirst opens the instance with an empty queue (DataLost: the first
	// message is gone) and no recovery info to end.
	noFirst bool
}

// openInstance runs the factory and opens the instance with the first
// message at the head of its queue (steps 3–5): held until the record says
// Ready, then dispatching. An error means nothing runs here and the first
// message is not queued anywhere (its answer is the caller's to give).
func (o *objects) openInstance(ctx context.Context, b instanceBuild) error {
	rec := b.rec
	f := o.registry[rec.StableType]
	handler, ferr := runFactory(ctx, &o.apps, spot.Key{Spot: true, ID: rec.SpotID}, f, spot.CreateRequest{ID: rec.SpotID, Generation: b.objGen, StableType: rec.StableType})
	if ferr != nil {
		var declined *spot.Declined
		if errors.As(ferr, &declined) {
			// A *RejectedError, as a declined Create's (until 2026-12-07 a
			// wrapped sentinel: errors.As found no reason).
			return b.undo(&RejectedError{ID: rec.SpotID, Reason: declined.Reason})
		}
		if ctx.Err() != nil {
			return b.undo(classify(ctx, ferr, "factory of "+rec.SpotID))
		}
		typ := "factoryError"
		if errors.Is(ferr, errFactoryPanic) {
			typ = "factoryPanic"
		}
		return b.undo(&CreateFailedError{ID: rec.SpotID, Type: typ, Message: validText(ferr.Error())})
	}
	env := spot.Envelope{Kind: spot.Send, Body: rec.Body, Meta: envMeta{op: opIDOf(rec.Operation), org: b.org}.encode()}
	if b.route != nil {
		env.Kind, env.ReplyRoute = spot.Request, b.route
	}
	key := spot.Key{Spot: true, ID: rec.SpotID}
	gate := o.n.lease.Gate()
	spec := spot.Spec{Key: key, Kind: spot.KindInstanceSpot, StableType: rec.StableType, Generation: b.objGen,
		Handler: gated{h: handler, gate: gate}, Held: true}
	ft := &firstTurn{fn: func() { o.endFirstMessage(rec.SpotID, rec.StableType, b.objGen, b.ref) }}
	if !b.noFirst {
		spec.Handler = gated{h: handler, gate: gate, first: ft}
		spec.Restored = &spot.Captured{Queue: []spot.Envelope{env}}
	}
	sobj, err := o.rt.Open(spec)
	if err != nil {
		return b.undo(wrapErr(ErrUnavailable, err, "open instance %s", rec.SpotID))
	}
	hs := &hosted{obj: sobj, kind: record.ObjectInstanceSpot, stableType: rec.StableType, objectGeneration: b.objGen, ownerGeneration: b.ownerGen}
	o.mu.Lock()
	o.hosted[key] = hs
	o.mu.Unlock()
	ready := func(version string) {
		o.mu.Lock()
		hs.storeVersion = version
		o.mu.Unlock()
		if h := o.hook().activationStep; h != nil {
			h(rec.SpotID, "committed")
		}
		o.stats.instanceActivated.Add(1)
		sobj.Release()
		o.log.Debug("instance spot activated", "object", rec.SpotID, "type", rec.StableType, "object_gen", b.objGen)
	}
	version := b.version
	if b.commit != nil {
		if err := o.n.lease.Gate().Admit(); err != nil {
			o.unhostInstance(key, hs)
			return b.undo(wrapErr(ErrUnavailable, err, "owner lease: %s not made Ready", rec.SpotID))
		}
		wctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		version, err = b.commit(wctx)
		cancel()
		if errors.Is(err, authority.ErrOutcomeUnknown) {
			// Held until the record says whether it went Ready (settle.go).
			ownerID, leaseGen := o.n.Owner()
			return o.settleInstanceCommit(ctx, rec.SpotID, b.objGen, b.ownerGen, authority.Owner{ID: ownerID, LeaseGeneration: leaseGen},
				err, ready, func(why error) {
					o.unhostInstance(key, hs)
					_ = b.undo(why)
				})
		}
		if err != nil {
			o.unhostInstance(key, hs)
			return b.undo(classify(context.Background(), err, "record "+rec.SpotID+" Ready"))
		}
	}
	ready(version)
	return nil
}

// unhostInstance removes a prepared instance that never became Ready; its
// queued first message is discarded, not answered (the caller answers).
func (o *objects) unhostInstance(key spot.Key, hs *hosted) {
	o.mu.Lock()
	if o.hosted[key] == hs {
		delete(o.hosted, key)
	}
	o.mu.Unlock()
	hs.obj.Discard()
}

// endFirstMessage runs firstMessageDone off the first message's turn, on
// a goroutine Close waits for (goWork; until 2026-12-07 a plain one that
// could outlive Close). Refused once the node halted, when untilAnswered
// would refuse its retries too: the recovery info then stays, as it
// does for a node that stops before the first turn is over.
func (o *objects) endFirstMessage(id, stableType string, gen uint64, ref string) {
	o.goWork(func() { o.firstMessageDone(id, stableType, gen, ref) })
}

// firstMessageDone ends the use of the recovery info once the first
// message's turn is over: Preserve clears pendingCreation (the Location
// Store first records the end of use), then the payload is deleted (§10).
// A record that is gone or changed meanwhile no longer points at the
// payload: it is deleted all the same.
func (o *objects) firstMessageDone(id, stableType string, gen uint64, ref string) {
	if h := o.hook().activationStep; h != nil {
		h(id, stepFirstMessageDone)
	}
	obj := authority.Object{ID: id, Kind: record.ObjectInstanceSpot, StableType: stableType}
	key := spot.Key{Spot: true, ID: id}
	// Retried until it is decided, for as long as the node runs
	// (untilAnswered): it gave up on a gate shut for a moment (a renew that
	// came late) or after 20 s of store errors, and nothing ever tried
	// again — the recovery info and the payload stayed, and a later death
	// of this node ran the first message a second time.
	_, _ = o.untilAnswered("instance spot: end of the first message", id, func(ctx context.Context) (bool, error) {
		if err := o.n.lease.Gate().Admit(); err != nil {
			// Without owner eligibility nothing may change the record
			// (§5): the recovery info stays, and so does the payload, until
			// the gate admits again.
			return false, err
		}
		ownerID, leaseGen := o.n.Owner()
		res, err := o.exec.Preserve(ctx, authority.PreserveRequest{Object: obj, ObjectGeneration: gen,
			Owner: authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}, ClearPendingCreation: true})
		if err == nil {
			o.mu.Lock()
			if h, ok := o.hosted[key]; ok && h.objectGeneration == gen {
				h.storeVersion = res.Version
			}
			o.mu.Unlock()
			o.forgetPayload(ref)
			return true, nil
		}
		if errors.Is(err, authority.ErrNotFound) || errors.Is(err, authority.ErrStaleGeneration) || errors.Is(err, authority.ErrTypeMismatch) {
			o.forgetPayload(ref) // the record no longer points at the payload
			return true, nil
		}
		row, rerr := o.readAuthority(ctx, record.ObjectInstanceSpot, id)
		if rerr != nil {
			return false, err
		}
		switch {
		case !row.Found || uint64(row.Record.ObjectGeneration) != gen || row.Record.PendingCreation == nil ||
			row.Record.PendingCreation.RequestContentReference != ref:
			o.forgetPayload(ref) // nothing points at it any more
			return true, nil
		case row.Record.OwnerID != ownerID:
			// Another owner took the record over (this node was presumed
			// dead): the recovery info is its to end.
			o.log.Warn("instance spot: another owner took over before the first message was recorded done", "object", id,
				"record_owner", row.Record.OwnerID)
			return true, nil
		}
		return false, err
	})
}

// storeActivation stores payload under ref and reads it back (§10: "stored
// first and re-verified"). The same bytes already there (a retried
// activation) are fine; other bytes under the reference mean the
// operation id was reused for another message.
func (o *objects) storeActivation(ctx context.Context, ref string, payload []byte, sum [32]byte) error {
	pr, err := o.n.reloc.Put(ctx, ref, payload, activationRetention)
	if err != nil {
		return classifyReloc(ctx, err, "store the activation of "+ref)
	}
	if pr.Outcome == relocstore.Conflict {
		return fmt.Errorf("%w: activation reference %s holds another message (operation id reused)", ErrInvalidOperation, ref)
	}
	got, state, err := o.readPayload(ctx, ref, len(payload), sum)
	if err != nil {
		return err
	}
	if state != activation.PayloadIntact || !bytes.Equal(got, payload) {
		// Nothing points at it: this node does not take the activation
		// (the sender tries another node, under a reference of its own),
		// and the bytes go now rather than at their retention's end. Until
		// 2026-12-07 a provider's integrity error (relocstore.ErrIntegrity)
		// was a plain ErrUnavailable here: the message failed at once
		// although another node might have stored it intact.
		o.forgetPayload(ref)
		what := "was missing when read back"
		if state == activation.PayloadCorrupt {
			what = "read back with another length or SHA-256 than stored (a corrupt store)"
		}
		return fmt.Errorf("%w: %w: the Relocation Store record of the activation (%s) %s; this node did not take it",
			ErrUnavailable, errRouteStale, ref, what)
	}
	return nil
}

// readPayload reads ref with §10's bounded re-reads and checks its size and
// checksum. A provider's integrity error (relocstore.ErrIntegrity: the
// bytes it holds do not match what was stored) is a corrupt payload, not
// an unknown outcome: until 2026-12-07 the Redis provider's made recovery
// change nothing, for good — never DataLost, every message to the Spot
// failing ErrUnavailable (TestCorruptPayloadInRedisRelocationStoreIsDataLost).
func (o *objects) readPayload(ctx context.Context, ref string, size int, sum [32]byte) ([]byte, activation.PayloadState, error) {
	for i := 0; ; i++ {
		rr, err := o.n.reloc.Read(ctx, ref)
		if errors.Is(err, relocstore.ErrIntegrity) {
			o.log.Debug("instance activation payload read corrupt from the Relocation Store", "ref", ref, "err", err)
			return nil, activation.PayloadCorrupt, nil
		}
		if err != nil {
			return nil, 0, classifyReloc(ctx, err, "read the activation "+ref)
		}
		if rr.Found {
			if len(rr.Bytes) != size || activation.Checksum(rr.Bytes) != sum {
				return nil, activation.PayloadCorrupt, nil
			}
			return rr.Bytes, activation.PayloadIntact, nil
		}
		if i+1 >= payloadRereads {
			return nil, activation.PayloadMissing, nil
		}
		if err := ctxsleep.For(ctx, time.Duration(i+1)*20*time.Millisecond); err != nil {
			return nil, 0, ctxErr(ctx, "read the activation %s", ref)
		}
	}
}

// forgetPayload deletes a payload no record points at (best effort: its
// retention removes it otherwise).
func (o *objects) forgetPayload(ref string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
	defer cancel()
	if err := o.n.reloc.Delete(ctx, ref); err != nil {
		o.log.Warn("instance activation payload not deleted; its retention removes it", "ref", ref, "err", err)
	}
}

// classifyReloc maps a Relocation Store error into the vocabulary.
func classifyReloc(ctx context.Context, err error, what string) error {
	if errors.Is(err, relocstore.ErrUnavailable) && ctx.Err() == nil {
		return wrapErr(ErrUnavailable, err, "%s", what)
	}
	return classify(ctx, err, what)
}
