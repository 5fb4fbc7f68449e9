package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Messaging (spec §7.2, §7.3): Send and Request to an ActorRef or SpotRef.
// The route is resolved from the authority record (Ready only) or the route
// cache, and every message carries the route fence — target node RID and
// run generation, expected AuthorityOwnerGeneration, expected owner
// LeaseGeneration — which the target checks before the message enters a
// mailbox. A refused fence means "not delivered", so the sender drops its
// cached route, re-resolves from the store once and tries again.

// SendActor sends body one-way to the Actor (command 24). nil means the
// message left this node (remote) or entered the mailbox (local); a one-way
// message the target refuses is dropped there and counted.
func (m *Manager) SendActor(ctx context.Context, ref ActorRef, body []byte) error {
	_, err := m.o.deliverCall(ctx, msgTarget{fam: familyActor, id: ref.ActorID, gen: ref.ObjectGeneration}, body, false)
	return err
}

// RequestActor sends body to the Actor (command 25) and returns its reply
// (command 20 payload).
func (m *Manager) RequestActor(ctx context.Context, ref ActorRef, body []byte) ([]byte, error) {
	return m.o.deliverCall(ctx, msgTarget{fam: familyActor, id: ref.ActorID, gen: ref.ObjectGeneration}, body, true)
}

// SendSpot sends body one-way to the User Spot (command 21).
func (m *Manager) SendSpot(ctx context.Context, ref SpotRef, body []byte) error {
	_, err := m.o.deliverCall(ctx, msgTarget{fam: familySpot, id: ref.SpotID, gen: ref.ObjectGeneration}, body, false)
	return err
}

// RequestSpot sends body to the User Spot (command 22) and returns its
// reply.
func (m *Manager) RequestSpot(ctx context.Context, ref SpotRef, body []byte) ([]byte, error) {
	return m.o.deliverCall(ctx, msgTarget{fam: familySpot, id: ref.SpotID, gen: ref.ObjectGeneration}, body, true)
}

// msgTarget is the object a message is for: family, id and the caller's
// ObjectGeneration; for a bound Session's message (session.go) also its
// session tail and operation id.
type msgTarget struct {
	fam  opFamily
	id   string
	gen  uint64
	inst bool // an Instance Spot (fam is familySpot)
	sess *sessionTag
	op   router.OperationID // a Session's operation id (zero: a fresh one)
	// control is the meshnode.control metadata of a framework message
	// that is no application message ("": none; route_barrier.go).
	control string
	// afterRun, on a barrier, names the ended node run whose messages the
	// receiver admits before it answers (metaBarrierAfterRun).
	afterRun *origin
}

func (t msgTarget) cacheKey() follow.Key {
	if t.fam == familySpot {
		return follow.Key{Kind: follow.KindSpot, ID: t.id}
	}
	return follow.Key{Kind: follow.KindActor, ID: t.id}
}

func (t msgTarget) kind() record.ObjectKind {
	if t.inst {
		return record.ObjectInstanceSpot
	}
	if t.fam == familySpot {
		return record.ObjectUserSpot
	}
	return record.ObjectActor
}

// errNotSent are transport errors raised before a record left this node.
var errNotSent = []error{transport.ErrNotAdmitted, transport.ErrUnknownPeer, transport.ErrBackpressure, transport.ErrInvalidRecord}

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// deliverCall is deliver for a Manager call: a node whose Close began
// refuses it with ErrClosed. Until 2026-12-07 a closed node's Manager went
// on reading the store and answered from it — a message to an object alive
// elsewhere ErrUnavailable (its transport closed), one the node had owned
// ErrNotFound (TestClosedNodesManagerAnswersErrClosed).
func (o *objects) deliverCall(ctx context.Context, t msgTarget, body []byte, request bool) ([]byte, error) {
	if err := o.closedErr(); err != nil {
		return nil, err
	}
	return o.deliver(ctx, t, body, request)
}

// closedErr is ErrClosed once the node's Close began (objects.stop), for
// the Manager calls that do not take part in the shutdown's wait (call):
// Find, messages, Sessions.
func (o *objects) closedErr() error {
	if o.stopping.Load() {
		return ErrClosed
	}
	return nil
}

// deliver resolves the route and delivers, with one retry after a refusal
// that guarantees the message was not delivered (a refused fence, a link
// that never took the record).
func (o *objects) deliver(ctx context.Context, t msgTarget, body []byte, request bool) ([]byte, error) {
	if _, err := resolveMesh(o.role(), o.n.cfg.Node.MeshName, nil); err != nil {
		return nil, err
	}
	if err := record.ValidateObjectID(t.id); err != nil {
		return nil, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
	}
	if !record.Generation(t.gen).Valid() {
		return nil, fmt.Errorf("%w: ObjectGeneration %d", ErrInvalidOperation, t.gen)
	}
	if lost := o.n.LeaseLost(); errors.Is(lost, locstore.ErrDataLost) {
		// The node stopped all new work on the loss (its messages too,
		// docs/store-redis.md): a route read from the emptied store would
		// answer "not found", which an application takes for a destroyed
		// object (an operator try-out: Redis restarted empty, and a
		// client's sends said `no actor "…"` until it was restarted).
		return nil, wrapErr(ErrUnavailable, lost, "this node stopped on a store data loss (STORE DATA LOST); restart it")
	}
	if t.op.IsZero() {
		// One operation id for every try: a retry is the same message,
		// and the route switch barrier matches refusals and commands 50
		// by it.
		t.op = opIDOf(NewOperationID())
	}
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		r, err := o.resolve(ctx, t, attempt > 0)
		if err != nil {
			return nil, classify(ctx, err, "resolve "+t.id)
		}
		if err := o.beforeSend(ctx, t, r, request); err != nil {
			return nil, classify(ctx, err, "route switch to "+t.id)
		}
		var reply []byte
		if bytes.Equal(r.Route.NodeRID, o.n.run.rid) && r.Route.NodeGeneration == o.n.run.lifecycleGeneration {
			reply, err = o.deliverLocal(ctx, t, r, body, request)
			if errors.Is(err, ErrNotFound) {
				// The object just left this node and the store does not
				// name its new owner yet: follow it, as a message from a
				// peer would be (§7.3).
				reply, err = o.deliverFollowing(ctx, t, r, body, request, err, nil)
			}
		} else {
			reply, err = o.deliverRemote(ctx, t, r, body, request)
		}
		// Queued (or not sent): what passes beforeSend next goes behind
		// it (route_barrier.go, sentRoute.sending).
		o.sent.sent(t.cacheKey(), request)
		if err == nil {
			return reply, nil
		}
		if errors.Is(err, transport.ErrBackpressure) {
			// The route is right; the link is full. Dropping the cached
			// route would add store reads exactly when the node is
			// overloaded, and retrying at once would meet the same full
			// queue: the caller gets the backpressure error (not sent).
			return nil, classify(ctx, err, "deliver to "+t.id)
		}
		if notDelivered(err) {
			// §7.3: a failed delivery drops the cached route; the next try
			// reads the store.
			o.cache.Drop(t.cacheKey())
			if !errorsIsAny(err, errNotSent...) {
				// Refused by the node the route named (or by the one it
				// passed the message on to): everything sent before it
				// on that connection was handled there.
				o.sent.settle(t.cacheKey(), follow.FenceOf(r), t.op)
			}
			last = err
			continue
		}
		if errorsIsAny(err, transport.ErrPeerDown) {
			o.cache.Drop(t.cacheKey())
		}
		return nil, classify(ctx, err, "deliver to "+t.id)
	}
	return nil, classify(ctx, last, "deliver to "+t.id)
}

