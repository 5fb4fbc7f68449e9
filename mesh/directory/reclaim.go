package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

// ReclaimOptions configures Reclaim. The zero value uses the defaults.
type ReclaimOptions struct {
	// MinAge: a descriptor whose owner lease is gone is deleted only when
	// the store's time is more than MinAge past its updatedAtEpochMs,
	// unless it says `stopped` (an orderly stop: deleted at once). 0 means
	// DefaultReclaimAge.
	MinAge time.Duration
	// PageSize is the scan page size, 1..1000; 0 means DefaultPageSize.
	PageSize int
	// Gate, if set, is consulted before every delete: a host whose own
	// lease is in doubt changes nothing.
	Gate lease.Admitter
	// MaxAttempts bounds the retries of one delete that conflicted on the
	// change counter only; 0 means 8.
	MaxAttempts int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// RemovedBy is set by a watcher removing the descriptor of a run it
	// found without its lease while the run's links were up
	// (Node.removeDeadWatched), and names the watcher: the deleting batch
	// then also writes the removal record (record.RemovedMeshNode, kept
	// RemovedRetention), so that `ctl topology` shows the run as removed
	// instead of not at all (ListRemoved, Rows). Every other delete — a
	// stopped run, a crashed one past MinAge — removes an earlier removal
	// record of that mesh and RoutingID instead: the run left for good,
	// and the topology must not bring an old removal back. A descriptor
	// that says stopped gets no removal record either way.
	RemovedBy *Remover
}

// Remover names the watcher run that removes a descriptor.
type Remover struct {
	OwnerID   string
	RoutingID []byte
}

// RemovedRetention is how long a removal record is kept: the descriptor
// reclaim age, about as long as the descriptor of a crashed run stays in
// the topology as expired (from its last publish to the reclaim round
// after DefaultReclaimAge).
const RemovedRetention = DefaultReclaimAge

// normalize checks opts and fills in the defaults (MinAge, MaxAttempts).
func (opts *ReclaimOptions) normalize() error {
	switch {
	case opts.MinAge < 0:
		return fmt.Errorf("%w: reclaim: MinAge %v is negative", ErrInvalidArgument, opts.MinAge)
	case opts.MaxAttempts < 0:
		return fmt.Errorf("%w: reclaim: MaxAttempts %d is negative", ErrInvalidArgument, opts.MaxAttempts)
	}
	if r := opts.RemovedBy; r != nil {
		if err := record.ValidateOwnerID(r.OwnerID); err != nil {
			return fmt.Errorf("%w: reclaim: RemovedBy: %w", ErrInvalidArgument, err)
		}
		if err := record.ValidateRoutingID(r.RoutingID); err != nil {
			return fmt.Errorf("%w: reclaim: RemovedBy: %w", ErrInvalidArgument, err)
		}
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultReclaimAge
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 8
	}
	return nil
}

// ReclaimResult counts what Reclaim saw and did.
type ReclaimResult struct {
	Scanned     int // descriptors in the scan snapshot
	Deleted     int
	Live        int // owner lease valid (or present but unreadable: not provably gone)
	Young       int // lease gone, but updated within MinAge
	Changed     int // the descriptor changed after the scan (left alone)
	Undecodable int // skipped: never delete what cannot be read
}

