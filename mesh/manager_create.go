package mesh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
)

// Creation of Actors and User Spots (spec §7), source side. The sequence and
// its store batches are in docs/OBJECTS.md "Creation".

// CreateActor creates the Actor actorID of stableType on a node chosen by
// placement. An existing Actor (Ready or Creating) of the same type is
// ErrAlreadyExists; of another type ErrTypeMismatch.
func (m *Manager) CreateActor(ctx context.Context, actorID, stableType string, opts ...CreateOption) (ActorRef, error) {
	res, err := m.create(ctx, modeCreate, record.ObjectActor, actorID, stableType, opts)
	if err != nil {
		return ActorRef{}, err
	}
	return ActorRef{ActorID: res.id, ObjectGeneration: res.gen, MeshName: res.mesh, NodeRID: res.rid}, nil
}

// GetOrCreateActor returns the Ready Actor actorID of stableType, creating
// it when missing and waiting for a creation in progress (§7 result table).
func (m *Manager) GetOrCreateActor(ctx context.Context, actorID, stableType string, opts ...CreateOption) (ActorCreation, error) {
	res, err := m.create(ctx, modeGetOrCreate, record.ObjectActor, actorID, stableType, opts)
	if err != nil {
		return ActorCreation{}, err
	}
	return ActorCreation{Ref: ActorRef{ActorID: res.id, ObjectGeneration: res.gen, MeshName: res.mesh, NodeRID: res.rid},
		Outcome: res.outcome}, nil
}

// CreateUserSpot creates a User Spot of stableType under a framework-issued
// SpotId (a lowercase canonical UUID v4, §7).
func (m *Manager) CreateUserSpot(ctx context.Context, stableType string, opts ...CreateOption) (SpotRef, error) {
	res, err := m.create(ctx, modeCreate, record.ObjectUserSpot, "", stableType, opts)
	if err != nil {
		return SpotRef{}, err
	}
	return SpotRef{SpotID: res.id, ObjectGeneration: res.gen, MeshName: res.mesh, NodeRID: res.rid}, nil
}

// GetOrCreateUserSpot returns the Ready User Spot spotID of stableType,
// creating it when missing (§7).
func (m *Manager) GetOrCreateUserSpot(ctx context.Context, spotID, stableType string, opts ...CreateOption) (SpotCreation, error) {
	if spotID == "" {
		return SpotCreation{}, fmt.Errorf("%w: GetOrCreateUserSpot needs a SpotId", ErrInvalidOperation)
	}
	res, err := m.create(ctx, modeGetOrCreate, record.ObjectUserSpot, spotID, stableType, opts)
	if err != nil {
		return SpotCreation{}, err
	}
	return SpotCreation{Ref: SpotRef{SpotID: res.id, ObjectGeneration: res.gen, MeshName: res.mesh, NodeRID: res.rid},
		Outcome: res.outcome}, nil
}

type createMode uint8

const (
	modeCreate createMode = iota + 1
	modeGetOrCreate
)

// The modes' names in the stored creation request.
const (
	modeCreateName      = "create"
	modeGetOrCreateName = "getOrCreate"
)

func (m createMode) String() string {
	if m == modeCreate {
		return modeCreateName
	}
	return modeGetOrCreateName
}

// createCall is one Create/GetOrCreate call in progress.
type createCall struct {
	mode       createMode
	kind       record.ObjectKind
	id         string
	callerID   string // "" when the framework issued the id (CreateUserSpot)
	stableType string
	mesh       string
	body       []byte
	op         authority.OperationRef
	opExplicit bool
	content    []byte   // the stored creation request
	sha        [32]byte // SHA-256 of content: identifies "the same request"
	contentKey string
	deadline   time.Time // local
	// storeDeadline is the call's deadline on the store's clock, fixed from
	// the first store time the call sees (the store is the one clock all
	// nodes share).
	storeDeadline time.Time
}

// fixStoreDeadline sets storeDeadline from a store time just seen, once.
func (c *createCall) fixStoreDeadline(storeNow time.Time) {
	if c.storeDeadline.IsZero() && !storeNow.IsZero() {
		c.storeDeadline = storeNow.Add(time.Until(c.deadline))
	}
}

type createResult struct {
	id      string
	gen     uint64
	mesh    string
	rid     []byte
	outcome CreateOutcome
}

// Creation request content (the "in-progress creation record" of §7): the
// request the target reads from the Location Store, referenced by the
// authority record's pendingCreation. Layout, NUL-separated:
//
//	creation-request-v1 \0 mode \0 objectKind \0 callerId \0 stableType \0 body
//
// callerId is empty for a framework-issued SpotId, so that a retry of
// CreateUserSpot with the same OperationId is "the same request". The
// SHA-256 of these bytes is the request hash of the stored final result.
const creationRequestFormat = "creation-request-v1"

// KindCreationRequest is the record kind (store-key prefix) of stored
// creation requests (authority.KindCreationRequest).
const KindCreationRequest = authority.KindCreationRequest