// notDelivered reports an outcome after which the message certainly did not
// reach a mailbox.
func notDelivered(err error) bool {
	return errorsIsAny(err, errRouteStale, ErrNotFound, ErrStaleGeneration) || errorsIsAny(err, errNotSent...)
}

// deliverFollowing sends a message from this node for an object that just
// left it along the move the follow table recorded, keeping a copy of a
// one-way one while the move is unconfirmed (follow_copies.go). Without a
// recorded move it returns notHere, the local refusal. sent, when not nil,
// learns the route a message went on.
func (o *objects) deliverFollowing(ctx context.Context, t msgTarget, r follow.Ready, body []byte, request bool, notHere error, sent func(follow.Ready)) ([]byte, error) {
	mv := o.beginPassOn(t.cacheKey())
	var copied *spot.Envelope
	var to uint64
	defer func() { o.endPassOn(mv, to, copied) }()
	fr, ok := o.followRoute(t, r)
	if !ok {
		return nil, notHere
	}

	// Recorded before the send: a switch away from r must order behind
	// this message on fr (route_barrier.go).
	o.sent.followed(t.cacheKey(), r, fr)
	reply, err := o.deliverRemote(ctx, t, fr, body, request)
	if err == nil && mv != nil && !request {
		env := o.localEnvelope(t, body)
		copied, to = &env, fr.AuthorityOwnerGeneration
	}
	if err == nil && sent != nil {
		sent(fr)
	}
	return reply, err
}

// followRoute is the route to an object's new owner that this node
// recorded when the object moved away (Message Follow, §7.3), as a route a
// local sender can use; false when there is none.
func (o *objects) followRoute(t msgTarget, r follow.Ready) (follow.Ready, bool) {
	f, err := o.follow.Forward(follow.Inbound{Key: t.cacheKey(), ObjectGeneration: t.gen, AuthorityOwnerGeneration: r.AuthorityOwnerGeneration})
	if err != nil {
		return follow.Ready{}, false
	}
	m := f.Target
	return follow.Ready{Key: m.Key, ObjectGeneration: m.ObjectGeneration, AuthorityOwnerGeneration: m.AuthorityOwnerGeneration,
		Owner: m.Owner, Route: m.Route}, true
}

// resolve returns the Ready route of t: the route cache when it holds t's
// generation (and fresh is false), else the authority record read from the
// store, bounded by the owner's admission deadline and then cached (§7.3).
// Missing, Creating and store errors are never cached.
func (o *objects) resolve(ctx context.Context, t msgTarget, fresh bool) (follow.Ready, error) {
	key := t.cacheKey()
	if !fresh {
		if r, ok := o.cache.Get(key); ok {
			switch {
			case o.n.isLeaving(r.Route.NodeRID, r.Route.NodeGeneration):
				// The route's node is draining or stopped (discovery saw
				// it): its objects are moving or gone; read the store.
				o.cache.Drop(key)
			case r.ObjectGeneration == t.gen:
				o.stats.cacheHits.Add(1)
				return r, nil
			case r.ObjectGeneration > t.gen:
				o.stats.cacheHits.Add(1)
				return follow.Ready{}, fmt.Errorf("%w: %s holds ObjectGeneration %d, the ref has %d", ErrStaleGeneration, t.id, r.ObjectGeneration, t.gen)
			}
		}
	}
	o.stats.cacheMisses.Add(1)
	row, err := o.readAuthority(ctx, t.kind(), t.id)
	if err != nil {
		return follow.Ready{}, err
	}
	if !row.Found {
		o.cache.Drop(key)
		return follow.Ready{}, fmt.Errorf("%w: no %s %q", ErrNotFound, t.kind(), t.id)
	}
	a := row.Record
	o.cache.Observe(key, follow.Version{ObjectGeneration: uint64(a.ObjectGeneration),
		AuthorityOwnerGeneration: uint64(a.AuthorityOwnerGeneration), StoreVersion: row.Version})
	if a.Allocation.ObjectKind != t.kind() {
		return follow.Ready{}, fmt.Errorf("%w: %q is %s", ErrTypeMismatch, t.id, aKind(a.Allocation.ObjectKind))
	}
	if uint64(a.ObjectGeneration) != t.gen {
		return follow.Ready{}, fmt.Errorf("%w: %s holds ObjectGeneration %d, the ref has %d", ErrStaleGeneration, t.id, a.ObjectGeneration, t.gen)
	}
	if a.Allocation.State != record.AllocationActive {
		return follow.Ready{}, fmt.Errorf("%w: %s %q is not Ready (Creating)", ErrNotFound, t.kind(), t.id)
	}
	r := follow.Ready{Key: key, ObjectGeneration: uint64(a.ObjectGeneration), AuthorityOwnerGeneration: uint64(a.AuthorityOwnerGeneration),
		StoreVersion: row.Version, Owner: follow.Owner{ID: a.OwnerID, LeaseGeneration: uint64(a.OwnerLeaseGeneration)},
		Route: follow.Route{NodeRID: a.Allocation.Descriptor.RoutingID, NodeGeneration: uint64(a.Allocation.DescriptorLifecycleGeneration)}}
	if r.ValidUntil, err = o.ownerDeadline(ctx, r.Owner); err != nil {
		switch {
		case errors.Is(err, errOwnerLeaseEnded):
			return follow.Ready{}, ownerGone(a)
		case errors.Is(err, errOwnerNotRenewed):
			return follow.Ready{}, ownerNotRenewed(a)
		}
		return follow.Ready{}, err
	}
	if _, err := o.cache.Put(r); err != nil {
		o.log.Warn("route not cached", "object", t.id, "err", err)
	}
	return r, nil
}

// ownerDeadline is the owner's local admission deadline as this node can
// know it, on this node's monotonic clock: its own gate deadline when it is
// the owner, else derived from the owner-lease record exactly as the owner
// derives its own (lease.AdmissionDeadline: t0 + ExpiresAt − StoreNow −
// fencing margin). The fencing margin is this node's configuration — the
// nodes of a mesh share lease timing. A missing or replaced lease means the
// owner is gone: Unavailable, nothing cached.
func (o *objects) ownerDeadline(ctx context.Context, owner follow.Owner) (time.Duration, error) {
	self, gen := o.n.Owner()
	if owner.ID == self && owner.LeaseGeneration == gen {
		return o.n.lease.Gate().Deadline(), nil
	}
	key, err := record.OwnerLeaseKey(owner.ID)
	if err != nil {
		return 0, fmt.Errorf("%w: owner id: %w", ErrUnavailable, err)
	}
	t0 := o.n.clock.Now()
	rr, err := o.n.loc.Read(ctx, key)
	t1 := o.n.clock.Now()
	if err != nil {
		return 0, fmt.Errorf("read owner lease: %w", err)
	}
	if !rr.Found {
		o.cache.DropOwner(owner.ID, 0)
		return 0, fmt.Errorf("%w: %w: owner %s has no lease", ErrUnavailable, errOwnerLeaseEnded, owner.ID)
	}
	l, err := record.DecodeOwnerLease(rr.Value)
	if err != nil {
		return 0, fmt.Errorf("%w: owner lease: %w", ErrUnavailable, err)
	}
	if uint64(l.LeaseGeneration) != owner.LeaseGeneration {
		o.cache.DropOwner(owner.ID, owner.LeaseGeneration)
		return 0, fmt.Errorf("%w: %w: owner %s runs lease generation %d, the record names %d", ErrUnavailable, errOwnerLeaseEnded, owner.ID, l.LeaseGeneration, owner.LeaseGeneration)
	}
	d, err := lease.AdmissionDeadline(lease.Observation{SentAt: t0, ReceivedAt: t1, StoreNow: rr.StoreNow, ExpiresAt: rr.ExpiresAt},
		o.n.cfg.Lease.FencingMargin)
	if err != nil {
		return 0, fmt.Errorf("%w: owner lease: %w", ErrUnavailable, err)
	}
	if d <= t1 {
		return 0, fmt.Errorf("%w: %w: owner %s/%d", ErrUnavailable, errOwnerNotRenewed, owner.ID, owner.LeaseGeneration)
	}
	return d, nil
}

