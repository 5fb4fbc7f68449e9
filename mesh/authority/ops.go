package authority

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/record"
)

// The planners of spec §6.1. Each takes the operation's request and the
// Snapshot the framework read, and returns the Plan of one batch or an
// *Error decided before any store call. docs/AUTHORITY.md lists, per
// operation, the rows read, the checks in order, and the exact conditions
// and mutations.

// ReserveRequest asks for Missing → Reserved (§6.1, §7).
type ReserveRequest struct {
	// Object: Id, kind and stable type of the object to create.
	Object Object
	// Target: the node run whose capacity is reserved and the host run that
	// will own the record (its lease is verified).
	Target Target
	// Creation is the creation-in-progress state; its ReservationID names
	// this reservation for Commit and Abort.
	Creation record.PendingCreation
	// Payload is the framework-internal data stored with the record.
	Payload []byte
	// Fences are extra rows that must be unchanged (e.g. the requester's own
	// lease, the target descriptor).
	Fences []Fence
	// Content, when set, is the creation request Creation references,
	// written in the same batch (§7: the request is stored with the
	// in-progress creation record; §12: the Creating record is one Store
	// request). So a Reserve that is refused — GenerationExhausted, no
	// capacity, a conflict — writes no request either.
	Content *CreationContent
}

// CreationContent is the creation request row a Reserve writes under
// Creation.RequestContentReference. Value must be Creation.RequestEncodedSize
// bytes with SHA-256 Creation.RequestSHA256; Retention is counted from the
// batch's commit (0: durable).
type CreationContent struct {
	Value     []byte
	Retention time.Duration
}

// KindCreationRequest is the record kind (store-key prefix) of the creation
// requests Actor and User Spot creations store with their Creating record
// (ReserveRequest.Content under pendingCreation.requestContentReference).
const KindCreationRequest record.Kind = "creation-request"

// storedRequest returns the Location Store row of the creation request pc
// references, when it is one (KindCreationRequest). The reservation's end —
// a Commit that clears pendingCreation, an Abort — deletes it in the same
// batch: nothing reads a request once no record references it (the target
// checks it only while the record is Reserved for that reservation), and
// left to expire it stayed until the deadline + 5 min, with its index
// entry, for every creation (measured on Redis, creations destroyed as fast
// as made: 2,255 bytes per creation of the last ten minutes before, 1,484
// with this and the provider's expiry index). An Instance Spot's reference
// names a Relocation Store payload, which its own path deletes (§9).
func storedRequest(pc *record.PendingCreation) (string, bool) {
	if pc == nil || !strings.HasPrefix(pc.RequestContentReference, record.KindPrefix(KindCreationRequest)) {
		return "", false
	}
	return pc.RequestContentReference, true
}

// CommitRequest asks for that reservation's Reserved → Active (§6.1, §7
// "Approved").
type CommitRequest struct {
	Object        Object
	ReservationID string
	// ObjectGeneration, when non-zero, must be the record's (from Reserve).
	ObjectGeneration uint64
	// Owner is the committing host run; it must own the record and hold a
	// valid lease (§5: confirming a factory result needs owner eligibility).
	Owner Owner
	// IfVersion, when set, is the StoreVersion Reserve returned; another
	// version is Conflict (§7: "StoreVersion all match").
	IfVersion string
	Payload   PayloadUpdate
	// KeepPendingCreation keeps pendingCreation on the Active record: an
	// Instance Spot keeps its recovery reference until the first message's
	// completion is recorded (§7.1), then clears it with Preserve.
	KeepPendingCreation bool
	// Terminal, when set, records the final result (Outcome must be
	// OutcomeCreated) in the same batch.
	Terminal *TerminalResult
	Fences   []Fence
}

// AbortRequest asks for that reservation's Reserved → Missing (§6.1; §7
// "Application decline", "Exception", "Framework processing failure").
type AbortRequest struct {
	Object           Object
	ReservationID    string
	ObjectGeneration uint64 // optional, as in CommitRequest
	IfVersion        string // optional, as in CommitRequest
	// Owner, when set, must own the record and hold a valid lease. Recovery
	// of a dead host's reservation aborts without it.
	Owner *Owner
	// Terminal records Rejected or Failed in the same batch; nil for a
	// framework failure before the callback (no final application result).
	Terminal *TerminalResult
	Fences   []Fence
}

