package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/activation"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// Instance Spots (spec §7.1; docs/INSTANCE-SPOTS.md): a message to an
// Instance Spot address is delivered to the Ready Spot under that id, or —
// when there is none — the node the sender picks creates the Spot by cold
// activation and runs that same message first. This file is the sender's
// side; instance_target.go is the node that activates.

// InstanceOption configures SendInstance and RequestInstance.
type InstanceOption func(*instanceOptions) error

type instanceOptions struct {
	stableType string
	inMesh     *string
}

// InstanceType names the Instance Spot stable type. Omitted, the type is
// the one Instance Spot type the mesh offers (§7.1: none is NotFound,
// several InvalidOperation). A Ready Spot of another type is TypeMismatch.
func InstanceType(stableType string) InstanceOption {
	return func(o *instanceOptions) error {
		if o.stableType != "" {
			return fmt.Errorf("%w: InstanceType given twice", ErrInvalidOperation)
		}
		if err := record.ValidateStableType(stableType); err != nil {
			return fmt.Errorf("%w: InstanceType: %w", ErrInvalidOperation, err)
		}
		o.stableType = stableType
		return nil
	}
}

// InstanceMesh names the mesh a missing Instance Spot is placed in (§7.1:
// "No record, InMesh specified: picks a target node from that Mesh"). A
// Ready Spot keeps its own mesh whatever this says.
func InstanceMesh(name string) InstanceOption {
	return func(o *instanceOptions) error {
		if o.inMesh != nil {
			return fmt.Errorf("%w: InstanceMesh given twice", ErrInvalidOperation)
		}
		o.inMesh = &name
		return nil
	}
}

// MaxInstanceMessage is the largest first message a cold activation can
// carry: the stored activation record (creation info + first message) is at
// most 1 MiB (§7, activation.MaxRecordBytes), and its header takes at most
// a few KiB of it. SendInstance and RequestInstance hold every message to
// it, also one to a Ready Instance Spot: any of them may become a cold
// activation's first message (the Spot ends with its node, and the next
// message activates it again), and it is checked before the id is looked
// up. (This comment said a Ready one had the usual limits until
// 2026-12-08; it never had.)
const MaxInstanceMessage = activation.MaxRecordBytes - 8<<10

// DefaultInstanceTimeout bounds SendInstance/RequestInstance when ctx has no
// deadline: one deadline from the first store read through the activation
// (and, for a request, its answer).
const DefaultInstanceTimeout = 30 * time.Second

// SendInstance sends body one-way to the Instance Spot spotID, activating
// it when it does not exist (§7.1). nil means the message was handed to the
// Ready Spot's owner or to the node that activates it; as with every
// one-way message, a failure after that is logged there, not returned.
func (m *Manager) SendInstance(ctx context.Context, spotID string, body []byte, opts ...InstanceOption) error {
	_, err := m.o.instanceCall(ctx, spotID, body, false, opts)
	return namedVerdict(err, spotID)
}

// RequestInstance sends body to the Instance Spot spotID, activating it
// when it does not exist, and returns the handler's reply.
func (m *Manager) RequestInstance(ctx context.Context, spotID string, body []byte, opts ...InstanceOption) ([]byte, error) {
	reply, err := m.o.instanceCall(ctx, spotID, body, true, opts)
	return reply, namedVerdict(err, spotID)
}

// namedVerdict names the Spot in a factory's verdict read from another
// node's answer, whose wire record carries no id (until 2026-12-07 such an
// error read `creation of "" failed`).
func namedVerdict(err error, id string) error {
	var failed *CreateFailedError
	var rejected *RejectedError
	switch {
	case errors.As(err, &failed) && failed.ID == "":
		failed.ID = id
	case errors.As(err, &rejected) && rejected.ID == "":
		rejected.ID = id
	}
	return err
}

// instanceMsg is one call of SendInstance/RequestInstance.
type instanceMsg struct {
	id         string
	stableType string // "" until chosen (§7.1 type rule)
	mesh       string
	body       []byte
	request    bool
	op         [16]byte
	deadline   time.Time
	// claimed: this node's activation claim on id is held by the caller
	// (the activating side, instance_target.go).
	claimed bool
}