// Reclaim deletes MeshNode descriptors whose owner lease is gone and which
// either say `stopped` or were last published (updatedAtEpochMs) more than
// MinAge ago by the store's clock. Descriptors are durable and are otherwise only replaced by a
// takeover (spec §11); without this, routing ids that are never reused
// would accumulate. Discovery calls it occasionally; it is not urgent,
// because readers already ignore descriptors without a valid lease.
//
// Candidates come from one scan snapshot (spec §11: a same-point-in-time
// list); each delete is one batch conditioned on the descriptor version
// the scan saw and on the owner lease still being in the state observed
// (absent, or the same other-generation record), and it bumps the change
// counter so that a concurrent List reads again. A store failure stops the
// run and is returned with the counts so far.
func Reclaim(ctx context.Context, store locstore.Store, opts ReclaimOptions) (ReclaimResult, error) {
	var res ReclaimResult
	if store == nil {
		return res, fmt.Errorf("%w: reclaim: no Location Store", ErrInvalidArgument)
	}
	if err := opts.normalize(); err != nil {
		return res, err
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if err := validPageSize(opts.PageSize); err != nil {
		return res, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	items, err := scanSnapshot(ctx, store, descriptorPrefix, opts.PageSize, DefaultListAttempts)
	if err != nil {
		return res, fmt.Errorf("directory: reclaim: %w", err)
	}
	res.Scanned = len(items)
	for _, it := range items {
		d, err := decodeItem(it)
		if err != nil {
			res.Undecodable++
			log.Warn("undecodable MeshNode descriptor left in place", "key", it.Key, "err", err)
			continue
		}
		verdict, err := reclaimOne(ctx, store, opts, it, d)
		if err != nil {
			return res, fmt.Errorf("directory: reclaim %s: %w", it.Key, err)
		}
		res.count(verdict)
		if verdict == reclaimDeleted {
			log.Info("reclaimed MeshNode descriptor of a gone host run",
				"gone_mesh", d.MeshName, "gone_rid", fmt.Sprintf("%x", d.RoutingID), "gone_owner", d.OwnerID, "gone_lease_gen", d.LeaseGeneration,
				"updated_at", d.UpdatedAt.Time())
		}
	}
	return res, nil
}

// ReclaimKey applies Reclaim's rule to the one descriptor stored at key
// (a Publisher's Key): it is deleted if its owner lease is gone and it
// either says `stopped` or was last published more than MinAge ago, by the
// same conditional batch as Reclaim's. A stopping node calls it last,
// after releasing its lease, so that a cleanly stopped run leaves the
// topology at once (docs/DISCOVERY.md §2). It is still the descriptor's own
// lease-expiry path of spec §11, not the owner sweep: the batch holds only
// while the lease is gone, and a takeover in between (a new run with a
// valid lease) is left alone. A missing key is not an error. opts.PageSize
// is not used.
func ReclaimKey(ctx context.Context, store locstore.Store, key string, opts ReclaimOptions) (ReclaimResult, error) {
	var res ReclaimResult
	if store == nil {
		return res, fmt.Errorf("%w: reclaim: no Location Store", ErrInvalidArgument)
	}
	if err := opts.normalize(); err != nil {
		return res, err
	}
	rr, err := store.Read(ctx, key)
	if err != nil {
		return res, fmt.Errorf("directory: reclaim %s: %w", key, err)
	}
	if !rr.Found {
		return res, nil
	}
	res.Scanned = 1
	it := locstore.Item{Key: key, Value: rr.Value, Version: rr.Version, ExpiresAt: rr.ExpiresAt}
	d, err := decodeItem(it)
	if err != nil {
		res.Undecodable++
		return res, nil // never delete what cannot be read
	}
	verdict, err := reclaimOne(ctx, store, opts, it, d)
	if err != nil {
		return res, fmt.Errorf("directory: reclaim %s: %w", key, err)
	}
	res.count(verdict)
	return res, nil
}

type reclaimVerdict uint8

const (
	reclaimDeleted reclaimVerdict = iota + 1
	reclaimLive
	reclaimYoung
	reclaimChanged
)

// count adds one descriptor's verdict to the result's tallies (Reclaim and
// ReclaimKey count alike).
func (r *ReclaimResult) count(v reclaimVerdict) {
	switch v {
	case reclaimDeleted:
		r.Deleted++
	case reclaimLive:
		r.Live++
	case reclaimYoung:
		r.Young++
	case reclaimChanged:
		r.Changed++
	}
}

func reclaimOne(ctx context.Context, store locstore.Store, opts ReclaimOptions, it locstore.Item, d record.MeshNodeDescriptor) (reclaimVerdict, error) {
	for attempt := 1; attempt <= opts.MaxAttempts; attempt++ {
		lc, err := checkLease(ctx, store, d.OwnerID, d.LeaseGeneration)
		if err != nil {
			return 0, err
		}
		// A lease naming the same OwnerId under a newer generation is the
		// same run: OwnerIds are never reused (lease.NewOwnerID), so only
		// that run can have reacquired it after losing it, and it
		// republishes its descriptor right after re-adopting its objects.
		// Deleting the descriptor in that moment — a watcher that saw the
		// lease gone during a store outage, then reclaimed as the run came
		// back — made every node drop a live run until it published again.
		// If the run dies before republishing, its newer lease ends and
		// the descriptor is reclaimed then.
		if lc.Valid || lc.Reacquired || lc.Unreadable {
			return reclaimLive, nil
		}
		// A run that stopped in order published `stopped` and then released
		// its lease (§11): with both said, there is nothing left for a
		// reader to tell apart, so its descriptor goes without waiting
		// MinAge. MinAge is for runs that ended otherwise (a crash, a lost
		// lease), whose descriptor is the only trace an operator sees.
		if d.State != record.StateStopped && lc.StoreNow.Sub(d.UpdatedAt.Time()) <= opts.MinAge {
			return reclaimYoung, nil
		}
		if opts.Gate != nil {
			if err := opts.Gate.Admit(); err != nil {
				return 0, fmt.Errorf("not admitted: %w", err)
			}
		}
		ch, err := readChange(ctx, store)
		if err != nil {
			return 0, err
		}
		muts, err := ch.mutations(it.Key)
		if err != nil {
			return 0, err
		}
		removal, err := removalMutation(opts.RemovedBy, d, lc.StoreNow)
		if err != nil {
			return 0, err
		}
		wr, err := store.Write(ctx, locstore.WriteRequest{
			Conditions: append([]locstore.Condition{locstore.IfVersion(it.Key, it.Version), lc.condition()}, ch.conditions()...),
			Mutations:  append([]locstore.Mutation{locstore.Delete(it.Key), removal}, muts...),
		})
		if err != nil && errors.Is(err, locstore.ErrArgument) {
			return 0, err
		}
		if err == nil && wr.Applied {
			return reclaimDeleted, nil
		}
		// Conflict or unknown outcome: our key says which (§10).
		rr, rerr := store.Read(ctx, it.Key)
		if rerr != nil {
			return 0, errors.Join(err, rerr)
		}
		if !rr.Found {
			if err != nil {
				return reclaimDeleted, nil // the lost delete applied
			}
			return reclaimChanged, nil // someone else deleted it
		}
		if rr.Version != it.Version {
			return reclaimChanged, nil
		}
		if errors.Is(err, locstore.ErrWriteRefused) {
			return 0, err // refused again at once until an operator acts
		}
		// Only the counter (or the lease) moved: look again.
	}
	return 0, fmt.Errorf("%w: delete gave up after %d attempts", ErrContention, opts.MaxAttempts)
}

// removalMutation is what deleting d does to d's removal record: a watcher
// (by set) writes it, expiring after RemovedRetention; any other delete, or
// a descriptor that says stopped (an orderly stop leaves the topology at
// once), deletes an earlier one. now is the store time of the lease read
// that found the lease gone. The write is unconditional: the batch's
// conditions on the descriptor and the lease already decide it.
func removalMutation(by *Remover, d record.MeshNodeDescriptor, now time.Time) (locstore.Mutation, error) {
	key, err := record.RemovedMeshNodeKey(d.MeshName, d.RoutingID)
	if err != nil {
		return locstore.Mutation{}, err
	}
	if by == nil || d.State == record.StateStopped {
		return locstore.Delete(key), nil
	}
	r := record.RemovedMeshNode{Descriptor: d, RemovedAt: record.EpochMillisOf(now),
		RemovedByOwnerID: by.OwnerID, RemovedByRoutingID: by.RoutingID}
	v, err := r.Encode()
	if errors.Is(err, record.ErrLimit) {
		// A descriptor within a few hundred bytes of the value bound:
		// without its lists the record fits, and removing the run must not
		// fail for an operator's note.
		v, err = r.Trim().Encode()
	}
	if err != nil {
		return locstore.Mutation{}, fmt.Errorf("removal record: %w", err)
	}
	return locstore.PutExpiring(key, v, RemovedRetention), nil
}
