package mesh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Creation of Actors and User Spots (spec §7), target side: the node the
// source reserved runs the factory and records the result. Local creation
// (the target is the source itself) runs the same code without the wire.

// createOrder is what a target is asked to create: the object, the
// operation, and the reservation the source made (every field the target
// checks before running the factory).
type createOrder struct {
	kind          record.ObjectKind
	id            string
	stableType    string
	op            authority.OperationRef
	reservationID string
	version       string // StoreVersion of the Reserved record
	objGen        uint64
	ownerGen      uint64
	deadline      time.Time // store clock
	sourceRID     []byte
	sourceGen     uint64
	targetRID     []byte
	targetGen     uint64
	targetOwner   authority.Owner
	delta         uint32 // pendingCapacityDelta: slots of the bundle
	meshName      string
}

func (ord createOrder) mesh() string { return ord.meshName }

// wireDeadline is a command's deadlineUnixMs (store clock) as a time.
func wireDeadline(ms uint64) time.Time { return time.UnixMilli(int64(min(ms, uint64(1<<62)))) }

func createOrderFromWire(kind record.ObjectKind, id, stableType string, op router.OperationID, srcRID []byte, srcGen uint64,
	f router.ObjectReservationFence, deadlineMs uint64) createOrder {
	ref := authority.OperationRef{SourceRoutingID: append([]byte(nil), srcRID...), SourceRunGeneration: srcGen}
	putUint64(ref.OperationID[:8], op.High)
	putUint64(ref.OperationID[8:], op.Low)
	return createOrder{kind: kind, id: id, stableType: stableType, op: ref, reservationID: f.ReservationID,
		version: f.ExpectedStoreVersion, objGen: f.ObjectGeneration, ownerGen: f.AuthorityOwnerGeneration,
		deadline: wireDeadline(deadlineMs), sourceRID: ref.SourceRoutingID, sourceGen: srcGen,
		targetRID: append([]byte(nil), f.TargetNodeRID...), targetGen: f.TargetNodeGeneration,
		targetOwner: authority.Owner{ID: f.TargetOwnerID, LeaseGeneration: f.TargetOwnerLeaseGeneration},
		delta:       f.PendingCapacityDelta}
}

// targetOutcome is a target's answer: a creation result (Created, Existing,
// Rejected), a typed Failed (err is a *CreateFailedError), or a framework
// failure before the callback (framework; no final application result).
type targetOutcome struct {
	result    router.CreateResult
	gen       uint64
	ownerGen  uint64
	mesh      string
	rid       []byte
	reason    string
	err       error
	framework bool
	// pending: no answer arrived and the store shows the reservation still
	// open — the target may yet commit or abort it, so the source must not.
	pending bool
}

// storeWriteTimeout bounds a store change an owner makes once the gate
// admitted it (the target's Commit/Abort, the Delete of Destroy/Close): it
// must be able to record the result (or return the space) even when the
// call's deadline is what ended the wait, so that its outcome is known.
const storeWriteTimeout = 5 * time.Second

