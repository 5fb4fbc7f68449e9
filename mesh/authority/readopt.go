package authority

import (
	"context"
)

// OpReadopt re-adopts a record after its owner reacquired its lease under a
// new generation (docs/LEASE.md "Riding out a store outage").
const OpReadopt Op = "readopt"

// ReadoptRequest moves an Active record from the owner combination From
// (this host's run before it lost its lease) to To (the same OwnerId under
// its new LeaseGeneration), on the same node run, raising
// AuthorityOwnerGeneration — the change §3.1 calls taking over an expired
// lease, for an object the host still holds in memory. It only applies
// while the record is unchanged since the host last wrote it: still naming
// From and Node, at IfVersion (when given), and To's lease live (its row's
// version is a condition). Anything else is Conflict: the object changed
// hands meanwhile (reclaimed, recreated), or — To's lease not live — the
// host's own new lease is in doubt.
//
// Relocation progress on the record is stale and is cleared: the host
// re-adopts only objects it is serving, not ones it is moving away, and
// progress is left behind by a cancelled move (Captured or Prepared, whose
// reservation the cancellation deleted, so its NewOwner can never apply)
// or by a move whose CompleteRelocation did not land (Committed, naming
// this owner). Refusing it made a lease loss drop such an object although
// its record named this node.
type ReadoptRequest struct {
	Object           Object
	ObjectGeneration uint64
	From, To         Owner
	Node             Node // the node run the record must name
	IfVersion        string
}

// PlanReadopt plans ReadoptRequest.
//
// Rows used: Authority, OwnerLease (of To).
func PlanReadopt(req ReadoptRequest, snap Snapshot) (Plan, error) {
	const op = OpReadopt
	if err := req.To.validate(); err != nil {
		return Plan{}, invalidCause(op, err, "to owner")
	}
	if req.From.ID != req.To.ID || req.To.LeaseGeneration <= req.From.LeaseGeneration {
		return Plan{}, invalid(op, "re-adoption is by the same OwnerId under a later LeaseGeneration (%s/%d -> %s/%d)",
			req.From.ID, req.From.LeaseGeneration, req.To.ID, req.To.LeaseGeneration)
	}
	key, err := activeOwnedBy(op, req.Object, req.ObjectGeneration, req.IfVersion, req.From, snap)
	if err != nil {
		return Plan{}, err
	}
	row := snap.Authority
	if !NodeOf(row.Record).Equal(req.Node) {
		return Plan{}, conflictWith(op, ErrConflict, row, "the record names node run %s, not %s", NodeOf(row.Record), req.Node)
	}
	leaseCond, err := verifyLease(op, snap.OwnerLease, req.To, "new")
	if err != nil {
		return Plan{}, err
	}
	next, err := moveTo(op, row, Target{Node: req.Node, Owner: req.To}, PayloadUpdate{})
	if err != nil {
		return Plan{}, err
	}
	next.Relocation = nil // stale: see ReadoptRequest
	return putOnly(op, key, row, next, leaseCond, nil)
}

// Readopt runs PlanReadopt.
func (e *Executor) Readopt(ctx context.Context, req ReadoptRequest) (Result, error) {
	read := e.existingReader(OpReadopt, req.Object, reads{owner: &req.To})
	return e.run(ctx, OpReadopt, req.Object, read, func(s Snapshot) (Plan, error) { return PlanReadopt(req, s) })
}
