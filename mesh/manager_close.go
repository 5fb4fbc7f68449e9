package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Destroy and Close (spec §7.2) act only on the exact generation the caller
// passes: false when no record exists, ErrStaleGeneration when another
// generation of the id exists, ErrMoving when the object is moving. The
// owner does the work: it stops admitting messages to the object, deletes
// the authority record together with its capacity (one batch verifying its
// own lease, §6.1 Delete), then closes the instance (queued requests are
// answered with a closed failure). A remote owner is asked with command 48
// (User Spot) or, for an Actor, with the project's destroy control request
// (docs/OBJECTS.md: the service wire has no Actor destroy command).

// Destroy destroys the Actor generation ref names. It reports true when
// this call ended it, and false with a nil error when no record exists
// under the id (already destroyed, or never created): calling it again is
// safe. Another generation under the id is ErrStaleGeneration, a move in
// progress ErrMoving.
func (m *Manager) Destroy(ctx context.Context, ref ActorRef) (bool, error) {
	return m.o.end(ctx, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
}

// Close closes the User Spot generation ref names; the result is read as
// Destroy's (true: this call closed it; false, nil: no record).
func (m *Manager) Close(ctx context.Context, ref SpotRef) (bool, error) {
	return m.o.end(ctx, record.ObjectUserSpot, ref.SpotID, ref.ObjectGeneration)
}

// controlKey/controlDestroy are the metadata entry that turns a command 25
// actorRequest into the owner-side Destroy of its fenced Actor.
const (
	controlKey     = "meshnode.control"
	controlDestroy = "destroy"
)

// Destroy control answers (ok payload).
const (
	destroyClosed   = "closed"
	destroyMissing  = "missing"
	destroyStale    = "stale"
	destroyMoving   = "moving"
	destroyNotOwner = "notOwner"
)

func (o *objects) end(ctx context.Context, kind record.ObjectKind, id string, gen uint64) (bool, error) {
	if _, err := resolveMesh(o.role(), o.n.cfg.Node.MeshName, nil); err != nil {
		return false, err
	}
	if err := record.ValidateObjectID(id); err != nil {
		return false, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
	}
	if !record.Generation(gen).Valid() {
		return false, fmt.Errorf("%w: ObjectGeneration %d", ErrInvalidOperation, gen)
	}
	ctx, done, err := o.call(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCreateTimeout)
		defer cancel()
	}
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		closed, err := o.endOnce(ctx, kind, id, gen)
		if err == nil || !errors.Is(err, errRouteStale) {
			return closed, classify(ctx, err, "end "+id)
		}
		last = err // the owner changed under us: read the record again once
	}
	return false, classify(ctx, last, "end "+id)
}

func (o *objects) endOnce(ctx context.Context, kind record.ObjectKind, id string, gen uint64) (bool, error) {
	return o.endOnceAt(ctx, kind, id, gen, false)
}