// inboundCreate handles command 47/49: the work runs on its own goroutine
// (store I/O and the factory must not hold the peer's connection), and each
// delivery is answered by exactly one command 20 on the ROUTER. A duplicate
// delivery of the same request does not run the factory again
// (acceptInbound).
func (o *objects) inboundCreate(ctx context.Context, from transport.PeerInfo, corr uint64, reply func(*router.Record) error, ord createOrder) {
	ord.meshName = o.n.cfg.Node.MeshName
	fam := famOf(ord.kind)
	answer := func(rec *router.Record) {
		if h := o.hook().dropCreateReply; h != nil && h(ord.id) {
			o.log.Warn("test hook: creation answer dropped", "object", ord.id)
			return
		}
		o.sendReply(reply, rec)
	}
	fail := func(err error) { answer(createReply(fam, corr, ord, targetOutcome{framework: true, err: err})) }
	// Checked before the request is looked up: the identity (source run,
	// OperationId) is the sender's own only when the sender is that source.
	if err := sourceIsPeer(from, ord.sourceRID, ord.sourceGen); err != nil {
		fail(err)
		return
	}
	if err := o.begin(); err != nil {
		fail(wrapErr(ErrUnavailable, err, "node closing"))
		return
	}
	if o.hostMove.Load() {
		o.work.Done()
		fail(fmt.Errorf("%w: node is relocating its objects away (host relocation): no new creations", ErrUnavailable))
		return
	}
	cmd := router.CmdUserSpotCreate
	if ord.kind == record.ObjectActor {
		cmd = router.CmdActorCreate
	}
	req, first, err := o.acceptInbound(inboundKey{cmd: cmd, source: string(ord.sourceRID), sourceGen: ord.sourceGen,
		op: opIDOf(ord.op.OperationID)}, ord, ord.deadline)
	if err != nil {
		o.work.Done()
		fail(err)
		return
	}
	o.gos.Go(func() {
		defer o.work.Done()
		if first {
			local := time.Until(ord.deadline) // the store clock is the shared one; this only bounds local waiting
			if local <= 0 {
				local = time.Millisecond
			}
			cctx, cancel := context.WithTimeout(ctx, local)
			defer cancel()
			defer context.AfterFunc(o.halt, cancel)() // the node stops: do not wait for the deadline
			out := o.createOnTarget(cctx, ord, &from)
			o.finishInbound(req, newCreateAnswer(fam, ord, out).record)
		}
		<-req.done
		answer(req.answer(corr))
	})
}

// sourceIsPeer checks that the source run an order names is the peer that
// sent it (the transport admitted that peer at that run generation).
func sourceIsPeer(from transport.PeerInfo, rid []byte, gen uint64) error {
	if !bytes.Equal(from.RID, rid) || from.LifecycleGeneration != gen {
		return fmt.Errorf("%w: source run %x/%d is not the sending peer %s/%d", errRouteStale, rid, gen,
			from.RID, from.LifecycleGeneration)
	}
	return nil
}

// Duplicate deliveries of 47/48/49 (§7, §7.2, §12: command 20's result is
// returned exactly once). One request is identified by the command, the
// source Node RID, the source host run generation and the OperationId; the
// sending peer has been checked to be that source run, so only it can use
// the identity. The first delivery does the work (factory run, close);
// every other delivery of the same request waits for that work and is
// answered with the same result under its own correlation — each delivery
// gets exactly one command 20, and the work happens once. The answer is
// kept until the request's deadline (local clock, at most
// inboundAnswerRetention); a copy arriving later is judged as a new order
// and finds the reservation or record it names already decided, so it is
// refused and changes nothing. A different order under the same identity
// is ErrInvalidOperation and changes nothing.

// inboundAnswerRetention bounds how long a finished request's answer is
// kept for duplicate deliveries.
const inboundAnswerRetention = 5 * time.Minute

type inboundKey struct {
	cmd       router.Command
	source    string // source Node RID bytes
	sourceGen uint64
	op        router.OperationID
}

// inboundRequest is one request this run accepted.
type inboundRequest struct {
	key    inboundKey
	order  any           // the order as first received (correlation aside)
	keep   time.Duration // how long the answer is kept once known
	done   chan struct{} // closed once answer is set
	answer func(corr uint64) *router.Record
	forget *time.Timer // drops it once keep has passed (nil until answered)
}

// acceptInbound registers the request key names, or finds it: first is
// true for the delivery that must do the work and then call finishInbound.
func (o *objects) acceptInbound(key inboundKey, order any, deadline time.Time) (req *inboundRequest, first bool, err error) {
	if key.op == (router.OperationID{}) {
		return nil, false, fmt.Errorf("%w: OperationId is zero", ErrInvalidOperation)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if req, ok := o.orders[key]; ok {
		if !reflect.DeepEqual(req.order, order) {
			return nil, false, fmt.Errorf("%w: another %s already used this OperationId", ErrInvalidOperation, key.cmd)
		}
		return req, false, nil
	}
	if o.orders == nil {
		o.orders = map[inboundKey]*inboundRequest{}
	}
	req = &inboundRequest{key: key, order: order, done: make(chan struct{}),
		keep: min(max(time.Until(deadline), 0), inboundAnswerRetention)}
	o.orders[key] = req
	return req, true, nil
}

// finishInbound records the answer of a request, releases the deliveries
// waiting for it, and forgets it once its deadline has passed (later
// copies are then refused on their own: deadline, decided record).
func (o *objects) finishInbound(req *inboundRequest, answer func(corr uint64) *router.Record) {
	req.answer = answer
	close(req.done)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return // stop forgets every order (forgetOrders)
	}
	req.forget = time.AfterFunc(req.keep, func() {
		o.mu.Lock()
		if o.orders[req.key] == req {
			delete(o.orders, req.key)
		}
		o.mu.Unlock()
	})
}