// instanceTarget is the msgTarget of a Ready Instance Spot of generation gen.
func instanceTarget(id string, gen uint64, op router.OperationID) msgTarget {
	return msgTarget{fam: familySpot, inst: true, id: id, gen: gen, op: op}
}

func (o *objects) instanceCall(ctx context.Context, id string, body []byte, request bool, opts []InstanceOption) ([]byte, error) {
	var io instanceOptions
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&io); err != nil {
			return nil, err
		}
	}
	mesh, err := resolveMesh(o.role(), o.n.cfg.Node.MeshName, io.inMesh)
	other := errors.Is(err, errOtherMesh)
	if other {
		if err := record.ValidateMeshName(mesh); err != nil {
			return nil, fmt.Errorf("%w: InstanceMesh: %w", ErrInvalidOperation, err)
		}
	} else if err != nil {
		return nil, err
	}
	if err := record.ValidateObjectID(id); err != nil {
		return nil, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
	}
	if strings.HasPrefix(id, entrySpotPrefix) {
		return nil, fmt.Errorf("%w: SpotId %q uses the Entry Spot prefix %q", ErrInvalidOperation, id, entrySpotPrefix)
	}
	if len(body) > MaxInstanceMessage {
		return nil, fmt.Errorf("%w: an Instance Spot message is %d bytes, at most %d (it may be stored for a cold activation, §7.1)",
			ErrInvalidOperation, len(body), MaxInstanceMessage)
	}
	ctx, done, err := o.call(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultInstanceTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	c := &instanceMsg{id: id, stableType: io.stableType, mesh: mesh, body: body, request: request, op: NewOperationID(), deadline: dl}
	reply, err := o.runInstance(ctx, c, other, nil)
	if err != nil {
		return nil, classify(ctx, err, "instance spot "+id)
	}
	return reply, nil
}

// runInstance is the sender's loop: read the record; a Ready Instance Spot
// gets the message through the usual route (cache, fence, Message Follow);
// Creating is waited for; no record means picking a target that offers
// the type and handing it the activation (command 39). A target that did not
// take the activation (stale route, full, not serving) is excluded and
// another tried, up to the one deadline; excluded (nil for none) names node
// runs left out from the start. The source never creates a record or a
// generation itself (§7.1).
func (o *objects) runInstance(ctx context.Context, c *instanceMsg, otherMesh bool, excluded map[string]exclusion) ([]byte, error) {
	if excluded == nil {
		excluded = map[string]exclusion{}
	}
	wait := newBackoff()
	opID := opIDOf(c.op)
	for {
		if err := ctx.Err(); err != nil {
			return nil, ctxErr(ctx, "message to instance spot %s", c.id)
		}
		row, _, err := o.readAuthorityAt(ctx, record.ObjectInstanceSpot, c.id)
		if err != nil {
			return nil, err
		}
		if row.Found {
			o.sentActivations.forget(c.id) // the record shows: the usual paths keep the order
			ready, err := o.instanceRow(ctx, c, row)
			if errors.Is(err, errCannotRestore) {
				// Its stored first message must run first, on a node
				// offering the type: the activation handed to such a
				// node recovers it there, then delivers this message.
				c.stableType = row.Record.Allocation.StableType
				reply, err := o.activateElsewhere(ctx, c, excluded)
				if err != nil && notTaken(err) && ctx.Err() == nil {
					continue
				}
				return reply, err
			}
			if err != nil {
				return nil, err
			}
			if !ready {
				if err := wait.sleep(ctx); err != nil {
					return nil, ctxErr(ctx, "instance spot %s: waiting for its activation", c.id)
				}
				continue
			}
			reply, err := o.deliver(ctx, instanceTarget(c.id, uint64(row.Record.ObjectGeneration), opID), c.body, c.request)
			if errors.Is(err, ErrNotFound) || errors.Is(err, ErrStaleGeneration) {
				// Closed (or replaced) since the read, and certainly not
				// delivered: read again — it may need activating now. After
				// a pause: a record that names a node which does not host
				// the Spot (yet) made this a read-and-deliver spin.
				if err := wait.sleep(ctx); err != nil {
					return nil, ctxErr(ctx, "instance spot %s: its record names a node that does not host it", c.id)
				}
				continue
			}
			return reply, err
		}
		if otherMesh {
			// Placement in a mesh this node is not a member of: the store
			// says whether it exists (as for Create).
			return nil, o.otherMesh(ctx, c.mesh)
		}
		if c.stableType == "" {
			if c.stableType, err = o.instanceTypeOf(ctx, c.mesh); err != nil {
				return nil, err
			}
		}
		reply, err := o.activateElsewhere(ctx, c, excluded)
		if err != nil && notTaken(err) && ctx.Err() == nil {
			continue
		}
		return reply, err
	}
}