// endOnceAt is endOnce; readopted is set on its second look, after it
// re-adopted the object (below).
func (o *objects) endOnceAt(ctx context.Context, kind record.ObjectKind, id string, gen uint64, readopted bool) (bool, error) {
	row, storeNow, err := o.readAuthorityAt(ctx, kind, id)
	if err != nil {
		return false, err
	}
	if done, closed, err := checkEndRow(row, kind, id, gen); done {
		return closed, err
	}
	a := row.Record
	self, lg := o.n.Owner()
	node := authority.NodeOf(a)
	if a.OwnerID == self && uint64(a.OwnerLeaseGeneration) == lg && bytes.Equal(node.RoutingID, o.n.run.rid) &&
		node.LifecycleGeneration == o.n.run.lifecycleGeneration {
		return o.closeLocal(ctx, kind, id, gen, endFence{})
	}
	if key := (spot.Key{Spot: kind != record.ObjectActor, ID: id}); !readopted && o.ownRunHosts(a) {
		// This run's own object under a lease generation lost since (a
		// close held across the loss reopened it; the loss's re-adoption
		// passed it over while it was closing): re-adopted first, then
		// closed here. Taken for a dead owner's, it was reclaimed while its
		// instance ran on — Destroy said closed, and the Id could be
		// created anew elsewhere: two owners (review, 2026-12-07).
		if !o.readoptHeldOnce(ctx, key, uint64(a.OwnerLeaseGeneration)) {
			return false, ctxErr(ctx, "close of %s: re-adopting it under the new owner lease generation", id)
		}
		return o.endOnceAt(ctx, kind, id, gen, true)
	}
	peer, ok := o.n.tr.Peer(transport.RID(node.RoutingID))
	if !ok || peer.LifecycleGeneration != node.LifecycleGeneration {
		// An owner that is gone for good cannot close it: the caller's
		// generation is removed here, without the grace (dead_owner.go).
		if reclaimed, err := o.reclaimDead(ctx, row, false, false, "close"); err != nil || reclaimed {
			return reclaimed, err
		}
		return false, fmt.Errorf("%w: owner node %s of %s is not reachable", ErrUnavailable, node, id)
	}
	if kind == record.ObjectActor {
		return o.remoteDestroy(ctx, id, gen, a)
	}
	dl, _ := ctx.Deadline()
	rec := router.NewRecord(&router.UserSpotClose{
		Operation: opIDOf(NewOperationID()), SourceNodeRID: o.n.run.rid, SourceNodeGeneration: o.n.run.lifecycleGeneration,
		Target: router.UserSpotCloseFence{Spot: router.SpotRef{SpotID: id, ObjectGeneration: gen},
			TargetNodeRID: node.RoutingID, TargetNodeGeneration: node.LifecycleGeneration,
			ExpectedAuthorityOwnerGeneration: uint64(a.AuthorityOwnerGeneration), ExpectedStoreVersion: row.Version},
		DeadlineUnixMs: uint64(storeNow.Add(time.Until(dl)).UnixMilli()),
	}, nil, nil)
	resp, err := o.n.tr.Request(ctx, node.RoutingID, rec)
	if err != nil {
		if errorsIsAny(err, errNotSent...) {
			return false, wrapErr(ErrUnavailable, err, "close %s", id)
		}
		// The answer is lost: the close may have happened. §7.2: the result
		// comes only from command 20, so report Unavailable; the caller may
		// Close again (false once the record is gone).
		return false, wrapErr(ErrUnavailable, err, "close %s: no answer from the owner", id)
	}
	rep, ok := resp.Body.(*router.Reply)
	if !ok {
		return false, fmt.Errorf("%w: close answered with %s", ErrUnavailable, resp.Command)
	}
	if rep.Result != router.ResultOK {
		return false, replyError(familySpot, rep, "close")
	}
	if err := resp.ResolveReplyTail(router.OpUserSpotClose); err != nil {
		return false, fmt.Errorf("%w: close answer: %w", ErrUnavailable, err)
	}
	t, ok := rep.Tail.(*router.UserSpotCloseTail)
	if !ok {
		return false, fmt.Errorf("%w: close answer without a close tail", ErrUnavailable)
	}
	return t.Closed, nil
}

// checkEndRow applies §7.2 to the record read: done with (closed, err), or
// not done (the generation is Ready: go on).
func checkEndRow(row authority.AuthorityRow, kind record.ObjectKind, id string, gen uint64) (bool, bool, error) {
	if !row.Found {
		return true, false, nil
	}
	a := row.Record
	switch {
	case a.Allocation.ObjectKind != kind:
		return true, false, fmt.Errorf("%w: %q is %s", ErrTypeMismatch, id, aKind(a.Allocation.ObjectKind))
	case uint64(a.ObjectGeneration) != gen:
		return true, false, fmt.Errorf("%w: %s holds ObjectGeneration %d, the ref has %d", ErrStaleGeneration, id, a.ObjectGeneration, gen)
	case a.Allocation.State != record.AllocationActive:
		return true, false, passing(fmt.Errorf("%w: %s generation %d is still being created", ErrInvalidOperation, id, gen))
	}
	return false, false, nil
}

