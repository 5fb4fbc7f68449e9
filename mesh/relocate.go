package mesh

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Relocation of one Actor or Spot (spec §1.3, §8, §9): the source side and
// the Manager API. The order of the steps is mesh/relocation's Source
// machine; this file performs its actions. docs/RELOCATION.md has the
// sequence, the stages and the failure table.

// RelocationOutcome is how a move ended.
type RelocationOutcome uint8

// Relocation outcomes.
const (
	// Moved: the new owner is recorded and serves; this node follows.
	Moved RelocationOutcome = iota + 1
	// NotMoved: the move was refused or cancelled and the object is still
	// owned and served here (§9.4). Result.Reason says why.
	NotMoved
)

func (o RelocationOutcome) String() string {
	switch o {
	case Moved:
		return "moved"
	case NotMoved:
		return "notMoved"
	}
	return fmt.Sprintf("RelocationOutcome(%d)", uint8(o))
}

// RelocationTimings are the stage durations a move measured on the source.
type RelocationTimings struct {
	Secure  time.Duration // target capacity secured (§1.3 step 2)
	Capture time.Duration // turn finished, queue, timers and state captured (step 3)
	Record  time.Duration // Captured written (step 3)
	Restore time.Duration // Restore request and chunks sent, relay-ready received (steps 4–5)
	Cutover time.Duration // hold relayed and cutover sent (step 5)
	Total   time.Duration
}

// RelocationResult is what RelocateActor / RelocateSpot report.
type RelocationResult struct {
	Outcome RelocationOutcome
	// Reason says why the object did not move (relocation.Reason names).
	Reason string
	// Detail, when set, says in words what Reason sums up: for
	// "capacity", why the target's capacity was not secured — its owner
	// lease gone (a target that stopped or died), its limit reached, the
	// store not answering; for "targetFailed", the target's failure code
	// and text (e.g. "notServing: node is draining"); for "targetLost",
	// what a target that stopped after its relay-ready said
	// ("notServing: node is stopped"), when it did.
	Detail string
	// TargetNodeRID / TargetNodeGeneration name the node run chosen.
	TargetNodeRID        []byte
	TargetNodeGeneration uint64
	// AuthorityOwnerGeneration is the generation the new owner holds
	// (Moved), one above the one the object had.
	AuthorityOwnerGeneration uint64
	// PayloadBytes is the size of the Restore payload sent.
	PayloadBytes int
	// Relayed counts the messages that arrived during the move and were
	// relayed in order.
	Relayed int
	// Confirmed: the source read the new owner in the Location Store
	// before the deadline. The source never waits for a reply from the
	// target (§1.3 step 8) and never writes on its behalf; it only reads,
	// so that the caller learns the move is complete. Moved without
	// Confirmed means the cutover was submitted but the new owner was not
	// seen in time (see docs/RELOCATION.md, failure table).
	Confirmed bool
	Timings   RelocationTimings

	// storeFailed: the target's capacity was not secured because the
	// store failed the batch's reads (it did not answer), not because of
	// the target — a host command tries the same target again instead of
	// ruling it out (hostMoveOne).
	storeFailed bool
	// appSlow: the move ended at the bound of its wait for the
	// application on the source (waitingForApp) — the object's, not the
	// target's: a host command does not offer it to another target.
	appSlow bool
}

// RelocateOption adjusts a move.
type RelocateOption func(*relocateOptions)

type relocateOptions struct {
	target  []byte
	toNodes int      // ToNode options given: more than one is ErrInvalidOperation
	avoid   [][]byte // RIDs placement must not pick (a host move's retry)
	// prefer names, for the object's kind and stable type, the node
	// placement takes when it is a usable candidate with room (a host
	// command's target run, host_targets.go).
	prefer func(kind record.ObjectKind, stableType string) []byte
	// appWait, when positive, bounds the source's wait for the
	// application (waitingForApp).
	appWait time.Duration
}

// preferring makes placement take the node prefer names when it can.
func preferring(prefer func(kind record.ObjectKind, stableType string) []byte) RelocateOption {
	return func(o *relocateOptions) { o.prefer = prefer }
}

// waitingForApp bounds the source's wait for the application — the
// object's running turn to end (its hold), then its Snapshot — by d from
// when the wait begins, within the move's deadline (a host command's
// moves: hostAttempt). A move that reaches it ends as at its deadline
// (deadlineExceeded), marked appSlow.
func waitingForApp(d time.Duration) RelocateOption {
	return func(o *relocateOptions) { o.appWait = d }
}

// avoiding keeps placement away from the nodes rids (a host move retries an
// object whose move failed on a target elsewhere).
func avoiding(rids [][]byte) RelocateOption {
	return func(o *relocateOptions) { o.avoid = rids }
}

// ToNode names the target node by RoutingId; without it the target is
// placed like a creation (weight, capacity, excluding this node).
func ToNode(rid []byte) RelocateOption {
	return func(o *relocateOptions) { o.target, o.toNodes = append([]byte(nil), rid...), o.toNodes+1 }
}

// RelocateActor moves the Actor ref to another node with its state (per its
// factory's policy), its not-yet-run queue and its timers while messages
// keep arriving (§1.3). It must be called on the owner's node. The move is
// bounded by ctx's deadline (the relocation.deadline setting without one).
//
// The result is Moved or NotMoved (the object stays served here, §9.4).
// Errors: ErrInvalidOperation (not the owner node, DisableRelocation, an
// Entry Spot, a bad target, a nil option or ToNode given twice),
// ErrNotFound / ErrStaleGeneration (the ref),
// ErrMoving (already moving), ErrUnavailable (no target, store, lease).
func (m *Manager) RelocateActor(ctx context.Context, ref ActorRef, opts ...RelocateOption) (RelocationResult, error) {
	return m.o.relocate(ctx, record.ObjectActor, ref.ActorID, ref.ObjectGeneration, opts)
}

// RelocateSpot moves the User Spot ref as a unit (its own queue, timers and
// state); see RelocateActor. Moving its member Actors with it is a later
// feature (whole-User-Spot moves).
func (m *Manager) RelocateSpot(ctx context.Context, ref SpotRef, opts ...RelocateOption) (RelocationResult, error) {
	return m.o.relocate(ctx, record.ObjectUserSpot, ref.SpotID, ref.ObjectGeneration, opts)
}

// sourceMove is one move in progress on the source.
type sourceMove struct {
	o      *objects
	m      *relocation.Source
	key    spot.Key
	h      *hosted
	kind   record.ObjectKind
	id     string
	gen    uint64
	policy spot.Policy
	f      spot.Factory
	row    authority.AuthorityRow // the first read
	target candidate
	self   authority.Party
	ref    authority.RelocationRef
	bind   chunk.Binding
	bundle authority.Bundle

	deadline time.Time
	appWait  time.Duration // bounds the wait for the application (waitingForApp)
	captured spot.Captured
	state    []byte
	payload  []byte
	sent     bool // the Restore request left (the target may hold staging)
	relayed  int
	digest   router.RelayDigest
	// relayEnvs are the messages relayed to the target, kept (with the
	// payload) until the store names the target: if it never does, the
	// source restores the object with them (recoverLocal).
	relayEnvs []spot.Envelope
	// unrelayed are the held messages after the first the relay could not
	// send (the link failed mid-relay): they follow relayEnvs, to the new
	// owner once the store names it (passOnLeftovers), or back into the
	// object if the source takes it back (recoverLocal).
	unrelayed []spot.Envelope
	// copies are the one-way messages Message Follow passed on to the
	// target since the cutover, kept until the store names it
	// (follow_copies.go).
	copies  passCopies
	res     RelocationResult
	stageAt time.Time
	// refused is the store's refusal of the capacity batch (out of
	// memory, a failed save): the move did not begin, and the
	// caller gets it as an error rather than as a capacity failure of the
	// target, which trying another target would not cure.
	refused error
	// leftToTarget: the node stopped while the move's reservation release
	// was unconfirmed: the target may still commit, so the source neither
	// takes the object back nor reopens it.
	leftToTarget bool
	// reservationGone: the release found the reservation row gone — the
	// target's owner CAS consumed it, or a reclaim released it, which
	// needs this node's owner lease ended (ownerOf).
	reservationGone bool
	// owner is the authority row readOwner last read (discard names
	// whom it names).
	owner authority.AuthorityRow
	// told ends when the target says, after its relay-ready, that the
	// move can no longer commit (a target that stopped, its owner sweep
	// having released the reservation, or one whose arrival failed for
	// relay mismatch before any owner CAS: relocate_stopped.go); tell ends it
	// with what it said (a *targetSaid).
	told context.Context
	tell context.CancelCauseFunc
	// snap is the snapshot adapter's call of this move, once made
	// (relocate_snapshot.go).
	snap *snapshotCall
}