// localEnvelope is the mailbox envelope of a one-way message t from this
// node (a request's adds its reply route).
func (o *objects) localEnvelope(t msgTarget, body []byte) spot.Envelope {
	op := t.op
	if op.IsZero() {
		op = opIDOf(NewOperationID())
	}
	self := origin{rid: o.n.run.rid, gen: o.n.run.lifecycleGeneration}
	return spot.Envelope{Kind: spot.Send, Body: append([]byte(nil), body...), Meta: envMeta{op: op, org: self, sess: t.sess}.encode()}
}

// deliverLocal checks the same fence a remote target would and posts to the
// mailbox directly, under the admission (admitMessage).
func (o *objects) deliverLocal(ctx context.Context, t msgTarget, r follow.Ready, body []byte, request bool) ([]byte, error) {
	if err := o.sendable(t, r, body, request); err != nil {
		return nil, err
	}
	env := o.localEnvelope(t, body)
	var call *transport.Call
	var k string
	var ch chan localReply
	if _, ok := ctx.Deadline(); request && !ok {
		// A request without a deadline gets transport.request_timeout, as
		// one to another node does (transport Call.Wait): before
		// 2026-12-07 a local one waited for good on a turn that never
		// ended, its waiter and reply slot kept meanwhile
		// (TestRequestWithoutDeadlineEndsAtRequestTimeoutLocallyToo).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.n.cfg.Transport.RequestTimeout)
		defer cancel()
	}
	if request {
		// The reply slot makes the request portable: if the object moves
		// before it runs, the new owner answers through the slot (§7.3);
		// if it runs here, Reply hands the result to ch directly.
		call = o.n.tr.ExpectReply()
		defer call.Cancel()
		route := replyRoute{fam: t.fam, gen: o.n.run.lifecycleGeneration, corr: call.Correlation(), rid: o.n.run.rid}
		k, ch = route.key(), make(chan localReply, 1)
		env.Kind, env.ReplyRoute = spot.Request, route.encode()
	}
	if t.fam == familySpot && !inActivationTurnOf(ctx, t) {
		// Behind this node's Instance Spot activations of the id (as
		// inboundSpot): they carry earlier messages of this Manager. Not
		// from a turn of that queue itself, which would wait for itself.
		turn := make(chan struct{})
		if o.activating.after(t.id, func() { close(turn) }) {
			select {
			case <-turn:
			case <-ctx.Done():
				return nil, ctxErr(ctx, "message to %s: waiting behind its activation", t.id)
			}
		}
	}
	var perr error
	_, err := o.admitAfterCutover(ctx, t.fam, t.id, t.gen, r.Route.NodeRID, r.Route.NodeGeneration, r.AuthorityOwnerGeneration, r.Owner.LeaseGeneration, false,
		func(d dest) {
			var obj poster = d.obj
			if d.arr != nil {
				obj = d.arr.local()
			}
			self := origin{rid: o.n.run.rid, gen: o.n.run.lifecycleGeneration}
			o.bindSessionLocked(d.h, t.sess, self)
			if t.sess != nil && d.h != nil && d.h.heldLocked() {
				// Into a move's ingress hold: told as a peer's Session is.
				o.holdSessionLocked(d.h, t.sess, inMessage{fam: t.fam, id: t.id, gen: t.gen, op: t.op, to: routeOf(r)}, self)
			}
			if request {
				o.waiters[k] = ch
			}
			o.stats.delivered.Add(1) // before Post, as in inbound
			if perr = obj.Post(env); perr != nil {
				o.stats.delivered.Add(^uint64(0))
				delete(o.waiters, k)
			}
		})
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, perr)
	}
	if !request {
		return nil, nil
	}
	forget := func() {
		o.mu.Lock()
		delete(o.waiters, k)
		o.mu.Unlock()
	}
	select {
	case rep := <-ch:
		if rep.err != nil {
			return nil, localReplyError(t.fam, rep.err)
		}
		return rep.body, nil
	case <-call.Done():
		forget()
		resp, err := call.Wait(ctx)
		if err != nil {
			return nil, wrapErr(ErrUnavailable, err, "request to %s", t.id)
		}
		return answerOf(t.fam, requestKind(t.fam), resp)
	case <-ctx.Done():
		forget()
		return nil, ctxErr(ctx, "request to %s", t.id)
	}
}

// messageFrames and messageHead bound what messageRecord builds besides
// its body: at most messageFrames frames, whose bytes other than the body
// come to at most messageHead (every field of the head is bounded by the
// wire schema — ids and routing ids 255 bytes, a metadata value 1,024 — so
// the head is a few KiB at most; TestMessageRecordHeadIsBounded builds the
// largest and checks both).
const (
	messageFrames = 4
	messageHead   = 64 << 10
)

// sendable refuses a local message the transport could not carry, with the
// error a send of it to another node gets (ErrInvalidOperation wrapping
// transport.ErrInvalidRecord, naming the limit): its object may move
// before it runs, and the move's relay (and a previous owner passing it
// on) sends it — which then failed, and the message, accepted, was lost
// (a request waited out its deadline). Until 2026-12-07 a local body over
// MaxFrameBytes was accepted (TestOversizeLocalMessageIsRefusedAsARemoteOne).
func (o *objects) sendable(t msgTarget, r follow.Ready, body []byte, request bool) error {
	// Most bodies are far below the limits: whatever the record's head,
	// they fit, and building and encoding a record only to size it cost
	// each local message ~1.7 µs and 9 allocations (2026-12-07).
	if within := uint64(len(body)) + messageHead; o.n.tr.WithinLimits(messageFrames, within, within) {
		return nil
	}
	// Sized as the one-way record: a request's differs only by the
	// correlation the transport gives it when it sends it, and its payload
	// frame, the one the limit bounds, is the same.
	rec, err := o.messageRecord(t, r, body, false)
	if err != nil {
		return err
	}
	if err = o.n.tr.CheckRecord(rec); err == nil {
		return nil
	}
	if request {
		return requestFailure(t.id, err)
	}
	return messageFailure("send to "+t.id, err)
}

// localReplyError gives a local request's failure the same vocabulary as a
// remote one (the wire mapping round trip), keeping the handler's error.
func localReplyError(fam opFamily, err error) error {
	if isVocabulary(err) {
		return err
	}
	res, code := wireFailure(fam, err)
	return fmt.Errorf("%w: %w", replyError(fam, &router.Reply{Result: res, FailureCode: code}, "request"), err)
}

