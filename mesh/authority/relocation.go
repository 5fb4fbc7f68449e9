package authority

import (
	"errors"
	"fmt"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/record"
)

// The relocation of one Actor or Spot, as far as the Location Store is
// concerned (spec §1.3, §8, §8.1, §8.2, §9.1, §9.4, §10). Each stage change
// is one conditional batch:
//
//	source: SecureCapacity (keyed)  — reservation row + target reserved slots
//	source: RecordCaptured          — progress {captured} on the authority row
//	target: RecordPrepared          — progress {prepared, target attempt} (optional)
//	target: NewOwner (Relocation)   — owner → target, progress {committed},
//	                                  reservation consumed, slots moved
//	target: CompleteRelocation      — progress removed
//	source: ReleaseCapacity (keyed) — cancellation: reservation row deleted,
//	                                  reserved slots returned (§9.4 step 4)
//
// Cancellation does not write the authority row (§9.4 step 5): a stale
// captured/prepared progress of a cancelled move is replaced by the same
// owner's next RecordCaptured, and it cannot change the owner, since the
// NewOwner of that move needs its reservation, which cancellation deleted.

// RelocationRef binds a stage change to one move and target attempt (§8.1,
// §9.1: the Restore request, each chunk and the owner CAS carry the same
// RelocationId and target attempt).
type RelocationRef struct {
	// RelocationID identifies the move: non-zero 128-bit.
	RelocationID [16]byte
	// TargetAttempt distinguishes Restore requests sent to the same target;
	// non-zero, compared only for equality.
	TargetAttempt uint64
	// ReservationID names the move's target capacity reservation
	// (SecureCapacity with this id): non-zero 128-bit.
	ReservationID [16]byte
}

func (r RelocationRef) validate() error {
	if r.RelocationID == ([16]byte{}) {
		return fmt.Errorf("relocation id is zero")
	}
	if r.ReservationID == ([16]byte{}) {
		return fmt.Errorf("reservation id is zero")
	}
	if !record.Generation(r.TargetAttempt).Valid() {
		return fmt.Errorf("target attempt %d outside 1..2^63-1", r.TargetAttempt)
	}
	return nil
}

// matches reports whether progress p belongs to this move: same
// relocation, reservation and target attempt.
func (r RelocationRef) matches(p *record.RelocationProgress) bool {
	return p != nil && p.RelocationID == r.RelocationID && p.ReservationID == r.ReservationID &&
		uint64(p.TargetAttempt) == r.TargetAttempt
}

// CaptureRequest records Captured (§1.3 step 3, §8.2): the source finished
// capturing state and queue and keeps them in memory. Performed by the
// source, the current owner.
type CaptureRequest struct {
	Object           Object
	ObjectGeneration uint64 // required
	// IfVersion is the StoreVersion the source first read (required; the
	// version its keyed SecureCapacity was secured against).
	IfVersion string
	// Source is the current owner on its node; its lease is verified.
	Source Party
	// Target is the chosen target host run and node run.
	Target Party
	Move   RelocationRef
	Fences []Fence
}

// PrepareRequest records Prepared (§8.2, §9.1): the target finished payload
// assembly, Restore and temporary queue registration for Move.TargetAttempt.
// Performed by the target. A re-prepare on the same target replaces the
// target attempt (§8.2: it "only replaces the target attempt number and prep
// info — it doesn't swap in a different target").
type PrepareRequest struct {
	Object           Object
	ObjectGeneration uint64 // required
	// IfVersion is the StoreVersion the target read (required).
	IfVersion string
	// Target is the performing target, as the progress names it; its lease
	// is verified.
	Target Party
	Move   RelocationRef
	Fences []Fence
}

// CompleteRequest removes the progress of a committed relocation once the
// new owner opened dispatch (§9.1 "Completed"). Owner, generations,
// allocation and capacity are kept.
type CompleteRequest struct {
	Object           Object
	ObjectGeneration uint64 // required
	// Owner is the new owner; its lease is verified.
	Owner        Owner
	RelocationID [16]byte
	// IfVersion, when set, is the version the caller last saw (NewOwner's
	// result); another version is Conflict.
	IfVersion string
	Fences    []Fence
}

