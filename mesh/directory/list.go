package directory

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Entry is one MeshNode descriptor of a complete list, with the verdict on
// its owner lease.
type Entry struct {
	Descriptor record.MeshNodeDescriptor
	// Key and Version are the descriptor's store key and the version the
	// list saw (a candidate only: act on it under IfVersion).
	Key     string
	Version string
	// LeaseValid: the host run's owner lease (read directly by OwnerId
	// after the list) exists with the same LeaseGeneration and is not
	// expired by the store's clock. A descriptor without a valid lease is
	// not used (spec §1.3, §4).
	LeaseValid bool
	// LeaseReacquired: not LeaseValid, but the same OwnerId holds a newer
	// LeaseGeneration — the run reacquired its lease after losing it and
	// is about to republish this descriptor under it. Its process is
	// alive: discovery keeps its link and does not remove the descriptor;
	// placement still does not use it until it names the new lease.
	LeaseReacquired bool
	// LeaseExpiresAt is the lease record's expiry (store time) when one was
	// found, else zero.
	LeaseExpiresAt time.Time
	// LeaseCheckedAt is the StoreNow of the lease read.
	LeaseCheckedAt time.Time
}

// Snapshot is a complete same-point-in-time list of MeshNode descriptors
// (spec §4, §6.2). Only List builds complete snapshots.
type Snapshot struct {
	// MeshName is the mesh listed; empty means every mesh.
	MeshName string
	// Entries are sorted by MeshName, then RoutingID bytes.
	Entries []Entry
	// ChangeNumber is the descriptor change counter's value the list is
	// consistent with (0: no descriptor was ever published).
	ChangeNumber record.Generation
	// StoreNow is the store time of the counter read that closed the list.
	StoreNow time.Time
	// Undecodable counts stored values that were skipped (logged).
	Undecodable int
	// Attempts is the number of whole-list reads it took.
	Attempts int
	// Complete is set by List only; the Planner refuses anything else.
	Complete bool
}