// passingState marks an error that reports a state the object leaves by
// itself — its creation is still being recorded, it is closing, another
// move of it is under way: a host command tries such an object again
// until it can be moved or is no longer here, instead of reporting it
// Failed (transientMove). The error's own kind (errors.Is) is kept.
type passingState struct{ err error }

func (e *passingState) Error() string { return e.err.Error() }
func (e *passingState) Unwrap() error { return e.err }

func passing(err error) error { return &passingState{err: err} }

// endFence is what a remote caller fixed when it read the record (§7.2:
// "only changes to Closing if the current record ... match"); a zero field
// is not fixed (a local call fixes nothing but the generation).
type endFence struct {
	ownerGen uint64    // AuthorityOwnerGeneration
	version  string    // StoreVersion
	deadline time.Time // the request's deadline, on the store clock
}

// closeLocal is the owner's Destroy/Close of (kind, id, gen) under the
// caller's fence f.
func (o *objects) closeLocal(ctx context.Context, kind record.ObjectKind, id string, gen uint64, f endFence) (bool, error) {
	for {
		closed, err := o.closeOnce(ctx, kind, id, gen, f)
		var w *closeUnderWay
		if !errors.As(err, &w) {
			return closed, err
		}
		// Another Destroy or Close of the same object is under way: its
		// outcome decides this one (the record is gone: not closed by this
		// call; it failed and reopened the object: close it here). Before,
		// this call failed Unavailable "already closing" — found in a
		// try-out with two processes destroying a shared id space: ~1,850
		// of 35,000 destroys per process.
		select {
		case <-w.done:
		case <-ctx.Done():
			return false, ctxErr(ctx, "close of %s: waiting for the close under way", id)
		}
	}
}

// closeUnderWay reports another close of the object in progress here;
// done is closed when it ends.
type closeUnderWay struct{ done <-chan struct{} }

func (*closeUnderWay) Error() string { return "already closing" }

