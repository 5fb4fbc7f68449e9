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
	if res.Ours > 0 {
		n.log.Info("owner sweep", "scanned", res.Scanned, "ours", res.Ours, "deleted", res.Deleted,
			"aborted", res.Aborted, "skipped", res.Skipped)
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