// keyed reports whether a capacity request names a reservation.
func (r CapacityRequest) keyed() bool { return r.ReservationID != [16]byte{} }

// reservation is the reservation a keyed SecureCapacity request asks for.
func (r CapacityRequest) reservation() Reservation {
	return Reservation{
		ID: r.ReservationID, ObjectID: r.Object.ID, ObjectKind: r.Object.Kind, ObjectGeneration: r.ObjectGeneration,
		AuthorityVersion: r.AuthorityVersion, Source: r.Source, Target: r.Target.Party(), Bundle: r.Bundle,
	}
}

// reservationRow checks that the snapshot's reservation row is id's.
func reservationRow(op Op, snap Snapshot, id [16]byte) (ReservationRow, string, error) {
	key, err := ReservationKey(id)
	if err != nil {
		return ReservationRow{}, "", invalidCause(op, err, "reservation")
	}
	if snap.Reservation.Key != key {
		return ReservationRow{}, "", invalid(op, "snapshot's reservation row is key %q, need %q", snap.Reservation.Key, key)
	}
	return snap.Reservation, key, nil
}

// planSecureKeyed plans the keyed SecureCapacity (§8.1 "Check result /
// Handling"): with the reservation row missing, the reservation row is
// created and the bundle reserved on the target's counters in one batch,
// conditioned on the authority row at AuthorityVersion (the source owns the
// Active record), the source's and target's leases, and the counters under
// the target's limits. The same id with the same content is AlreadyApplied
// (nothing written); the same id with other content is Conflict.
//
// Rows used: Reservation, Authority, OwnerLease (source), TargetLease,
// Capacity (target node).
func planSecureKeyed(req CapacityRequest, snap Snapshot) (Plan, error) {
	const op = OpSecureCapacity
	if err := req.Target.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "target")
	}
	want := req.reservation()
	if err := want.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "reservation")
	}
	if req.Object.StableType != "" {
		if err := record.ValidateStableType(req.Object.StableType); err != nil {
			return Plan{}, invalidCause(op, err, "stable type")
		}
	}
	rrow, rkey, err := reservationRow(op, snap, req.ReservationID)
	if err != nil {
		return Plan{}, err
	}
	if rrow.Found {
		if !rrow.Reservation.Equal(want) {
			return Plan{}, newErr(op, ErrConflict, "reservation %x already names other content (object %s generation %d, target %s)",
				req.ReservationID, rrow.Reservation.ObjectID, rrow.Reservation.ObjectGeneration, rrow.Reservation.Target)
		}
		r := rrow.Reservation
		return Plan{Op: op, AuthorityMutation: -1, Reservation: &r, ReservationKey: rkey, AlreadyApplied: true}, nil
	}
	row := snap.Authority
	key, err := existing(op, req.Object, req.ObjectGeneration, req.AuthorityVersion, record.AllocationActive, row)
	if err != nil {
		return Plan{}, err
	}
	if err := sourceOwns(op, row, req.Source); err != nil {
		return Plan{}, err
	}
	srcLease, err := verifyLease(op, snap.OwnerLease, req.Source.Owner, "source")
	if err != nil {
		return Plan{}, err
	}
	tgtLease, err := verifyLease(op, snap.TargetLease, req.Target.Owner, "target")
	if err != nil {
		return Plan{}, err
	}
	value, err := want.Encode()
	if err != nil {
		return Plan{}, invalidCause(op, err, "reservation")
	}
	b := newBatch(op)
	p := Plan{Op: op, AuthorityMutation: -1, Reservation: &want, ReservationKey: rkey, from: row}
	if err := b.cond(locstore.IfVersion(key, row.Version)); err != nil {
		return Plan{}, err
	}
	if err := b.cond(srcLease); err != nil {
		return Plan{}, err
	}
	// One host run may own MeshNodes of several meshes: source and target
	// may then share a lease, conditioned once.
	if tgtLease != srcLease {
		if err := b.cond(tgtLease); err != nil {
			return Plan{}, err
		}
	}
	if err := b.cond(locstore.IfMissing(rkey)); err != nil {
		return Plan{}, err
	}
	b.mut(locstore.Put(rkey, value))
	return reserveOnTarget(b, p, req, snap)
}