// forgetOrders stops the timers that keep answered orders: once the node
// stops nobody asks again, and a pending timer would keep the whole closed
// node reachable until the order's deadline (up to 5 minutes; seen in the
// heap benchmark). The caller holds o.mu.
func (o *objects) forgetOrders() {
	for _, req := range o.orders {
		if req.forget != nil {
			req.forget.Stop()
		}
	}
	o.orders = nil
}

// createReply builds the command 20 answering 47/49 (§7: Existing |
// Created | Rejected with the exact ref, or a failure).
func createReply(fam opFamily, corr uint64, ord createOrder, out targetOutcome) *router.Record {
	return newCreateAnswer(fam, ord, out).record(corr)
}

// createAnswer is what command 20 needs of an order and its outcome. A
// target keeps each answer for duplicate deliveries until the order's
// deadline (finishInbound: 30 s by default, for every creation), so it
// keeps only this, not the whole order and outcome.
type createAnswer struct {
	fam    opFamily
	kind   record.ObjectKind
	id     string
	objGen uint64 // the order's, for a User Spot
	result router.CreateResult
	gen    uint64 // the outcome's, for an Actor
	err    error
}

func newCreateAnswer(fam opFamily, ord createOrder, out targetOutcome) createAnswer {
	return createAnswer{fam: fam, kind: ord.kind, id: ord.id, objGen: ord.objGen, result: out.result, gen: out.gen, err: out.err}
}

// record is the command 20 of the answer under the correlation corr.
func (a createAnswer) record(corr uint64) *router.Record {
	if a.err != nil || a.result == 0 {
		err := a.err
		if err == nil {
			err = fmt.Errorf("%w: no result", ErrUnavailable)
		}
		res, code := wireFailure(a.fam, err)
		return router.NewRecord(&router.Reply{Correlation: corr, Result: res, FailureCode: code}, nil, nil)
	}
	var tail router.ReplyTail
	if a.kind == record.ObjectActor {
		t := &router.ActorCreateTail{Result: a.result}
		if a.result != router.CreateRejected {
			t.Actor = &router.ActorRef{ActorID: a.id, ObjectGeneration: a.gen}
		}
		tail = t
	} else {
		tail = &router.UserSpotCreateTail{Result: a.result, Spot: router.SpotRef{SpotID: a.id, ObjectGeneration: a.objGen}}
	}
	return router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultOK, Tail: tail}, nil, nil)
}