// PreserveRequest keeps the Active owner, generations and capacity and
// changes only framework-internal data (§6.1). It carries no target: a
// regular Preserve has no relocation target information.
type PreserveRequest struct {
	Object Object
	// ObjectGeneration is the caller's ref generation (required).
	ObjectGeneration uint64
	// Owner is the current owner; its lease is verified.
	Owner                Owner
	IfVersion            string
	Payload              PayloadUpdate
	ClearPendingCreation bool
	Fences               []Fence
}

// NewOwnerRequest changes an Active record to the target owner (§6.1).
type NewOwnerRequest struct {
	Object           Object
	ObjectGeneration uint64 // required
	// IfVersion is the StoreVersion the relocation first read (§8: the CAS
	// is "only if the version first read is unchanged").
	IfVersion string
	Target    Target
	// PreSecured: the target's slots were reserved beforehand with an
	// unkeyed SecureCapacity and are converted to active here; otherwise the
	// target's active usage grows under the target's limits in this batch.
	// Not used with Relocation.
	PreSecured bool
	Payload    PayloadUpdate
	Fences     []Fence
	// Relocation, when set, makes this the owner CAS of a relocation,
	// performed by the target (§8): IfVersion is required (the version the
	// target first read), the progress must name exactly this relocation,
	// target attempt, reservation and Target, and the reservation's slots
	// are the ones converted to active. See docs/AUTHORITY.md "Relocation".
	// Without it, NewOwner is the recovery owner replacement (§3.3), which
	// removes any relocation progress.
	Relocation *RelocationRef
	// ResumeActivation makes a recovery owner replacement (no Relocation)
	// of an Instance Spot whose first message is not yet recorded done: the
	// record must hold pendingCreation, which the new record keeps, so the
	// new owner restores the stored first message before anything else
	// (§7.1 restart table, "After Ready, before restoring the first
	// message"). Without it such a record is Conflict, as before.
	ResumeActivation bool
}

// DeleteRequest removes the Active record and its capacity (§6.1, §11).
type DeleteRequest struct {
	Object           Object
	ObjectGeneration uint64 // required: only the caller's generation is deleted (§7.2)
	Owner            Owner  // the current owner; its lease is verified
	IfVersion        string
	Fences           []Fence
}

// CapacityRequest pre-secures (SecureCapacity) or returns (ReleaseCapacity)
// target capacity for a relocation (§8.1 "Securing target space", §9.4
// step 4), without touching any authority record.
//
// With a non-zero ReservationID it is the keyed form (§8.1 "Reservation
// ID"): SecureCapacity writes a reservation row holding the object, its
// generation, AuthorityVersion, Source, Target and Bundle, in the same batch
// as the counters, and ReleaseCapacity deletes that row and returns its
// slots (Target, Bundle and the other fields are then taken from the row
// and not used). Without it, only the counters move.
type CapacityRequest struct {
	Target Target
	Bundle Bundle
	// Fences: for the unkeyed form typically the authority rows of the
	// objects being moved at their first-read StoreVersion (§8.1: securing
	// space fixes the object's StoreVersion together with the capacity).
	// The keyed form conditions the object's authority row itself, so a
	// fence on that row would be a duplicate (ErrInvalidOperation).
	Fences []Fence

	// ReservationID names the reservation (non-zero: the keyed form).
	ReservationID [16]byte
	// Keyed SecureCapacity only: the object moved (ID and Kind; StableType
	// checked when set), its ObjectGeneration, the authority StoreVersion
	// the source first read (the row must still be at it), and the source:
	// the record's current owner and node, whose lease is verified.
	Object           Object
	ObjectGeneration uint64
	AuthorityVersion string
	Source           Party
}