func (o *objects) relocate(ctx context.Context, kind record.ObjectKind, id string, gen uint64, opts []RelocateOption) (RelocationResult, error) {
	o.n.metrics.relocationStarted()
	t0 := time.Now()
	res, err := o.relocateOne(ctx, kind, id, gen, opts)
	o.n.metrics.relocationEnded(res, err, time.Since(t0))
	return res, err
}

// relocateOne is relocate without the metrics.
func (o *objects) relocateOne(ctx context.Context, kind record.ObjectKind, id string, gen uint64, opts []RelocateOption) (RelocationResult, error) {
	var ro relocateOptions
	for _, f := range opts {
		if f == nil {
			// As for a creation's options; until 2026-12-07 a nil option
			// panicked (TestRelocateOptionMisuseIsInvalidOperation).
			return RelocationResult{}, fmt.Errorf("%w: nil option", ErrInvalidOperation)
		}
		f(&ro)
	}
	if ro.toNodes > 1 {
		// Until 2026-12-07 the last one won, silently.
		return RelocationResult{}, fmt.Errorf("%w: ToNode given twice", ErrInvalidOperation)
	}
	if err := record.ValidateObjectID(id); err != nil {
		return RelocationResult{}, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
	}
	if !record.Generation(gen).Valid() {
		return RelocationResult{}, fmt.Errorf("%w: ObjectGeneration %d", ErrInvalidOperation, gen)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.n.cfg.Relocation.Deadline)
		defer cancel()
	}
	ctx, done, err := o.call(ctx)
	if err != nil {
		return RelocationResult{}, wrapErr(ErrUnavailable, err, "node closing")
	}
	defer done()
	start := time.Now()
	var s *sourceMove
	for {
		var opening <-chan struct{}
		s, opening, err = o.beginMove(ctx, kind, id, gen, ro)
		if opening == nil {
			break
		}
		// The store already names this node, but the move that brought
		// the object here has not finished (the owner CAS applied, the
		// merge has not run or the completion is not recorded yet): a
		// caller that moved it here a moment ago and moves it on must not
		// be refused for that. Wait for the arrival to end, then begin
		// again from a fresh read.
		select {
		case <-opening:
		case <-ctx.Done():
			return RelocationResult{}, fmt.Errorf("%w: %s %q is still opening after its move here (its move has not finished): %w", ErrUnavailable, kind, id, ctx.Err())
		}
	}
	if err != nil {
		return RelocationResult{}, err
	}
	res := s.run(ctx)
	if res.Outcome == NotMoved && !s.leftToTarget {
		o.readoptAfterHold(ctx, s.key, s.self.Owner.LeaseGeneration)
	}
	res.Timings.Total = time.Since(start)
	o.log.Info("relocation ended", "object", id, "kind", kind, "outcome", res.Outcome, "reason", res.Reason,
		"target", fmt.Sprintf("%x/%d", res.TargetNodeRID, res.TargetNodeGeneration), "bytes", res.PayloadBytes,
		"relayed", res.Relayed, "took", res.Timings.Total)
	if s.refused != nil && res.Outcome == NotMoved {
		return res, fmt.Errorf("%w: %s %q not moved, the store refused the target capacity batch: %w", ErrUnavailable, kind, id, s.refused)
	}
	return res, nil
}

// beginMove checks what §1.3 step 1 confirms — this node owns the object
// under its current lease and the record is Active at the ref's generation
// — picks the target, and marks the object moving. Anything refused here
// changed nothing. When the record names this node while the move that
// brought the object here has not finished yet (not opened, or its
// completion not yet recorded), it returns that arrival's end instead (and
// no move): the caller waits and begins again.
func (o *objects) beginMove(ctx context.Context, kind record.ObjectKind, id string, gen uint64, ro relocateOptions) (*sourceMove, <-chan struct{}, error) {
	s, err := o.beginMoveChecked(ctx, kind, id, gen, ro)
	if err == nil {
		return s, nil, nil // before op: taking its address moves it to the heap
	}
	var op *openingErr
	if errors.As(err, &op) {
		return nil, op.done, nil
	}
	return s, nil, err
}

// openingErr is beginMoveChecked's answer for an object this node owns in
// the store whose arrival has not opened yet or has not recorded its
// completion yet.
type openingErr struct{ done <-chan struct{} }

func (*openingErr) Error() string { return "object still opening after its move here" }

// beginMoveChecked is beginMove's check; see there.
// inOwnTurn reports whether ctx is the Context of the running turn of the
// object hosted here under key (spot.Object.InOwnTurn).
func (o *objects) inOwnTurn(ctx context.Context, key spot.Key) bool {
	o.mu.Lock()
	var obj *spot.Object
	if h, ok := o.hosted[key]; ok {
		obj = h.obj
	}
	o.mu.Unlock()
	return obj != nil && obj.InOwnTurn(ctx)
}