// deliverRemote sends command 24/25 (Actor) or 21/22 (Spot) with the route
// fence.
func (o *objects) deliverRemote(ctx context.Context, t msgTarget, r follow.Ready, body []byte, request bool) ([]byte, error) {
	kind := requestKind(t.fam)
	rec, err := o.messageRecord(t, r, body, request)
	if err != nil {
		return nil, err
	}
	if h := o.hook().beforeRemoteSend; h != nil {
		if err := h(t.id); err != nil {
			return nil, wrapErr(ErrUnavailable, err, "send to %s", t.id)
		}
	}
	// Sent to the route's node run only (endedRun): a bound Session or a
	// cached route to a run that ended kept sending for as long as nothing
	// told it (an operator try-out: ~100 a second for 36 s). Not sent: the
	// caller reads the store.
	if !request {
		if err := o.n.tr.SendRun(ctx, r.Route.NodeRID, r.Route.NodeGeneration, rec); err != nil {
			if ended := runRefused(err); ended != nil {
				return nil, fmt.Errorf("send to %s: %w", t.id, ended)
			}
			return nil, messageFailure("send to "+t.id, err)
		}
		return nil, nil
	}
	// Portable: if the object moves before the request runs, the new
	// owner answers (§7.3).
	resp, err := o.n.tr.Request(ctx, r.Route.NodeRID, rec, transport.Portable(), transport.Run(r.Route.NodeGeneration))
	if err != nil {
		if ended := runRefused(err); ended != nil {
			return nil, fmt.Errorf("send to %s: %w", t.id, ended)
		}
		return nil, requestFailure(t.id, err)
	}
	return answerOf(t.fam, kind, resp)
}

// messageRecord is the command 24/25 (Actor) or 21/22 (Spot) that carries
// body to t on route r.
func (o *objects) messageRecord(t msgTarget, r follow.Ready, body []byte, request bool) (*router.Record, error) {
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: body}
	var b router.Body
	opID := t.op
	if opID.IsZero() {
		opID = opIDOf(NewOperationID())
	}
	source := entrySpotID(o.n.run)
	if t.fam == familyActor {
		fence := router.ActorRouteFence{Actor: router.ActorRef{ActorID: t.id, ObjectGeneration: t.gen},
			TargetNodeRID: r.Route.NodeRID, TargetNodeGeneration: r.Route.NodeGeneration,
			ExpectedAuthorityOwnerGeneration: r.AuthorityOwnerGeneration, ExpectedOwnerLeaseGeneration: r.Owner.LeaseGeneration}
		// A one-way message carries its operation id too, so that a
		// command 50 about it names it: a Session's sequence (session.go),
		// the last message on a route (route_barrier.go).
		if request {
			b = &router.ActorRequest{Operation: opID, TargetActor: fence, BoundSession: t.sess.tail()}
		} else {
			b = &router.ActorSend{Operation: opID, TargetActor: fence, BoundSession: t.sess.tail()}
		}
	} else {
		fence := router.SpotRouteFence{Spot: router.SpotRef{SpotID: t.id, ObjectGeneration: t.gen},
			TargetNodeRID: r.Route.NodeRID, TargetNodeGeneration: r.Route.NodeGeneration,
			ExpectedAuthorityOwnerGeneration: r.AuthorityOwnerGeneration, ExpectedOwnerLeaseGeneration: r.Owner.LeaseGeneration}
		if request {
			b = &router.SpotRequest{Operation: opID, SourceSpotID: source, TargetSpot: fence}
		} else {
			b = &router.SpotSend{Operation: opID, SourceSpotID: source, TargetSpot: fence}
		}
	}
	var meta []byte
	if t.control != "" {
		entries := []router.MetadataEntry{{Key: controlKey, Value: t.control}}
		if t.afterRun != nil {
			entries = append(entries, router.MetadataEntry{Key: metaBarrierAfterRun, Value: t.afterRun.String()})
		}
		var err error
		if meta, err = router.EncodeMetadata(entries); err != nil {
			return nil, fmt.Errorf("%w: control %q: %w", ErrInvalidOperation, t.control, err)
		}
	}
	return router.NewRecord(b, meta, payload), nil
}

// endedRun is the check every path makes before it sends an object message
// (or a record carrying one) to a route naming the node run rid/gen: nil
// when that run is the one of its node admitted on the link now (or no run
// of the node is admitted: the send's own error says so), ErrUnavailable +
// errRouteStale when an earlier run is named (a later one: below). The
// node stopped and started again (a
// rolling restart, the objects it could not move removed, or moved on by
// its drain): the new run refuses a message addressed to the ended one, and
// drops a one-way message — after its sender's Send had returned nil, and
// counted only there. So it is not sent: a direct sender reads the store
// (deliverRemote), a cold activation tries another node (sendActivation), a
// previous owner admits it when the object is hosted there again, else
// counts the loss it can no longer pass on (passOn, readmit; §7.3: it does
// not read the store), a handover counts it lost (handOver). Not made by a
// move's relay to its target: a target run that ended cannot commit, and
// the source puts back what it relayed (recoverLocal).
//
// Only an earlier run than the one admitted has ended. A later one is the
// node's run now, which the link has not caught up with: it still holds
// its previous run's session (a hard stop leaves that open until liveness
// or the new run's hello ends it, and the transport admits no other run
// while it is heard). Sent there, a message was kept for the previous run
// and dropped when the new one was admitted; so it is not sent either, but
// as over a link that is down (transport.ErrNotAdmitted): not a stale
// route, no other_run drop, no readmit, and a handover keeps its follow
// record to that run.
//
// The sends make this check in the transport (SendRun, SendWaitRun,
// transport.Run), against the session the record is queued on, which the
// send takes from the link anyway; runRefused turns its refusal into this
// error. Checked before the send (Peer), the run could end and the new one
// be admitted in between, and the message went to it; and every remote
// send took the node's and the link's mutexes twice. endedRun itself is
// asked only by a handover, which decides before it sends anything (maybe
// nothing) whether the follow record to the run is kept.
func (o *objects) endedRun(rid []byte, gen uint64) error {
	p, ok := o.n.tr.Peer(transport.RID(rid))
	if !ok {
		return nil
	}
	return runMismatch(rid, gen, p.LifecycleGeneration)
}

// runRefused is endedRun's error for a send the transport refused because
// the record named another run of the peer than the one admitted on the
// session it would have been queued on (*transport.RunError); nil for any
// other error.
func runRefused(err error) error {
	var re *transport.RunError
	if !errors.As(err, &re) {
		return nil
	}
	return runMismatch(re.Peer, re.Named, re.Admitted)
}

// runMismatch is endedRun's error for a route naming node run rid/gen while
// the link holds the run admitted.
func runMismatch(rid []byte, gen, admitted uint64) error {
	switch {
	case admitted == gen:
		return nil
	case admitted < gen:
		return fmt.Errorf("%w: %w: the route names node run %x/%d, and the link to %x still holds its earlier run %d",
			ErrUnavailable, transport.ErrNotAdmitted, rid, gen, rid, admitted)
	}
	return fmt.Errorf("%w: %w: %w: the route names node run %x/%d, and %x runs as %d now",
		ErrUnavailable, errRouteStale, errRunEnded, rid, gen, rid, admitted)
}

// errRunEnded marks endedRun's refusal among the errRouteStale ones.
var errRunEnded = errors.New("mesh: the node run named ended")