func (r ReserveRequest) validate() error {
	const op = OpReserve
	if _, err := r.Object.Key(); err != nil {
		return invalidCause(op, err, "object")
	}
	if err := record.ValidateStableType(r.Object.StableType); err != nil {
		return invalidCause(op, err, "stable type")
	}
	if err := r.Target.validate(); err != nil {
		return invalidCause(op, err, "target")
	}
	if c := r.Content; c != nil {
		pc := r.Creation
		if len(c.Value) != pc.RequestEncodedSize || sha256.Sum256(c.Value) != pc.RequestSHA256 {
			return invalid(op, "creation content (%d bytes) is not the request pendingCreation names (%d bytes, SHA-256 %x)",
				len(c.Value), pc.RequestEncodedSize, pc.RequestSHA256)
		}
		if err := locstore.ValidateKey("write", "content.key", pc.RequestContentReference); err != nil {
			return invalidCause(op, err, "creation content reference")
		}
	}
	return nil
}

// PlanReserve plans Missing → Reserved: it issues the next ObjectGeneration
// from the store-wide counter (gen.Next), sets AuthorityOwnerGeneration to
// the first value gen.Next issues (1), reserves the object's bundle on the
// target node's counters under its limits, and records pendingCreation.
//
// With Content it also writes the creation request pendingCreation names.
//
// Rows used: Authority, ObjectGeneration, TargetLease, Capacity (target).
func PlanReserve(req ReserveRequest, snap Snapshot) (Plan, error) {
	const op = OpReserve
	if err := req.validate(); err != nil {
		return Plan{}, err
	}
	key, _ := req.Object.Key()
	row := snap.Authority
	if row.Key != key {
		return Plan{}, invalid(op, "snapshot's authority row is key %q, need %q", row.Key, key)
	}
	if row.Found {
		cur := row.Record.Allocation
		if cur.ObjectKind != req.Object.Kind || cur.StableType != req.Object.StableType {
			return Plan{}, conflictWith(op, ErrTypeMismatch, row, "%s exists as %s %q, asked for %s %q",
				req.Object.ID, cur.ObjectKind, cur.StableType, req.Object.Kind, req.Object.StableType)
		}
		return Plan{}, conflictWith(op, ErrConflict, row, "%s already has a %s record (ObjectGeneration %d)",
			req.Object.ID, cur.State, row.Record.ObjectGeneration)
	}
	counterKey, err := record.CounterKey(record.CounterObjectGeneration)
	if err != nil {
		return Plan{}, invalidCause(op, err, "ObjectGeneration counter key")
	}
	ctr := snap.ObjectGeneration
	if ctr.Key != counterKey {
		return Plan{}, invalid(op, "snapshot's ObjectGeneration counter row is key %q, need %q", ctr.Key, counterKey)
	}
	objGen, err := gen.Next(ctr.Value, ctr.Found)
	if err != nil {
		kind := ErrCorruptRecord
		if errors.Is(err, gen.ErrGenerationExhausted) {
			kind = ErrGenerationExhausted
		}
		return Plan{}, &Error{Op: op, Kind: kind, Reason: "ObjectGeneration counter", Err: err}
	}
	ownerGen, err := gen.Next(0, false) // the first AuthorityOwnerGeneration, by the same rule
	if err != nil {
		return Plan{}, &Error{Op: op, Kind: ErrInvalidOperation, Reason: "first AuthorityOwnerGeneration", Err: err}
	}
	bundle, err := BundleFor(req.Object.Kind, req.Object.StableType)
	if err != nil {
		return Plan{}, invalidCause(op, err, "capacity bundle")
	}
	creation := req.Creation
	rec := record.Authority{
		ObjectID:                 req.Object.ID,
		Payload:                  cloneBytes(req.Payload),
		ObjectGeneration:         record.Generation(objGen),
		AuthorityOwnerGeneration: record.Generation(ownerGen),
		OwnerID:                  req.Target.Owner.ID,
		OwnerLeaseGeneration:     record.Generation(req.Target.Owner.LeaseGeneration),
		Allocation: record.Allocation{
			State:                         record.AllocationReserved,
			ObjectKind:                    req.Object.Kind,
			StableType:                    req.Object.StableType,
			Descriptor:                    record.DescriptorRef{MeshName: req.Target.Node.MeshName, RoutingID: cloneBytes(req.Target.Node.RoutingID)},
			DescriptorLifecycleGeneration: record.Generation(req.Target.Node.LifecycleGeneration),
			Capacity:                      bundle,
		},
		PendingCreation: &creation,
	}
	value, err := rec.Encode()
	if err != nil {
		return Plan{}, invalidCause(op, err, "authority record")
	}
	leaseCond, err := verifyLease(op, snap.TargetLease, req.Target.Owner, "target")
	if err != nil {
		return Plan{}, err
	}
	b := newBatch(op)
	p := Plan{Op: op, Key: key, Record: &rec, Value: value, from: row}
	if err := b.cond(locstore.IfMissing(key)); err != nil {
		return Plan{}, err
	}
	if ctr.Found {
		err = b.cond(locstore.IfVersion(counterKey, ctr.Version))
	} else {
		err = b.cond(locstore.IfMissing(counterKey))
	}
	if err != nil {
		return Plan{}, err
	}
	if err := b.cond(leaseCond); err != nil {
		return Plan{}, err
	}
	if err := b.fences(req.Fences); err != nil {
		return Plan{}, err
	}
	p.AuthorityMutation = b.mut(locstore.Put(key, value))
	cv, err := record.Counter{Value: record.Generation(objGen)}.Encode()
	if err != nil {
		return Plan{}, invalidCause(op, err, "ObjectGeneration counter")
	}
	b.mut(locstore.Put(counterKey, cv))
	limits := req.Target.Limits
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(req.Target.Node, bundle, 1, 0, &limits)); err != nil {
		return Plan{}, err
	}
	if c := req.Content; c != nil {
		// Not copied: the request can be 1 MiB and the caller does not
		// change it (the store copies what it keeps).
		b.mut(locstore.PutExpiring(creation.RequestContentReference, c.Value, c.Retention))
	}
	return b.finish(p)
}