func (o *objects) beginMoveChecked(ctx context.Context, kind record.ObjectKind, id string, gen uint64, ro relocateOptions) (*sourceMove, error) {
	if err := o.n.lease.Gate().Admit(); err != nil {
		return nil, wrapErr(ErrUnavailable, err, "owner lease")
	}
	if o.inOwnTurn(ctx, spot.Key{Spot: kind != record.ObjectActor, ID: id}) {
		// Its handler moving it from its turn (t.Context()): the move
		// holds the object until its running turn ends, that is until the
		// call returns — it waited out the move's deadline and then spoke
		// of a handler blocked for long (developer try-out, 2026-12-08).
		return nil, fmt.Errorf("%w: %s %q cannot be moved from its own turn (a move waits for the running turn to end); "+
			"start the move from a goroutine the turn leaves running, or from another object", ErrInvalidOperation, kind, id)
	}
	row, _, err := o.readAuthorityAt(ctx, kind, id)
	if err != nil {
		return nil, classify(ctx, err, "relocate "+id)
	}
	o.hook().step(id, stepSourceRead)
	if !row.Found {
		return nil, fmt.Errorf("%w: no %s %q", ErrNotFound, kind, id)
	}
	if _, _, err := checkEndRow(row, kind, id, gen); err != nil {
		return nil, err
	}
	a := row.Record
	self, lg := o.n.Owner()
	me := authority.Party{Owner: authority.Owner{ID: self, LeaseGeneration: lg},
		Node: authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid, LifecycleGeneration: o.n.run.lifecycleGeneration}}
	if !authority.PartyOf(a).Equal(me) {
		if a.OwnerID == self && uint64(a.OwnerLeaseGeneration) < lg {
			// This node's own record from before its lease loss: the
			// object stayed here held by an operation (a move) that the
			// re-adoption passed over, and readoptAfterHold is taking it
			// under the new generation — passing, not another owner's.
			return nil, passing(fmt.Errorf("%w: %s %q is still recorded under this node's owner lease generation %d, from before its loss; "+
				"it is being re-adopted under %d", ErrUnavailable, kind, id, a.OwnerLeaseGeneration, lg))
		}
		return nil, fmt.Errorf("%w: %s %q is owned by %s on %x/%d; relocate it on its owner's node", ErrInvalidOperation, kind, id,
			a.OwnerID, a.Allocation.Descriptor.RoutingID, a.Allocation.DescriptorLifecycleGeneration)
	}
	if a.Allocation.State != record.AllocationActive {
		return nil, fmt.Errorf("%w: %s %q is not Ready", ErrUnavailable, kind, id)
	}
	f, ok := o.registry[a.Allocation.StableType]
	if !ok {
		return nil, fmt.Errorf("%w: no factory %q on this node", ErrUnavailable, a.Allocation.StableType)
	}
	if f.Policy == spot.PolicyDisabled {
		// §1.3: a DisableRelocation move is rejected before capture —
		// and before any store change.
		return nil, fmt.Errorf("%w: %s %q has policy DisableRelocation", ErrInvalidOperation, kind, id)
	}
	bun, err := authority.BundleFor(kind, a.Allocation.StableType)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	target, err := o.relocationTarget(ctx, kind, a.Allocation.StableType, ro)
	if err != nil {
		return nil, err
	}
	key := spot.Key{Spot: kind != record.ObjectActor, ID: id}
	o.mu.Lock()
	h, hostedHere := o.hosted[key]
	switch {
	case !hostedHere || h.entry || h.objectGeneration != gen:
		o.mu.Unlock()
		return nil, fmt.Errorf("%w: %s %q is not hosted on this node at generation %d", ErrUnavailable, kind, id, gen)
	case h.state == hostMoving:
		// Moved by another command (an application's RelocateActor during
		// a host command): passing — a host command retries it until the
		// object is movable here again or gone, instead of reporting it
		// Failed (and a drain then counting it removed) although it moved.
		o.mu.Unlock()
		return nil, passing(fmt.Errorf("%w: %s", ErrMoving, id))
	case h.state == hostIncoming && h.arrival != nil && h.ownerGeneration == uint64(a.AuthorityOwnerGeneration):
		// The record (read above) names this node at the generation the
		// arrival will open with: its owner CAS applied.
		done := h.arrival.done
		o.mu.Unlock()
		return nil, &openingErr{done: done}
	case h.state == hostServing && h.settling != nil:
		// Opened, but the move that brought it here is still recording
		// its completion, a change of the record just read.
		done := h.settling
		o.mu.Unlock()
		return nil, &openingErr{done: done}
	case h.state != hostServing:
		o.mu.Unlock()
		return nil, passing(fmt.Errorf("%w: %s %q is %s", ErrUnavailable, kind, id, h.state))
	case h.ownerGeneration != uint64(a.AuthorityOwnerGeneration):
		o.mu.Unlock()
		return nil, fmt.Errorf("%w: %s %q is hosted at AuthorityOwnerGeneration %d, the record has %d", ErrUnavailable, kind, id,
			h.ownerGeneration, a.AuthorityOwnerGeneration)
	}
	h.state = hostMoving // Destroy/Close now answer ErrMoving
	h.holding = make(chan struct{})
	o.mu.Unlock()

	s := &sourceMove{o: o, m: relocation.NewSource(policyOf(f.Policy)), key: key, h: h, kind: kind, id: id, gen: gen,
		policy: f.Policy, f: f, row: row, target: target, self: me, bundle: bun, appWait: ro.appWait}
	s.deadline, _ = ctx.Deadline()
	s.told, s.tell = context.WithCancelCause(context.Background())
	s.ref = authority.RelocationRef{RelocationID: random128(), TargetAttempt: randomAttempt(), ReservationID: random128()}
	s.bind = chunk.Binding{Relocation: router.RelocationID{High: binary.BigEndian.Uint64(s.ref.RelocationID[:8]),
		Low: binary.BigEndian.Uint64(s.ref.RelocationID[8:])}, TargetAttempt: s.ref.TargetAttempt,
		Source: chunk.SourceFence{OwnerID: self, LeaseGeneration: lg, NodeRID: string(o.n.run.rid), NodeGeneration: o.n.run.lifecycleGeneration}}
	s.res.TargetNodeRID, s.res.TargetNodeGeneration = target.node.RoutingID, target.node.LifecycleGeneration
	return s, nil
}

// relocationTarget places like a creation, excluding this node (§1.3 step
// 2 secures capacity on the node it picks), or takes the named node when
// it is a usable candidate; never one of avoid.
func (o *objects) relocationTarget(ctx context.Context, kind record.ObjectKind, stableType string, ro relocateOptions) (candidate, error) {
	rid := ro.target
	if rid != nil && bytes.Equal(rid, o.n.run.rid) {
		return candidate{}, fmt.Errorf("%w: the target is this node", ErrInvalidOperation)
	}
	req := placeRequest{kind: kind, stableType: stableType, mesh: o.n.cfg.Node.MeshName, only: rid, avoid: ro.avoid, notHere: true}
	if ro.prefer != nil && rid == nil {
		req.prefer = ro.prefer(kind, stableType)
	}
	c, err := o.place(ctx, req)
	if err != nil && rid != nil {
		return candidate{}, fmt.Errorf("%w: node %x cannot take %s %q: %w", ErrUnavailable, rid, kind, stableType, err)
	}
	return c, err
}

func policyOf(p spot.Policy) relocation.Policy {
	switch p {
	case spot.PolicyRecreate:
		return relocation.Recreate
	case spot.PolicyPreserveState:
		return relocation.Preserve
	}
	return relocation.Disable
}

// random128 is a non-zero 128-bit random id (RelocationId, Reservation ID,
// §8.1).
func random128() [16]byte {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if b != ([16]byte{}) {
			return b
		}
	}
}

// randomAttempt is a TargetAttemptGeneration: non-zero, compared for
// equality only, not derived from the target's lifecycle generation
// (§8.1). 63 bits, so it is a valid generation-style value.
func randomAttempt() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if v := binary.BigEndian.Uint64(b[:]) >> 1; v != 0 {
			return v
		}
	}
}

// run drives the source machine to its end.
func (s *sourceMove) run(ctx context.Context) RelocationResult {
	ev := relocation.EvBegin
	for {
		acts, err := s.m.Step(ev)
		if err != nil {
			// A framework bug: an action answered an event its state does
			// not take. Never leave the object held: the machine is the
			// judge of what is safe, so stop here loudly.
			s.o.log.Error("relocation machine refused an event", "object", s.id, "err", err)
			break
		}
		ev = 0
		for _, a := range acts {
			if next := s.do(ctx, a); next != 0 {
				ev = next
			}
		}
		if s.m.State().Final() {
			break
		}
		if ev == 0 {
			s.o.log.Error("relocation action produced no event", "object", s.id, "state", s.m.State())
			break
		}
	}
	if s.m.State() == relocation.SrcMoved {
		// SrcMoved is reached only once the store was read naming the
		// target under this move.
		s.res.Outcome, s.res.Confirmed = Moved, true
		s.res.AuthorityOwnerGeneration = s.targetRoute().ownerGen
	} else {
		s.res.Outcome, s.res.Reason = NotMoved, s.m.Reason().String()
		if s.leftToTarget {
			s.res.Reason = relocation.ReasonLeftToTarget.String()
		}
	}
	s.res.Relayed = s.relayed
	s.o.dropCopies(s) // a move that ended otherwise keeps nothing
	// Every end lets go of the hold above; this one is for a move that
	// stopped on a machine error, so that no held barrier waits for ever.
	// Likewise the cutover: a move that relayed and then reopened or
	// discarded the object ends it here, and the arrivals waiting for it
	// are admitted again.
	s.o.mu.Lock()
	s.h.letGoLocked()
	s.h.endCutoverLocked()
	s.o.moveEndsLocked(s)
	s.o.mu.Unlock()
	return s.res
}

// lap returns the time since the last lap.
func (s *sourceMove) lap() time.Duration {
	now := time.Now()
	if s.stageAt.IsZero() {
		s.stageAt = now
		return 0
	}
	d := now.Sub(s.stageAt)
	s.stageAt = now
	return d
}

// bg is a context for the cleanup steps, which must run even when the
// move's own context ended (its deadline is what ended it), bounded by the
// node's life.
func (s *sourceMove) bg(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.o.halt, d)
}

