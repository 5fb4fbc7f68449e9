package mesh

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// SweepResult counts what the §11 owner sweep saw and did.
type SweepResult struct {
	Scanned  int // authority rows in the snapshot
	Ours     int // rows of this host run (owner id and lease generation)
	Deleted  int // Active rows deleted with their capacity
	Aborted  int // Reserved rows aborted with their capacity
	Skipped  int // rows that changed since the snapshot or could not be decoded
	Restarts int // snapshot restarts after an expired scan
	// Fenced counts moves to this run that had not committed: their
	// reservation was released, so their owner CAS can never apply
	// (fenceArrival). Landed counts those whose CAS had applied after
	// all: their row, this run's then, was removed with the others.
	Fenced, Landed int
}

// sweepAuthority is the owner-cleanup sweep of §11 (removeAllByOwner): it
// reclaims the authority rows of this host run only — matching both the
// owner id and the lease generation — and never touches descriptors (those
// go through their own lease expiry and takeover). Each row found in the
// snapshot is only a candidate: it is removed under the version the scan
// read, together with its capacity. The rows of a page are removed in
// batches of up to authority.MaxSweepRows (authority.Executor.Sweep: one
// read and one write per batch instead of three round trips per row); a
// batch the store refuses, or whose answer is lost, is removed again row by
// row, where each row is decided on its own (Delete or Abort re-reads it).
func (n *Node) sweepAuthority(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	exec, err := authority.NewExecutor(n.loc, authority.WithLogger(n.log))
	if err != nil {
		return res, err
	}
	id, lg := n.Owner()
	owner := authority.Owner{ID: id, LeaseGeneration: lg}
	prefix := record.KindPrefix(record.KindAuthority)
	cursor := ""
	var errs []error
	for {
		page, err := n.loc.Scan(ctx, locstore.ScanRequest{Prefix: prefix, Limit: 500, Cursor: cursor})
		if err != nil {
			return res, fmt.Errorf("owner sweep: scan: %w", err)
		}
		if page.Expired {
			if res.Restarts++; res.Restarts > 3 {
				return res, errors.New("owner sweep: scan snapshot kept expiring")
			}
			cursor = ""
			continue
		}
		var ours []authority.AuthorityRow
		for _, it := range page.Items {
			res.Scanned++
			a, err := record.DecodeAuthority(it.Value)
			if err != nil {
				res.Skipped++
				n.log.Warn("owner sweep: undecodable authority row", "key", it.Key, "err", err)
				continue
			}
			if a.OwnerID != owner.ID || uint64(a.OwnerLeaseGeneration) != owner.LeaseGeneration {
				if movingHere(a, owner) {
					if err := n.fenceArrival(ctx, exec, owner, it.Key, a, &res); err != nil {
						errs = append(errs, err)
					}
				}
				continue
			}
			res.Ours++
			if moving, err := moveMayCommit(ctx, n.loc, a); err != nil || moving {
				// A move of it may still commit on its target: left to
				// the move (and, failing that, to the reclaim sweep).
				res.Skipped++
				if err != nil {
					errs = append(errs, err)
				}
				continue
			}
			ours = append(ours, authority.AuthorityRow{Key: it.Key, Found: true, Record: a, Version: it.Version})
		}
		for len(ours) > 0 {
			chunk := ours[:min(len(ours), authority.MaxSweepRows)]
			ours = ours[len(chunk):]
			_, err := exec.Sweep(ctx, authority.SweepRequest{Owner: owner, Rows: chunk})
			if err == nil {
				for _, row := range chunk {
					if row.Record.Allocation.State == record.AllocationActive {
						res.Deleted++
					} else {
						res.Aborted++
					}
				}
				continue
			}
			n.log.Debug("owner sweep: batch not applied; removing its rows one by one", "rows", len(chunk), "err", err)
			for _, row := range chunk {
				if err := sweepOne(ctx, n.loc, exec, owner, row, &res); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if res.Ours > 0 || res.Fenced > 0 {
		n.log.Info("owner sweep", "scanned", res.Scanned, "ours", res.Ours, "deleted", res.Deleted,
			"aborted", res.Aborted, "skipped", res.Skipped, "arrivals_fenced", res.Fenced, "arrivals_landed", res.Landed)
	}
	return res, errors.Join(errs...)
}

// sweepOne removes one row of this host run under the version the scan
// read: an Active row is deleted, a Reserved row aborted, with its
// capacity. A row changed since the scan is read again and removed under
// its new version while it is still this run's (owner id and lease
// generation) and no move of it is under way; otherwise it is skipped. Before, every changed
// row was skipped and left to the other nodes' reclaim sweep: in a try-out
// (two processes creating and destroying a shared id space while a server
// drained) two such rows outlived their node, and requests to them failed
// "unknown peer" until the reclaim grace had passed.
func sweepOne(ctx context.Context, loc locstore.Store, exec *authority.Executor, owner authority.Owner, row authority.AuthorityRow, res *SweepResult) error {
	for try := 0; ; try++ {
		changed, err := sweepRow(ctx, exec, owner, row, res)
		if !changed {
			return err
		}
		if try == sweepRereads {
			res.Skipped++ // kept changing: left to the reclaim sweep
			return nil
		}
		rr, err := loc.Read(ctx, row.Key)
		if err != nil {
			return fmt.Errorf("owner sweep %s: re-read: %w", row.Record.ObjectID, err)
		}
		cur, err := authority.AuthorityRowOf(row.Key, rr)
		if err != nil || !cur.Found || cur.Record.OwnerID != owner.ID || uint64(cur.Record.OwnerLeaseGeneration) != owner.LeaseGeneration ||
			cur.Record.Relocation != nil {
			// Gone, undecodable, no longer this run's — or a move of it
			// went under way since the scan: left to the move (which may
			// still save it) and, failing that, to the reclaim sweep.
			res.Skipped++
			return nil
		}
		row = cur
	}
}

// sweepRereads bounds how often sweepOne reads a changing row again.
const sweepRereads = 3

// sweepRow is one try of sweepOne under row's version; changed reports a
// Conflict (the row moved on since it was read).
func sweepRow(ctx context.Context, exec *authority.Executor, owner authority.Owner, row authority.AuthorityRow, res *SweepResult) (bool, error) {
	a := row.Record
	obj := authority.Object{ID: a.ObjectID, Kind: a.Allocation.ObjectKind, StableType: a.Allocation.StableType}
	var err error
	switch a.Allocation.State {
	case record.AllocationActive:
		_, err = exec.Delete(ctx, authority.DeleteRequest{Object: obj, ObjectGeneration: uint64(a.ObjectGeneration),
			Owner: owner, IfVersion: row.Version})
		if err == nil {
			res.Deleted++
		}
	case record.AllocationReserved:
		req := authority.AbortRequest{Object: obj, ObjectGeneration: uint64(a.ObjectGeneration), IfVersion: row.Version, Owner: &owner}
		if a.PendingCreation != nil {
			req.ReservationID = a.PendingCreation.ReservationID
		}
		_, err = exec.Abort(ctx, req)
		if err == nil {
			res.Aborted++
		}
	}
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, authority.ErrConflict):
		return true, nil
	default:
		return false, fmt.Errorf("owner sweep %s: %w", a.ObjectID, err)
	}
}

// moveMayCommit reports whether a's relocation progress names a move whose
// reservation still exists: its target's owner CAS (which consumes the
// reservation) may still apply. Progress of a move whose reservation was
// released or consumed is stale and does not keep the row.
func moveMayCommit(ctx context.Context, loc locstore.Store, a record.Authority) (bool, error) {
	r := a.Relocation
	if r == nil || r.Stage == record.RelocationCommitted {
		return false, nil
	}
	key, err := authority.ReservationKey(r.ReservationID)
	if err != nil {
		return false, nil
	}
	rr, err := loc.Read(ctx, key)
	if err != nil {
		return false, fmt.Errorf("owner sweep %s: read its move's reservation: %w", a.ObjectID, err)
	}
	return rr.Found, nil
}

// movingHere reports whether a's move progress names the host run owner as
// the target of a move that has not committed (the source still owns the
// row).
func movingHere(a record.Authority, owner authority.Owner) bool {
	r := a.Relocation
	return r != nil && r.Stage != record.RelocationCommitted && r.Target.OwnerID == owner.ID &&
		uint64(r.Target.OwnerLeaseGeneration) == owner.LeaseGeneration
}

// fenceArrival makes sure a move to this stopping run whose owner CAS has
// not applied never does: it releases the move's reservation, which the
// CAS consumes and is conditioned on (§8.1). The shutdown halted the
// arrival before the sweep, but a CAS already sent may still be applied by
// the store after the sweep's scan — and then the record named this run
// once it had stopped, for an object it no longer had, until the other
// nodes reclaimed it after the lease expired. The source, waiting for the
// commit, is told so when this release applied and the arrival had
// answered relay-ready (tellFenced: a second 53, failed); it then finds
// the reservation gone and the record still its own, and takes the object
// back with its state (RELOCATION.md §9.4 and §5).
// A release that finds the reservation gone (consumed by a CAS that landed
// since the scan, or released by the source) is followed by a read of the
// row: once that answer is in no CAS of the move can land any more, and a
// row that names this run now is removed like the others — the object
// arrived at a stopping node and goes with its objects.
func (n *Node) fenceArrival(ctx context.Context, exec *authority.Executor, owner authority.Owner, key string, a record.Authority, res *SweepResult) error {
	rel, err := exec.ReleaseCapacity(ctx, authority.CapacityRequest{ReservationID: a.Relocation.ReservationID})
	if err != nil {
		return fmt.Errorf("owner sweep %s: release the reservation of its move here: %w", a.ObjectID, err)
	}
	res.Fenced++
	if !rel.AlreadyApplied && !rel.Recovered {
		n.log.Info("owner sweep: a move here that had not committed is stopped; its source keeps the object",
			"object", a.ObjectID)
		// This release made the CAS impossible: the source may take the
		// object back now, and is told so rather than left to find this
		// run's lease gone (relocate_stopped.go). Not in the branch below:
		// there the reservation was gone already, and the CAS may be what
		// consumed it.
		n.obj.tellFenced(a.Relocation)
		return nil
	}
	rr, err := n.loc.Read(ctx, key)
	if err != nil {
		return fmt.Errorf("owner sweep %s: re-read after its move's reservation was gone: %w", a.ObjectID, err)
	}
	cur, err := authority.AuthorityRowOf(key, rr)
	if err != nil || !cur.Found || cur.Record.OwnerID != owner.ID || uint64(cur.Record.OwnerLeaseGeneration) != owner.LeaseGeneration {
		return nil // not this run's: the source's still, or gone
	}
	res.Ours++
	res.Landed++
	n.log.Warn("owner sweep: a move here committed while the node stopped; its record is removed with this run's others (its state is lost)",
		"object", a.ObjectID)
	return sweepOne(ctx, n.loc, exec, owner, cur, res)
}