// maxCreationHeader is the longest header encodeCreationRequest writes: the
// format, the longer mode, the longer object kind a Manager creates (User
// Spot; Instance Spots are not created through this request), a maximal id
// and a maximal stable type, each followed by NUL.
const maxCreationHeader = len(creationRequestFormat) + 1 + max(len(modeCreateName), len(modeGetOrCreateName)) + 1 +
	max(len(record.ObjectActor), len(record.ObjectUserSpot)) + 1 + record.MaxIDBytes + 1 + record.MaxNameBytes + 1

// MaxCreationBody is the largest creation body (1,048,023 bytes): the stored
// request — header plus body, one store value — is at most 1 MiB (§7), and
// the header can take maxCreationHeader bytes. A larger body is
// ErrInvalidOperation before anything is written.
const MaxCreationBody = record.MaxCreationRequestBytes - maxCreationHeader

func encodeCreationRequest(mode createMode, kind record.ObjectKind, callerID, stableType string, body []byte) []byte {
	var b []byte
	for _, p := range []string{creationRequestFormat, mode.String(), string(kind), callerID, stableType} {
		b = append(append(b, p...), 0)
	}
	return append(b, body...)
}

type creationRequest struct {
	mode       string
	kind       record.ObjectKind
	callerID   string
	stableType string
	body       []byte
}

func decodeCreationRequest(b []byte) (creationRequest, error) {
	var parts []string
	rest := b
	for i := 0; i < 5; i++ {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return creationRequest{}, fmt.Errorf("creation request: %d header fields, want 5", i)
		}
		parts = append(parts, string(rest[:j]))
		rest = rest[j+1:]
	}
	if parts[0] != creationRequestFormat {
		return creationRequest{}, fmt.Errorf("creation request: unknown format %q", parts[0])
	}
	return creationRequest{mode: parts[1], kind: record.ObjectKind(parts[2]), callerID: parts[3], stableType: parts[4],
		body: rest}, nil
}

// creationRequestKey is the store key of an operation's request content:
// creation-request\0{hex(source RID)}\0{source run generation}\0{hex(OperationId)}.
func creationRequestKey(op authority.OperationRef) string {
	p := string(KindCreationRequest) + "\x00" + hex.EncodeToString(op.SourceRoutingID) + "\x00" +
		strconv.FormatUint(op.SourceRunGeneration, 10) + "\x00" + hex.EncodeToString(op.OperationID[:])
	return record.Key([]byte(p))
}

func (m *Manager) create(ctx context.Context, mode createMode, kind record.ObjectKind, id, stableType string, opts []CreateOption) (createResult, error) {
	res, err := m.createOnce(ctx, mode, kind, id, stableType, opts)
	m.o.n.metrics.creationEnded(string(kind), res, err)
	return res, err
}

// createOnce is create without the metrics.
func (m *Manager) createOnce(ctx context.Context, mode createMode, kind record.ObjectKind, id, stableType string, opts []CreateOption) (createResult, error) {
	o := m.o
	co, err := applyOptions(opts)
	if err != nil {
		return createResult{}, err
	}
	mesh, err := resolveMesh(o.role(), o.n.cfg.Node.MeshName, co.inMesh)
	other := errors.Is(err, errOtherMesh) // answered from the store below
	if other {
		if err := record.ValidateMeshName(mesh); err != nil {
			return createResult{}, fmt.Errorf("%w: InMesh: %w", ErrInvalidOperation, err)
		}
	} else if err != nil {
		return createResult{}, err
	}
	issue := id == "" && kind == record.ObjectUserSpot && mode == modeCreate // §7: the framework issues the SpotId
	if !issue {
		if err := record.ValidateObjectID(id); err != nil {
			return createResult{}, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
		}
		if kind != record.ObjectActor && strings.HasPrefix(id, entrySpotPrefix) {
			// Entry Spot ids are framework-issued only (§7); a User Spot
			// must not take one.
			return createResult{}, fmt.Errorf("%w: SpotId %q uses the Entry Spot prefix %q", ErrInvalidOperation, id, entrySpotPrefix)
		}
	}
	if err := record.ValidateStableType(stableType); err != nil {
		return createResult{}, fmt.Errorf("%w: stable type: %w", ErrInvalidOperation, err)
	}
	if len(co.body) > MaxCreationBody {
		return createResult{}, fmt.Errorf("%w: creation body is %d bytes, at most %d", ErrInvalidOperation, len(co.body), MaxCreationBody)
	}
	ctx, done, err := o.call(ctx)
	if err != nil {
		return createResult{}, err
	}
	defer done()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultCreateTimeout)
		defer cancel()
	}
	if other {
		return createResult{}, o.otherMesh(ctx, mesh)
	}
	dl, _ := ctx.Deadline()
	c := &createCall{mode: mode, kind: kind, id: id, callerID: id, stableType: stableType, mesh: mesh, body: co.body,
		deadline: dl, opExplicit: co.opSet}
	if issue {
		c.id = newSpotID()
	}
	c.op = authority.OperationRef{SourceRoutingID: o.n.run.rid, SourceRunGeneration: o.n.run.lifecycleGeneration, OperationID: co.op}
	if !co.opSet {
		c.op.OperationID = NewOperationID()
	}
	c.content = encodeCreationRequest(mode, kind, c.callerID, stableType, co.body)
	c.sha = sha256.Sum256(c.content)
	c.contentKey = creationRequestKey(c.op)
	res, err := o.runCreate(ctx, c)
	if err != nil {
		o.log.Debug("creation ended", "object", c.id, "kind", string(kind), "mode", mode.String(), "err", err)
		return createResult{}, classify(ctx, err, mode.String()+" "+c.id)
	}
	return res, nil
}