// existing runs the checks shared by every operation on an existing record,
// in the documented order: key, Missing (ErrNotFound), kind and stable type
// (ErrTypeMismatch), ObjectGeneration (ErrStaleGeneration), IfVersion and
// allocation state (ErrConflict).
func existing(op Op, obj Object, objGen uint64, ifVersion string, want record.AllocationState, row AuthorityRow) (string, error) {
	key, err := obj.Key()
	if err != nil {
		return "", invalidCause(op, err, "object")
	}
	if obj.StableType != "" {
		if err := record.ValidateStableType(obj.StableType); err != nil {
			return "", invalidCause(op, err, "stable type")
		}
	}
	if row.Key != key {
		return "", invalid(op, "snapshot's authority row is key %q, need %q", row.Key, key)
	}
	if !row.Found {
		return "", newErr(op, ErrNotFound, "%s %s has no authority record", obj.Kind.IdentityKind(), obj.ID)
	}
	al := row.Record.Allocation
	if al.ObjectKind != obj.Kind || (obj.StableType != "" && al.StableType != obj.StableType) {
		return "", conflictWith(op, ErrTypeMismatch, row, "%s is %s %q, asked for %s %q", obj.ID, al.ObjectKind, al.StableType, obj.Kind, obj.StableType)
	}
	if objGen != 0 && uint64(row.Record.ObjectGeneration) != objGen {
		return "", conflictWith(op, ErrStaleGeneration, row, "%s holds ObjectGeneration %d, not %d", obj.ID, row.Record.ObjectGeneration, objGen)
	}
	if ifVersion != "" && row.Version != ifVersion {
		return "", conflictWith(op, ErrConflict, row, "record changed since it was first read (version %q, expected %q)", row.Version, ifVersion)
	}
	if al.State != want {
		return "", conflictWith(op, ErrConflict, row, "%s is %s; %s needs a %s record", obj.ID, al.State, op, want)
	}
	return key, nil
}

func requireGeneration(op Op, g uint64) error {
	if !record.Generation(g).Valid() {
		return invalid(op, "the caller's ObjectGeneration %d is not a generation (1..2^63-1 required)", g)
	}
	return nil
}

