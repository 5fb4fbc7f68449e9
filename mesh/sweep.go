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
// snapshot is only a candidate: the delete or abort re-reads it and applies
// under its first-read version, together with the capacity change, in one
// batch (authority.Executor).
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
			obj := authority.Object{ID: a.ObjectID, Kind: a.Allocation.ObjectKind, StableType: a.Allocation.StableType}
			switch a.Allocation.State {
			case record.AllocationActive:
				_, err = exec.Delete(ctx, authority.DeleteRequest{Object: obj, ObjectGeneration: uint64(a.ObjectGeneration),
					Owner: owner, IfVersion: it.Version})
				if err == nil {
					res.Deleted++
				}
			case record.AllocationReserved:
				req := authority.AbortRequest{Object: obj, ObjectGeneration: uint64(a.ObjectGeneration), IfVersion: it.Version, Owner: &owner}
				if a.PendingCreation != nil {
					req.ReservationID = a.PendingCreation.ReservationID
				}
				_, err = exec.Abort(ctx, req)
				if err == nil {
					res.Aborted++
				}
			}
			if err != nil {
				if errors.Is(err, authority.ErrConflict) {
					res.Skipped++ // changed since the snapshot: no longer ours to sweep blindly
					continue
				}
				errs = append(errs, fmt.Errorf("owner sweep %s: %w", a.ObjectID, err))
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