// runCreate is the source's loop (§7): check the stored result of the same
// operation, read the current record and follow it, or place, reserve and
// have the target create; a target or capacity failure excludes that node
// run and another candidate is tried until the one deadline.
func (o *objects) runCreate(ctx context.Context, c *createCall) (createResult, error) {
	if c.opExplicit {
		t, err := o.exec.LookupTerminal(ctx, c.op, c.sha)
		switch {
		case err == nil:
			o.log.Debug("creation answered from the stored final result", "object", t.ID)
			return resultFromTerminal(t)
		case errors.Is(err, authority.ErrNotFound):
		case errors.Is(err, authority.ErrInvalidOperation):
			return createResult{}, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
		default:
			return createResult{}, err
		}
	}
	excluded := map[string]exclusion{}
	var lastFailed *nodeFailure // the last target that failed before the callback
	relisted := false           // the list was read again after a target's lease changed
	wait := newBackoff()
	// A round either reads the authority row first (readFirst) or places
	// at once and lets the Reserve read the row together with everything
	// else it plans on, in one store call: a new Id — what a creation is
	// for — then costs no read of its own (issue 15). A Reserve that finds
	// the record hands it back (authority.Error.Current) and the round
	// follows it exactly as a first read would have. The row is read first
	// when the record was seen a moment ago (a Creating record waited on,
	// a dead owner's record reclaimed) and when placement fails, so that a
	// failed placement never hides an existing object.
	var row *authority.AuthorityRow
	readFirst := false
	// joined: this call found the same request (same OperationId, same
	// request) in progress and waits for its result (sameRequestInFlight).
	joined := false
	for {
		if err := ctx.Err(); err != nil {
			return createResult{}, ctxErr(ctx, "%s %s", c.mode, c.id)
		}
		if readFirst {
			r, storeNow, err := o.readAuthorityAt(ctx, c.kind, c.id)
			if err != nil {
				return createResult{}, err
			}
			c.fixStoreDeadline(storeNow)
			row = &r
		}
		if joined && row != nil && !sameRequestInFlight(c, *row) {
			// The creation joined is decided: its final result, read after
			// the row that shows it decided (written in the same batch),
			// is this call's answer too. None means it ended without one
			// (a failure before the factory): go on as a creation.
			joined = false
			t, err := o.exec.LookupTerminal(ctx, c.op, c.sha)
			switch {
			case err == nil:
				return resultFromTerminal(t)
			case errors.Is(err, authority.ErrInvalidOperation):
				return createResult{}, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
			case !errors.Is(err, authority.ErrNotFound):
				return createResult{}, err
			}
		}
		if row != nil && row.Found {
			// A Ready record of a dead owner (same kind and type: a
			// mismatch stays one) is removed once the grace allows and
			// the creation goes on as for a new Id (dead_owner.go).
			al := row.Record.Allocation
			readFirst = true
			if al.State == record.AllocationActive && al.ObjectKind == c.kind && al.StableType == c.stableType {
				reclaimed, err := o.reclaimDead(ctx, *row, true, false, string(c.mode))
				if err != nil {
					return createResult{}, err
				}
				if reclaimed {
					continue
				}
			}
			if c.opExplicit && sameOperationInFlight(c, *row) {
				// OBJECTS §3: one OperationId is one creation. A retry of
				// the request still in progress (its answer not yet seen)
				// waits for that creation's result and gets the same
				// answer; it was ErrAlreadyExists (a GetOrCreate: Existing
				// for a creation that answered Created) until 2026-12-07
				// (review). Another request under the OperationId is
				// refused, as it is once a result is stored.
				if !sameRequestInFlight(c, *row) {
					return createResult{}, fmt.Errorf("%w: another request under this OperationId is creating %s", ErrInvalidOperation, c.id)
				}
				joined = true
			} else if res, done, err := followExisting(c, *row); done {
				return res, err
			}
			// GetOrCreate on Creating: wait for that creation's result,
			// unless its creator is gone for good (manager_recovery.go).
			if aborted, err := o.recoverAbandoned(ctx, *row); err != nil {
				return createResult{}, err
			} else if aborted {
				continue
			}
			if err := wait.sleep(ctx); err != nil {
				return createResult{}, ctxErr(ctx, "%s %s: waiting for the creation in progress", c.mode, c.id)
			}
			continue
		}
		known := row != nil // read Missing this round
		row = nil
		cand, err := o.place(ctx, placeRequest{kind: c.kind, stableType: c.stableType, mesh: c.mesh, excluded: excluded})
		if err != nil {
			if !known {
				readFirst = true
				continue
			}
			if lastFailed != nil {
				// Say what the last node tried answered: the placement alone
				// only counts the nodes that failed.
				err = fmt.Errorf("%w; the last node tried, %s: %v", err, lastFailed.node, lastFailed.err)
			}
			return createResult{}, err
		}
		readFirst = false
		retention, err := contentRetention(c)
		if err != nil {
			return createResult{}, err
		}
		if err := o.n.lease.Gate().Admit(); err != nil {
			return createResult{}, wrapErr(ErrUnavailable, err, "owner lease: no capacity reservation")
		}
		rsv := NewOperationID()
		reservationID := hex.EncodeToString(rsv[:])
		// The Reserve reads the authority row with the rows it plans on
		// (one call), or takes it from the executor's hints when this round
		// read it Missing just above (readAuthorityAt).
		res, err := o.exec.Reserve(ctx, authority.ReserveRequest{
			Object: authority.Object{ID: c.id, Kind: c.kind, StableType: c.stableType},
			Target: authority.Target{Node: cand.node, Owner: cand.owner, Limits: cand.limits},
			Creation: record.PendingCreation{ReservationID: reservationID, RequestContentReference: c.contentKey,
				RequestSHA256: c.sha, RequestEncodedSize: len(c.content)},
			// The request is written with the Creating record, never
			// before it: a Reserve the store refuses (GenerationExhausted,
			// capacity, a conflict) leaves nothing behind (§3.2, §12).
			Content: &authority.CreationContent{Value: c.content, Retention: retention},
		})
		if err != nil {
			var ae *authority.Error
			switch {
			case errors.As(err, &ae) && ae.Current != nil:
				// The record exists (another creation got there first, or
				// it is of another kind or type): follow it.
				row = ae.Current
				continue
			case errors.Is(err, authority.ErrCapacityExhausted):
				o.log.Debug("placement: node full, excluded", "node", cand.key(), "object", c.id)
				excluded[cand.key()] = excludedFull
				continue
			case errors.Is(err, authority.ErrContended):
				// Lost the store-wide counters to other writers attempt
				// after attempt: a race, not a change of the target (§6.1
				// rules a node run out only when its state or capacity
				// changed). Placed again, the same target allowed, until
				// the deadline; until 2026-12-07 the target was ruled out
				// and a creation on a one-node mesh failed with capacity
				// free (review).
				o.log.Debug("placement: lost the store's counters to other writers; placing again", "node", cand.key(), "object", c.id, "err", err)
				continue
			case errors.As(err, &ae) && ae.Kind == authority.ErrConflict:
				// The target's lease is gone or changed. Changed under the
				// same node run means this node's list is stale: once per
				// creation, read it again and place anew. Gone: that run
				// is out.
				if !relisted && o.relistedWithNewOwner(ctx, cand) {
					relisted = true
					continue
				}
				excluded[cand.key()] = excludedFailed
				continue
			}
			if errors.Is(err, authority.ErrOutcomeUnknown) {
				// The Creating record may be there: return it once the
				// store answers, or it blocks the Id (settle.go).
				o.returnReservationLater(authority.AbortRequest{Object: authority.Object{ID: c.id, Kind: c.kind, StableType: c.stableType},
					ReservationID: reservationID}, err)
			}
			return createResult{}, err
		}
		c.fixStoreDeadline(res.StoreNow)
		ord := createOrder{kind: c.kind, id: c.id, stableType: c.stableType, op: c.op, reservationID: reservationID,
			version: res.Version, objGen: uint64(res.Plan.Record.ObjectGeneration),
			ownerGen: uint64(res.Plan.Record.AuthorityOwnerGeneration), deadline: c.storeDeadline,
			sourceRID: o.n.run.rid, sourceGen: o.n.run.lifecycleGeneration,
			targetRID: cand.node.RoutingID, targetGen: cand.node.LifecycleGeneration, targetOwner: cand.owner,
			delta: bundleSlots(c.kind, c.stableType), meshName: c.mesh}
		if ord.version == "" {
			// A lost write answer was resolved by a re-read that saw a later
			// version; read it again to fence the target on the current one.
			row, _, err := o.readAuthorityAt(ctx, c.kind, c.id)
			if err != nil {
				o.returnReservationLater(authority.AbortRequest{Object: authority.Object{ID: c.id, Kind: c.kind, StableType: c.stableType},
					ReservationID: reservationID, ObjectGeneration: ord.objGen}, err)
				return createResult{}, err
			}
			if !row.Found || row.Record.PendingCreation == nil || row.Record.PendingCreation.ReservationID != reservationID {
				continue
			}
			ord.version = row.Version
		}
		var out targetOutcome
		if cand.local {
			out = o.createLocally(ctx, ord)
		} else {
			out = o.remoteCreate(ctx, c, ord)
		}
		if out.framework {
			if out.pending {
				// No answer and no decision in the store: the target may
				// still create. A timeout is not a failure (§7): the
				// reservation stays with the target, which commits or
				// aborts it, and nothing is resubmitted elsewhere.
				return createResult{}, out.err
			}
			// The target refused or failed before the factory (or never got
			// the order): return the reservation if it is still ours.
			if err := o.abortIfOurs(c, ord); err != nil {
				return createResult{}, fmt.Errorf("%w (node %x had answered: %v)", err, cand.node.RoutingID, out.err)
			}
			if errors.Is(out.err, ErrDeadlineExceeded) || ctx.Err() != nil {
				return createResult{}, out.err
			}
			if errors.Is(out.err, ErrInvalidOperation) {
				// The request itself is refused (another request under the
				// same OperationId finished first, authority.terminalTaken):
				// no other node would take it either.
				return createResult{}, out.err
			}
			o.log.Info("creation target failed before the callback; trying another node", "object", c.id,
				"node", cand.key(), "err", out.err)
			if !cand.local {
				// It may be draining: its answer cannot say (command 20 has
				// no reason), the state it published can (relist.go).
				o.n.askRelist()
			}
			lastFailed = &nodeFailure{node: fmt.Sprintf("%x", cand.node.RoutingID), err: out.err}
			excluded[cand.key()] = excludedFailed
			continue
		}
		return o.finishOutcome(ctx, c, ord, out)
	}
}

