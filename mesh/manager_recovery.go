package mesh

import (
	"context"
	"errors"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// recoverAbandoned cancels a Creating record whose owner host run is gone
// (its owner lease is missing, expired or of another generation): that run
// can never commit it, so without this a GetOrCreate would wait on it until
// its deadline, forever. It is the "cancels the same record" branch of the
// spec's restart table (§7.1), applied by whoever next needs the Id; the
// Abort returns the reserved capacity in the same batch, records no final
// application result (a framework failure before the callback, §7), and is
// conditioned on the version read, so a record that changed meanwhile is
// left alone. It reports whether the record was aborted.
func (o *objects) recoverAbandoned(ctx context.Context, row authority.AuthorityRow) (bool, error) {
	rec := row.Record
	if !row.Found || rec.Allocation.State != record.AllocationReserved {
		return false, nil
	}
	if ended, err := o.ownerEnded(ctx, rec, true); err != nil || !ended {
		return false, err // the creator is alive: wait for its result
	}
	if err := o.n.lease.Gate().Admit(); err != nil {
		return false, nil // our own eligibility is in doubt: change nothing
	}
	req := authority.AbortRequest{
		Object:           authority.Object{ID: rec.ObjectID, Kind: rec.Allocation.ObjectKind, StableType: rec.Allocation.StableType},
		ObjectGeneration: uint64(rec.ObjectGeneration),
		IfVersion:        row.Version,
	}
	if rec.PendingCreation != nil {
		req.ReservationID = rec.PendingCreation.ReservationID
	}
	if _, err := o.exec.Abort(ctx, req); err != nil {
		if errors.Is(err, authority.ErrConflict) {
			return false, nil // changed since we read it; re-read decides
		}
		return false, err
	}
	o.log.Warn("aborted an abandoned creation: its creator's owner lease is gone",
		"object", rec.ObjectID, "kind", string(rec.Allocation.ObjectKind),
		"creator", rec.OwnerID, "creator_gen", uint64(rec.OwnerLeaseGeneration))
	return true, nil
}