// activateElsewhere places c's activation on a node offering its type and
// hands it over; a node that did not take it is added to excluded. While
// an activation this node sent for the id may not show in the store yet,
// the next message for it goes to the same node (sentActivations), which
// runs them in arrival order — placing it anew could activate the Spot
// elsewhere with the second message first.
func (o *objects) activateElsewhere(ctx context.Context, c *instanceMsg, excluded map[string]exclusion) ([]byte, error) {
	cand, ok := o.sentActivations.target(c.id, c.stableType, c.mesh)
	if !ok || excluded[cand.key()] != 0 {
		var err error
		if cand, err = o.place(ctx, placeRequest{kind: record.ObjectInstanceSpot, stableType: c.stableType, mesh: c.mesh, excluded: excluded}); err != nil {
			return nil, err
		}
	}
	o.sentActivations.sent(c.id, c.stableType, c.mesh, cand)
	reply, err := o.sendActivation(ctx, c, cand)
	if err != nil && notTaken(err) {
		o.sentActivations.forget(c.id)
		o.log.Debug("instance activation not taken; trying another node", "object", c.id, "node", cand.key(), "err", err)
		excluded[cand.key()] = excludedFailed
	}
	return reply, err
}

// sentActivations remembers, per Instance Spot id, the node this node last
// handed a cold activation to, until the store shows the Spot (or
// DefaultInstanceTimeout passes): messages that find no record yet follow
// the first to the same node instead of racing it.
type sentActivations struct {
	m expiring[sentActivation]
}

type sentActivation struct {
	stableType, mesh string
	cand             candidate
}

// maxSentActivations bounds the map (oldest entries are not tracked; an
// entry only matters for the instants before its activation shows).
const maxSentActivations = 4096

func (s *sentActivations) target(id, stableType, mesh string) (candidate, bool) {
	a, ok := s.m.get(id)
	if !ok || a.stableType != stableType || a.mesh != mesh {
		return candidate{}, false
	}
	return a.cand, true
}

func (s *sentActivations) sent(id, stableType, mesh string, cand candidate) {
	s.m.put(id, sentActivation{stableType: stableType, mesh: mesh, cand: cand})
}

func (s *sentActivations) forget(id string) { s.m.forget(id) }

// expiring is a map by Instance Spot id whose entries last
// DefaultInstanceTimeout, bounded to maxSentActivations (a new entry past
// that is not kept: an entry only matters for the instants before an
// activation shows in the store).
type expiring[V any] struct {
	mu sync.Mutex
	m  map[string]expiringEntry[V]
}

type expiringEntry[V any] struct {
	v     V
	until time.Time
}

func (e *expiring[V]) get(id string) (V, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[id]
	if !ok || time.Now().After(x.until) {
		var zero V
		return zero, false
	}
	return x.v, true
}

func (e *expiring[V]) put(id string, v V) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]expiringEntry[V]{}
	}
	if len(e.m) >= maxSentActivations {
		now := time.Now()
		for k, x := range e.m {
			if now.After(x.until) {
				delete(e.m, k)
			}
		}
		if len(e.m) >= maxSentActivations {
			return
		}
	}
	e.m[id] = expiringEntry[V]{v: v, until: time.Now().Add(DefaultInstanceTimeout)}
}

func (e *expiring[V]) forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, id)
}