// createOnTarget checks every fence of the order (source and target run,
// id, type, reservation, OperationId, StoreVersion), runs the factory and
// records the outcome together with the final result (§7 callback table):
//
//	approved  → Commit (Ready, reserved → active slots) + Created
//	declined  → Abort (record deleted, slots returned) + Rejected
//	exception → Abort + typed Failed
//	framework failure before the callback → Abort without a final result
//	  (when the reservation is verified ours; otherwise nothing is changed
//	  and the source returns it).
//
// Every store change it makes asks the admission gate first (§5: no new
// store change with expired owner eligibility), the Abort of a framework
// failure included.
func (o *objects) createOnTarget(ctx context.Context, ord createOrder, from *transport.PeerInfo) targetOutcome {
	n := o.n
	fw := func(err error) targetOutcome { return targetOutcome{framework: true, err: err} }
	if ord.meshName == "" {
		ord.meshName = n.cfg.Node.MeshName
	}
	if from != nil {
		if err := sourceIsPeer(*from, ord.sourceRID, ord.sourceGen); err != nil {
			return fw(err)
		}
	}
	ownerID, leaseGen := n.Owner()
	self := authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}
	if !bytes.Equal(ord.targetRID, n.run.rid) || ord.targetGen != n.run.lifecycleGeneration || ord.targetOwner != self {
		return fw(fmt.Errorf("%w: the reservation names target %x/%d owner %s/%d, this is %x/%d owner %s/%d",
			errRouteStale, ord.targetRID, ord.targetGen, ord.targetOwner.ID, ord.targetOwner.LeaseGeneration,
			n.run.rid, n.run.lifecycleGeneration, self.ID, self.LeaseGeneration))
	}
	if st := n.State(); st != record.StateServing {
		return fw(fmt.Errorf("%w: node is %s, not serving", ErrUnavailable, st))
	}
	// Counted under o.mu with the host command's check: a host command
	// that has begun either sees this creation and keeps its list open
	// until it lands (relist), or this creation sees the command and is
	// refused — never an object that lands here after the list and is
	// left behind (a drain would remove it with its state).
	landed, ok := o.arriving()
	if !ok {
		return fw(fmt.Errorf("%w: node is relocating its objects away (host relocation): no new creations", ErrUnavailable))
	}
	defer landed()
	if ord.delta != bundleSlots(ord.kind, ord.stableType) {
		return fw(fmt.Errorf("%w: pendingCapacityDelta %d does not match the %s bundle", ErrInvalidOperation, ord.delta, ord.kind))
	}
	gate := n.lease.Gate()
	if err := gate.Admit(); err != nil {
		return fw(wrapErr(ErrUnavailable, err, "owner lease"))
	}
	row, storeNow, content, err := o.readAuthorityAndRequest(ctx, ord)
	if err != nil {
		return fw(classify(ctx, err, "target read"))
	}
	key := spot.Key{Spot: ord.kind != record.ObjectActor, ID: ord.id}
	obj := authority.Object{ID: ord.id, Kind: ord.kind, StableType: ord.stableType}
	// A repeated delivery of an order this run already decided is answered
	// by acceptInbound; here the record must still be the open reservation.
	pc := row.Record.PendingCreation
	switch {
	case !row.Found:
		return fw(fmt.Errorf("%w: %s has no record (the reservation is gone)", ErrStaleGeneration, ord.id))
	case row.Record.Allocation.ObjectKind != ord.kind || row.Record.Allocation.StableType != ord.stableType:
		return fw(fmt.Errorf("%w: %s is %s %q", ErrTypeMismatch, ord.id, row.Record.Allocation.ObjectKind, row.Record.Allocation.StableType))
	case uint64(row.Record.ObjectGeneration) != ord.objGen || uint64(row.Record.AuthorityOwnerGeneration) != ord.ownerGen,
		row.Record.Allocation.State != record.AllocationReserved, pc == nil, pc.ReservationID != ord.reservationID,
		row.Version != ord.version, authority.OwnerOf(row.Record) != self,
		!authority.NodeOf(row.Record).Equal(authority.Node{MeshName: ord.meshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration}):
		return fw(fmt.Errorf("%w: the record of %s no longer matches the reservation", ErrStaleGeneration, ord.id))
	case pc.RequestContentReference != creationRequestKey(ord.op):
		// §7/§12: the OperationId is fixed by the reservation (the stored
		// request's key is derived from source RID, source run and
		// OperationId). An order under another id is not this
		// reservation's: running it would store its final result under
		// the wrong identifier.
		return fw(fmt.Errorf("%w: the reservation of %s was made for another operation", ErrInvalidOperation, ord.id))
	}
	// write makes one of this order's store changes: only while the gate
	// admits (§5), and on its own bounded context so that a result can be
	// recorded (or the space returned) even when the call's deadline is
	// what ended the wait.
	write := func(what string, change func(context.Context) error) error {
		if err := gate.Admit(); err != nil {
			return wrapErr(ErrUnavailable, err, "owner lease: %s not recorded", what)
		}
		wctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		if err := change(wctx); err != nil {
			return classify(context.Background(), err, "record "+what)
		}
		return nil
	}
	abort := func(what string, t *authority.TerminalResult) error {
		return write(what, func(ctx context.Context) error {
			_, err := o.exec.Abort(ctx, authority.AbortRequest{Object: obj, ReservationID: ord.reservationID,
				ObjectGeneration: ord.objGen, IfVersion: ord.version, Owner: &self, Terminal: t})
			return err
		})
	}
	// returnLater returns the reservation once the store takes it, when
	// the abort could not (settle.go): the Creating record blocks the Id.
	// t, when set, is the application's verdict (rejected, failed),
	// recorded with the return.
	returnLater := func(t *authority.TerminalResult, cause error) {
		o.returnReservationLater(authority.AbortRequest{Object: obj, ReservationID: ord.reservationID,
			ObjectGeneration: ord.objGen, Owner: &self, Terminal: t}, cause)
	}
	failBefore := func(err error) targetOutcome {
		if aerr := abort("reservation return", nil); aerr != nil {
			returnLater(nil, aerr)
		}
		return fw(err)
	}
	// verdictNotRecorded handles an Abort recording the factory's verdict
	// that failed and did not apply: the verdict stands and is answered
	// (ok), recorded once the store takes it (returnLater). Answered as a
	// failure before the factory, the creator returned the reservation
	// itself and placed the creation on another node, whose factory ran a
	// second time for a request the application had already rejected
	// (review, 2026-12-07). Only another request's result already stored
	// under the OperationId (ErrInvalidOperation) still ends the creation
	// as that.
	verdictNotRecorded := func(t *authority.TerminalResult, err error) (targetOutcome, bool) {
		if errors.Is(err, ErrInvalidOperation) {
			return fw(err), false
		}
		o.log.Warn("creation: the factory's verdict is not recorded yet; recording it once the store takes it",
			"object", ord.id, "outcome", string(t.Outcome), "err", err)
		returnLater(t, err)
		return targetOutcome{}, true
	}
	if !storeNow.Before(ord.deadline) {
		return failBefore(deadlineErr("creation of %s: deadline passed before the factory", ord.id))
	}
	f, ok := o.registry[ord.stableType]
	if !ok || objectKind(f.Kind) != ord.kind {
		return failBefore(fmt.Errorf("%w: no %s factory %q on this node", ErrUnavailable, ord.kind, ord.stableType))
	}
	body, err := checkContent(content, pc, ord)
	if err != nil {
		return failBefore(err)
	}
	if h := o.hook().beforeFactory; h != nil {
		if err := h(ord.id); err != nil {
			return failBefore(wrapErr(ErrUnavailable, err, "before the factory"))
		}
	}
	terminal := &authority.TerminalResult{Operation: ord.op, RequestSHA256: pc.RequestSHA256, Deadline: ord.deadline}
	handler, ferr := runFactory(ctx, &o.apps, spot.Key{Spot: ord.kind != record.ObjectActor, ID: ord.id}, f, spot.CreateRequest{ID: ord.id, Generation: ord.objGen, StableType: ord.stableType, Body: body})
	var declined *spot.Declined
	switch {
	case ferr != nil && ctx.Err() != nil:
		// The call's deadline passed or the node is stopping while the
		// factory ran: not the application's verdict. The reservation is
		// returned without a final result; the factory may run again later
		// for the same id (§7).
		return failBefore(classify(ctx, ferr, "factory interrupted"))
	case errors.As(ferr, &declined):
		terminal.Outcome, terminal.Reason = authority.OutcomeRejected, validText(declined.Reason)
		if err := abort("rejection", terminal); err != nil && !o.abortApplied(ctx, ord, err) {
			if out, ok := verdictNotRecorded(terminal, err); !ok {
				return out
			}
		}
		o.log.Info("creation rejected by the factory", "object", ord.id, "reason", declined.Reason)
		return targetOutcome{result: router.CreateRejected, gen: ord.objGen, reason: declined.Reason}
	case ferr != nil:
		typ := "factoryError"
		if errors.Is(ferr, errFactoryPanic) {
			typ = "factoryPanic"
		}
		msg := validText(ferr.Error())
		terminal.Outcome, terminal.Failure = authority.OutcomeFailed, &authority.Failure{Type: typ, Message: msg}
		if err := abort("failure", terminal); err != nil && !o.abortApplied(ctx, ord, err) {
			if out, ok := verdictNotRecorded(terminal, err); !ok {
				return out
			}
		}
		o.log.Warn("creation failed in the factory", "object", ord.id, "type", typ, "err", ferr)
		return targetOutcome{err: &CreateFailedError{ID: ord.id, Type: typ, Message: msg}}
	}
	// Open held: the instance exists (its fence is registered) but runs
	// nothing until the store says Ready.
	sobj, err := o.rt.Open(spot.Spec{Key: key, Kind: f.Kind, StableType: ord.stableType, Generation: ord.objGen,
		Handler: gated{h: handler, gate: gate}, Held: true})
	if err != nil {
		return failBefore(wrapErr(ErrUnavailable, err, "open instance"))
	}
	hs := &hosted{obj: sobj, kind: ord.kind, stableType: ord.stableType, objectGeneration: ord.objGen, ownerGeneration: ord.ownerGen}
	o.mu.Lock()
	o.hosted[key] = hs
	o.mu.Unlock()
	unhost := func() {
		o.mu.Lock()
		if o.hosted[key] == hs {
			delete(o.hosted, key)
		}
		o.mu.Unlock()
		sobj.Close()
	}
	terminal.Outcome = authority.OutcomeCreated
	created := func(version string) {
		o.mu.Lock()
		hs.storeVersion = version
		o.mu.Unlock()
		sobj.Release()
		o.log.Debug("object created", "object", ord.id, "kind", string(ord.kind), "type", ord.stableType, "object_gen", ord.objGen)
	}
	createdOutcome := targetOutcome{result: router.CreateCreated, gen: ord.objGen, ownerGen: ord.ownerGen, mesh: ord.meshName,
		rid: append([]byte(nil), n.run.rid...)}
	var res authority.Result
	if err := write("Ready", func(ctx context.Context) (err error) {
		res, err = o.exec.Commit(ctx, authority.CommitRequest{Object: obj, ReservationID: ord.reservationID,
			ObjectGeneration: ord.objGen, Owner: self, IfVersion: ord.version, Terminal: terminal})
		return err
	}); err != nil {
		if errors.Is(err, authority.ErrOutcomeUnknown) {
			// Held until the record says whether it went Ready (settle.go).
			return o.settleCommit(ctx, ord, self, err, func(version string) { created(version) }, func() {
				unhost()
			}, func() {
				if aerr := abort("reservation return", nil); aerr != nil {
					returnLater(nil, aerr)
				}
			}, createdOutcome)
		}
		unhost()
		return fw(err)
	}
	created(res.Version)
	return createdOutcome
}

