package directory

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// Sentinels, matched with errors.Is.
var (
	// ErrInvalidArgument: a configuration or call argument is unusable
	// (missing store, page size outside 1..1000, a descriptor for another
	// mesh or routing id than the publisher's, ...). Nothing was sent.
	ErrInvalidArgument = errors.New("directory: invalid argument")
	// ErrInvalidDescriptor: the descriptor fails record validation (a field
	// out of range, more than 1,024 capability entries, a value over 1 MiB).
	// The record package's typed error is wrapped too (errors.As with
	// *record.LimitError or *record.FieldError). Nothing was written and
	// nothing was truncated (spec §4).
	ErrInvalidDescriptor = errors.New("directory: invalid MeshNode descriptor")
	// ErrRevisionExhausted: the next descriptor revision would pass 2^63-1
	// (spec §4). The Publisher refuses every later publish; the caller
	// switches the node to the error state. Also matches
	// record.ErrRevisionExhausted.
	ErrRevisionExhausted = errors.New("directory: descriptor revision exhausted; publishing stopped")
	// ErrRoutingIDInUse: another host run, whose owner lease is still valid,
	// has published a descriptor for the same mesh and routing id. The
	// error is a *RoutingIDInUseError.
	ErrRoutingIDInUse = errors.New("directory: routing id in use by another live MeshNode")
	// ErrLeaseNotHeld: our owner-lease record is gone or no longer ours, so
	// nothing may be published under it.
	ErrLeaseNotHeld = errors.New("directory: owner lease not held")
	// ErrStoredDescriptor: the value stored under our descriptor key cannot
	// be read (unknown recordVersion, corrupt, or for another mesh/routing
	// id). It is never overwritten blindly: it may be a newer runtime's.
	ErrStoredDescriptor = errors.New("directory: stored MeshNode descriptor unreadable")
	// ErrCounter: the descriptor change counter cannot be read or cannot be
	// incremented (corrupt, or at 2^63-1).
	ErrCounter = errors.New("directory: descriptor change counter unusable")
	// ErrContention: a publish or reclaim conflicted on every one of its
	// attempts.
	ErrContention = errors.New("directory: store kept conflicting")
	// ErrListChanged: the change counter differed before and after the scan
	// on every attempt, so no complete list could be read (spec §4).
	ErrListChanged = errors.New("directory: descriptor list kept changing while it was read")
	// ErrScanExpired: the scan cursor expired (ScanExpired) on every
	// attempt.
	ErrScanExpired = errors.New("directory: descriptor scan kept expiring")
	// ErrIncompleteSnapshot: a Snapshot that List did not return as
	// complete was given to the Planner.
	ErrIncompleteSnapshot = errors.New("directory: snapshot is not a complete list")
)

// RoutingIDInUseError reports the live host run holding a mesh+routing id.
type RoutingIDInUseError struct {
	MeshName  string
	RoutingID []byte
	// OwnerID and LeaseGeneration identify the other host run.
	OwnerID         string
	LeaseGeneration record.Generation
	// LeaseExpiresAt is the other run's lease expiry (store time) when we
	// looked; it may be renewed later.
	LeaseExpiresAt time.Time
	// StoreNow is the store's time when we looked: LeaseExpiresAt minus
	// StoreNow is what was left of the lease, whatever the offset between
	// the store's clock and this host's.
	StoreNow time.Time
}

func (e *RoutingIDInUseError) Error() string {
	return fmt.Sprintf("directory: mesh %q routing id %s is published by live owner %s (lease generation %d, lease expires %s)",
		e.MeshName, hex.EncodeToString(e.RoutingID), e.OwnerID, e.LeaseGeneration, e.LeaseExpiresAt.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrRoutingIDInUse) true.
func (e *RoutingIDInUseError) Is(target error) bool { return target == ErrRoutingIDInUse }