// closeOnce is closeLocal's body: a close under way is *closeUnderWay.
func (o *objects) closeOnce(ctx context.Context, kind record.ObjectKind, id string, gen uint64, f endFence) (bool, error) {
	row, storeNow, err := o.readAuthorityAt(ctx, kind, id)
	if err != nil {
		return false, err
	}
	if !f.deadline.IsZero() && !storeNow.Before(f.deadline) {
		// §7.2: the deadline is one of the fixed fields; an expired
		// request changes nothing.
		return false, deadlineErr("close of %s: the deadline passed by store time", id)
	}
	if done, closed, err := checkEndRow(row, kind, id, gen); done {
		return closed, err
	}
	a := row.Record
	self, lg := o.n.Owner()
	owner := authority.Owner{ID: self, LeaseGeneration: lg}
	node := authority.NodeOf(a)
	switch {
	case authority.OwnerOf(a) != owner || !bytes.Equal(node.RoutingID, o.n.run.rid) || node.LifecycleGeneration != o.n.run.lifecycleGeneration:
		return false, fmt.Errorf("%w: %s is owned by %s/%d", errRouteStale, id, a.OwnerID, a.OwnerLeaseGeneration)
	case f.ownerGen != 0 && uint64(a.AuthorityOwnerGeneration) != f.ownerGen, f.version != "" && row.Version != f.version:
		return false, fmt.Errorf("%w: %s changed since the caller read it", errRouteStale, id)
	}
	key := spot.Key{Spot: kind != record.ObjectActor, ID: id}
	o.mu.Lock()
	h, hostedHere := o.hosted[key]
	if hostedHere && h.objectGeneration != gen {
		hostedHere = false // an older instance; the record is authoritative
	}
	if hostedHere {
		switch h.state {
		case hostMoving, hostCutover, hostIncoming:
			// Every stage of a move: the source holding or relaying, the
			// target whose owner CAS applied before it opened (§7.2).
			o.mu.Unlock()
			return false, fmt.Errorf("%w: %s", ErrMoving, id)
		case hostClosing:
			done := h.closed
			o.mu.Unlock()
			return false, &closeUnderWay{done: done}
		}
		h.state = hostClosing // the fence now refuses new messages
		h.closed = make(chan struct{})
	}
	o.mu.Unlock()
	reopen := func() {
		if hostedHere {
			o.mu.Lock()
			h.state = hostServing
			close(h.closed)
			h.closed = nil
			o.mu.Unlock()
		}
	}
	if err := o.n.lease.Gate().Admit(); err != nil {
		reopen()
		return false, wrapErr(ErrUnavailable, err, "owner lease")
	}
	// Once admitted, the Delete runs on its own bounded context, not the
	// caller's: a Delete cut off mid-write would leave its outcome unknown,
	// and the instance must end exactly when the record does.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeWriteTimeout)
	_, err = o.exec.Delete(dctx, authority.DeleteRequest{Object: authority.Object{ID: id, Kind: kind},
		ObjectGeneration: gen, Owner: owner, IfVersion: row.Version})
	cancel()
	end := func() {
		if hostedHere {
			o.mu.Lock()
			if o.hosted[key] == h {
				delete(o.hosted, key)
			}
			done := h.closed
			h.closed = nil
			o.mu.Unlock()
			// Close waits for a running turn, but not for the caller's own:
			// an object ending itself from its turn with t.Context()
			// (CloseFrom; with another context it waits for itself,
			// docs/OBJECTS.md §8). Queued requests are answered with a
			// closed failure.
			h.obj.CloseFrom(ctx)
			close(done) // after the instance ended: a waiting close finds it gone
		}
		o.cache.Drop(msgTarget{fam: famOf(kind), id: id}.cacheKey())
	}
	closed := err == nil
	switch {
	case err == nil:
	case errors.Is(err, authority.ErrNotFound):
		// Deleted meanwhile by someone else; the instance goes too.
	case errors.Is(err, authority.ErrOutcomeUnknown):
		// The instance keeps refusing messages until its record says
		// whether the Delete applied (settle.go).
		return o.settleEnd(ctx, kind, id, gen, err, end, reopen)
	default:
		reopen()
		if _, now := o.n.Owner(); hostedHere && now != lg {
			// The owner lease was lost and taken again while the Delete
			// waited: the loss's re-adoption passed the object over (it
			// was closing), so its record names lg, a generation gone —
			// re-adopted now, as a move that did not move it is, or others
			// take its owner for dead and reclaim it while it runs here
			// (review, 2026-12-07). A local Destroy's retry then closes it
			// (endOnceAt); a remote one's close finds it this node's again.
			o.readoptAfterHold(ctx, key, lg)
		}
		if errors.Is(err, authority.ErrConflict) && !errors.Is(err, authority.ErrStaleGeneration) {
			return false, fmt.Errorf("%w: %w", errRouteStale, err)
		}
		return false, err
	}
	end()
	o.log.Debug("object ended", "object", id, "kind", string(kind), "object_gen", gen, "deleted", closed)
	return closed, nil
}

func famOf(kind record.ObjectKind) opFamily {
	if kind == record.ObjectActor {
		return familyActor
	}
	return familySpot
}

func opIDOf(id [16]byte) router.OperationID {
	return router.OperationID{High: beUint64(id[:8]), Low: beUint64(id[8:])}
}

