package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Defaults and bounds.
const (
	// MaxLimit is the largest ListRequest.Limit (§7.4: 1..1000 entries).
	MaxLimit = 1000
	// DefaultFirstPageAttempts bounds how often List restarts a first page
	// whose scan snapshot expired while the page was being filled.
	DefaultFirstPageAttempts = 3
)

// authorityPrefix is the scan prefix of every authority row.
var authorityPrefix = record.KindPrefix(record.KindAuthority)

// Reader answers §7.4 queries against one Location Store. The zero value is
// not usable: Store is required.
type Reader struct {
	Store locstore.Store
	// Logger receives skipped-row warnings and restart notes; nil means
	// slog.Default().
	Logger *slog.Logger
	// FirstPageAttempts bounds the transparent restarts of a first page
	// (see List); 0 means DefaultFirstPageAttempts.
	FirstPageAttempts int
}

// Locate is Reader{Store: store}.Locate.
func Locate(ctx context.Context, store locstore.Store, kind record.IdentityKind, id string) (Entry, bool, error) {
	return Reader{Store: store}.Locate(ctx, kind, id)
}

// List is Reader{Store: store}.List.
func List(ctx context.Context, store locstore.Store, req ListRequest) (Page, error) {
	return Reader{Store: store}.List(ctx, req)
}

func (r Reader) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Locate looks up the object with global ID id of the given kind (actor or
// spot: the same Id is a different object for each, §3.4). found is false
// when no authority row exists: §7.4's "empty" answer, not an error. The
// answer does not depend on the caller's MeshName (§12): the Id alone is
// the key.
//
// Errors: ErrInvalidArgument (kind or id invalid; nothing read),
// ErrUnavailable (the authority or owner-lease read failed; also matches
// locstore.ErrUnavailable), ErrCorruptRecord (the row does not decode or
// holds the other identity kind's record).
func (r Reader) Locate(ctx context.Context, kind record.IdentityKind, id string) (Entry, bool, error) {
	if r.Store == nil {
		return Entry{}, false, fmt.Errorf("%w: locate: no Location Store", ErrInvalidArgument)
	}
	key, err := record.AuthorityKey(kind, id)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: locate: %w", ErrInvalidArgument, err)
	}
	rr, err := r.Store.Read(ctx, key)
	if err != nil {
		return Entry{}, false, storeErr("locate "+string(kind)+" "+quote(id), err)
	}
	if !rr.Found {
		return Entry{}, false, nil
	}
	a, err := record.DecodeAuthority(rr.Value)
	if err != nil {
		return Entry{}, false, fmt.Errorf("%w: %s %q (key %s): %w", ErrCorruptRecord, kind, id, key, err)
	}
	if got := a.Allocation.ObjectKind.IdentityKind(); got != kind || a.ObjectID != id {
		return Entry{}, false, fmt.Errorf("%w: %s %q (key %s) holds the record of %s %q (objectKind %s)", ErrCorruptRecord, kind, id, key, got, a.ObjectID, a.Allocation.ObjectKind)
	}
	var lv leaseView
	if a.Allocation.State == record.AllocationActive {
		if lv, err = readLease(ctx, r.Store, a.OwnerID); err != nil {
			return Entry{}, false, storeErr("locate "+string(kind)+" "+quote(id), err)
		}
	}
	return entryOf(key, a, lv), true, nil
}

// leaseView is what a query needs of an owner lease: whether a live,
// readable record exists and its generation.
type leaseView struct {
	live       bool
	generation record.Generation
	// unreadable: a live record that does not decode (or names another
	// owner). Treated as not live; reported in logs.
	unreadable bool
}

// readLease reads the owner lease of ownerID directly (§3.1: never judged
// from an enumeration). Only a store failure is an error.
func readLease(ctx context.Context, store locstore.Store, ownerID string) (leaseView, error) {
	key, err := record.OwnerLeaseKey(ownerID)
	if err != nil { // cannot happen for a decoded authority (same name rules)
		return leaseView{unreadable: true}, nil
	}
	rr, err := store.Read(ctx, key)
	if err != nil {
		return leaseView{}, fmt.Errorf("read owner lease of %q: %w", ownerID, err)
	}
	if !rr.Found {
		return leaseView{}, nil
	}
	// Found already means unexpired by the SPI; the comparison keeps the
	// rule visible and guards a provider that returned an expired value.
	if !rr.ExpiresAt.IsZero() && !rr.StoreNow.Before(rr.ExpiresAt) {
		return leaseView{}, nil
	}
	l, err := record.DecodeOwnerLease(rr.Value)
	if err != nil || l.OwnerID != ownerID {
		return leaseView{unreadable: true}, nil
	}
	return leaseView{live: true, generation: l.LeaseGeneration}, nil
}

// stateOf maps an authority row and its owner's lease to a §7.4 state.
// Only a committed (Active) row can be Unavailable: a Reserved row is
// Creating whatever its owner's lease says, because the spec's third row is
// "current owner unavailable after commit".
func stateOf(active bool, ownerLeaseGeneration record.Generation, lv leaseView) State {
	if !active {
		return StateCreating
	}
	if lv.live && lv.generation == ownerLeaseGeneration {
		return StateReady
	}
	return StateUnavailable
}

func entryOf(key string, a record.Authority, lv leaseView) Entry {
	return Entry{
		ID:                       a.ObjectID,
		Key:                      key,
		Kind:                     a.Allocation.ObjectKind,
		ObjectGeneration:         a.ObjectGeneration,
		MeshName:                 a.Allocation.Descriptor.MeshName,
		NodeRID:                  a.Allocation.Descriptor.RoutingID,
		State:                    stateOf(a.Allocation.State == record.AllocationActive, a.OwnerLeaseGeneration, lv),
		StableType:               a.Allocation.StableType,
		AuthorityOwnerGeneration: a.AuthorityOwnerGeneration,
		OwnerID:                  a.OwnerID,
		OwnerLeaseGeneration:     a.OwnerLeaseGeneration,
	}
}

// storeErr wraps a failed store call as the §7.4 Unavailable framework
// error, keeping the provider's error (and any context error) matchable.
func storeErr(what string, err error) error {
	if errors.Is(err, locstore.ErrArgument) {
		// The SPI refused a request built here: not an outage.
		return fmt.Errorf("%w: %s: store refused the request: %w", ErrInvalidArgument, what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