// createLocally runs an order placed on this node as a peer's order runs
// (manager_target.go): on a goroutine of the node, so that the call ends at
// its deadline also when the factory ignores its context. The order then
// stays pending, as a remote one whose answer did not come: the node
// records the factory's result when it returns, or aborts a reservation
// whose deadline passed before it. Before, the factory ran on the caller's
// goroutine and the call waited for it past its deadline (for good, for a
// factory that never returns).
func (o *objects) createLocally(ctx context.Context, ord createOrder) targetOutcome {
	if err := o.begin(); err != nil {
		return targetOutcome{framework: true, err: wrapErr(ErrUnavailable, err, "node closing")}
	}
	done := make(chan targetOutcome, 1)
	o.gos.Go(func() {
		defer o.work.Done()
		done <- o.createOnTarget(ctx, ord, nil)
	})
	select {
	case out := <-done:
		return out
	case <-ctx.Done():
		return targetOutcome{framework: true, pending: true,
			err: ctxErr(ctx, "creation of %s: the factory on this node has not returned", ord.id)}
	}
}

// sameOperationInFlight reports a Creating record reserved for c's
// operation (source run and OperationId: the stored request's key).
func sameOperationInFlight(c *createCall, row authority.AuthorityRow) bool {
	pc := row.Record.PendingCreation
	return row.Found && row.Record.Allocation.State == record.AllocationReserved && pc != nil &&
		pc.RequestContentReference == c.contentKey
}