// inboundClose handles command 48 on the owner. Every field the 48 fixes
// is checked (§7.2): the source run is the sending peer, the target is this
// run, and — by closeLocal, on the record read — the SpotRef's generation,
// AuthorityOwnerGeneration, StoreVersion and the deadline (store clock);
// the OperationId identifies the request for duplicate deliveries
// (acceptInbound: a copy gets the same answer, the Spot is closed once).
// Each delivery is answered by exactly one command 20 (closed true/false,
// or the failure).
func (o *objects) inboundClose(ctx context.Context, from transport.PeerInfo, b *router.UserSpotClose, reply func(*router.Record) error) {
	fail := func(err error) { o.sendReply(reply, replyRecord(familySpot, b.Correlation, nil, err)) }
	if err := sourceIsPeer(from, b.SourceNodeRID, b.SourceNodeGeneration); err != nil {
		fail(err)
		return
	}
	f := b.Target
	if !bytes.Equal(f.TargetNodeRID, o.n.run.rid) || f.TargetNodeGeneration != o.n.run.lifecycleGeneration {
		fail(fmt.Errorf("%w: addressed to node run %x/%d", errRouteStale, f.TargetNodeRID, f.TargetNodeGeneration))
		return
	}
	if f.ExpectedAuthorityOwnerGeneration == 0 || f.ExpectedStoreVersion == "" || b.DeadlineUnixMs == 0 {
		// The codec refuses these on the wire; a zero would turn the fence
		// check off.
		fail(fmt.Errorf("%w: close of %s without its full fence", ErrInvalidOperation, f.Spot.SpotID))
		return
	}
	deadline := wireDeadline(b.DeadlineUnixMs)
	if err := o.begin(); err != nil {
		fail(wrapErr(ErrUnavailable, err, "node closing"))
		return
	}
	order := *b
	order.Correlation = 0
	req, first, err := o.acceptInbound(inboundKey{cmd: router.CmdUserSpotClose, source: string(b.SourceNodeRID),
		sourceGen: b.SourceNodeGeneration, op: b.Operation}, &order, deadline)
	if err != nil {
		o.work.Done()
		fail(err)
		return
	}
	go func() {
		defer o.work.Done()
		if first {
			closed, err := o.closeOrder(ctx, f, deadline)
			o.finishInbound(req, func(corr uint64) *router.Record {
				if err != nil {
					return replyRecord(familySpot, corr, nil, classifyTarget(err))
				}
				return router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultOK,
					Tail: &router.UserSpotCloseTail{Closed: closed}}, nil, nil)
			})
		}
		<-req.done
		o.sendReply(reply, req.answer(b.Correlation))
	}()
}

// closeOrder runs a 48 within its deadline: the local clock bounds the
// waiting (an order already past it is refused without a store access),
// the store clock decides (closeLocal).
func (o *objects) closeOrder(ctx context.Context, f router.UserSpotCloseFence, deadline time.Time) (bool, error) {
	local := time.Until(deadline)
	if local <= 0 {
		return false, deadlineErr("close of %s: the deadline passed", f.Spot.SpotID)
	}
	cctx, cancel := context.WithTimeout(ctx, local)
	defer cancel()
	defer context.AfterFunc(o.halt, cancel)() // the node stops: do not wait for the deadline
	return o.closeLocal(cctx, record.ObjectUserSpot, f.Spot.SpotID, f.Spot.ObjectGeneration,
		endFence{ownerGen: f.ExpectedAuthorityOwnerGeneration, version: f.ExpectedStoreVersion, deadline: deadline})
}

// classifyTarget keeps the fence outcome of a target-side error and maps
// the rest into the vocabulary for the wire.
func classifyTarget(err error) error {
	if errors.Is(err, errRouteStale) {
		return err
	}
	return classify(context.Background(), err, "owner")
}