// instanceRow applies §7.1's "current location" rows to a record that
// exists: Ready of the Instance kind (and the named type) → deliver; Creating
// → wait (recovering it when its creator is gone); anything else under the
// id → TypeMismatch. It reports whether the record is Ready.
func (o *objects) instanceRow(ctx context.Context, c *instanceMsg, row authority.AuthorityRow) (bool, error) {
	al := row.Record.Allocation
	if al.ObjectKind != record.ObjectInstanceSpot {
		return false, fmt.Errorf("%w: %q is %s, not an Instance Spot", ErrTypeMismatch, c.id, aKind(al.ObjectKind))
	}
	if c.stableType != "" && al.StableType != c.stableType {
		return false, fmt.Errorf("%w: Instance Spot %q is of type %q, not %q", ErrTypeMismatch, c.id, al.StableType, c.stableType)
	}
	if al.State != record.AllocationActive {
		// Creating: its creator may be gone for good (cancel, §7.1).
		_, err := o.recoverInstance(ctx, row, c.claimed)
		return false, err
	}
	if row.Record.PendingCreation != nil {
		// Ready, first message not recorded done: if its owner is gone the
		// stored first message must run before anything new (§7.1).
		if recovered, err := o.recoverInstance(ctx, row, c.claimed); err != nil || recovered {
			return false, err
		}
		return true, nil
	}
	reclaimed, err := o.reclaimDead(ctx, row, true, true, "instance message")
	if err != nil || reclaimed {
		return false, err
	}
	return true, nil
}

// instanceTypeOf is §7.1's type rule for an omitted type, over the
// Instance Spot types the serving nodes of mesh offer.
func (o *objects) instanceTypeOf(ctx context.Context, mesh string) (string, error) {
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok {
		if err := o.n.Discover(ctx); err != nil {
			return "", classify(ctx, err, "discovery before choosing an Instance Spot type")
		}
		if snap, list, ok = o.n.lastSnapshotNumbered(); !ok {
			return "", fmt.Errorf("%w: no descriptor list yet", ErrUnavailable)
		}
	}
	t, err := activation.ChooseType(o.n.memo.offeredInstanceTypes(list, snap, mesh), "")
	switch {
	case errors.Is(err, activation.ErrNoInstanceType):
		return "", fmt.Errorf("%w: no serving node of mesh %q offers an Instance Spot type", ErrNotFound, mesh)
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	return t, nil
}

// activationRecord is the creation info and first message of c for cand.
func (o *objects) activationRecord(c *instanceMsg, cand candidate, replyRouteID uint64) activation.Record {
	return activation.Record{SpotID: c.id, StableType: c.stableType, MeshName: c.mesh,
		TargetRID: cand.node.RoutingID, TargetGen: cand.node.LifecycleGeneration,
		SourceRID: o.n.run.rid, SourceGen: o.n.run.lifecycleGeneration, SourceSpotID: entrySpotID(o.n.run),
		Operation: c.op, Request: c.request, ReplyRouteID: replyRouteID,
		DeadlineUnixMs: uint64(c.deadline.UnixMilli()), Body: c.body}
}

// sendActivation hands the activation to cand: to this node's own target
// side, or as command 39 with a cold-activation route. A request waits for
// the first message's reply; a send returns once the record left this node.
func (o *objects) sendActivation(ctx context.Context, c *instanceMsg, cand candidate) ([]byte, error) {
	if cand.local {
		var route replyRoute
		var ch chan localReply
		if c.request {
			call := o.n.tr.ExpectReply()
			defer call.Cancel()
			route = replyRoute{fam: familySpot, gen: o.n.run.lifecycleGeneration, corr: call.Correlation(), rid: o.n.run.rid}
			ch = make(chan localReply, 1)
			o.mu.Lock()
			o.waiters[route.key()] = ch
			o.mu.Unlock()
		}
		rec := o.activationRecord(c, cand, route.corr)
		if !c.request {
			// One-way: the activation runs on its own (as it would on a
			// peer); the caller does not wait for the factory.
			return nil, o.startActivation(rec, origin{rid: o.n.run.rid, gen: o.n.run.lifecycleGeneration}, nil)
		}
		if err := o.startActivation(rec, origin{rid: o.n.run.rid, gen: o.n.run.lifecycleGeneration}, nil); err != nil {
			o.dropWaiter(route.key())
			return nil, err
		}
		select {
		case rep := <-ch:
			if rep.err != nil {
				return nil, localReplyError(familySpot, rep.err)
			}
			return rep.body, nil
		case <-ctx.Done():
			o.dropWaiter(route.key())
			return nil, ctxErr(ctx, "request to instance spot %s", c.id)
		}
	}
	rec := o.activationRecord(c, cand, 0)
	b := &router.InstanceSpot{
		Route: router.InstanceRoute{Kind: router.InstanceRouteColdActivation, Cold: &router.InstanceColdRoute{
			TargetNodeRID: cand.node.RoutingID, TargetNodeGeneration: cand.node.LifecycleGeneration, TargetSpotID: c.id,
			TargetMeshName: c.mesh, StableType: c.stableType, TargetDescriptorVersion: cand.descriptorVersion,
			DeadlineUnixMs: rec.DeadlineUnixMs}},
		SourceNodeGeneration: rec.SourceGen, SourceNodeRID: rec.SourceRID, SourceSpotID: rec.SourceSpotID,
		OperationKind: router.InstanceSend, Operation: opIDOf(c.op),
	}
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: c.body}
	// Sent to the candidate's run only (endedRun). A candidate of a run
	// that ended (the id's activation handed there a moment ago,
	// sentActivations, or a list older than the link): the new run would
	// refuse it, and a one-way message was lost. Not taken: another node
	// is tried.
	//
	// A failure is judged as a direct message's (messageFailure,
	// requestFailure): the caller's deadline passing is
	// ErrDeadlineExceeded; an activation that never left this node
	// (errNotSent) keeps its cause even when that matches
	// context.DeadlineExceeded, so that notTaken tries another node within
	// the caller's deadline. Until 2026-12-07 a request's error matching
	// context.DeadlineExceeded was flattened into ErrDeadlineExceeded, and
	// a one-way one's was ErrUnavailable
	// (TestActivationNotSentIsTriedElsewhere).
	sendErr := func() error { return nil }
	if h := o.hook().activationSend; h != nil {
		sendErr = func() error { return h(c.id) }
	}
	if !c.request {
		err := sendErr()
		if err == nil {
			err = o.n.tr.SendRun(ctx, cand.node.RoutingID, cand.node.LifecycleGeneration, router.NewRecord(b, nil, payload))
		}
		if err != nil {
			if ended := runRefused(err); ended != nil {
				return nil, fmt.Errorf("activation of %s on %s: %w", c.id, cand.key(), ended)
			}
			return nil, messageFailure(fmt.Sprintf("activation of %s on %s", c.id, cand.key()), err)
		}
		return nil, nil
	}
	b.OperationKind = router.InstanceRequest // the transport sets ReplyRouteID (its correlation)
	var resp *router.Record
	err := sendErr()
	if err == nil {
		resp, err = o.n.tr.Request(ctx, cand.node.RoutingID, router.NewRecord(b, nil, payload), transport.Portable(),
			transport.Run(cand.node.LifecycleGeneration))
	}
	if err != nil {
		if ended := runRefused(err); ended != nil {
			return nil, fmt.Errorf("activation of %s on %s: %w", c.id, cand.key(), ended)
		}
		return nil, requestFailure("instance spot "+c.id, err)
	}
	return answerOf(familySpot, requestKind(familySpot), resp)
}