// ownedBy refuses a record that owner does not own (Conflict).
func ownedBy(op Op, row AuthorityRow, owner Owner) error {
	if cur := row.Record; OwnerOf(cur) != owner {
		return conflictWith(op, ErrConflict, row, "the record is owned by %s/%d, not %s/%d",
			cur.OwnerID, cur.OwnerLeaseGeneration, owner.ID, owner.LeaseGeneration)
	}
	return nil
}

// ownerLease checks that owner owns the record and that its lease is valid,
// and returns the lease condition (verifyLease, as the current owner).
func ownerLease(op Op, row AuthorityRow, owner Owner, lease LeaseRow) (locstore.Condition, error) {
	if err := ownedBy(op, row, owner); err != nil {
		return locstore.Condition{}, err
	}
	return verifyLease(op, lease, owner, "current")
}

// ownedActive runs the checks of a change made by the owner of an Active
// record (Preserve, Delete), in the documented order: owner and caller's
// ObjectGeneration valid, the record as asked and Active (existing), owned
// by owner, owner's lease valid. It returns the record's key and the lease
// condition.
func ownedActive(op Op, obj Object, objGen uint64, ifVersion string, owner Owner, snap Snapshot) (string, locstore.Condition, error) {
	key, err := activeOwnedBy(op, obj, objGen, ifVersion, owner, snap)
	if err != nil {
		return "", locstore.Condition{}, err
	}
	leaseCond, err := verifyLease(op, snap.OwnerLease, owner, "current")
	if err != nil {
		return "", locstore.Condition{}, err
	}
	return key, leaseCond, nil
}

// activeOwnedBy is ownedActive without the lease: owner and the caller's
// ObjectGeneration valid, the record as asked and Active, owned by owner
// (Reclaim and Readopt judge owner's lease their own way).
func activeOwnedBy(op Op, obj Object, objGen uint64, ifVersion string, owner Owner, snap Snapshot) (string, error) {
	if err := owner.validate(); err != nil {
		return "", invalidCause(op, err, "owner")
	}
	if err := requireGeneration(op, objGen); err != nil {
		return "", err
	}
	key, err := existing(op, obj, objGen, ifVersion, record.AllocationActive, snap.Authority)
	if err != nil {
		return "", err
	}
	if err := ownedBy(op, snap.Authority, owner); err != nil {
		return "", err
	}
	return key, nil
}

// PlanCommit plans that reservation's Reserved → Active: reserved slots
// become active on the record's node, pendingCreation is cleared (unless
// KeepPendingCreation), and the Created final result is recorded in the
// same batch when Terminal is set.
//
// Rows used: Authority, OwnerLease (of req.Owner), Capacity (record's node).
func PlanCommit(req CommitRequest, snap Snapshot) (Plan, error) {
	const op = OpCommit
	if err := req.Owner.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "owner")
	}
	if req.ReservationID == "" {
		return Plan{}, invalid(op, "no reservation id")
	}
	if req.Terminal != nil && req.Terminal.Outcome != OutcomeCreated {
		return Plan{}, invalid(op, "a Commit records only a created result, not %q", req.Terminal.Outcome)
	}
	row := snap.Authority
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationReserved, row)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if pc := cur.PendingCreation; pc == nil || pc.ReservationID != req.ReservationID {
		return Plan{}, conflictWith(op, ErrConflict, row, "the reservation is not %q", req.ReservationID)
	}
	leaseCond, err := ownerLease(op, row, req.Owner, snap.OwnerLease)
	if err != nil {
		return Plan{}, err
	}
	next := cloneAuthority(cur)
	next.Allocation.State = record.AllocationActive
	if !req.KeepPendingCreation {
		next.PendingCreation = nil
	}
	if req.Payload.Set {
		next.Payload = cloneBytes(req.Payload.Value)
	}
	b := newBatch(op)
	p, err := putExisting(b, op, key, row, next, leaseCond, req.Fences)
	if err != nil {
		return Plan{}, err
	}
	// The reserved slots are the record's own (Reserved, under its version
	// in this batch): guarded, so only the active row is conditioned and a
	// Commit no longer contends with the Reserves of other creations.
	node, bun := NodeOf(cur), cur.Allocation.Capacity
	if p.Capacity, err = applyCapacity(b, snap, guardedBy(bundleDeltas(node, bun, -1, 1, nil))); err != nil {
		return Plan{}, err
	}
	if err := addTerminal(b, &p, req.Terminal, next, req.Object.ID, snap.StoreNow); err != nil {
		return Plan{}, err
	}
	if ref, ok := storedRequest(cur.PendingCreation); ok && next.PendingCreation == nil {
		b.mut(locstore.Delete(ref))
	}
	return b.finish(p)
}