// planReleaseKeyed plans the keyed ReleaseCapacity (§9.4 step 4): the
// reservation row is deleted and its slots returned to its target's
// counters in one batch. A missing row is AlreadyApplied: the reservation
// was released before, or consumed by the relocation's NewOwner. No lease
// is verified: returning slots cannot overfill a node, and the target run
// may be gone.
//
// Rows used: Reservation, Capacity (the reservation's target node).
func planReleaseKeyed(req CapacityRequest, snap Snapshot) (Plan, error) {
	const op = OpReleaseCapacity
	rrow, rkey, err := reservationRow(op, snap, req.ReservationID)
	if err != nil {
		return Plan{}, err
	}
	if !rrow.Found {
		return Plan{Op: op, AuthorityMutation: -1, ReservationKey: rkey, AlreadyApplied: true}, nil
	}
	r := rrow.Reservation
	b := newBatch(op)
	p := Plan{Op: op, AuthorityMutation: -1, Reservation: &r, ReservationKey: rkey}
	if err := b.cond(locstore.IfVersion(rkey, rrow.Version)); err != nil {
		return Plan{}, err
	}
	if err := b.fences(req.Fences); err != nil {
		return Plan{}, err
	}
	b.mut(locstore.Delete(rkey))
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(r.Target.Node, r.Bundle, -1, 0, nil)); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// checkReservation checks that the move's reservation row exists and was
// secured for this object and generation, from source to target (§8.1).
// Its IfVersion condition keeps it so until the batch commits.
func checkReservation(op Op, snap Snapshot, move RelocationRef, cur record.Authority, source, target Party) (ReservationRow, string, error) {
	rrow, rkey, err := reservationRow(op, snap, move.ReservationID)
	if err != nil {
		return ReservationRow{}, "", err
	}
	if !rrow.Found {
		return ReservationRow{}, "", newErr(op, ErrConflict, "reservation %x is missing (never secured, released, or consumed)", move.ReservationID)
	}
	r := rrow.Reservation
	switch {
	case r.ObjectID != cur.ObjectID || r.ObjectKind != cur.Allocation.ObjectKind || r.ObjectGeneration != uint64(cur.ObjectGeneration):
		return ReservationRow{}, "", newErr(op, ErrConflict, "reservation %x was secured for %s %s generation %d", move.ReservationID, r.ObjectKind, r.ObjectID, r.ObjectGeneration)
	case !r.Source.Equal(source):
		return ReservationRow{}, "", newErr(op, ErrConflict, "reservation %x was secured from source %s, not %s", move.ReservationID, r.Source, source)
	case !r.Target.Equal(target):
		return ReservationRow{}, "", newErr(op, ErrConflict, "reservation %x was secured on target %s, not %s", move.ReservationID, r.Target, target)
	}
	return rrow, rkey, nil
}