func (o *objects) dropWaiter(k string) {
	o.mu.Lock()
	delete(o.waiters, k)
	o.mu.Unlock()
}

// notTaken reports a refusal after which the target certainly did not take
// the activation (nothing stored, nothing run): another node may be tried.
func notTaken(err error) bool {
	return errors.Is(err, errRouteStale) || errorsIsAny(err, errNotSent...)
}

// instanceLimits are this node's own placement limits for an Instance Spot
// of stableType, as its descriptor publishes them (descriptor.go).
func (o *objects) instanceLimits(stableType string) authority.Limits {
	cfg := o.n.cfg.Node
	l := authority.Limits{Actors: cfg.Limits.Actors, Spots: cfg.Limits.Spots}
	if f, ok := o.registry[stableType]; ok {
		l.SpotType = f.Limit
	}
	if v, ok := cfg.Limits.SpotTypes[stableType]; ok {
		l.SpotType = v
	}
	return l
}

// instanceRole is nil when this node may activate Instance Spots at all.
func (o *objects) instanceRole() error {
	if o.role() != config.RoleServer {
		return fmt.Errorf("%w: %w: this node's object role is %q, not server", ErrUnavailable, errRouteStale, o.role())
	}
	if o.n.reloc == nil {
		return fmt.Errorf("%w: %w: no Relocation Store configured (relocation_store.provider)", ErrUnavailable, errRouteStale)
	}
	return nil
}