// sameRequestInFlight is sameOperationInFlight for the same request too
// (its SHA-256).
func sameRequestInFlight(c *createCall, row authority.AuthorityRow) bool {
	return sameOperationInFlight(c, row) && row.Record.PendingCreation.RequestSHA256 == c.sha
}

// nodeFailure is what one creation target answered when it failed before
// the callback.
type nodeFailure struct {
	node string
	err  error
}

// followExisting applies §7's result table to a record that exists: done
// with a result or error, or not done (GetOrCreate waits for Creating).
func followExisting(c *createCall, row authority.AuthorityRow) (createResult, bool, error) {
	al := row.Record.Allocation
	if al.ObjectKind != c.kind || al.StableType != c.stableType {
		return createResult{}, true, fmt.Errorf("%w: %q exists as %s %q, asked for %s %q", ErrTypeMismatch, c.id,
			al.ObjectKind, al.StableType, c.kind, c.stableType)
	}
	if c.mode == modeCreate {
		return createResult{}, true, fmt.Errorf("%w: %s %q (%s, ObjectGeneration %d)", ErrAlreadyExists, c.kind, c.id,
			stateName(al.State), row.Record.ObjectGeneration)
	}
	if al.State != record.AllocationActive {
		return createResult{}, false, nil
	}
	return createResult{id: c.id, gen: uint64(row.Record.ObjectGeneration), mesh: al.Descriptor.MeshName,
		rid: append([]byte(nil), al.Descriptor.RoutingID...), outcome: Existing}, true, nil
}

func stateName(s record.AllocationState) string {
	if s == record.AllocationActive {
		return "Ready"
	}
	return "Creating"
}

