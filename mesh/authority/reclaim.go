package authority

import (
	"context"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// OpReclaim removes the Active record of an owner whose lease has ended
// (docs/AUTHORITY.md "Reclaiming a dead owner's objects").
const OpReclaim Op = "reclaim"

// ReclaimRequest removes an Active record whose owner's lease has ended —
// the owner-lease row is gone, or holds another LeaseGeneration — with the
// active slots it held on its node, so that its Id can be used again. The
// state that lived only in the dead process is gone with it; the record is
// the last trace of the object, and the caller logs it.
//
// Spec basis: §6.1 only lets the current owner Delete, verifying its lease;
// with the lease ended there is no current owner left to ask (§3.1: the
// run's combination is judged by the lease record read directly), §5 has
// already fenced the dead run off every store change, and §7.4 reports the
// record as "current owner unavailable" for ever. The batch checks exactly
// what makes that safe: the record unchanged since the caller read it
// (IfVersion), still naming Owner, and Owner's lease still ended (IfMissing
// on its row, or IfVersion on the row of its successor generation).
type ReclaimRequest struct {
	Object           Object
	ObjectGeneration uint64 // required: only that generation is reclaimed
	// Owner is the owner the caller saw in the record; the record must
	// still name it.
	Owner     Owner
	IfVersion string // optional first-read version
}

// PlanReclaim plans ReclaimRequest.
//
// Rows used: Authority, OwnerLease (of req.Owner), Capacity (record's node).
func PlanReclaim(req ReclaimRequest, snap Snapshot) (Plan, error) {
	const op = OpReclaim
	key, err := activeOwnedBy(op, req.Object, req.ObjectGeneration, req.IfVersion, req.Owner, snap)
	if err != nil {
		return Plan{}, err
	}
	row := snap.Authority
	leaseCond, err := leaseEnded(op, snap.OwnerLease, req.Owner)
	if err != nil {
		return Plan{}, err
	}
	b := newBatch(op)
	p, err := deleteExisting(b, op, key, row, leaseCond, nil)
	if err != nil {
		return Plan{}, err
	}
	cur := row.Record
	if p.Capacity, err = applyCapacity(b, snap, bundleDeltas(NodeOf(cur), cur.Allocation.Capacity, 0, -1, nil)); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// leaseEnded checks that owner's lease has ended — its row is missing
// (expired or deleted: a Found row is unexpired by the SPI) or holds another
// LeaseGeneration — and returns the condition that keeps it so: IfMissing,
// or IfVersion on the successor's row. A live lease of owner is Conflict.
func leaseEnded(op Op, row LeaseRow, owner Owner) (locstore.Condition, error) {
	key, err := record.OwnerLeaseKey(owner.ID)
	if err != nil {
		return locstore.Condition{}, invalidCause(op, err, "owner id")
	}
	if row.Key != key {
		return locstore.Condition{}, invalid(op, "snapshot's owner lease row is key %q, need %q (the lease of %s)", row.Key, key, owner.ID)
	}
	switch {
	case !row.Found:
		return locstore.IfMissing(key), nil
	case row.Lease.OwnerID != owner.ID:
		return locstore.Condition{}, newErr(op, ErrCorruptRecord, "owner-lease row %s holds owner %q", key, row.Lease.OwnerID)
	case uint64(row.Lease.LeaseGeneration) != owner.LeaseGeneration:
		return locstore.IfVersion(key, row.Version), nil
	}
	return locstore.Condition{}, newErr(op, ErrConflict, "owner %s/%d still holds a live lease", owner.ID, owner.LeaseGeneration)
}

// Reclaim runs PlanReclaim.
func (e *Executor) Reclaim(ctx context.Context, req ReclaimRequest) (Result, error) {
	read := e.existingReader(OpReclaim, req.Object, reads{owner: &req.Owner, capacity: true})
	return e.run(ctx, OpReclaim, req.Object, read, func(s Snapshot) (Plan, error) { return PlanReclaim(req, s) })
}
