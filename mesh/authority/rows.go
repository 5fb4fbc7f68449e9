package authority

import (
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// A row is one store key as the framework read it: Missing, or Found with
// the decoded value and the provider's version. Every row carries its key,
// so a planner can tell a row read under the wrong key (a framework bug,
// ErrInvalidOperation) from a row that says something unwelcome (Conflict).

// AuthorityRow is an authority key as read: Missing, or Found{Record,
// Version} (§6.1).
type AuthorityRow struct {
	Key     string
	Found   bool
	Record  record.Authority
	Version string
}

// CounterRow is the store-wide ObjectGeneration counter as read. Value is
// the last issued generation; Missing means none was issued yet.
type CounterRow struct {
	Key     string
	Found   bool
	Value   uint64
	Version string
}

// LeaseRow is an owner-lease key as read. Found means present and
// unexpired by the store's clock (an expired key reads as Missing).
type LeaseRow struct {
	Key     string
	Found   bool
	Lease   record.OwnerLease
	Version string
}

// CapacityRow is a capacity counter as read. Missing is zero usage.
type CapacityRow struct {
	ID      CounterID
	Found   bool
	Usage   Usage
	Version string
}

// Fence is an extra row the caller wants unchanged when the batch applies
// (an IfVersion condition), e.g. the requesting host's own owner lease or
// the target MeshNode descriptor it placed on (§7, §8.1).
type Fence struct {
	Key     string
	Version string
}

// Snapshot is everything the framework read for one operation. Each
// operation uses the rows it needs (docs/AUTHORITY.md lists them) and
// ignores the others; a needed row that is absent from the snapshot is
// ErrInvalidOperation.
type Snapshot struct {
	// StoreNow is the store time of the read; the creation final result's
	// retention is computed from it.
	StoreNow time.Time
	// Authority is the object's authority row.
	Authority AuthorityRow
	// ObjectGeneration is the store-wide ObjectGeneration counter (Reserve).
	ObjectGeneration CounterRow
	// OwnerLease is the lease of the owner the operation acts as (Commit,
	// Preserve, Delete, CompleteRelocation; Abort when an owner is given;
	// the source for RecordCaptured and keyed SecureCapacity).
	OwnerLease LeaseRow
	// TargetLease is the target owner's lease (Reserve, NewOwner,
	// SecureCapacity, RecordPrepared).
	TargetLease LeaseRow
	// Capacity holds the capacity counter rows of every node the operation
	// touches (see CountersFor).
	Capacity []CapacityRow
	// Reservation is the relocation capacity reservation row (keyed
	// SecureCapacity and ReleaseCapacity, RecordCaptured, RecordPrepared,
	// the relocation's NewOwner).
	Reservation ReservationRow
}

func (s Snapshot) capacity(id CounterID) (CapacityRow, bool) {
	for _, r := range s.Capacity {
		if r.ID.equal(id) {
			return r, true
		}
	}
	return CapacityRow{}, false
}

// AuthorityRowOf turns a read of key into an AuthorityRow, decoding the
// value (ErrCorruptRecord when it does not decode).
func AuthorityRowOf(key string, rr locstore.ReadResult) (AuthorityRow, error) {
	row := AuthorityRow{Key: key, Found: rr.Found, Version: rr.Version}
	if !rr.Found {
		row.Version = ""
		return row, nil
	}
	a, err := record.DecodeAuthority(rr.Value)
	if err != nil {
		return AuthorityRow{}, &Error{Kind: ErrCorruptRecord, Reason: "authority row " + key, Err: err}
	}
	row.Record = a
	return row, nil
}

// CounterRowOf turns a read of the ObjectGeneration counter key into a
// CounterRow.
func CounterRowOf(key string, rr locstore.ReadResult) (CounterRow, error) {
	row := CounterRow{Key: key, Found: rr.Found, Version: rr.Version}
	if !rr.Found {
		row.Version = ""
		return row, nil
	}
	c, err := record.DecodeCounter(rr.Value)
	if err != nil {
		return CounterRow{}, &Error{Kind: ErrCorruptRecord, Reason: "counter row " + key, Err: err}
	}
	row.Value = uint64(c.Value)
	return row, nil
}

// LeaseRowOf turns a read of an owner-lease key into a LeaseRow.
func LeaseRowOf(key string, rr locstore.ReadResult) (LeaseRow, error) {
	row := LeaseRow{Key: key, Found: rr.Found, Version: rr.Version}
	if !rr.Found {
		row.Version = ""
		return row, nil
	}
	l, err := record.DecodeOwnerLease(rr.Value)
	if err != nil {
		return LeaseRow{}, &Error{Kind: ErrCorruptRecord, Reason: "owner-lease row " + key, Err: err}
	}
	row.Lease = l
	return row, nil
}

// CapacityRowOf turns a read of counter id's key into a CapacityRow. A value
// naming another counter than id is ErrCorruptRecord.
func CapacityRowOf(id CounterID, rr locstore.ReadResult) (CapacityRow, error) {
	row := CapacityRow{ID: id, Found: rr.Found, Version: rr.Version}
	if !rr.Found {
		row.Version = ""
		return row, nil
	}
	got, u, err := DecodeCapacity(rr.Value)
	if err != nil {
		return CapacityRow{}, &Error{Kind: ErrCorruptRecord, Reason: "capacity row " + id.String(), Counter: &id, Err: err}
	}
	if !got.equal(id) {
		return CapacityRow{}, &Error{Kind: ErrCorruptRecord, Counter: &id,
			Reason: fmt.Sprintf("capacity row read for %s holds counter %s", id, got)}
	}
	row.Usage = u
	return row, nil
}