// PlanRecordCaptured plans Captured (§1.3 step 3, §8.2): on the Active
// record owned by the source (valid lease) at the first-read IfVersion,
// with the move's reservation present and matching, the progress becomes
// {captured, relocation, target attempt, reservation, source, target}.
// Progress already on the row:
//   - none, or captured/prepared of another relocation (a cancelled move of
//     the same owner: cancellation does not write the row, §9.4), or
//     committed by an earlier move into this owner that was never cleared:
//     replaced;
//   - captured/prepared of this relocation with the same target and
//     reservation: replaced (a re-capture, e.g. with a new target attempt);
//   - this relocation with another target or reservation: Conflict (a move
//     does not swap in a different target, §8.2);
//   - committed naming another owner: Conflict.
//
// Rows used: Authority, OwnerLease (source), Reservation.
func PlanRecordCaptured(req CaptureRequest, snap Snapshot) (Plan, error) {
	const op = OpRecordCaptured
	if err := req.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "request")
	}
	row := snap.Authority
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationActive, row)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if err := sourceOwns(op, row, req.Source); err != nil {
		return Plan{}, err
	}
	if old := cur.Relocation; old != nil {
		switch {
		case old.RelocationID == req.Move.RelocationID && old.Stage == record.RelocationCommitted:
			return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x is already committed", old.RelocationID)
		case old.RelocationID == req.Move.RelocationID &&
			(!partyOfRelocation(old.Target).Equal(req.Target) || old.ReservationID != req.Move.ReservationID):
			return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x is recorded with target %s and reservation %x",
				old.RelocationID, partyOfRelocation(old.Target), old.ReservationID)
		case old.Stage == record.RelocationCommitted && !partyOfRelocation(old.Target).Equal(req.Source):
			return Plan{}, conflictWith(op, ErrConflict, row, "committed relocation %x names owner %s", old.RelocationID, partyOfRelocation(old.Target))
		}
	}
	rrow, rkey, err := checkReservation(op, snap, req.Move, cur, req.Source, req.Target)
	if err != nil {
		return Plan{}, err
	}
	leaseCond, err := verifyLease(op, snap.OwnerLease, req.Source.Owner, "source")
	if err != nil {
		return Plan{}, err
	}
	next := cloneAuthority(cur)
	next.Relocation = &record.RelocationProgress{
		Stage:         record.RelocationCaptured,
		RelocationID:  req.Move.RelocationID,
		TargetAttempt: record.Generation(req.Move.TargetAttempt),
		ReservationID: req.Move.ReservationID,
		Source:        req.Source.relocationParty(),
		Target:        req.Target.relocationParty(),
	}
	return planStage(op, key, row, next, leaseCond, req.Fences, rrow, rkey)
}

// planStage finishes a progress-only batch (RecordCaptured, RecordPrepared):
// the authority Put under its version, the lease and the fences, and the
// reservation row kept as it is (IfVersion), so that a release racing the
// stage change cannot leave progress without its reservation.
func planStage(op Op, key string, row AuthorityRow, next record.Authority, leaseCond locstore.Condition, fences []Fence, rrow ReservationRow, rkey string) (Plan, error) {
	b := newBatch(op)
	p, err := putExisting(b, op, key, row, next, leaseCond, fences)
	if err != nil {
		return Plan{}, err
	}
	if err := b.cond(locstore.IfVersion(rkey, rrow.Version)); err != nil {
		return Plan{}, err
	}
	r := rrow.Reservation
	p.Reservation, p.ReservationKey = &r, rkey
	return b.finish(p)
}

func (r CaptureRequest) validate() error {
	if err := requireGeneration(OpRecordCaptured, r.ObjectGeneration); err != nil {
		return err
	}
	if r.IfVersion == "" {
		return errors.New("no first-read IfVersion")
	}
	if err := validateParties(r.Source, r.Target); err != nil {
		return err
	}
	return r.Move.validate()
}

// PlanRecordPrepared plans Prepared (§8.2, §9.1), performed by the target:
// the progress must be captured or prepared for this relocation and
// reservation naming this target (owner and node), with the reservation
// present and matching and the target's lease valid; it becomes
// {prepared, Move.TargetAttempt}. The source stays the owner.
//
// Rows used: Authority, TargetLease, Reservation.
func PlanRecordPrepared(req PrepareRequest, snap Snapshot) (Plan, error) {
	const op = OpRecordPrepared
	if err := requireGeneration(op, req.ObjectGeneration); err != nil {
		return Plan{}, err
	}
	if req.IfVersion == "" {
		return Plan{}, invalid(op, "no first-read IfVersion")
	}
	if err := req.Target.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "target")
	}
	if err := req.Move.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "relocation")
	}
	row := snap.Authority
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationActive, row)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	old := cur.Relocation
	switch {
	case old == nil || old.RelocationID != req.Move.RelocationID || old.ReservationID != req.Move.ReservationID:
		return Plan{}, conflictWith(op, ErrConflict, row, "the record holds no progress of relocation %x with reservation %x", req.Move.RelocationID, req.Move.ReservationID)
	case old.Stage == record.RelocationCommitted:
		return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x is already committed", old.RelocationID)
	case !partyOfRelocation(old.Target).Equal(req.Target):
		return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x names target %s, not %s", old.RelocationID, partyOfRelocation(old.Target), req.Target)
	}
	rrow, rkey, err := checkReservation(op, snap, req.Move, cur, PartyOf(cur), req.Target)
	if err != nil {
		return Plan{}, err
	}
	leaseCond, err := verifyLease(op, snap.TargetLease, req.Target.Owner, "target")
	if err != nil {
		return Plan{}, err
	}
	next := cloneAuthority(cur)
	next.Relocation.Stage = record.RelocationPrepared
	next.Relocation.TargetAttempt = record.Generation(req.Move.TargetAttempt)
	return planStage(op, key, row, next, leaseCond, req.Fences, rrow, rkey)
}

