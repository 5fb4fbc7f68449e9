package authority

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// The owner sweep of §11 (removeAllByOwner) in batches. A stopping host run
// removes every authority row it still owns: Active rows are deleted,
// Reserved rows aborted, each with its slots. One Delete or Abort per row
// reads the row, its lease and its counters and writes one batch — three
// round trips per object, ~0.43 ms on Redis here, so a node holding 100,000
// objects took ~45 s to stop. The scan that finds the rows already read each
// one with its version, and every row of the sweep moves the same few
// counters of the same node run, so one batch can remove many rows: each
// conditioned on the version the scan read, the owner's lease on its
// version, the counters on theirs, and the counters moved once by the sum.
// A row that changed since the scan fails the whole batch (Conflict); the
// caller then removes that chunk's rows one by one, where the changed row
// is decided on its own.

// OpSweep removes rows of the caller's own host run in one batch.
const OpSweep Op = "sweep"

// MaxSweepRows bounds the rows of one sweep batch: well inside the store's
// key limit (locstore.MaxBatchKeys) with the lease and the counters.
const MaxSweepRows = 128

// SweepRequest is a batch of the owner sweep: rows of Owner's host run, as
// a scan read them (found, with their versions).
type SweepRequest struct {
	Owner Owner
	Rows  []AuthorityRow
}

// counters are the counters the rows move (each once).
func (r SweepRequest) counters() []CounterID {
	var ids []CounterID
	for _, row := range r.Rows {
		for _, id := range CountersFor(NodeOf(row.Record), row.Record.Allocation.Capacity) {
			if !containsCounter(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// PlanSweep plans the removal of req.Rows in one batch: each row deleted
// under the version the scan read (an Active row with its active slots, a
// Reserved row — an abort without a final result — with its reserved
// slots), the owner's lease verified, the counters moved by the sum.
//
// Rows used: OwnerLease (of req.Owner), Capacity (the rows' counters).
func PlanSweep(req SweepRequest, snap Snapshot) (Plan, error) {
	const op = OpSweep
	if len(req.Rows) == 0 || len(req.Rows) > MaxSweepRows {
		return Plan{}, invalid(op, "%d rows, want 1..%d", len(req.Rows), MaxSweepRows)
	}
	leaseCond, err := verifyLease(op, snap.OwnerLease, req.Owner, "owner")
	if err != nil {
		return Plan{}, err
	}
	rows := slices.Clone(req.Rows)
	slices.SortFunc(rows, func(a, b AuthorityRow) int { return strings.Compare(a.Key, b.Key) })
	b := newBatch(op)
	var deltas []capDelta
	for _, row := range rows {
		if !row.Found || row.Version == "" {
			return Plan{}, invalid(op, "row %s: a sweep removes rows read with their version", row.Key)
		}
		if OwnerOf(row.Record) != req.Owner {
			return Plan{}, invalid(op, "row %s is owned by %s/%d, not this host run", row.Key, row.Record.OwnerID, row.Record.OwnerLeaseGeneration)
		}
		obj := Object{ID: row.Record.ObjectID, Kind: row.Record.Allocation.ObjectKind}
		key, err := obj.Key()
		if err != nil || key != row.Key {
			return Plan{}, invalid(op, "row %s does not hold the record of its key", row.Key)
		}
		if err := b.cond(locstore.IfVersion(row.Key, row.Version)); err != nil {
			return Plan{}, err
		}
		b.mut(locstore.Delete(row.Key))
		al := row.Record.Allocation
		switch al.State {
		case record.AllocationActive:
			deltas = append(deltas, bundleDeltas(NodeOf(row.Record), al.Capacity, 0, -1, nil)...)
		case record.AllocationReserved:
			deltas = append(deltas, bundleDeltas(NodeOf(row.Record), al.Capacity, -1, 0, nil)...)
		default:
			return Plan{}, invalid(op, "row %s is in state %q", row.Key, al.State)
		}
	}
	if err := b.cond(leaseCond); err != nil {
		return Plan{}, err
	}
	p := Plan{Op: op, AuthorityMutation: -1}
	if p.Capacity, err = applyCapacity(b, snap, deltas); err != nil {
		return Plan{}, err
	}
	return b.finish(p)
}

// Sweep reads the owner's lease and the rows' counters in one call, plans
// PlanSweep and writes the batch once. A batch the store refuses (a row,
// the lease or a counter changed since) is ErrConflict and changed
// nothing; a lost answer is returned as the provider's error — the batch
// may have applied, and the caller removes the rows one by one, which
// decides each of them from the store.
func (e *Executor) Sweep(ctx context.Context, req SweepRequest) (Result, error) {
	const op = OpSweep
	var r rowSet
	li := r.addLease(op, req.Owner.ID)
	ids := req.counters()
	capAt := r.addCapacity(op, ids)
	got, err := e.fetch(ctx, nil, op, r)
	if err != nil {
		return Result{}, err
	}
	snap := Snapshot{StoreNow: got.now}
	if snap.OwnerLease, err = got.lease(op, r, li); err != nil {
		return Result{}, err
	}
	if snap.Capacity, err = capacityAt(op, ids, got, capAt); err != nil {
		return Result{}, err
	}
	p, err := PlanSweep(req, snap)
	if err != nil {
		return Result{}, err
	}
	wr, err := e.store.Write(ctx, p.Request)
	if err != nil {
		return Result{}, outcomeUnknown(string(op), fmt.Sprintf("(write: %v)", err), err)
	}
	if !wr.Applied {
		return Result{}, newErr(op, ErrConflict, "a row, the lease or a counter changed since they were read")
	}
	return Result{Plan: p, StoreNow: wr.StoreNow, Attempts: 1}, nil
}