// requestFailure is the error of a request to id the transport failed with
// err: the request's deadline passing is ErrDeadlineExceeded; a request
// that never left this node (errNotSent: among them a link that is down
// and whose last redial got no connection in time) keeps its cause, so
// that deliver drops the route and tries again and a route switch's
// barrier sees why. Before, any error matching context.DeadlineExceeded
// was flattened into a deadline (its cause kept only as text): a timed-out
// redial read as an owner that did not answer in time.
//
// A one-way send is judged the same way (messageFailure): its context
// ending before the record was queued is ErrDeadlineExceeded at its
// deadline. Until 2026-12-07 it was ErrUnavailable wrapping
// context.DeadlineExceeded (TestSendPastItsDeadlineIsDeadlineExceeded).
func requestFailure(id string, err error) error {
	return messageFailure("request to "+id, err)
}

// messageFailure is requestFailure for a message described by what.
func messageFailure(what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && !errorsIsAny(err, errNotSent...) {
		return deadlineErr("%s: %v", what, err)
	}
	return wrapErr(sendFailure(err), err, "%s", what)
}

// sendFailure is the vocabulary of a transport error sending a message: a
// record the transport refuses to send at all (a body over its frame
// limit, docs/TRANSPORT.md) is the caller's ErrInvalidOperation — sending
// it again cannot help; anything else ErrUnavailable.
func sendFailure(err error) error {
	if errors.Is(err, transport.ErrInvalidRecord) {
		return ErrInvalidOperation
	}
	return ErrUnavailable
}

// requestKind is the operation kind a request of family fam is answered
// under (the reply tail's discriminator).
func requestKind(fam opFamily) router.MeshOperationKind {
	if fam == familySpot {
		return router.OpSpotRequest
	}
	return router.OpActorRequest
}

// answerOf turns a request's command 20 into the caller's result: the
// application payload, or the typed failure.
func answerOf(fam opFamily, kind router.MeshOperationKind, resp *router.Record) ([]byte, error) {
	rep, ok := resp.Body.(*router.Reply)
	if !ok {
		return nil, fmt.Errorf("%w: request answered with %s", ErrUnavailable, resp.Command)
	}
	if rep.Result != router.ResultOK {
		return nil, replyError(fam, rep, "request")
	}
	if err := resp.ResolveReplyTail(kind); err != nil {
		return nil, fmt.Errorf("%w: reply: %w", ErrUnavailable, err)
	}
	if resp.Payload == nil {
		return nil, nil
	}
	return append([]byte(nil), resp.Payload.Data...), nil
}

// dest is where an admitted message goes: the object's mailbox (which is
// the ingress hold while it moves), the temporary queue of a move bringing
// it here, or — during a source's cutover — nowhere yet: wait, then admit
// again (the object then follows its new owner).
type dest struct {
	obj  *spot.Object
	arr  *arrival
	wait chan struct{}
	h    *hosted // the hosted entry admitted to (with obj or arr)
}

// admitMessage is the target's route fence check (§7.3), shared by local
// and remote delivery: this node run and its owner lease generation, the
// object hosted with the ref's ObjectGeneration and the expected
// AuthorityOwnerGeneration, not closing, and the admission gate open (§5;
// with unheard, a held object keeps the message while the gate is shut,
// see below). A refusal is never delivered. An admitted message is handed to post
// (mailbox or arrival) under objects.mu, in the same critical section as
// the check: a move changes the object's state under that lock, so a
// message is either in the queue the move takes (the ingress hold it
// relays, the temporary queue it merges) or sees the new state — never
// posted to a queue that was already taken (and then lost).
func (o *objects) admitMessage(fam opFamily, id string, gen uint64, nodeRID []byte, nodeGen, ownerGen, leaseGen uint64, unheard bool, post func(dest)) (dest, error) {
	refuse := func(err error) (dest, error) {
		o.stats.fenceRefused.Add(1)
		return dest{}, err
	}
	if !bytes.Equal(nodeRID, o.n.run.rid) {
		return refuse(fmt.Errorf("%w: addressed to node run %x/%d", errRouteStale, nodeRID, nodeGen))
	}
	if nodeGen != o.n.run.lifecycleGeneration {
		// Another run of this node: a route from before it restarted.
		return refuse(fmt.Errorf("%w: %w: addressed to node run %x/%d, this is run %d", errRouteStale, errRunEnded,
			nodeRID, nodeGen, o.n.run.lifecycleGeneration))
	}
	// The owner part of the fence: this run's owner lease generation and
	// the object's AuthorityOwnerGeneration. Two cases besides the
	// current combination with the gate open are admitted, both for
	// messages sent to this very object, here:
	//   - the combination an object was re-adopted from (queued on a link
	//     while the node was paused, say), like a message passed on to
	//     the object's new owner (§7.3);
	//   - a message whose refusal nobody would hear (unheard: a one-way
	//     message from another node) while the gate is shut because the
	//     lease expired or was lost, for a serving object: it waits in the
	//     mailbox — no turn starts while the gate is shut (the object is
	//     held, or holds itself, spot.Options.Admit) — and runs only if the
	//     gate reopens with the object kept (§5 forbids starting it, not
	//     keeping it), else goes with the object. Refused, it would be
	//     dropped without a word; a request, or a local send, is still
	//     refused, so that its caller learns at once.
	_, lg := o.n.Owner()
	staleLease := func() (dest, error) {
		return refuse(fmt.Errorf("%w: addressed to owner lease generation %d, this run holds %d", errRouteStale, leaseGen, lg))
	}
	if leaseGen > lg {
		return staleLease()
	}
	gateErr := o.n.lease.Gate().Admit()
	shut := func() (dest, error) { return refuse(wrapErr(ErrUnavailable, gateErr, "owner lease")) }
	holdable := gateErr != nil && unheard && o.n.leaseRecoverable()
	if gateErr != nil && !holdable && o.closingWithout(fam, id) {
		// A closing node past its lease release (the gate stays shut)
		// hosts nothing, but still passes on what comes for the objects it
		// moved away until its transport closes — its last barriers behind
		// them (shutdown_passons.go) keep it open a while for that. Refused
		// at the gate, a sender's barrier let it switch at once, ahead of
		// what was still being passed on, and a one-way message was lost.
		return refuse(errNotHosted(id))
	}
	if gateErr != nil && !holdable {
		if leaseGen != lg {
			return staleLease()
		}
		return shut()
	}
	key := spot.Key{Spot: fam == familySpot, ID: id}
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.hosted[key]
	if leaseGen != lg || gateErr != nil {
		switch {
		case ok && h.readoptedFrom == (ownerCombination{leaseGen: leaseGen, ownerGen: ownerGen}):
			ownerGen = h.ownerGeneration
		case ok && gateErr != nil && h.ownerGeneration == ownerGen:
			// Current, or pending its re-adoption after a reacquisition.
		case gateErr == nil && (!ok || h.entry || h.objectGeneration == gen && ownerGen < h.ownerGeneration):
			// The object left the stay the fence names (not hosted here,
			// or here again at a later AuthorityOwnerGeneration): refused
			// below as not hosted, so that its follow record passes it on
			// (notAdmitted, §7.3) — whatever this run's lease generation
			// is now. The record names the new owner, whose lease is not
			// this node's. Before 2026-12-07 a previous owner whose lease
			// was lost and reacquired after it moved the object away
			// refused such a message as a stale route, and a one-way one
			// was dropped though the follow record was there
			// (TestMessageForAMovedObjectFollowsAfterThePreviousOwnersLeaseChanged).
			// Nothing is posted under a stale lease: every case below
			// refuses it (or waits for a cutover and checks again).
		case leaseGen != lg:
			return staleLease()
		default:
			return shut()
		}
		if gateErr != nil && h.state != hostServing {
			return shut()
		}
	}
	switch {
	case !ok || h.entry || h.state == hostClosing:
		// Checked before closing: a node shutting down after a drain
		// still passes on messages for the objects it moved away (§7.3).
		return refuse(errNotHosted(id))
	case o.closing:
		return refuse(wrapErr(ErrUnavailable, ErrClosed, "node closing"))
	case h.objectGeneration != gen:
		return refuse(fmt.Errorf("%w: %s is hosted at ObjectGeneration %d, the message is for %d", ErrStaleGeneration, id, h.objectGeneration, gen))
	case h.state == hostCutover:
		// The fence named the source's generation; the object is leaving.
		return dest{wait: h.cutoverDone}, nil
	case ownerGen < h.ownerGeneration:
		// The object left this node and came back: the fence is from an
		// earlier stay. Earlier messages with that fence were passed on
		// along the recorded moves and return here through them, so this
		// one follows the same way (Message Follow) instead of being
		// refused — a refused one-way message would be lost.
		return refuse(fmt.Errorf("%w: %s is hosted here again at AuthorityOwnerGeneration %d; the message's %d is from an earlier stay",
			ErrNotFound, id, h.ownerGeneration, ownerGen))
	case h.ownerGeneration != ownerGen:
		return refuse(fmt.Errorf("%w: %s is at AuthorityOwnerGeneration %d, the message expects %d", errRouteStale, id, h.ownerGeneration, ownerGen))
	}
	d := dest{obj: h.obj, h: h}
	if h.state == hostIncoming {
		d = dest{arr: h.arrival, h: h}
	}
	// hostServing posts to a dispatching mailbox; hostMoving to the held
	// one, which is the move's ingress hold (relayed in order or put back);
	// hostIncoming to the move's temporary queue.
	post(d)
	return d, nil
}