// putExisting starts the batch of a change to an existing record:
// IfVersion on the authority row, the lease condition (if any), the fences,
// and the authority Put.
func putExisting(b *batch, op Op, key string, row AuthorityRow, next record.Authority, leaseCond locstore.Condition, fences []Fence) (Plan, error) {
	value, err := next.Encode()
	if err != nil {
		return Plan{}, invalidCause(op, err, "authority record")
	}
	p := Plan{Op: op, Key: key, Record: &next, Value: value, from: row}
	if err := b.cond(locstore.IfVersion(key, row.Version)); err != nil {
		return Plan{}, err
	}
	if leaseCond.Key != "" {
		if err := b.cond(leaseCond); err != nil {
			return Plan{}, err
		}
	}
	if err := b.fences(fences); err != nil {
		return Plan{}, err
	}
	p.AuthorityMutation = b.mut(locstore.Put(key, value))
	return p, nil
}

// deleteExisting is putExisting for a batch that deletes the record.
func deleteExisting(b *batch, op Op, key string, row AuthorityRow, leaseCond locstore.Condition, fences []Fence) (Plan, error) {
	p := Plan{Op: op, Key: key, from: row}
	if err := b.cond(locstore.IfVersion(key, row.Version)); err != nil {
		return Plan{}, err
	}
	if leaseCond.Key != "" {
		if err := b.cond(leaseCond); err != nil {
			return Plan{}, err
		}
	}
	if err := b.fences(fences); err != nil {
		return Plan{}, err
	}
	p.AuthorityMutation = b.mut(locstore.Delete(key))
	return p, nil
}

// PlanAbort plans that reservation's Reserved → Missing: the record is
// deleted, its reserved slots are returned, and a Rejected or Failed final
// result is recorded in the same batch when Terminal is set.
//
// Rows used: Authority, Capacity (record's node), OwnerLease when Owner is
// set.
func PlanAbort(req AbortRequest, snap Snapshot) (Plan, error) {
	const op = OpAbort
	if req.ReservationID == "" {
		return Plan{}, invalid(op, "no reservation id")
	}
	if req.Owner != nil {
		if err := req.Owner.validate(); err != nil {
			return Plan{}, invalidCause(op, err, "owner")
		}
	}
	if t := req.Terminal; t != nil && t.Outcome != OutcomeRejected && t.Outcome != OutcomeFailed {
		return Plan{}, invalid(op, "an Abort records only a rejected or failed result, not %q", t.Outcome)
	}
	row := snap.Authority
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationReserved, row)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if pc := cur.PendingCreation; pc == nil || pc.ReservationID != req.ReservationID {
		return Plan{}, conflictWith(op, ErrConflict, row, "the reservation is not %q", req.ReservationID)
	}
	var leaseCond locstore.Condition
	if req.Owner != nil {
		if leaseCond, err = ownerLease(op, row, *req.Owner, snap.OwnerLease); err != nil {
			return Plan{}, err
		}
	}
	b := newBatch(op)
	p, err := deleteExisting(b, op, key, row, leaseCond, req.Fences)
	if err != nil {
		return Plan{}, err
	}
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(NodeOf(cur), cur.Allocation.Capacity, -1, 0, nil)); err != nil {
		return Plan{}, err
	}
	if err := addTerminal(b, &p, req.Terminal, cur, req.Object.ID, snap.StoreNow); err != nil {
		return Plan{}, err
	}
	if ref, ok := storedRequest(cur.PendingCreation); ok {
		b.mut(locstore.Delete(ref))
	}
	return b.finish(p)
}