// bundleSlots is the pendingCapacityDelta of a creation: the slots its
// bundle secures (1 actor; 1 spot + 1 spot-type slot).
func bundleSlots(kind record.ObjectKind, stableType string) uint32 {
	b, err := authority.BundleFor(kind, stableType)
	if err != nil {
		return 0
	}
	n := b.Actors + b.Spots
	if b.SpotType != nil {
		n += b.SpotType.Count
	}
	return uint32(n)
}

// readAuthorityAt reads the authority row and the store time of the read.
func (o *objects) readAuthorityAt(ctx context.Context, kind record.ObjectKind, id string) (authority.AuthorityRow, time.Time, error) {
	key, err := authority.Object{ID: id, Kind: kind}.Key()
	if err != nil {
		return authority.AuthorityRow{}, time.Time{}, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	o.stats.authorityReads.Add(1)
	rr, err := o.n.loc.Read(ctx, key)
	if err != nil {
		return authority.AuthorityRow{}, time.Time{}, fmt.Errorf("read authority of %s: %w", id, err)
	}
	// The next authority operation on it need not read or decode it again.
	row, err := o.exec.ObserveAuthority(key, rr)
	return row, rr.StoreNow, err
}

// contentRetention is how long the creation request is kept: until 5
// minutes past the deadline, like the final result (§7). A retention is a
// span, so the local clock measures it; only the deadline itself is sent on
// the store's clock (fixStoreDeadline).
func contentRetention(c *createCall) (time.Duration, error) {
	retention := time.Until(c.deadline) + authority.TerminalRetentionAfterDeadline
	if retention <= 0 {
		return 0, deadlineErr("%s %s: deadline already passed", c.mode, c.id)
	}
	if retention > locstore.MaxRetention {
		return 0, fmt.Errorf("%w: deadline too far in the future", ErrInvalidOperation)
	}
	return retention, nil
}

// abortIfOurs returns the reservation when it is still ours after a
// framework failure the target reported (or that left the reservation
// behind): Reserved → Missing without a final application result (§7).
// It runs on a short context of its own because the call's deadline may
// be the very reason it is needed. An error means the reservation stays
// for now (returnReservationLater returns it once the store takes it, or
// recovery once this node's lease has ended) and the creation must end:
// nothing can be placed for the Id while its Creating record stands.
func (o *objects) abortIfOurs(c *createCall, ord createOrder) error {
	// §5: no store change without owner eligibility, returning a
	// reservation included.
	req := authority.AbortRequest{
		Object:           authority.Object{ID: c.id, Kind: c.kind, StableType: c.stableType},
		ReservationID:    ord.reservationID,
		ObjectGeneration: ord.objGen,
	}
	if err := o.n.lease.Gate().Admit(); err != nil {
		o.returnReservationLater(req, err)
		return wrapErr(ErrUnavailable, err, "owner lease: the reservation of %s is returned once it is valid again", c.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := o.exec.Abort(ctx, req)
	switch {
	case err == nil:
		o.log.Debug("reservation returned", "object", c.id, "reservation", ord.reservationID)
	case errors.Is(err, authority.ErrConflict):
		// Not (or no longer) our reservation: the target returned it, or it
		// moved on. Nothing to do.
	default:
		// The Creating record stays until recovery returns it, so no other
		// node can be tried: a Reserve elsewhere would find it, and a
		// Create then said "already exists (Creating)" — a GetOrCreate
		// waited on it until its deadline. End here with the store's
		// answer: when it refuses writes (Redis out of memory), that is
		// most likely why the target failed too, whose answer on the wire
		// carries no text.
		o.returnReservationLater(req, err)
		return wrapErr(ErrUnavailable, err, "the reservation of %s could not be returned (it will be once the store takes it)", c.id)
	}
	return nil
}

// finishOutcome turns a target's final answer into the caller's result,
// reading the stored final result for details the wire does not carry (the
// rejection reason, the failure message).
func (o *objects) finishOutcome(ctx context.Context, c *createCall, ord createOrder, out targetOutcome) (createResult, error) {
	switch out.result {
	case router.CreateCreated, router.CreateExisting:
		outcome := Created
		if c.mode == modeGetOrCreate && out.result == router.CreateExisting {
			outcome = Existing
		}
		if out.gen != ord.objGen {
			return createResult{}, fmt.Errorf("%w: target answered ObjectGeneration %d for reservation of %d", ErrUnavailable, out.gen, ord.objGen)
		}
		return createResult{id: c.id, gen: out.gen, mesh: out.mesh, rid: out.rid, outcome: outcome}, nil
	case router.CreateRejected:
		reason := out.reason
		if reason == "" {
			if t, err := o.exec.LookupTerminal(ctx, c.op, c.sha); err == nil && t.Reason != nil {
				reason = *t.Reason
			}
		}
		return createResult{}, &RejectedError{ID: c.id, Reason: reason}
	}
	var cf *CreateFailedError
	if errors.As(out.err, &cf) {
		if t, err := o.exec.LookupTerminal(ctx, c.op, c.sha); err == nil && t.Failure != nil {
			return createResult{}, &CreateFailedError{ID: c.id, Type: t.Failure.Type, Message: t.Failure.Message}
		}
		cf.ID = c.id
		return createResult{}, cf
	}
	if out.err != nil {
		return createResult{}, out.err
	}
	return createResult{}, fmt.Errorf("%w: creation of %s ended without a result", ErrUnavailable, c.id)
}

// resultFromTerminal answers a call from a stored final result (§7).
func resultFromTerminal(t authority.TerminalRecord) (createResult, error) {
	switch t.Outcome {
	case authority.OutcomeCreated:
		return createResult{id: t.ID, gen: t.Ref.ObjectGeneration, mesh: t.Ref.MeshName,
			rid: append([]byte(nil), t.Ref.RoutingID...), outcome: Created}, nil
	case authority.OutcomeRejected:
		r := ""
		if t.Reason != nil {
			r = *t.Reason
		}
		return createResult{}, &RejectedError{ID: t.ID, Reason: r}
	case authority.OutcomeFailed:
		return createResult{}, &CreateFailedError{ID: t.ID, Type: t.Failure.Type, Message: t.Failure.Message}
	}
	return createResult{}, fmt.Errorf("%w: stored final result has outcome %q", ErrUnavailable, t.Outcome)
}

// remoteCreate sends command 49 (Actor) or 47 (User Spot) to the reserved
// target and reads its one command 20 answer. When the answer is lost
// (transport failure after sending), the result is recovered from the
// store: the stored final result, or the record itself (§7, §10) — never
// by resubmitting to another node.
func (o *objects) remoteCreate(ctx context.Context, c *createCall, ord createOrder) targetOutcome {
	fence := router.ObjectReservationFence{ReservationID: ord.reservationID, ExpectedStoreVersion: ord.version,
		ObjectGeneration: ord.objGen, AuthorityOwnerGeneration: ord.ownerGen, TargetNodeRID: ord.targetRID,
		TargetNodeGeneration: ord.targetGen, TargetOwnerID: ord.targetOwner.ID,
		TargetOwnerLeaseGeneration: ord.targetOwner.LeaseGeneration, PendingCapacityDelta: ord.delta}
	opID := router.OperationID{High: beUint64(ord.op.OperationID[:8]), Low: beUint64(ord.op.OperationID[8:])}
	deadline := uint64(ord.deadline.UnixMilli())
	var body router.Body
	kind := router.OpActorCreate
	if ord.kind == record.ObjectActor {
		body = &router.ActorCreate{Operation: opID, SourceNodeRID: ord.sourceRID, SourceNodeGeneration: ord.sourceGen,
			ActorID: ord.id, StableType: ord.stableType, Reservation: fence, DeadlineUnixMs: deadline}
	} else {
		kind = router.OpUserSpotCreate
		body = &router.UserSpotCreate{Operation: opID, SourceNodeRID: ord.sourceRID, SourceNodeGeneration: ord.sourceGen,
			SpotID: ord.id, StableType: ord.stableType, Reservation: fence, DeadlineUnixMs: deadline}
	}
	resp, err := o.n.tr.Request(ctx, ord.targetRID, router.NewRecord(body, nil, nil))
	if err != nil {
		if ctx.Err() == nil && !sentNothing(err) {
			o.log.Info("creation answer lost; reading the store", "object", ord.id, "err", err)
			return o.recoverLost(ctx, c, ord)
		}
		if ctx.Err() != nil {
			return targetOutcome{framework: true, pending: true, err: ctxErr(ctx, "creation of %s: no answer from the target (%v)", ord.id, err)}
		}
		return targetOutcome{framework: true, err: wrapErr(ErrUnavailable, err, "send creation of %s", ord.id)}
	}
	return outcomeFromReply(resp, kind, ord)
}

// outcomeFromReply reads a command 20 answering 47/49.
func outcomeFromReply(resp *router.Record, kind router.MeshOperationKind, ord createOrder) targetOutcome {
	rep, ok := resp.Body.(*router.Reply)
	if !ok {
		return targetOutcome{framework: true, err: fmt.Errorf("%w: creation answered with %s", ErrUnavailable, resp.Command)}
	}
	fam := familyActor
	if ord.kind != record.ObjectActor {
		fam = familySpot
	}
	if rep.Result != router.ResultOK {
		err := replyError(fam, rep, "create")
		var cf *CreateFailedError
		if errors.As(err, &cf) {
			return targetOutcome{err: err}
		}
		return targetOutcome{framework: true, err: err}
	}
	if err := resp.ResolveReplyTail(kind); err != nil {
		return targetOutcome{framework: true, err: fmt.Errorf("%w: creation answer: %w", ErrUnavailable, err)}
	}
	out := targetOutcome{mesh: ord.mesh(), rid: append([]byte(nil), ord.targetRID...)}
	switch t := rep.Tail.(type) {
	case *router.ActorCreateTail:
		out.result = t.Result
		if t.Actor != nil {
			out.gen = t.Actor.ObjectGeneration
		}
	case *router.UserSpotCreateTail:
		out.result, out.gen = t.Result, t.Spot.ObjectGeneration
	default:
		return targetOutcome{framework: true, err: fmt.Errorf("%w: creation answer without a creation tail", ErrUnavailable)}
	}
	return out
}

// recoverLost polls the store after a lost answer until the creation is
// decided or the deadline passes: the record still Reserved under our
// reservation means the target is still working; anything else means its
// batch applied, and the stored final result (written in that same batch)
// says how (§7, §10).
func (o *objects) recoverLost(ctx context.Context, c *createCall, ord createOrder) targetOutcome {
	wait := newBackoff()
	for {
		row, _, err := o.readAuthorityAt(ctx, c.kind, c.id)
		if err != nil {
			if ctx.Err() != nil {
				return targetOutcome{framework: true, pending: true, err: ctxErr(ctx, "creation of %s: answer lost and not confirmed", c.id)}
			}
			return targetOutcome{framework: true, pending: true, err: classify(ctx, err, "confirm creation")}
		}
		ours := row.Found && uint64(row.Record.ObjectGeneration) == ord.objGen
		pending := ours && row.Record.Allocation.State == record.AllocationReserved
		if !pending {
			t, err := o.exec.LookupTerminal(ctx, c.op, c.sha)
			if err == nil || errors.Is(err, authority.ErrNotFound) {
				o.stats.lostRecovered.Add(1) // decided from the store
			}
			switch {
			case err == nil:
				res, rerr := resultFromTerminal(t)
				out := targetOutcome{mesh: res.mesh, rid: res.rid, gen: res.gen}
				switch t.Outcome {
				case authority.OutcomeCreated:
					out.result = router.CreateCreated
				case authority.OutcomeRejected:
					out.result = router.CreateRejected
					out.reason = *t.Reason
				default:
					out.err = rerr
				}
				return out
			case errors.Is(err, authority.ErrNotFound):
				if ours && row.Record.Allocation.State == record.AllocationActive {
					// Committed, but the final result was past its retention.
					return targetOutcome{result: router.CreateCreated, gen: ord.objGen, mesh: ord.mesh(), rid: ord.targetRID}
				}
				return targetOutcome{framework: true, err: fmt.Errorf("%w: the target returned the reservation of %s without a result", ErrUnavailable, c.id)}
			default:
				return targetOutcome{framework: true, pending: true, err: classify(ctx, err, "read final result")}
			}
		}
		if err := wait.sleep(ctx); err != nil {
			return targetOutcome{framework: true, pending: true, err: ctxErr(ctx, "creation of %s: answer lost and the target did not finish", c.id)}
		}
	}
}

// sentNothing reports a transport error raised before the record left this
// node (nothing can have reached the target).
func sentNothing(err error) bool {
	return errorsIsAny(err, errNotSent...)
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

func putUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// backoff is the polling pause of a waiting caller: 2 ms doubling to 50 ms
// (newBackoff). flat pauses of d come first when flat is set; ceil, when
// set, replaces the 50 ms.
type backoff struct {
	d    time.Duration
	flat int
	ceil time.Duration
}

func newBackoff() *backoff { return &backoff{d: 2 * time.Millisecond} }

// next returns the next pause: d while flat pauses are left, then d
// doubling, up to the first value at or past 50 ms (or ceil).
func (b *backoff) next() time.Duration {
	d := b.d
	ceil := b.ceil
	if ceil <= 0 {
		ceil = 50 * time.Millisecond
	}
	if b.flat > 0 {
		b.flat--
	} else if b.d < ceil {
		b.d *= 2
	}
	return d
}

func (b *backoff) sleep(ctx context.Context) error { return ctxsleep.For(ctx, b.next()) }

// lagAverage is a moving average of a duration observed by many goroutines
// (an exponentially weighted mean, weight 1/8 per observation) that one
// stall cannot blow up: an observation counts at most twice the average
// (the first at most lagFirstMax). Its user waits for most of the average
// before looking, so an inflated average is self-sustaining — every later
// wait, and so every later observation, is at least that long: after Redis
// paused 8 s during a host relocation (operator try-out), each of the
// node's later moves slept ~1 s before reading its commit, and a drain of
// 700 objects that takes half a second took a minute.
type lagAverage struct{ ns atomic.Int64 }

// lagFirstMax bounds the first observation of a lagAverage.
const lagFirstMax = 50 * time.Millisecond

// typical is the current average (0 before any observation).
func (l *lagAverage) typical() time.Duration { return time.Duration(l.ns.Load()) }

func (l *lagAverage) observe(d time.Duration) {
	for {
		old := l.ns.Load()
		next := min(int64(d), int64(lagFirstMax))
		if old > 0 {
			next = old + (min(int64(d), 2*old)-old)/8
		}
		if l.ns.CompareAndSwap(old, next) {
			return
		}
	}
}