// sourceOwns checks that the source is the record's owner on the record's
// node and that the record holds no creation recovery state.
func sourceOwns(op Op, row AuthorityRow, source Party) error {
	if !PartyOf(row.Record).Equal(source) {
		return conflictWith(op, ErrConflict, row, "the record is owned by %s, not the source %s", PartyOf(row.Record), source)
	}
	return noCreationState(op, row)
}

// noCreationState refuses a record still holding pendingCreation: an
// Instance Spot whose first message is not yet recorded neither changes its
// owner nor relocates (§7.1).
func noCreationState(op Op, row AuthorityRow) error {
	if pc := row.Record.PendingCreation; pc != nil {
		return conflictWith(op, ErrConflict, row, "%s still holds creation recovery state (reservation %q)", row.Record.ObjectID, pc.ReservationID)
	}
	return nil
}

// alreadyApplied is the plan of an operation whose effect row (the
// object's authority row) already shows: no batch, the row's record.
func alreadyApplied(op Op, obj Object, row AuthorityRow) (Plan, error) {
	key, err := obj.Key()
	if err != nil || row.Key != key {
		return Plan{}, invalid(op, "snapshot's authority row is key %q, need %q", row.Key, key)
	}
	rec := cloneAuthority(row.Record)
	return Plan{Op: op, Key: key, Record: &rec, AuthorityMutation: -1, AlreadyApplied: true, from: row}, nil
}

// committedBy reports whether row already shows target as the owner by
// relocation move: the progress committed with this relocation and target
// attempt (§10: a repeated owner CAS after a lost answer converges to
// success).
func committedBy(row AuthorityRow, objGen uint64, target Party, move RelocationRef) bool {
	r := row.Record.Relocation
	return row.Found && uint64(row.Record.ObjectGeneration) == objGen && r != nil && r.Stage == record.RelocationCommitted &&
		r.RelocationID == move.RelocationID && uint64(r.TargetAttempt) == move.TargetAttempt && PartyOf(row.Record).Equal(target)
}

