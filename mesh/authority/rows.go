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

// CapacityRow is a capacity counter as read: its usage and the two stored
// rows it comes from (capacity.go). A missing row is a zero count.
type CapacityRow struct {
	ID    CounterID
	Found bool // either row exists: the usage is not zero
	Usage Usage
	// Secured holds Usage.Total(), Active holds Usage.Active.
	Secured, Active StoredCount
}

// StoredCount is one stored row of a counter as read.
type StoredCount struct {
	Found   bool
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
	l, err := decodeLease(key, rr.Value)
	if err != nil {
		return LeaseRow{}, &Error{Kind: ErrCorruptRecord, Reason: "owner-lease row " + key, Err: err}
	}
	row.Lease = l
	return row, nil
}

// CapacityRowOf turns the reads of counter id's two rows (secured, active;
// CounterKeys) into a CapacityRow. A value naming another counter or measure
// than its key's is ErrCorruptRecord, and so is an active count above the
// secured count.
func CapacityRowOf(id CounterID, secured, active locstore.ReadResult) (CapacityRow, error) {
	row := CapacityRow{ID: id}
	total, err := storedCount(id, MeasureSecured, secured, &row.Secured)
	if err != nil {
		return CapacityRow{}, err
	}
	inUse, err := storedCount(id, MeasureActive, active, &row.Active)
	if err != nil {
		return CapacityRow{}, err
	}
	if inUse > total {
		cid := id
		return CapacityRow{}, &Error{Kind: ErrCorruptRecord, Counter: &cid,
			Reason: fmt.Sprintf("capacity counter %s holds %d active slots but only %d secured", id, inUse, total)}
	}
	row.Found = row.Secured.Found || row.Active.Found
	row.Usage = Usage{Reserved: total - inUse, Active: inUse}
	return row, nil
}

// storedCount decodes the m row of counter id into its count and sets sc.
func storedCount(id CounterID, m Measure, rr locstore.ReadResult, sc *StoredCount) (int, error) {
	if !rr.Found {
		return 0, nil
	}
	got, gm, n, err := DecodeCapacity(rr.Value)
	if err != nil {
		cid := id // a copy per error: &id would move id to the heap on every call
		return 0, &Error{Kind: ErrCorruptRecord, Reason: fmt.Sprintf("capacity row %s (%s)", id, m), Counter: &cid, Err: err}
	}
	if !got.equal(id) || gm != m {
		cid := id
		return 0, &Error{Kind: ErrCorruptRecord, Counter: &cid,
			Reason: fmt.Sprintf("capacity row read for %s (%s) holds counter %s (%s)", id, m, got, gm)}
	}
	*sc = StoredCount{Found: true, Version: rr.Version}
	return n, nil
}