// Lister reads descriptor lists. The zero value is not usable: Store is
// required.
type Lister struct {
	Store locstore.Store
	// PageSize is the scan page size, 1..1000.
	PageSize int
	// MaxAttempts bounds the whole-list reads (counter moved, or the scan
	// expired); 0 means DefaultListAttempts.
	MaxAttempts int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// List reads every MeshNode descriptor of meshName (every mesh when
// meshName is empty) as a complete list, then checks each host's owner
// lease. See Lister.List.
func List(ctx context.Context, store locstore.Store, meshName string, pageSize int) (Snapshot, error) {
	return Lister{Store: store, PageSize: pageSize}.List(ctx, meshName)
}

// List reads the change counter, scans every MeshNode descriptor page,
// and reads the counter again; only when both reads saw the same counter is
// the list complete (spec §4). Otherwise, and when the scan cursor expires
// (ScanExpired), the whole list is read again from the first page, up to
// MaxAttempts times, after which the result is ErrListChanged (or
// ErrScanExpired). A value that does not decode as a descriptor for its
// key is skipped, counted and logged; it never fails the list.
//
// Then each host's owner lease is read directly (one read per distinct
// OwnerId) and recorded in Entry.LeaseValid / LeaseExpiresAt. A store
// failure anywhere fails the call: a partial list is never returned.
func (l Lister) List(ctx context.Context, meshName string) (Snapshot, error) {
	if l.Store == nil {
		return Snapshot{}, fmt.Errorf("%w: list: no Location Store", ErrInvalidArgument)
	}
	if err := validPageSize(l.PageSize); err != nil {
		return Snapshot{}, err
	}
	if meshName != "" {
		if err := record.ValidateMeshName(meshName); err != nil {
			return Snapshot{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	if l.MaxAttempts < 0 {
		return Snapshot{}, fmt.Errorf("%w: list: MaxAttempts %d is negative", ErrInvalidArgument, l.MaxAttempts)
	}
	ls, err := l.descriptors(ctx, meshName)
	if err != nil {
		return Snapshot{}, fmt.Errorf("directory: list: %w", err)
	}
	snap := ls.snap
	if err := checkLeases(ctx, l.Store, &snap); err != nil {
		return Snapshot{}, fmt.Errorf("directory: list: %w", err)
	}
	return snap, nil
}

// readOnceCounter is one counter/scan/counter round: nil for ScanExpired, a
// snapshot with Complete false when the counter moved; and the closing
// counter observation.
func (l Lister) readOnceCounter(ctx context.Context, counterKey, meshName string, log *slog.Logger) (*Snapshot, counterState, error) {
	before, err := readCounter(ctx, l.Store, counterKey)
	if err != nil {
		return nil, counterState{}, err
	}
	items, expired, err := scanAll(ctx, l.Store, descriptorPrefix, l.PageSize)
	if err != nil || expired {
		return nil, counterState{}, err
	}
	s := &Snapshot{MeshName: meshName}
	for _, it := range items {
		d, err := decodeItem(it)
		if err != nil {
			s.Undecodable++
			log.Warn("undecodable MeshNode descriptor skipped", "key", it.Key, "err", err)
			continue
		}
		if meshName != "" && d.MeshName != meshName {
			continue
		}
		s.Entries = append(s.Entries, Entry{Descriptor: d, Key: it.Key, Version: it.Version})
	}
	after, err := readCounter(ctx, l.Store, counterKey)
	if err != nil {
		return nil, counterState{}, err
	}
	s.ChangeNumber, s.StoreNow = after.Value, after.StoreNow
	s.Complete = before.same(after)
	sortEntries(s.Entries)
	return s, after, nil
}

// decodeItem decodes a scanned value and checks that it belongs under its
// key (a value copied to the wrong key would otherwise impersonate a node).
func decodeItem(it locstore.Item) (record.MeshNodeDescriptor, error) {
	d, err := record.DecodeMeshNode(it.Value)
	if err != nil {
		return d, err
	}
	key, err := record.MeshNodeKey(d.MeshName, d.RoutingID)
	if err != nil {
		return d, err
	}
	if key != it.Key {
		return d, fmt.Errorf("descriptor of mesh %q rid %x stored under key %s (its key is %s)", d.MeshName, d.RoutingID, it.Key, key)
	}
	return d, nil
}

func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i].Descriptor, es[j].Descriptor
		if a.MeshName != b.MeshName {
			return a.MeshName < b.MeshName
		}
		return bytes.Compare(a.RoutingID, b.RoutingID) < 0
	})
}

// checkLeases reads each distinct host run's owner lease once.
func checkLeases(ctx context.Context, store locstore.Store, s *Snapshot) error {
	type run struct {
		owner string
		gen   record.Generation
	}
	seen := make(map[run]leaseCheck)
	for i := range s.Entries {
		e := &s.Entries[i]
		r := run{e.Descriptor.OwnerID, e.Descriptor.LeaseGeneration}
		lc, ok := seen[r]
		if !ok {
			var err error
			if lc, err = checkLease(ctx, store, r.owner, r.gen); err != nil {
				return err
			}
			seen[r] = lc
		}
		e.LeaseValid, e.LeaseReacquired, e.LeaseCheckedAt = lc.Valid, lc.Reacquired, lc.StoreNow
		if lc.Found {
			e.LeaseExpiresAt = lc.ExpiresAt
		}
	}
	return nil
}

// RunStopped reports whether node run (rid, gen) of mesh has stopped
// cleanly as its descriptor in store shows now: the descriptor says stopped
// for that very run, or it is gone (an orderly stop removes it after
// publishing stopped, §11; a reclaim removes only a stopped one or one of a
// run long ended). A descriptor of another run of the RoutingID says
// nothing about gen's end (a restart takes over a crashed run's too):
// false.
func RunStopped(ctx context.Context, store locstore.Store, mesh string, rid []byte, gen uint64) (bool, error) {
	key, err := record.MeshNodeKey(mesh, rid)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	rr, err := store.Read(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read descriptor of %x: %w", rid, err)
	}
	if !rr.Found {
		return true, nil
	}
	d, err := decodeItem(locstore.Item{Key: key, Value: rr.Value})
	if err != nil {
		return false, fmt.Errorf("descriptor of %x: %w", rid, err)
	}
	return uint64(d.LifecycleGeneration) == gen && d.State == record.StateStopped, nil
}