// planNewOwnerRelocation is PlanNewOwner for req.Relocation (§8, §8.2):
// the target changes the owner to itself, only at the version it first
// read, only while the progress names exactly this relocation, target
// attempt, reservation and target, and only with the reservation present
// and secured for this object, source and target. In one batch the
// reservation row is deleted, its reserved slots on the target become
// active, the source's active slots are released, ObjectGeneration is kept,
// AuthorityOwnerGeneration takes its next value, and the progress becomes
// committed with the previous AuthorityOwnerGeneration.
//
// Rows used: Authority, TargetLease, Reservation, Capacity (record's node
// and target node).
func planNewOwnerRelocation(req NewOwnerRequest, snap Snapshot) (Plan, error) {
	const op = OpNewOwner
	move := *req.Relocation
	if err := move.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "relocation")
	}
	if req.IfVersion == "" {
		return Plan{}, invalid(op, "a relocation's owner change needs the first-read IfVersion")
	}
	if req.PreSecured {
		return Plan{}, invalid(op, "PreSecured does not apply to a relocation: its reservation names the slots")
	}
	row := snap.Authority
	target := req.Target.Party()
	if committedBy(row, req.ObjectGeneration, target, move) {
		return alreadyApplied(op, req.Object, row)
	}
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationActive, row)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if err := noCreationState(op, row); err != nil {
		return Plan{}, err
	}
	// A row the target already owns through another attempt of this move is
	// a stale attempt (Conflict), not an invalid target combination.
	old := cur.Relocation
	if old != nil && old.RelocationID == move.RelocationID && old.Stage == record.RelocationCommitted {
		return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x is already committed to %s (target attempt %d)", old.RelocationID, partyOfRelocation(old.Target), old.TargetAttempt)
	}
	if err := checkTargetCombination(op, cur, req.Target); err != nil {
		return Plan{}, err
	}
	switch {
	case old == nil || old.RelocationID != move.RelocationID:
		return Plan{}, conflictWith(op, ErrConflict, row, "the record holds no progress of relocation %x", move.RelocationID)
	case !partyOfRelocation(old.Target).Equal(target):
		return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x names target %s, not %s", old.RelocationID, partyOfRelocation(old.Target), target)
	case !move.matches(old):
		return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x is bound to target attempt %d and reservation %x; attempt %d cannot change the owner",
			old.RelocationID, old.TargetAttempt, old.ReservationID, move.TargetAttempt)
	}
	source := PartyOf(cur)
	rrow, rkey, err := checkReservation(op, snap, move, cur, source, target)
	if err != nil {
		return Plan{}, err
	}
	bun := cur.Allocation.Capacity
	if !bundleEqual(rrow.Reservation.Bundle, bun) {
		return Plan{}, newErr(op, ErrConflict, "reservation %x secured another bundle than the record's", move.ReservationID)
	}
	leaseCond, err := verifyLease(op, snap.TargetLease, req.Target.Owner, "target")
	if err != nil {
		return Plan{}, err
	}
	next, err := moveTo(op, row, req.Target, req.Payload)
	if err != nil {
		return Plan{}, err
	}
	next.Relocation.Stage = record.RelocationCommitted
	next.Relocation.PreviousAuthorityOwnerGeneration = cur.AuthorityOwnerGeneration
	b := newBatch(op)
	p, err := putExisting(b, op, key, row, next, leaseCond, req.Fences)
	if err != nil {
		return Plan{}, err
	}
	if err := b.cond(locstore.IfVersion(rkey, rrow.Version)); err != nil {
		return Plan{}, err
	}
	b.mut(locstore.Delete(rkey))
	r := rrow.Reservation
	p.Reservation, p.ReservationKey = &r, rkey
	// The target's reserved slots are the reservation row's, which this
	// batch consumes under its version: guarded.
	deltas := append(bundleDeltas(source.Node, bun, 0, -1, nil), guardedBy(bundleDeltas(req.Target.Node, bun, -1, 1, nil))...)
	if p.Capacity, err = applyCapacity(b, snap, deltas); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// moveTo returns the record after an owner change to target: the same
// ObjectGeneration, the next AuthorityOwnerGeneration (gen.Next), owner and
// allocation node of the target, payload replaced when set.
func moveTo(op Op, row AuthorityRow, target Target, payload PayloadUpdate) (record.Authority, error) {
	cur := row.Record
	ownerGen, err := gen.Next(uint64(cur.AuthorityOwnerGeneration), true)
	if err != nil {
		kind := ErrCorruptRecord
		if errors.Is(err, gen.ErrGenerationExhausted) {
			kind = ErrGenerationExhausted
		}
		cr := row // a copy per error: &row would move row to the heap on every call
		return record.Authority{}, &Error{Op: op, Kind: kind, Reason: "AuthorityOwnerGeneration", Err: err, Current: &cr}
	}
	next := cloneAuthority(cur)
	next.AuthorityOwnerGeneration = record.Generation(ownerGen)
	next.OwnerID = target.Owner.ID
	next.OwnerLeaseGeneration = record.Generation(target.Owner.LeaseGeneration)
	next.Allocation.Descriptor = record.DescriptorRef{MeshName: target.Node.MeshName, RoutingID: cloneBytes(target.Node.RoutingID)}
	next.Allocation.DescriptorLifecycleGeneration = record.Generation(target.Node.LifecycleGeneration)
	if payload.Set {
		next.Payload = cloneBytes(payload.Value)
	}
	return next, nil
}