// PlanPreserve plans a change of framework-internal data only (payload,
// clearing pendingCreation) on an Active record whose owner's lease is
// valid. Owner, generations, allocation and capacity are kept.
//
// Rows used: Authority, OwnerLease (of req.Owner).
func PlanPreserve(req PreserveRequest, snap Snapshot) (Plan, error) {
	const op = OpPreserve
	key, leaseCond, err := ownedActive(op, req.Object, req.ObjectGeneration, req.IfVersion, req.Owner, snap)
	if err != nil {
		return Plan{}, err
	}
	row := snap.Authority
	next := cloneAuthority(row.Record)
	if req.Payload.Set {
		next.Payload = cloneBytes(req.Payload.Value)
	}
	if req.ClearPendingCreation {
		next.PendingCreation = nil
	}
	return putOnly(op, key, row, next, leaseCond, req.Fences)
}

// putOnly is the whole batch of a change of the authority row alone
// (Preserve, CompleteRelocation): putExisting and the SPI check.
func putOnly(op Op, key string, row AuthorityRow, next record.Authority, leaseCond locstore.Condition, fences []Fence) (Plan, error) {
	b := newBatch(op)
	p, err := putExisting(b, op, key, row, next, leaseCond, fences)
	if err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// PlanNewOwner plans an Active record's change to the target owner: the
// ObjectGeneration is kept, AuthorityOwnerGeneration takes its next value
// (gen.Next), the allocation moves to the target node, the source node's
// active slots are released and the target's are taken — from its
// pre-secured reservation (PreSecured) or under its limits. The target's
// lease is verified; the source's is not (the target performs the CAS, and
// recovery replaces the owner of a dead host, §3.3, §8).
//
// An invalid target combination (the target is the current owner on the
// current node, or the target's node is the current node under another
// owner — a node run has exactly one host run) is ErrInvalidOperation.
// A record still holding pendingCreation (an Instance Spot whose first
// message is not yet recorded, §7.1) is Conflict: no owner change is
// allowed before that. Without req.Relocation (recovery) the new record
// carries no relocation progress; with it, see planNewOwnerRelocation.
//
// Rows used: Authority, TargetLease, Capacity (record's node and target node).
func PlanNewOwner(req NewOwnerRequest, snap Snapshot) (Plan, error) {
	const op = OpNewOwner
	if err := req.Target.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "target")
	}
	if err := requireGeneration(op, req.ObjectGeneration); err != nil {
		return Plan{}, err
	}
	if req.Relocation != nil {
		return planNewOwnerRelocation(req, snap)
	}
	row := snap.Authority
	key, err := existing(op, req.Object, req.ObjectGeneration, req.IfVersion, record.AllocationActive, row)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if err := checkTargetCombination(op, cur, req.Target); err != nil {
		return Plan{}, err
	}
	if req.ResumeActivation {
		if cur.PendingCreation == nil || cur.Allocation.ObjectKind != record.ObjectInstanceSpot {
			return Plan{}, conflictWith(op, ErrConflict, row, "%s holds no Instance Spot activation to resume", req.Object.ID)
		}
	} else if err := noCreationState(op, row); err != nil {
		return Plan{}, err
	}
	leaseCond, err := verifyLease(op, snap.TargetLease, req.Target.Owner, "target")
	if err != nil {
		return Plan{}, err
	}
	next, err := moveTo(op, row, req.Target, req.Payload)
	if err != nil {
		return Plan{}, err
	}
	// A recovery owner replacement ends whatever move was under way: its
	// progress names an owner that is no longer the record's.
	next.Relocation = nil
	b := newBatch(op)
	p, err := putExisting(b, op, key, row, next, leaseCond, req.Fences)
	if err != nil {
		return Plan{}, err
	}
	bun := cur.Allocation.Capacity
	deltas := bundleDeltas(NodeOf(cur), bun, 0, -1, nil)
	if req.PreSecured {
		for _, s := range slotsOf(req.Target.Node, bun) {
			r, ok := snap.capacity(s.id)
			if ok && (!r.Found || r.Usage.Reserved < s.slots) {
				id := s.id
				reserved := 0
				if r.Found {
					reserved = r.Usage.Reserved
				}
				return Plan{}, &Error{Op: op, Kind: ErrConflict, Counter: &id,
					Reason: fmt.Sprintf("target counter %s holds %d reserved slots, the pre-secured bundle needs %d", id, reserved, s.slots)}
			}
		}
		deltas = append(deltas, bundleDeltas(req.Target.Node, bun, -1, 1, nil)...)
	} else {
		limits := req.Target.Limits
		deltas = append(deltas, bundleDeltas(req.Target.Node, bun, 0, 1, &limits)...)
	}
	if p.Capacity, err = applyCapacity(b, snap, deltas); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// PlanDelete plans the removal of the Active record of the caller's