// closingWithout reports whether this node is closing (§11) and does not
// host the object id of family fam: a message for it can only be passed
// on (Message Follow) or refused as not hosted here.
func (o *objects) closingWithout(fam opFamily, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.hosted[spot.Key{Spot: fam == familySpot, ID: id}]
	return o.closing && (!ok || h.entry)
}

// cutoverWait bounds how long a local message waits for a source's cutover
// to be submitted before it is admitted again (the relay of a whole hold).
const cutoverWait = 10 * time.Second

// admitAfterCutover is admitMessage, waiting once for a source's cutover:
// a local sender's (deliverLocal), whose caller learns of the refusal. A
// peer's message waits off the connection's reader instead (waitCutover).
// The wait ends at the caller's deadline or cancellation too (ctx): the
// call's context is its one deadline, and nothing was posted yet. Before
// 2026-12-07 it ignored ctx and a caller whose deadline had long passed
// waited the whole cutoverWait and got ErrMoving
// (TestLocalMessageInACutoverKeepsTheCallersDeadline).
func (o *objects) admitAfterCutover(ctx context.Context, fam opFamily, id string, gen uint64, nodeRID []byte, nodeGen, ownerGen, leaseGen uint64, unheard bool, post func(dest)) (dest, error) {
	d, err := o.admitMessage(fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, unheard, post)
	if err != nil || d.wait == nil {
		return d, err
	}
	wait := time.NewTimer(cutoverWait)
	defer wait.Stop()
	select {
	case <-d.wait:
	case <-ctx.Done():
		return dest{}, ctxErr(ctx, "message to %s: waiting for its cutover", id)
	case <-wait.C:
		return dest{}, fmt.Errorf("%w: %s is being moved", ErrMoving, id)
	}
	d, err = o.admitMessage(fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, unheard, post)
	if err == nil && d.wait != nil {
		return dest{}, fmt.Errorf("%w: %s is being moved", ErrMoving, id)
	}
	return d, err
}

func (o *objects) inboundActor(from transport.PeerInfo, f router.ActorRouteFence, corr uint64, rec *router.Record, reply func(*router.Record) error) {
	if corr == 0 && o.noticeBarrierHeld(rec) {
		return
	}
	if corr != 0 && isDestroyControl(rec) {
		o.inboundDestroy(from, f, corr, reply)
		return
	}
	o.inbound(from, familyActor, f.Actor.ActorID, f.Actor.ObjectGeneration, f.TargetNodeRID, f.TargetNodeGeneration,
		f.ExpectedAuthorityOwnerGeneration, f.ExpectedOwnerLeaseGeneration, corr, rec, reply)
}

func (o *objects) inboundSpot(from transport.PeerInfo, f router.SpotRouteFence, corr uint64, rec *router.Record, reply func(*router.Record) error) {
	if corr == 0 && o.noticeBarrierHeld(rec) {
		return
	}
	deliver := func() {
		o.inbound(from, familySpot, f.Spot.SpotID, f.Spot.ObjectGeneration, f.TargetNodeRID, f.TargetNodeGeneration,
			f.ExpectedAuthorityOwnerGeneration, f.ExpectedOwnerLeaseGeneration, corr, rec, reply)
	}
	// Behind the Instance Spot activations of this id still queued here
	// (activations.after): they carry earlier messages of the same sender.
	if !o.activating.after(f.Spot.SpotID, deliver) {
		deliver()
	}
}

// inboundEnvelope is the mailbox envelope of a one-way message record (a
// request's adds its reply route).
func inboundEnvelope(rec *router.Record, op router.OperationID, org origin, tag *sessionTag) spot.Envelope {
	var body []byte
	if rec.Payload != nil {
		body = append([]byte(nil), rec.Payload.Data...)
	}
	return spot.Envelope{Kind: spot.Send, Body: body, Meta: envMeta{op: op, org: org, sess: tag}.encode()}
}

// inbound delivers a remote message after the fence check. corr is 0 for a
// one-way message; a refused one-way message is dropped (there is no reply
// to carry the refusal) and counted. A message for an object in its
// cutover here, or behind one from the same peer still waiting for it,
// waits off the connection's reader (waitCutover).
func (o *objects) inbound(from transport.PeerInfo, fam opFamily, id string, gen uint64, nodeRID []byte, nodeGen, ownerGen, leaseGen uint64,
	corr uint64, rec *router.Record, reply func(*router.Record) error) {
	waiter := func() cutoverWaiter {
		return cutoverWaiter{
			key: cutoverWaitKey{peer: string(from.RID), obj: spot.Key{Spot: fam == familySpot, ID: id}},
			admit: func() <-chan struct{} {
				return o.inboundOnce(from, fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, corr, rec, reply)
			},
			refuse: func(err error) {
				// ErrMoving: nothing to follow.
				m, _ := messageOf(rec)
				o.refuseMessage(from, m, rec, reply, err)
			},
		}
	}
	var tell *heldTeller
	if corr != 0 && controlOf(rec) == controlBarrier {
		// A barrier waiting for a cutover here is held on purpose: its
		// sender is told so while it waits (route_barrier_held.go).
		tell = &heldTeller{}
		plain := waiter
		waiter = func() cutoverWaiter { return tell.until(plain()) }
	}
	// Waiting for a cutover here (not refused over cutoverWaitMax): its
	// sender is told it is held on purpose, a barrier's or a Session's.
	// A refused one is held nowhere: told so, a Session's switch waited
	// for a message that was dropped, as long as the cutover lasted.
	waiting := func() {
		tell.begin(func() func() { return o.tellBarrierHeld(from, fam, rec) })
		o.holdWaitingSession(from, rec)
	}
	// The fast path takes no lock for this: no message waits anywhere.
	if o.cutoverQueues.Load() > 0 {
		if taken, queued := o.queueBehindCutover(waiter()); taken {
			if queued {
				waiting()
			}
			return
		}
	}
	if wait := o.inboundOnce(from, fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, corr, rec, reply); wait != nil {
		if o.waitCutover(waiter(), wait) {
			waiting()
		}
	}
}