// do performs one action and returns the event it produced (0: none).
func (s *sourceMove) do(ctx context.Context, a relocation.SourceAction) relocation.SourceEvent {
	o := s.o
	switch a {
	case relocation.ActSecureCapacity:
		s.lap()
		var err error
		for try := 0; ; try++ {
			o.hook().step(s.id, stepSourceSecure)
			err = s.write(ctx, "capacity", func(ctx context.Context) error {
				_, err := o.exec.SecureCapacity(ctx, authority.CapacityRequest{
					Target: authority.Target{Node: s.target.node, Owner: s.target.owner, Limits: s.target.limits},
					Bundle: s.bundle, ReservationID: s.ref.ReservationID,
					Object:           authority.Object{ID: s.id, Kind: s.kind, StableType: s.h.stableType},
					ObjectGeneration: s.gen, AuthorityVersion: s.row.Version, Source: s.self})
				return err
			})
			row, benign := s.benignChange(err)
			if !benign || try == secureRebase {
				break
			}
			// Nothing is written yet and the object still serves: the
			// move begins again from the record as it is now.
			o.log.Debug("relocation: record changed before the capacity was secured; again on its new version",
				"object", s.id, "from", s.row.Version, "to", row.Version)
			s.row = row
		}
		s.res.Timings.Secure = s.lap()
		switch {
		case err == nil:
			return relocation.EvSecured
		case ctx.Err() != nil:
			return relocation.EvDeadline
		case errors.Is(err, authority.ErrOutcomeUnknown):
			o.log.Info("relocation: the store did not confirm the capacity batch; releasing it", "object", s.id, "err", err)
			return relocation.EvSecureUnknown
		}
		switch {
		case errors.Is(err, locstore.ErrWriteRefused):
			s.refused = err
		case errors.Is(err, locstore.ErrUnavailable):
			s.res.storeFailed = true
		}
		o.log.Info("relocation: target capacity not secured", "object", s.id, "err", err)
		s.res.Detail = err.Error()
		return relocation.EvSecureFailed
	case relocation.ActHoldAndCapture:
		// The running turn finishes; arrivals queue (ingress hold). A turn
		// still running at the move's deadline (a handler blocked on a
		// slow call) ends the move there; the object goes on here. A host
		// command's move waits for the application at most appWait.
		if s.appWait > 0 {
			moveCtx := ctx
			appCtx, cancel := context.WithTimeout(moveCtx, s.appWait)
			defer cancel()
			// Ended by the bound, not by the move's own deadline: the
			// object's slowness, not the target's.
			defer func() { s.res.appSlow = moveCtx.Err() == nil && appCtx.Err() != nil }()
			ctx = appCtx
		}
		if err := s.h.obj.HoldContext(ctx); err != nil {
			s.res.Timings.Capture = s.lap()
			s.res.Detail = "a turn of the object was still running at the move's deadline (a handler blocked for long)"
			o.log.Warn("relocation: a turn of the object ran until the move's deadline; not moved, it stays served here",
				"object", s.id, "type", s.h.stableType, "waited", s.res.Timings.Capture)
			if errors.Is(err, context.DeadlineExceeded) {
				return relocation.EvDeadline
			}
			return relocation.EvCancel
		}
		c, err := s.h.obj.Capture()
		if err == nil && s.policy == spot.PolicyPreserveState {
			var late bool
			s.state, late, err = s.snapshot(ctx)
			ended := late || ctx.Err() != nil
			if err != nil || ended {
				// The queue is back in front: nothing was lost.
				if rerr := s.h.obj.Requeue(c); rerr != nil {
					o.log.Error("relocation: captured queue not put back", "object", s.id, "err", rerr)
				}
			}
			if ended {
				// The move ended while the adapter was in its call:
				// relocate_snapshot.go.
				return s.snapshotEnded(ctx, late, err)
			}
			if err != nil {
				if !errors.Is(err, spot.ErrHandlerPanic) {
					err = fmt.Errorf("snapshot adapter: %w", err)
				}
				s.res.Timings.Capture = s.lap()
				// The application's text, bounded: it goes on into a host
				// command's reasons, logs and /v1/status.
				s.res.Detail = validText(err.Error())
				o.log.Warn("relocation: the object's snapshot adapter failed; not moved, it stays served here",
					"object", s.id, "type", s.h.stableType, "err", s.res.Detail)
				return relocation.EvSnapshotFailed
			}
		}
		s.res.Timings.Capture = s.lap()
		if err != nil {
			o.log.Warn("relocation: capture failed", "object", s.id, "err", err)
			return relocation.EvCaptureFailed
		}
		s.captured = c
		return relocation.EvCaptured
	case relocation.ActRecordCaptured:
		o.hook().step(s.id, stepSourceRecord)
		err := s.write(ctx, "Captured", func(ctx context.Context) error {
			_, err := o.exec.RecordCaptured(ctx, authority.CaptureRequest{
				Object:           authority.Object{ID: s.id, Kind: s.kind, StableType: s.h.stableType},
				ObjectGeneration: s.gen, IfVersion: s.row.Version, Source: s.self, Target: s.target.party(), Move: s.ref})
			return err
		})
		s.res.Timings.Record = s.lap()
		if err != nil {
			o.log.Info("relocation: Captured not recorded", "object", s.id, "err", err)
			return relocation.EvRecordRefused
		}
		return relocation.EvRecorded
	case relocation.ActStreamRestore:
		ev := s.stream(ctx)
		s.res.Timings.Restore = s.lap()
		return ev
	case relocation.ActRelayHold:
		o.hook().step(s.id, stepSourceReady)
		s.relayHold(ctx)
		return 0
	case relocation.ActSendCutover:
		o.hook().step(s.id, stepSourceCutover)
		s.cutover(ctx)
		s.res.Timings.Cutover = s.lap()
		return relocation.EvCutoverSubmitted
	case relocation.ActKeepFollow:
		s.follow()
		return 0
	case relocation.ActFreePayload:
		s.payload, s.state, s.captured, s.relayEnvs, s.unrelayed = nil, nil, spot.Captured{}, nil, nil
		o.dropCopies(s)
		return 0
	case relocation.ActAwaitCommit:
		if s.confirm(ctx) {
			return relocation.EvCommitSeen
		}
		if s.told.Err() != nil {
			return s.toldStopped()
		}
		return relocation.EvDeadline
	case relocation.ActRecover:
		s.recoverLocal()
		return 0
	case relocation.ActDiscard:
		s.discard()
		return 0
	case relocation.ActHandOver:
		s.handOver()
		return 0
	case relocation.ActSendCancel:
		cctx, cancel := s.bg(time.Second)
		defer cancel()
		if err := o.n.tr.SendWait(cctx, transport.RID(s.target.node.RoutingID),
			router.NewRecord(&router.RelocationCancel{Binding: s.bind.Wire()}, nil, nil)); err != nil {
			// The release below is what makes the target's commit
			// impossible; the cancel only frees its staging early.
			o.log.Debug("relocation: cancel not sent", "object", s.id, "err", err)
		}
		return 0
	case relocation.ActReleaseCapacity:
		return s.release()
	case relocation.ActReadOwner:
		return s.readOwner()
	case relocation.ActRequeue:
		if s.leftToTarget {
			return 0
		}
		if err := s.h.obj.Requeue(s.captured); err != nil {
			o.log.Error("relocation: captured queue not put back", "object", s.id, "err", err)
		}
		return 0
	case relocation.ActSessionAbort:
		// §9.4 step 3: command 44 abort, one-way, to every bound Session's
		// owner, before the source reopens (the machine orders it).
		s.sessionAbort()
		return 0
	case relocation.ActForgetProgress:
		s.payload, s.state = nil, nil
		return 0
	case relocation.ActReopenAfterSnapshot:
		s.reopenAfterSnapshot()
		return 0
	case relocation.ActReopen:
		if s.leftToTarget {
			o.log.Warn("relocation: the node stopped while its move's reservation release was unconfirmed; the object is left to the target",
				"object", s.id)
			return 0
		}
		o.mu.Lock()
		if o.hosted[s.key] == s.h {
			s.h.state = hostServing
		}
		s.h.letGoLocked()
		s.h.endCutoverLocked()
		o.mu.Unlock()
		s.h.obj.Release()
		return 0
	}
	o.log.Error("relocation: unknown source action", "action", a)
	return 0
}

// secureRebase bounds how often SecureCapacity begins again on a record
// that changed without changing what the move needs.
const secureRebase = 3