// checkTargetCombination refuses a target that is the current owner on the
// current node, or the current node under another owner (a node run has
// exactly one host run): an invalid target combination, decided before the
// store (§6.1).
func checkTargetCombination(op Op, cur record.Authority, target Target) error {
	srcNode, srcOwner := NodeOf(cur), OwnerOf(cur)
	switch {
	case srcNode.Equal(target.Node) && srcOwner == target.Owner:
		return invalid(op, "target %s on %s is already the owner", target.Owner.ID, srcNode)
	case srcNode.Equal(target.Node):
		return invalid(op, "target node %s is the current node but the target owner %s/%d is not its owner %s/%d",
			srcNode, target.Owner.ID, target.Owner.LeaseGeneration, srcOwner.ID, srcOwner.LeaseGeneration)
	}
	return nil
}

// PlanCompleteRelocation plans Completed (§9.1): the new owner, with a
// valid lease, removes the progress of relocation req.RelocationID, which
// must be committed; owner, generations, allocation, capacity and payload
// are kept. A row owned by req.Owner that holds no progress of this
// relocation any more is AlreadyApplied (nothing to remove).
//
// Rows used: Authority, OwnerLease (of req.Owner).
func PlanCompleteRelocation(req CompleteRequest, snap Snapshot) (Plan, error) {
	const op = OpCompleteRelocation
	if err := req.Owner.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "owner")
	}
	if err := requireGeneration(op, req.ObjectGeneration); err != nil {
		return Plan{}, err
	}
	if req.RelocationID == ([16]byte{}) {
		return Plan{}, invalid(op, "relocation id is zero")
	}
	row := snap.Authority
	if r := row.Record.Relocation; row.Found && OwnerOf(row.Record) == req.Owner &&
		uint64(row.Record.ObjectGeneration) == req.ObjectGeneration && (r == nil || r.RelocationID != req.RelocationID) {
		return alreadyApplied(op, req.Object, row)
	}
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationActive, row)
	if err != nil {
		return Plan{}, err
	}
	if err := ownedBy(op, row, req.Owner); err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if r := cur.Relocation; r == nil || r.RelocationID != req.RelocationID || r.Stage != record.RelocationCommitted {
		return Plan{}, conflictWith(op, ErrConflict, row, "relocation %x is not committed on the record", req.RelocationID)
	}
	leaseCond, err := verifyLease(op, snap.OwnerLease, req.Owner, "current")
	if err != nil {
		return Plan{}, err
	}
	next := cloneAuthority(cur)
	next.Relocation = nil
	return putOnly(op, key, row, next, leaseCond, req.Fences)
}

// CASOutcome is what the rows say about a relocation's owner CAS whose
// answer was lost and that may no longer be retried (§10: the Restore
// deadline passed).
type CASOutcome uint8

const (
	// CASUndecided: every row the CAS batch is conditioned on is as the
	// target first read it, so a batch still in flight could apply.
	CASUndecided CASOutcome = iota
	// CASCommitted: the row names the target with this relocation and
	// target attempt committed.
	CASCommitted
	// CASImpossible: the authority row moved past the first-read version,
	// or the reservation row is gone (the source released it): no batch of
	// this attempt can apply any more.
	CASImpossible
)

var casOutcomeNames = []string{"undecided", "committed", "impossible"}

func (c CASOutcome) String() string {
	if int(c) < len(casOutcomeNames) {
		return casOutcomeNames[c]
	}
	return fmt.Sprintf("CASOutcome(%d)", c)
}

// DecideNewOwner classifies snap for req, a relocation's owner CAS (§8),
// without planning a write. It errs toward CASUndecided: only a change to
// a row every batch of this attempt is conditioned on (the authority row's
// version, the reservation row's presence) proves the CAS impossible.
func DecideNewOwner(req NewOwnerRequest, snap Snapshot) (CASOutcome, error) {
	if req.Relocation == nil || req.IfVersion == "" {
		return CASUndecided, invalid(OpNewOwner, "deciding a lost owner CAS needs a relocation and its first-read IfVersion")
	}
	row := snap.Authority
	switch {
	case committedBy(row, req.ObjectGeneration, req.Target.Party(), *req.Relocation):
		return CASCommitted, nil
	case !row.Found || row.Version != req.IfVersion || !snap.Reservation.Found:
		return CASImpossible, nil
	}
	return CASUndecided, nil
}