// inboundOnce is inbound's admission and delivery. It returns, having done
// nothing, the channel to wait on when the object is in its cutover here.
func (o *objects) inboundOnce(from transport.PeerInfo, fam opFamily, id string, gen uint64, nodeRID []byte, nodeGen, ownerGen, leaseGen uint64,
	corr uint64, rec *router.Record, reply func(*router.Record) error) <-chan struct{} {
	org, oerr := originOf(rec, from)
	m, _ := messageOf(rec)
	if m.hop > 0 {
		o.hook().step(id, stepFollowArrive)
	}
	tag := sessionTagOf(rec)
	env := inboundEnvelope(rec, m.op, org, tag)
	var route replyRoute
	if corr != 0 {
		route = replyRoute{fam: fam, gen: org.gen, corr: corr, rid: org.rid}
		env.Kind, env.ReplyRoute = spot.Request, route.encode()
	}
	var perr error
	var arrived bool
	// A barrier (route_barrier.go) is answered where it is admitted; it
	// is never queued.
	barrier := corr != 0 && controlOf(rec) == controlBarrier
	if barrier {
		// Behind an ended run's messages first, when it names one.
		if wait, refused := o.barrierAfterRun(from, fam, id, corr, rec, reply); wait != nil || refused {
			return wait
		}
	}
	// A closed Session's unbind (session.go) drops its binding where it
	// is admitted; it is never queued either.
	unbind := corr == 0 && tag != nil && controlOf(rec) == controlUnbind
	var holding chan struct{}
	d, err := o.admitMessage(fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, corr == 0, func(d dest) {
		if barrier && d.h.state == hostMoving && o.halt.Err() == nil {
			// Everything the sender sent before it is in the ingress hold
			// of a move, not yet relayed: answered only once the move has
			// let go of it (below).
			holding = d.h.holding
		}
		if oerr != nil || barrier {
			return // refused or answered below
		}
		if unbind {
			if d.h.state == hostMoving && d.h.holding != nil && o.halt.Err() == nil {
				// The Session's earlier messages may be in the move's
				// ingress hold: relayed to the target, they record the
				// binding there again (and the payload may carry it
				// already). Taken anew once the move lets go (below):
				// passed on behind the relay, or taken here if the object
				// stays.
				holding = d.h.holding
				return
			}
			o.unbindSessionLocked(d.h, tag)
			return
		}
		// Recorded before the message is queued anywhere: a move that
		// takes the queue (or merges it at the owner change) then knows
		// the Session.
		o.bindSessionLocked(d.h, tag, org)
		o.holdSessionLocked(d.h, tag, m, org)      // into a move's ingress hold: its Session is told (route_barrier_held.go)
		o.lateRelayedLocked(d.h, tag, from, m.hop) // relayed after a grace commit: its Session is told (session_late_relay.go)
		if corr != 0 && org.direct(from) {
			// Fast path: answer on the connection the request came on. A
			// request passed on by another node is answered to its origin
			// (portable reply), not to the node that passed it on.
			o.remotes[route.key()] = remoteReply{reply: reply}
		}
		// Counted before Post: the turn (and its reply) may run before
		// Post returns, and a reader of the counter must see it by then.
		o.stats.delivered.Add(1)
		if d.arr != nil {
			// A move is bringing the object here: the relay or the
			// temporary queue, merged in order at the owner change (§9.2).
			d.arr.arrive(from, rec, env, m.hop > 0)
			arrived = true
			return
		}
		if lateRelayFrom(d.h, from, m.hop) {
			// The source accepted it into its ingress hold: appended
			// outside the mailbox limit, as the merge at the open does.
			perr = d.obj.Append(env)
		} else {
			perr = d.obj.Post(env)
		}
		if perr != nil {
			o.stats.delivered.Add(^uint64(0))
		}
	})
	switch {
	case err == nil && d.wait != nil:
		return d.wait // nothing posted: the caller waits and admits it again
	case err != nil:
		// Message Follow or the refusal (follow_forward.go); or what that
		// waits for, as a cutover.
		return o.notAdmitted(from, rec, reply, err)
	case oerr != nil:
		if corr != 0 {
			o.sendReply(reply, replyRecord(fam, corr, nil, oerr))
		} else {
			o.drops.add(oerr)
		}
		o.log.Debug("message refused", "object", id, "err", oerr)
	case unbind && holding != nil:
		o.holdBarrier(holding, func() {
			o.inbound(from, fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, corr, rec, reply)
		})
	case barrier && holding != nil:
		stop := o.tellBarrierHeld(from, fam, rec)
		o.holdBarrier(holding, func() {
			stop()
			o.inbound(from, fam, id, gen, nodeRID, nodeGen, ownerGen, leaseGen, corr, rec, reply)
		})
		o.hook().step(id, stepSwitchHeld)
	case barrier:
		o.answerOrigin(from, rec, fam, corr, reply, nil, nil)
		o.noticeFollowed(from, rec)
	case arrived:
		// Into the arrival: one that came through Message Follow gets its
		// command 50 at the open (arrival.arrive).
	case perr != nil:
		if corr != 0 {
			// To the requester, wherever the request came from.
			o.Reply(route.encode(), nil, perr)
		} else {
			o.drops.add(perr)
		}
		o.log.Debug("message not queued", "object", id, "err", perr)
	default:
		o.noticeFollowed(from, rec) // command 50 when it came through Message Follow
	}
	return nil
}

// cutoverWaitMax bounds the messages waiting for cutovers on this node
// (waitCutover); beyond it an arrival is refused with ErrMoving, as one
// that outwaited the cutover used to be.
const cutoverWaitMax = 4096

// cutoverWaitKey is one peer's messages for one object.
type cutoverWaitKey struct {
	peer string // the sending node's RID
	obj  spot.Key
}

// cutoverWaiter is a message waiting for a cutover: admit runs it again
// (inboundOnce: nil once admitted, refused or passed on; the channel to
// wait on while the object is still in a cutover), refuse refuses it.
type cutoverWaiter struct {
	key    cutoverWaitKey
	admit  func() <-chan struct{}
	refuse func(error)
}

// cutoverQueue is the messages of one cutoverWaitKey waiting, in arrival
// order; the first is the one being admitted or waited for. done is
// closed once the queue is empty and gone (what waits behind an ended
// run's messages, ended_run_reads.go).
type cutoverQueue struct {
	waiting []cutoverWaiter
	done    chan struct{}
}

// errCutoverWait is the refusal of a message over cutoverWaitMax: not
// delivered (errRouteStale), so that a requester reads the store and
// tries again within its deadline, an Actor's and a Spot's alike (on the
// wire invalidState for both: wireFailure maps errRouteStale first). With
// ErrMoving alone a Spot's went as conflict/spotMoving, which its
// requester returned as ErrMoving without trying again, while an Actor's
// went as invalidState and was tried again
// (TestRequestRefusedAtAFullCutoverIsTriedAgainForBothKinds).
func errCutoverWait(id string) error {
	return fmt.Errorf("%w: %w: %s is being moved; too many messages wait for cutovers here", ErrMoving, errRouteStale, id)
}