// generation, owned by req.Owner with a valid lease, together with its
// active slots (§6.1, §11). There is no separate lookup index to remove:
// the operational list scans the "authority:" key prefix.
//
// Rows used: Authority, OwnerLease (of req.Owner), Capacity (record's node).
func PlanDelete(req DeleteRequest, snap Snapshot) (Plan, error) {
	const op = OpDelete
	key, leaseCond, err := ownedActive(op, req.Object, req.ObjectGeneration, req.IfVersion, req.Owner, snap)
	if err != nil {
		return Plan{}, err
	}
	row := snap.Authority
	cur := row.Record
	b := newBatch(op)
	p, err := deleteExisting(b, op, key, row, leaseCond, req.Fences)
	if err != nil {
		return Plan{}, err
	}
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(NodeOf(cur), cur.Allocation.Capacity, 0, -1, nil)); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// PlanSecureCapacity plans reserving a bundle on the target node for a
// relocation (§1.3 step 2, §8.1), under the target's limits, with the
// target's lease verified. It changes no authority record. With a
// ReservationID it is the keyed form (planSecureKeyed), which also writes
// the reservation row.
//
// Rows used: TargetLease, Capacity (target node); keyed: see
// planSecureKeyed.
func PlanSecureCapacity(req CapacityRequest, snap Snapshot) (Plan, error) {
	const op = OpSecureCapacity
	if req.keyed() {
		return planSecureKeyed(req, snap)
	}
	if err := req.Target.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "target")
	}
	if err := validateBundle(req.Bundle); err != nil {
		return Plan{}, invalidCause(op, err, "bundle")
	}
	leaseCond, err := verifyLease(op, snap.TargetLease, req.Target.Owner, "target")
	if err != nil {
		return Plan{}, err
	}
	b := newBatch(op)
	if err := b.cond(leaseCond); err != nil {
		return Plan{}, err
	}
	return reserveOnTarget(b, Plan{Op: op, AuthorityMutation: -1}, req, snap)
}

// reserveOnTarget ends a SecureCapacity batch: the fences, the bundle
// reserved on the target's counters under its limits, and the SPI check.
func reserveOnTarget(b *batch, p Plan, req CapacityRequest, snap Snapshot) (Plan, error) {
	if err := b.fences(req.Fences); err != nil {
		return Plan{}, err
	}
	limits := req.Target.Limits
	var err error
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(req.Target.Node, req.Bundle, 1, 0, &limits)); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// PlanReleaseCapacity plans returning a bundle SecureCapacity reserved on
// the target node (relocation cancelled, §9.4 step 4). It verifies no lease:
// returning slots cannot overfill a node, and the target run may be gone.
// Target.Owner and Target.Limits are not used. With a ReservationID it is
// the keyed form (planReleaseKeyed), which takes target and bundle from the
// reservation row.
//
// Rows used: Capacity (target node); keyed: see planReleaseKeyed.
func PlanReleaseCapacity(req CapacityRequest, snap Snapshot) (Plan, error) {
	const op = OpReleaseCapacity
	if req.keyed() {
		return planReleaseKeyed(req, snap)
	}
	if err := req.Target.Node.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "target node")
	}
	if err := validateBundle(req.Bundle); err != nil {
		return Plan{}, invalidCause(op, err, "bundle")
	}
	b := newBatch(op)
	p := Plan{Op: op, AuthorityMutation: -1}
	if err := b.fences(req.Fences); err != nil {
		return Plan{}, err
	}
	var err error
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(req.Target.Node, req.Bundle, -1, 0, nil)); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