// benignChange reports whether err is a refusal only because the authority
// row's version moved on since the first read while the record still says
// what the move was begun on — Active, this node's run as its owner, the
// same ObjectGeneration and AuthorityOwnerGeneration. The write that does
// this is the previous move's completion (the target erases its progress
// right after it opened the object, and a caller may move the object on
// within that moment). It returns the row as it is now.
func (s *sourceMove) benignChange(err error) (authority.AuthorityRow, bool) {
	if err == nil {
		return authority.AuthorityRow{}, false // before ae (it would move to the heap)
	}
	var ae *authority.Error
	if !errors.As(err, &ae) || !errors.Is(ae.Kind, authority.ErrConflict) || ae.Current == nil {
		return authority.AuthorityRow{}, false
	}
	cur := *ae.Current
	if !cur.Found || cur.Version == s.row.Version {
		return authority.AuthorityRow{}, false
	}
	a, was := cur.Record, s.row.Record
	ok := a.Allocation.State == record.AllocationActive && authority.PartyOf(a).Equal(s.self) &&
		a.ObjectGeneration == was.ObjectGeneration && a.AuthorityOwnerGeneration == was.AuthorityOwnerGeneration &&
		a.Allocation.StableType == was.Allocation.StableType && a.Allocation.ObjectKind == was.Allocation.ObjectKind
	return cur, ok
}

// write makes one of the move's store changes, only while the owner lease
// gate admits new work (§5: without owner eligibility, relocation state
// changes and capacity reservations are blocked).
func (s *sourceMove) write(ctx context.Context, what string, change func(context.Context) error) error {
	if err := s.o.n.lease.Gate().Admit(); err != nil {
		return wrapErr(ErrUnavailable, err, "owner lease: %s not recorded", what)
	}
	return change(ctx)
}

// party is the candidate's host run and node run.
func (c candidate) party() authority.Party { return authority.Party{Node: c.node, Owner: c.owner} }

// unwrapGated returns the application handler inside the admission-gate
// wrapper (the snapshot adapter knows the application's type only).
func unwrapGated(h spot.Handler) spot.Handler {
	if g, ok := h.(gated); ok {
		return g.h
	}
	return h
}

// stream sends the Restore request (40) and its chunks (52) on the ordered
// connection and waits for relay-ready (53).
func (s *sourceMove) stream(ctx context.Context) relocation.SourceEvent {
	o := s.o
	p := &chunk.Payload{Object: chunk.Object{Kind: spotKind(s.kind), ID: s.id, Generation: s.gen, StableType: s.h.stableType},
		Policy: s.policy, State: s.state, Captured: s.captured, Sessions: o.payloadSessions(s.h)}
	payload, err := chunk.Encode(p, chunk.EncodeOptions{})
	if err != nil {
		o.log.Error("relocation: payload not encoded", "object", s.id, "err", err)
		return relocation.EvStreamFailed
	}
	s.payload, s.res.PayloadBytes = payload, len(payload)
	tr, err := chunk.Split(payload, o.n.cfg.Relocation.ChunkSize)
	if err != nil {
		o.log.Error("relocation: payload not split", "object", s.id, "err", err)
		return relocation.EvStreamFailed
	}
	peer := transport.RID(s.target.node.RoutingID)
	o.streamStarts(s)
	prep := &router.RelocationPrepare{Binding: s.bind.Wire(),
		Object: router.RelocationObject{Kind: wireKind(s.kind), ObjectID: s.id, StableType: s.h.stableType,
			ObjectGeneration: s.gen, ExpectedAuthorityOwnerGeneration: uint64(s.row.Record.AuthorityOwnerGeneration)},
		TargetNodeRID: s.target.node.RoutingID, TargetNodeGeneration: s.target.node.LifecycleGeneration,
		TotalLength: tr.Declaration.Length, ChunkCount: tr.Declaration.Count, CRC32C: tr.Declaration.CRC32C,
		DeadlineUnixMs: uint64(s.deadline.UnixMilli())}
	call, err := o.n.tr.Start(ctx, peer, router.NewRecord(prep, nil, nil))
	if err != nil {
		return s.streamErr(ctx, err)
	}
	defer call.Cancel()
	s.sent = true
	for i, c := range tr.Chunks {
		c = o.hook().chunkOut(s.id, s.bind, i, c)
		rec := router.NewRecord(&router.RelocationState{Binding: s.bind.Wire(), ChunkIndex: uint32(i), Data: c}, nil, nil)
		if err := o.n.tr.SendWait(ctx, peer, rec); err != nil {
			return s.streamErr(ctx, err)
		}
	}
	resp, err := call.Wait(ctx)
	if err != nil {
		return s.streamErr(ctx, err)
	}
	ready, ok := resp.Body.(*router.RelocationReady)
	if !ok {
		o.log.Warn("relocation: Restore answered with the wrong command", "object", s.id, "command", resp.Command)
		return relocation.EvTargetFailed
	}
	if ready.Outcome != router.RelocationRelayReady {
		o.log.Info("relocation: target failed the Restore", "object", s.id, "failure", ready.Failure, "detail", ready.Detail)
		s.res.Detail = fmt.Sprintf("%s: %s", ready.Failure, ready.Detail)
		if st, ok := leavingRefusal(ready.Failure, ready.Detail); ok {
			// The target's descriptor says so already; this node's list
			// may not yet: no further object is placed on it.
			o.n.noteRefusedLeaving(s.target.node.RoutingID, s.target.node.LifecycleGeneration, st)
		}
		return relocation.EvTargetFailed
	}
	return relocation.EvRelayReady
}

func (s *sourceMove) streamErr(ctx context.Context, err error) relocation.SourceEvent {
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return relocation.EvDeadline
		}
		return relocation.EvCancel
	}
	s.o.log.Info("relocation: Restore stream failed", "object", s.id, "err", err)
	return relocation.EvStreamFailed
}

// targetRoute is the fence of the object at its new owner.
func (s *sourceMove) targetRoute() routeTo {
	return routeTo{nodeRID: s.target.node.RoutingID, nodeGen: s.target.node.LifecycleGeneration,
		ownerGen: uint64(s.row.Record.AuthorityOwnerGeneration) + 1, leaseGen: s.target.owner.LeaseGeneration}
}

// relayHold relays the ingress hold in arrival order on the ordered
// connection (§1.3 step 5). From here on nothing reaches the object's
// mailbox: the state flips to cutover, and later arrivals wait for the
// cutover to be submitted and then follow the object (Message Follow).
func (s *sourceMove) relayHold(ctx context.Context) {
	o := s.o
	o.mu.Lock()
	s.h.beginCutoverLocked()
	o.mu.Unlock()
	hold, err := s.h.obj.Capture()
	if err != nil {
		o.log.Error("relocation: ingress hold not captured", "object", s.id, "err", err)
		return
	}
	to := s.targetRoute()
	peer := transport.RID(s.target.node.RoutingID)
	var digest router.RelayDigest
	if len(hold.Queue) > 0 { // most moves hold nothing: no context for them
		cctx, cancel := s.bg(time.Until(s.deadline) + 5*time.Second)
		defer cancel()
		digest = s.relay(cctx, hold.Queue, to, peer)
	}
	for _, env := range s.captured.Queue {
		s.dropFastPath(env)
	}
	s.relayed = int(digest.Count())
	s.digest = digest
	if s.relayed > 0 {
		o.notePassedOn(msgTarget{fam: famOf(s.kind), id: s.id, gen: s.gen}, s.followMove())
	}
}