// readAuthorityAndRequest reads, in one store call, the authority row of
// ord's object, the creation request its reservation names (derived from
// the order's OperationId, checked against the row by the caller) and this
// node run's capacity counters the Commit will move, which it hands to the
// executor (authority.Executor.ObserveCounter): a lone creation's Commit then
// needs no read of its own (issue 15).
func (o *objects) readAuthorityAndRequest(ctx context.Context, ord createOrder) (authority.AuthorityRow, time.Time, locstore.ReadResult, error) {
	key, err := authority.Object{ID: ord.id, Kind: ord.kind}.Key()
	if err != nil {
		return authority.AuthorityRow{}, time.Time{}, locstore.ReadResult{}, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	keys := []string{key, creationRequestKey(ord.op)}
	if b, err := authority.BundleFor(ord.kind, ord.stableType); err == nil {
		self := authority.Node{MeshName: ord.meshName, RoutingID: o.n.run.rid, LifecycleGeneration: o.n.run.lifecycleGeneration}
		if ck, err := authority.BundleCounterKeys(self, b); err == nil {
			keys = append(keys, ck...)
		}
	}
	o.stats.authorityReads.Add(1)
	rs, err := locstore.ReadMany(ctx, o.n.loc, keys)
	if err != nil {
		return authority.AuthorityRow{}, time.Time{}, locstore.ReadResult{}, fmt.Errorf("read authority of %s and its creation request: %w", ord.id, err)
	}
	for i := 2; i < len(keys); i++ {
		o.exec.ObserveCounter(keys[i], rs[i])
	}
	// The next authority operation on it need not read or decode it again.
	row, err := o.exec.ObserveAuthority(key, rs[0])
	return row, rs[0].StoreNow, rs[1], err
}

// checkContent checks the stored creation request rr against the
// reservation's size and SHA-256 and returns its body.
func checkContent(rr locstore.ReadResult, pc *record.PendingCreation, ord createOrder) ([]byte, error) {
	if !rr.Found {
		return nil, fmt.Errorf("%w: creation request of %s is gone", ErrUnavailable, ord.id)
	}
	if len(rr.Value) != pc.RequestEncodedSize || sha256.Sum256(rr.Value) != pc.RequestSHA256 {
		return nil, fmt.Errorf("%w: creation request of %s does not match its size or SHA-256", ErrUnavailable, ord.id)
	}
	req, err := decodeCreationRequest(rr.Value)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if req.kind != ord.kind || req.stableType != ord.stableType || (req.callerID != "" && req.callerID != ord.id) {
		return nil, fmt.Errorf("%w: creation request is for %s %q %q", ErrUnavailable, req.kind, req.callerID, req.stableType)
	}
	return req.body, nil
}

var errFactoryPanic = errors.New("factory panicked")

// runFactory calls the factory for the object k, turning a panic into an
// error (§7: an exception is a typed Failed, not a crash); calls names the
// call while it runs.
func runFactory(ctx context.Context, calls *appCalls, k spot.Key, f spot.Factory, req spot.CreateRequest) (h spot.Handler, err error) {
	defer calls.enter("New", k)()
	defer func() {
		if r := recover(); r != nil {
			h, err = nil, fmt.Errorf("%w: %v", errFactoryPanic, r)
		}
	}()
	h, err = f.New(ctx, req)
	if err == nil && noHandler(h) {
		err = errors.New("factory returned no handler")
	}
	return h, err
}

// errAdapterPanic wraps spot.ErrHandlerPanic for a snapshot adapter's
// panic: application code like a handler's, and as unable to take the
// node down (before, a panic in Snapshot or Restore killed the process in
// the middle of a move or a drain).
var errAdapterPanic = fmt.Errorf("snapshot adapter: %w", spot.ErrHandlerPanic)

// runSnapshot calls the snapshot adapter's Snapshot — its SnapshotContext,
// with ctx, when it implements spot.ContextSnapshotter — of the object k,
// turning a panic into an error; calls names the call while it runs.
func runSnapshot(ctx context.Context, calls *appCalls, k spot.Key, a spot.SnapshotAdapter, h spot.Handler) (state []byte, err error) {
	defer calls.enter("Snapshot", k)()
	defer func() {
		if r := recover(); r != nil {
			state, err = nil, fmt.Errorf("%w: in Snapshot: %v", errAdapterPanic, r)
		}
	}()
	if cs, ok := a.(spot.ContextSnapshotter); ok {
		return cs.SnapshotContext(ctx, h)
	}
	return a.Snapshot(h)
}

// runRestore calls the snapshot adapter's Restore for the object k,
// turning a panic, and a nil handler with no error (which would fail every
// later turn of the object), into an error; calls names the call while it
// runs.
func runRestore(ctx context.Context, calls *appCalls, k spot.Key, a spot.SnapshotAdapter, req spot.CreateRequest, state []byte) (h spot.Handler, err error) {
	defer calls.enter("Restore", k)()
	defer func() {
		if r := recover(); r != nil {
			h, err = nil, fmt.Errorf("%w: in Restore: %v", errAdapterPanic, r)
		}
	}()
	h, err = a.Restore(ctx, req, state)
	if err == nil && noHandler(h) {
		err = errors.New("snapshot adapter: Restore returned no handler")
	}
	return h, err
}

// noHandler reports whether h is no handler: nil, or a nil pointer or
// func of the application's handler type (a typed nil, which passed an
// h == nil check until 2026-12-07: the object was opened and every turn
// failed on it).
func noHandler(h spot.Handler) bool {
	if h == nil {
		return true
	}
	switch v := reflect.ValueOf(h); v.Kind() {
	case reflect.Pointer, reflect.Func:
		return v.IsNil()
	}
	return false
}

// validText makes an application string storable in the final result:
// valid UTF-8, at most 4 KiB.
func validText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 4096 {
		s = strings.ToValidUTF8(s[:4096], "")
	}
	return s
}