// remoteDestroy asks the Actor's owner to destroy it: a command 25
// actorRequest carrying the route fence and the metadata entry
// meshnode.control=destroy; the owner answers ok with a status word.
func (o *objects) remoteDestroy(ctx context.Context, id string, gen uint64, a record.Authority) (bool, error) {
	meta, err := router.EncodeMetadata([]router.MetadataEntry{{Key: controlKey, Value: controlDestroy}})
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	fence := router.ActorRouteFence{Actor: router.ActorRef{ActorID: id, ObjectGeneration: gen},
		TargetNodeRID: a.Allocation.Descriptor.RoutingID, TargetNodeGeneration: uint64(a.Allocation.DescriptorLifecycleGeneration),
		ExpectedAuthorityOwnerGeneration: uint64(a.AuthorityOwnerGeneration), ExpectedOwnerLeaseGeneration: uint64(a.OwnerLeaseGeneration)}
	rec := router.NewRecord(&router.ActorRequest{Operation: opIDOf(NewOperationID()), TargetActor: fence}, meta,
		&router.Payload{PacketName: PacketName, ContentType: ContentType})
	resp, err := o.n.tr.Request(ctx, fence.TargetNodeRID, rec)
	if err != nil {
		return false, wrapErr(ErrUnavailable, err, "destroy %s", id)
	}
	rep, ok := resp.Body.(*router.Reply)
	if !ok {
		return false, fmt.Errorf("%w: destroy answered with %s", ErrUnavailable, resp.Command)
	}
	if rep.Result != router.ResultOK {
		return false, replyError(familyActor, rep, "destroy")
	}
	if err := resp.ResolveReplyTail(router.OpActorRequest); err != nil || resp.Payload == nil {
		return false, fmt.Errorf("%w: destroy answer: %v", ErrUnavailable, err)
	}
	switch string(resp.Payload.Data) {
	case destroyClosed:
		return true, nil
	case destroyMissing:
		return false, nil
	case destroyStale:
		return false, fmt.Errorf("%w: %s generation %d", ErrStaleGeneration, id, gen)
	case destroyMoving:
		return false, fmt.Errorf("%w: %s", ErrMoving, id)
	case destroyNotOwner:
		return false, fmt.Errorf("%w: the addressed node no longer owns %s", errRouteStale, id)
	}
	return false, fmt.Errorf("%w: destroy answer %q", ErrUnavailable, resp.Payload.Data)
}

func isDestroyControl(rec *router.Record) bool {
	return controlOf(rec) == controlDestroy
}

// inboundDestroy is the owner side of remoteDestroy.
func (o *objects) inboundDestroy(from transport.PeerInfo, f router.ActorRouteFence, corr uint64, reply func(*router.Record) error) {
	answer := func(status string) {
		o.sendReply(reply, router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultOK}, nil,
			&router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte(status)}))
	}
	if _, lg := o.n.Owner(); !bytes.Equal(f.TargetNodeRID, o.n.run.rid) || f.TargetNodeGeneration != o.n.run.lifecycleGeneration ||
		f.ExpectedOwnerLeaseGeneration != lg {
		answer(destroyNotOwner)
		return
	}
	if err := o.begin(); err != nil {
		o.sendReply(reply, replyRecord(familyActor, corr, nil, wrapErr(ErrUnavailable, err, "node closing")))
		return
	}
	go func() {
		defer o.work.Done()
		ctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		closed, err := o.closeLocal(ctx, record.ObjectActor, f.Actor.ActorID, f.Actor.ObjectGeneration,
			endFence{ownerGen: f.ExpectedAuthorityOwnerGeneration})
		switch {
		case err == nil && closed:
			answer(destroyClosed)
		case err == nil:
			answer(destroyMissing)
		case errors.Is(err, ErrStaleGeneration):
			answer(destroyStale)
		case errors.Is(err, ErrMoving):
			answer(destroyMoving)
		case errors.Is(err, errRouteStale):
			answer(destroyNotOwner)
		default:
			o.sendReply(reply, replyRecord(familyActor, corr, nil, classifyTarget(err)))
		}
	}()
}