// relay sends the held messages to the target in order and returns the
// digest of what it sent.
func (s *sourceMove) relay(cctx context.Context, queue []spot.Envelope, to routeTo, peer transport.RID) router.RelayDigest {
	o := s.o
	var digest router.RelayDigest
	for i, env := range queue {
		rec, err := envelopeRecord(s.h, s.id, entrySpotID(o.n.run), env, to, 0)
		if err != nil {
			o.log.Error("relocation: held message not relayed", "object", s.id, "err", err)
			continue
		}
		frames, err := router.Encode(rec)
		if err != nil {
			o.log.Error("relocation: held message not encoded", "object", s.id, "err", err)
			continue
		}
		if h := o.hook().relaySend; h != nil {
			err = h(s.id, i)
		}
		if err == nil {
			// Only to the target's run (endedRun): a target that stopped
			// and started again since its relay-ready has a new run,
			// which refused them as addressed to another run (one-way
			// ones counted dropped, requests answered "not run") while
			// this move, whose target can no longer commit, puts them
			// back into the object (recoverLocal).
			err = o.n.tr.SendWaitRun(cctx, peer, to.nodeGen, rec)
		}
		if err != nil {
			// Kept, in order: they were accepted, and dropping them lost
			// them without a word once the target committed anyway.
			s.unrelayed = append(s.unrelayed, queue[i:]...)
			o.log.Warn("relocation: relay not sent; the rest of the hold follows the object", "object", s.id,
				"unrelayed", len(s.unrelayed), "err", err)
			break
		}
		digest.Add(frames)
		s.relayEnvs = append(s.relayEnvs, env)
		s.dropFastPath(env)
	}
	return digest
}

// cutover sends the one-way cutover (54) with the relayed count and digest
// (§1.3 step 5). Nobody waits for a reply (step 8).
func (s *sourceMove) cutover(ctx context.Context) {
	cctx, cancel := s.bg(5 * time.Second)
	defer cancel()
	c := &router.RelocationCutover{Binding: s.bind.Wire(), RelayedCount: s.digest.Count(), RelayedCRC32C: s.digest.Sum32()}
	if h := s.o.hook().cutover; h != nil {
		h(s.id, c)
	}
	rec := router.NewRecord(c, nil, nil)
	if err := s.o.n.tr.SendWait(cctx, transport.RID(s.target.node.RoutingID), rec); err != nil {
		// The target commits CutoverGrace after relay-ready anyway.
		s.o.log.Warn("relocation: cutover not sent; the target commits after its grace", "object", s.id, "err", err)
	}
}

// dropFastPath forgets the reply function of a request that moved: its
// answer now comes from the new owner, straight to the requester.
func (s *sourceMove) dropFastPath(env spot.Envelope) {
	if env.Kind != spot.Request {
		return
	}
	r, err := decodeReplyRoute(env.ReplyRoute)
	if err != nil {
		return
	}
	s.o.mu.Lock()
	delete(s.o.remotes, r.key())
	s.o.mu.Unlock()
}

// follow records source→target for Message Follow (§7.3) and retires the
// object here: from now on its arrivals are passed on, never run.
func (s *sourceMove) follow() {
	o := s.o
	// Arrivals wait for this to finish (hostCutover), then follow: what
	// the object still holds must reach the new owner before them. A move
	// that never relayed (its relay-ready lost, then the target's commit
	// won the race with the cancel) still has its ingress hold here.
	o.mu.Lock()
	relayedHold := s.h.state == hostCutover
	if !relayedHold {
		s.h.beginCutoverLocked()
	}
	o.mu.Unlock()
	rest := s.unrelayed
	if !relayedHold {
		if hold, err := s.h.obj.Capture(); err != nil {
			o.log.Error("relocation: ingress hold not captured", "object", s.id, "err", err)
		} else {
			rest = append(rest, hold.Queue...)
		}
	}
	to := s.targetRoute()
	m := s.followMove()
	o.keepPassCopies(s)
	if err := o.recordMove(m); err != nil {
		o.log.Warn("relocation: Message Follow not recorded", "object", s.id, "err", err)
	}
	o.cache.Drop(m.Key)
	s.passOnLeftovers(rest, to)
	// Kept until the store names the target (ActFreePayload): if it never
	// does, the target drops them unrun and recoverLocal puts them back.
	s.unrelayed = rest
	o.mu.Lock()
	if o.hosted[s.key] == s.h {
		delete(o.hosted, s.key)
	}
	o.mu.Unlock()
	s.h.obj.Discard() // empty: its queue and timers left in the payload, the relay and the leftovers
	o.mu.Lock()
	s.h.endCutoverLocked()
	o.mu.Unlock()
}

// followMove is this move's Message Follow record (source→target).
func (s *sourceMove) followMove() follow.Move {
	to := s.targetRoute()
	return follow.Move{Key: followKey(s.kind, s.id), ObjectGeneration: s.gen,
		PreviousAuthorityOwnerGeneration: uint64(s.row.Record.AuthorityOwnerGeneration), AuthorityOwnerGeneration: to.ownerGen,
		Owner: follow.Owner{ID: s.target.owner.ID, LeaseGeneration: s.target.owner.LeaseGeneration},
		Route: follow.Route{NodeRID: s.target.node.RoutingID, NodeGeneration: s.target.node.LifecycleGeneration}}
}

// passOnLeftovers sends the new owner, in order, the messages this move
// took in but did not relay, as Message Follow passes on later arrivals.
// Those that cannot be sent are counted and logged: their senders were told
// they were accepted.
func (s *sourceMove) passOnLeftovers(rest []spot.Envelope, to routeTo) {
	if len(rest) == 0 {
		return
	}
	o := s.o
	ctx, cancel := context.WithTimeout(context.Background(), followSendWait)
	defer cancel()
	lost := 0
	var last error
	for _, env := range rest {
		if err := s.passOne(ctx, env, to); err != nil {
			lost++
			last = err
		}
	}
	if lost < len(rest) {
		o.notePassedOn(msgTarget{fam: famOf(s.kind), id: s.id, gen: s.gen}, s.followMove())
	}
	if lost > 0 {
		o.log.Warn("relocation: messages taken in during the move not passed on to the new owner (lost)", "object", s.id,
			"lost", lost, "of", len(rest), "err", last)
		return
	}
	o.log.Info("relocation: messages taken in during the move passed on to the new owner", "object", s.id, "count", len(rest))
}

// release returns the target capacity reservation (§9.4 step 4). Its
// outcome decides whether the source may reopen: once released, the
// target's owner CAS (which needs the reservation) cannot succeed. An
// unknown outcome is retried — reopening without knowing could make two
// owners — for as long as the node runs.
func (s *sourceMove) release() relocation.SourceEvent {
	wait := s.heldRetry("reservation release")
	for {
		ctx, cancel := s.bg(5 * time.Second)
		var res authority.Result
		err := s.write(ctx, "reservation release", func(ctx context.Context) (err error) {
			res, err = s.o.exec.ReleaseCapacity(ctx, authority.CapacityRequest{
				Target: authority.Target{Node: s.target.node, Owner: s.target.owner}, Bundle: s.bundle, ReservationID: s.ref.ReservationID})
			return err
		})
		cancel()
		switch {
		case err == nil && (res.AlreadyApplied || res.Recovered):
			// Recovered: the answer was lost and a re-read found the row
			// gone — which the target's owner CAS, consuming the
			// reservation, leaves too. Only the owner read tells them
			// apart; taken for a release, the source reopened while the
			// target served: two instances.
			wait.confirmed()
			s.reservationGone = true
			return relocation.EvReservationGone
		case err == nil:
			wait.confirmed()
			return relocation.EvReleased
		}
		if wait.failed(err) != nil {
			// The node is stopping and nothing was released: the target
			// may still commit (after the cutover, or on its own once it
			// sent relay-ready), so the source must not take the object
			// back — it would serve, or run its captured work, beside the
			// target. The move is left to the target; the shutdown's
			// sweep leaves its record while the reservation exists
			// (sweep.go). Before, the source reopened the object and its
			// sweep deleted the record the target was committing.
			s.leftToTarget = true
			return relocation.EvReleased
		}
	}
}

// heldRetry paces a store call that must be confirmed before a held
// object may serve again (release, readOwner): it is retried for as long as
// the node runs, since guessing could make two owners. The pause grows to
// heldRetryMax — a store that is down, or a node whose lease failed,
// answers at once, and 16 moves retrying every 50 ms wrote hundreds of
// warnings a second — and the object's first failure is logged at WARN,
// the rest at DEBUG, its confirmation at INFO.
func (s *sourceMove) heldRetry(what string) *heldRetry {
	return &heldRetry{s: s, what: what, d: 2 * time.Millisecond}
}

const heldRetryMax = 2 * time.Second

type heldRetry struct {
	s     *sourceMove
	what  string
	d     time.Duration
	tries int
}