// queueBehindCutover puts w behind the messages of the same peer for the
// same object that wait for its cutover, if there are any: the peer's
// messages to an object must not overtake each other (§7.3). It reports
// whether w was taken (queued, or refused over cutoverWaitMax) and whether
// it was queued.
func (o *objects) queueBehindCutover(w cutoverWaiter) (taken, queued bool) {
	o.mu.Lock()
	q := o.afterCutover[w.key]
	if q == nil {
		o.mu.Unlock()
		return false, false
	}
	if o.cutoverWaiting >= cutoverWaitMax {
		o.mu.Unlock()
		w.refuse(errCutoverWait(w.key.obj.ID))
		return true, false
	}
	q.waiting = append(q.waiting, w)
	o.cutoverWaiting++
	o.mu.Unlock()
	return true, true
}

// waitCutover waits for the cutover of w's object (wait: its cutoverDone)
// off the connection's reader and then admits w again — it then follows
// the object to its new owner behind the relay, or enters the mailbox of
// an object its move put back — and after it, in order, the messages of
// the same peer for the same object queued behind it meanwhile. Waiting on
// the reader, bounded by cutoverWait, dropped a one-way message whose
// sender had been told it was sent when a cutover stalled longer (the
// target slow to take it), and waiting longer there would leave the
// peer's liveness probes unanswered past transport.peer_timeout. A node
// halting refuses with ErrMoving what still waits. It reports whether w
// waits (false: refused over cutoverWaitMax).
func (o *objects) waitCutover(w cutoverWaiter, wait <-chan struct{}) bool {
	o.mu.Lock()
	if o.cutoverWaiting >= cutoverWaitMax {
		o.mu.Unlock()
		w.refuse(errCutoverWait(w.key.obj.ID))
		return false
	}
	o.cutoverWaiting++
	if q := o.afterCutover[w.key]; q != nil {
		// Not expected (one reader per peer): behind the one waiting.
		q.waiting = append(q.waiting, w)
		o.mu.Unlock()
		return true
	}
	if o.afterCutover == nil {
		o.afterCutover = map[cutoverWaitKey]*cutoverQueue{}
	}
	q := &cutoverQueue{waiting: []cutoverWaiter{w}, done: make(chan struct{})}
	o.afterCutover[w.key] = q
	o.cutoverQueues.Add(1)
	o.mu.Unlock()
	o.hook().step(w.key.obj.ID, stepCutoverWait)
	if !o.goWork(func() { o.runCutoverQueue(w.key, q, wait) }) {
		o.runCutoverQueue(w.key, q, wait) // the node halted: done with them at once
	}
	return true
}

// runCutoverQueue admits the messages of q in order once wait is closed,
// waiting again when one meets a later cutover, until q is empty; once the
// node halts, it refuses them (Close waits for it: goWork).
func (o *objects) runCutoverQueue(key cutoverWaitKey, q *cutoverQueue, wait <-chan struct{}) {
	for {
		select {
		case <-wait:
		case <-o.halt.Done():
		}
		wait = nil
		for wait == nil {
			o.mu.Lock()
			if len(q.waiting) == 0 {
				delete(o.afterCutover, key)
				o.cutoverQueues.Add(-1)
				close(q.done)
				o.mu.Unlock()
				return
			}
			w := q.waiting[0]
			o.mu.Unlock()
			// Still first while it runs: a message of the same peer
			// arriving meanwhile queues behind it.
			again := w.admit()
			halted := again != nil && o.halt.Err() != nil
			if again == nil || halted {
				o.mu.Lock()
				q.waiting[0] = cutoverWaiter{}
				q.waiting = q.waiting[1:]
				o.cutoverWaiting--
				o.mu.Unlock()
			}
			if halted {
				// Not delivered, as errCutoverWait.
				w.refuse(fmt.Errorf("%w: %w: %s is being moved; the node is stopping", ErrMoving, errRouteStale, key.obj.ID))
				continue
			}
			wait = again
		}
	}
}

// holdBarrier runs again — admitting a route switch barrier anew — once the move
// holding its object has let go of its ingress hold (hosted.holding): then
// the object is serving here again and it is answered behind the put-back
// hold, or it is in its cutover and it waits for it and is passed on to
// the new owner behind the relay, as any arrival then (§7.3), or the object
// is gone and it is refused. Not on the connection's reader: the sender's
// messages to other objects go on meanwhile, and it sends this object
// nothing more until the answer (route_barrier.go). Answering at once let
// the sender's next messages run at a target that had committed on its
// CutoverGrace before the relay of the earlier ones came (a demo drain:
// "reordered 24"). A node halting answers it at once, as before (inbound
// holds no barrier once o.halt is done). Close waits for the goroutine
// (goWork); once the node halted, again runs on the caller's.
func (o *objects) holdBarrier(holding <-chan struct{}, again func()) {
	if !o.goWork(func() {
		select {
		case <-holding:
		case <-o.halt.Done():
		}
		again()
	}) {
		again()
	}
}

func (o *objects) sendReply(reply func(*router.Record) error, rec *router.Record) {
	o.sendReplyOr(reply, rec, nil)
}

// sendReplyOr is sendReply that hands the answer to gone, when not nil,
// if the connection reply sends on is gone (transport.ErrPeerDown: closed,
// or superseded by the requester's new connection): nothing was sent on it.
func (o *objects) sendReplyOr(reply func(*router.Record) error, rec *router.Record, gone func(*router.Record)) {
	err := reply(rec)
	if failed, ok := unsendableAnswer(rec, err); ok {
		if ok, suppressed := o.replyNotSentLog.allow(); ok {
			o.log.Warn("reply too large to send; the request is answered failed (ErrRequestFailed)", "err", err, "suppressed", suppressed)
		}
		rec = failed
		err = reply(failed)
	}
	if gone != nil && errors.Is(err, transport.ErrPeerDown) {
		gone(rec)
		return
	}
	if err != nil {
		// A requester that went away with many requests queued here
		// fails each of their replies: budgeted (record_log.go).
		if ok, suppressed := o.replyNotSentLog.allow(); ok {
			o.log.Warn("reply not sent", "err", err, "suppressed", suppressed)
		}
	}
}

// unsendableAnswer is the failure that answers a request in place of its
// ok reply rec when the transport refused to send rec at all (err: a
// payload over its frame limit, docs/TRANSPORT.md): the handler ran, and
// its answer cannot be carried, so the request failed (ErrRequestFailed).
// Dropped with a "reply not sent" warning, the requester waited out its
// deadline for an answer that would never come and read it as a target
// that did not answer (TestReplyOverTheFrameLimitFailsTheRequestAtOnce).
// false when err is anything else.
func unsendableAnswer(rec *router.Record, err error) (*router.Record, bool) {
	rep, ok := rec.Body.(*router.Reply)
	if !errors.Is(err, transport.ErrInvalidRecord) || !ok || rep.Result != router.ResultOK {
		return nil, false
	}
	var size int
	if rec.Payload != nil {
		size = len(rec.Payload.Data)
	}
	return replyRecord(familyActor, rep.Correlation, nil,
		fmt.Errorf("%w: its reply of %d bytes cannot be sent: %w", ErrRequestFailed, size, err)), true
}