// failed logs err and waits before the next try; its error is the node
// halting.
func (r *heldRetry) failed(err error) error {
	r.tries++
	level := slog.LevelDebug
	if r.tries == 1 {
		level = slog.LevelWarn
	}
	r.s.o.log.Log(context.Background(), level, "relocation: "+r.what+" not confirmed; the object stays held until it is (retrying)",
		"object", r.s.id, "attempts", r.tries, "err", err)
	d := r.d
	r.d = min(2*r.d, heldRetryMax)
	return ctxsleep.For(r.s.o.halt, d)
}

// confirmed logs the end of a wait that failed at least once.
func (r *heldRetry) confirmed() {
	if r.tries > 0 {
		r.s.o.log.Info("relocation: "+r.what+" confirmed after a store failure", "object", r.s.id, "attempts", r.tries+1)
	}
}

// recoverLocal takes the object back after relay-ready when the target can
// no longer commit (its reservation was released, or the store still names
// this node after the deadline): the instance is rebuilt from the kept
// state, queue and timers, the relayed messages queue behind, the follow
// entry is dropped, and dispatch opens. The one-way messages the source
// passed on to the target after the cutover follow, from their copies
// (follow_copies.go: the target never ran them); requests passed on are
// answered by the failed target (Unavailable), or end at their deadlines
// when it died.
func (s *sourceMove) recoverLocal() {
	o := s.o
	if s.leftToTarget {
		o.log.Warn("relocation: the node stopped while the move awaited its target's commit; the object is left to the target",
			"object", s.id, "target", fmt.Sprintf("%x/%d", s.target.node.RoutingID, s.target.node.LifecycleGeneration))
		return
	}
	// Only this move's departure: earlier ones still carry senders that
	// hold the routes of earlier stays here.
	o.follow.Revert(s.followMove())
	passed := o.takeCopies(s) // after the removal: no pass-on can add one later
	req := spot.CreateRequest{ID: s.id, Generation: s.gen, StableType: s.h.stableType}
	var h spot.Handler
	var err error
	ctx, cancel := s.bg(o.n.cfg.Relocation.Deadline)
	defer cancel()
	if s.policy == spot.PolicyPreserveState {
		h, err = runRestore(ctx, &o.apps, s.key, s.f.Snapshot, req, s.state)
	} else {
		h, err = runFactory(ctx, &o.apps, s.key, s.f, req)
	}
	var obj *spot.Object
	if err == nil {
		captured := s.captured
		obj, err = o.rt.Open(spot.Spec{Key: s.key, Kind: s.f.Kind, StableType: s.h.stableType, Generation: s.gen,
			Handler: gated{h: h, gate: o.n.lease.Gate()}, Held: true, Restored: &captured})
	}
	if err != nil {
		o.log.Error("relocation: the target never committed and the object could not be restored on the source; it is unavailable until recovery",
			"object", s.id, "err", err)
		return
	}
	// Accepted here already: appended outside the mailbox limit (Post
	// refused what went past it until 2026-12-07, and the one-way messages
	// among them were lost).
	back := append(append(s.relayEnvs, s.unrelayed...), passed...)
	if perr := obj.Append(back...); perr != nil {
		o.log.Error("relocation: relayed messages not restored", "object", s.id, "count", len(back), "err", perr)
	}
	if len(passed) > 0 {
		o.log.Info("relocation: one-way messages passed on to the target put back into the object", "object", s.id, "count", len(passed))
	}
	s.unrelayed = nil
	o.mu.Lock()
	if _, taken := o.hosted[s.key]; taken {
		o.mu.Unlock()
		obj.Discard()
		o.log.Error("relocation: the object is hosted here again; not restored twice", "object", s.id)
		return
	}
	o.hosted[s.key] = &hosted{obj: obj, kind: s.kind, stableType: s.h.stableType, objectGeneration: s.gen,
		ownerGeneration: uint64(s.row.Record.AuthorityOwnerGeneration), state: hostServing}
	o.mu.Unlock()
	obj.Release()
	o.log.Warn("relocation: the target never committed; the object was taken back on the source", "object", s.id,
		"target", fmt.Sprintf("%x/%d", s.target.node.RoutingID, s.target.node.LifecycleGeneration), "relayed", len(s.relayEnvs))
}

// confirm reads the authority row until it no longer names this source
// (stillOurs: normally it names the target under the next owner
// generation), or the move's deadline passes, or the row is gone (false:
// the caller releases and reads the owner, which ends the move removed).
func (s *sourceMove) confirm(ctx context.Context) bool {
	s.o.hook().step(s.id, stepSourceConfirm)
	// The target's word that it stopped and fenced the move ends the wait
	// too (relocate_stopped.go).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.told, cancel)()
	// The target's CAS normally lands within a store round trip of the
	// cutover: poll fast at first (a 2 ms first step was most of a move's
	// time, benchmarks/relocation), then back off. Under load it lands
	// later: the first read waits for most of the lag recent moves saw, so
	// that a busy host does not spend a fifth of its store reads on polls
	// that cannot succeed yet (issue 11).
	start := s.o.n.clock.Now()
	lag := s.o.commitLag.typical()
	if lag > 0 {
		if err := ctxsleep.For(ctx, lag*3/4); err != nil {
			return false
		}
	}
	wait := confirmPace(lag)
	nextLeaseCheck := start + targetLeaseCheckAfter
	for {
		row, _, err := s.o.readAuthorityAt(ctx, s.kind, s.id)
		ev := relocation.EvOwnerIsSource
		if err == nil {
			ev = s.ownerOf(row)
		}
		switch ev {
		case relocation.EvOwnerGone:
			// Removed from the mesh while the move waited (reclaimed,
			// deleted): the target's CAS, conditioned on the row it first
			// read, can never apply. Stop waiting; the release and the
			// owner read that follow end the move removed, not Moved.
			s.o.log.Info("relocation: the object's record is gone while the move awaited the target's commit; ending the move",
				"object", s.id)
			return false
		case relocation.EvOwnerIsOther:
			// Another owner: the target's, after it committed and moved
			// the object on before this read — or one the move did not
			// make (a recovery after this node's lease ended, a row
			// written by hand), and then the target never commits. Only
			// the release tells them apart (it finds the reservation
			// consumed by the target's CAS, or deletes it), and the
			// owner read after it decides. Until 2026-12-07 such a row
			// read as the commit: Moved, while what the move had relayed
			// was dropped with the target that could not commit.
			s.o.log.Info("relocation: the object's record names another owner while the move awaited the target's commit; "+
				"releasing the move to learn whether its target committed", "object", s.id)
			return false
		case relocation.EvOwnerIsTarget:
			// A wait whose first look finds the commit counts in full,
			// although the commit came during the sleep: counting half
			// brought the average below the lag and cost a handoff a read
			// more (7.2 → 8.2 per handoff, benchmarks/README.md); the
			// average then comes down by 1/32 per move.
			s.o.commitLag.observe(s.o.n.clock.Now() - start)
			return true
		}
		if now := s.o.n.clock.Now(); err == nil && now >= nextLeaseCheck {
			nextLeaseCheck = now + targetLeaseCheckEvery
			if why, never := s.targetCannotCommit(ctx); never {
				s.o.log.Warn("relocation: the target cannot commit any more (its owner lease generation ended); "+
					"releasing the move now instead of at its deadline", "object", s.id,
					"target", fmt.Sprintf("%x/%d", s.target.node.RoutingID, s.target.node.LifecycleGeneration), "why", why)
				return false
			}
		}
		if wait.sleep(ctx) != nil {
			return false
		}
	}
}

// A source waiting for its target's commit checks, from
// targetLeaseCheckAfter on and then every targetLeaseCheckEvery, whether
// the target still holds the owner lease generation the move's
// reservation names (a commit lands within milliseconds normally, so the
// check costs a read only on a move that is already late).
const (
	targetLeaseCheckAfter = time.Second
	targetLeaseCheckEvery = time.Second
)

// targetCannotCommit reports whether the target's owner lease generation
// the move was bound to has ended: its lease row is gone or holds another
// generation (a target that lost its lease in a store outage and
// reacquired it under a new one, or that died). Its owner CAS names that
// generation and can then never apply (authority.verifyLease), so waiting
// for the move's deadline only keeps the object held — and its record
// under this node's lease generation of the move's start, which a lease
// loss here meanwhile ends: an operator try-out (Redis paused 8 s during
// a host relocation whose deadline was 5 min) saw ten such objects held
// two minutes, until the reclaim sweep removed their records and the
// moves read that as Moved — the objects were lost. The caller releases
// the reservation then (the usual fence against a late commit: if the
// target did commit, the release finds the reservation consumed and the
// record decides). A failed read decides nothing.
func (s *sourceMove) targetCannotCommit(ctx context.Context) (string, bool) {
	key, err := record.OwnerLeaseKey(s.target.owner.ID)
	if err != nil {
		return "", false
	}
	rr, err := s.o.n.loc.Read(ctx, key)
	if err != nil {
		return "", false
	}
	if !rr.Found {
		return "its owner lease record is gone", true
	}
	l, err := record.DecodeOwnerLease(rr.Value)
	if err != nil {
		return "", false
	}
	if uint64(l.LeaseGeneration) != s.target.owner.LeaseGeneration {
		return fmt.Sprintf("it holds lease generation %d, the move was bound to %d", l.LeaseGeneration, s.target.owner.LeaseGeneration), true
	}
	return "", false
}

// confirmPace is the pause between a source's reads of the authority row
// after its first read (at three quarters of the typical lag) missed the
// target's CAS: a quarter of the typical lag, four times, then doubling; or
// 100 µs doubling when no lag was seen yet. The pause used to be 100 µs
// doubling whatever the lag: with 6–7 ms lags on a busy host (16 moves at
// once, 10,000 objects), a move whose first read came before the commit
// read 3–6 times more in the next 3 ms — 2.2 reads per confirmation on
// average; now 1.5, and 5.8–5.9 store reads per handoff instead of
// 6.2–6.6, at the same handoffs/s (benchmarks/README.md).
func confirmPace(lag time.Duration) *backoff {
	if lag <= 0 {
		return &backoff{d: 100 * time.Microsecond}
	}
	return &backoff{d: max(lag/4, 100*time.Microsecond), flat: 4}
}

// stillOurs reports whether row still names this source as the owner of
// the moved generation, as the move found it: only then may the object be
// taken back here. ownerOf sorts any other row: the target's (its commit,
// while the move awaits it), an owner the move did not make, or gone.
func (s *sourceMove) stillOurs(row authority.AuthorityRow) bool {
	return row.Found && uint64(row.Record.ObjectGeneration) == s.gen &&
		authority.PartyOf(row.Record).Equal(authority.PartyOf(s.row.Record)) &&
		row.Record.AuthorityOwnerGeneration == s.row.Record.AuthorityOwnerGeneration
}

// ownerOf sorts the authority row the move reads after its wait: still
// this source's (EvOwnerIsSource), the target's under this move
// (EvOwnerIsTarget: its node run and owner, past the moved owner
// generation), another owner's (EvOwnerIsOther: another node or owner
// run — a later move by the target, or an owner this move did not make;
// readOwner tells them apart), or gone (EvOwnerGone: no row, or another
// ObjectGeneration — the object was
// removed from the mesh during the move, by an operator's ctl reclaim, the
// reclaim sweep after this node's lease ended, or a deleted row). Until
// 2026-12-06 a row gone counted as the target's commit, and the move
// reported Moved for an object no node owned (an operator try-out: ctl
// reclaim during a held move). A new owner that ended the object right
// after the move leaves the row gone too: readOwner tells that case apart
// by the reservation, which only the target's CAS can have consumed while
// this node still holds the lease generation the move began under.
func (s *sourceMove) ownerOf(row authority.AuthorityRow) relocation.SourceEvent {
	switch {
	case !row.Found || uint64(row.Record.ObjectGeneration) != s.gen:
		return relocation.EvOwnerGone
	case s.stillOurs(row):
		return relocation.EvOwnerIsSource
	case authority.PartyOf(row.Record).Equal(s.target.party()) &&
		row.Record.AuthorityOwnerGeneration > s.row.Record.AuthorityOwnerGeneration:
		return relocation.EvOwnerIsTarget
	}
	return relocation.EvOwnerIsOther
}

// readOwner re-reads the authority row after the release: did the target
// commit this move (the release found no reservation), and is the object
// still recorded at all (ownerOf)?
func (s *sourceMove) readOwner() relocation.SourceEvent {
	if s.leftToTarget {
		// The node is stopping (release): the object is left to the
		// target, whatever the row says now.
		return relocation.EvOwnerIsSource
	}
	wait := s.heldRetry("owner read")
	for {
		ctx, cancel := s.bg(5 * time.Second)
		row, _, err := s.o.readAuthorityAt(ctx, s.kind, s.id)
		cancel()
		ev := relocation.EvOwnerIsSource
		if err == nil {
			ev = s.ownerOf(row)
			s.owner = row
			if (ev == relocation.EvOwnerGone || ev == relocation.EvOwnerIsOther) && s.reservationGone && s.m.MayHaveCommitted() {
				ctx, cancel := s.bg(5 * time.Second)
				var ended bool
				ended, err = leaseEnded(ctx, s.o.n.loc, s.self.Owner)
				cancel()
				if err == nil && !ended {
					// Only the target's CAS can have consumed the
					// reservation (a reclaim needs this node's lease
					// ended, and it still holds the generation the move
					// began under), and only that CAS can have changed
					// the owner at this ObjectGeneration (a recovery
					// needs that lease ended too): the target committed,
					// and its new owner ended the object right after, or
					// moved it on — moved. Not when the target cannot
					// have committed (no Restore sent, or a release
					// deleted the reservation): a consumed reservation
					// then is this move's own release whose answer was
					// lost, and the row says what it says.
					ev = relocation.EvOwnerIsTarget
				}
			}
		}
		if err == nil {
			wait.confirmed()
			return ev
		}
		if wait.failed(err) != nil {
			return relocation.EvOwnerIsSource
		}
	}
}

// envelopeRecord rebuilds the wire message of a queued envelope for the
// object's new owner: the same operation id, correlation and origin, the
// body as payload, the new fence (§7.3, §9.3).
func envelopeRecord(h *hosted, id, srcSpot string, env spot.Envelope, to routeTo, hop uint8) (*router.Record, error) {
	meta, err := decodeEnvMeta(env.Meta)
	if err != nil {
		return nil, err
	}
	org := meta.org
	var corr uint64
	switch env.Kind {
	case spot.Request:
		r, err := decodeReplyRoute(env.ReplyRoute)
		if err != nil {
			return nil, err
		}
		corr, org = r.corr, origin{rid: r.rid, gen: r.gen}
	case spot.Send:
	default:
		return nil, fmt.Errorf("%w: a %s envelope has no wire form", ErrInvalidOperation, env.Kind)
	}
	var body router.Body
	if h.kind == record.ObjectActor {
		ref := router.ActorRef{ActorID: id, ObjectGeneration: h.objectGeneration}
		if corr != 0 {
			body = &router.ActorRequest{Correlation: corr, Operation: meta.op, MessageFollowHopCount: hop, TargetActor: actorFence(ref, to),
				BoundSession: meta.sess.tail()}
		} else {
			body = &router.ActorSend{Operation: meta.op, MessageFollowHopCount: hop, TargetActor: actorFence(ref, to),
				BoundSession: meta.sess.tail()}
		}
	} else {
		ref := router.SpotRef{SpotID: id, ObjectGeneration: h.objectGeneration}
		if corr != 0 {
			body = &router.SpotRequest{Correlation: corr, Operation: meta.op, MessageFollowHopCount: hop, SourceSpotID: srcSpot, TargetSpot: spotFence(ref, to)}
		} else {
			body = &router.SpotSend{Operation: meta.op, MessageFollowHopCount: hop, SourceSpotID: srcSpot, TargetSpot: spotFence(ref, to)}
		}
	}
	md, err := withOrigin(nil, org)
	if err != nil {
		return nil, err
	}
	return router.NewRecord(body, md, &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: env.Body}), nil
}
