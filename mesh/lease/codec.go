package lease

import (
	"fmt"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// The owner-lease record and the LeaseGeneration counter are encoded by
// package mesh/record (spec §3.4 key preimage + canonical JSON; the counter
// format is project-specific, see docs/RECORDS.md). These helpers are the
// only place the lease manager touches that format.

func ownerLeaseKey(ownerID string) (string, error) { return record.OwnerLeaseKey(ownerID) }

func leaseCounterKey() (string, error) { return record.CounterKey(record.CounterLeaseGeneration) }

// encodeOwnerLease builds the owner-lease record value. acquiredAt is the
// StoreNow of the counter read that planned this generation; updatedAt is
// the latest StoreNow observed before the write (docs/RECORDS.md §5.1). Both
// are informational: the lease's validity is the key's retention only.
func encodeOwnerLease(ownerID string, generation uint64, acquiredAt, updatedAt time.Time) ([]byte, error) {
	return record.OwnerLease{
		OwnerID:         ownerID,
		LeaseGeneration: record.Generation(generation),
		AcquiredAt:      record.EpochMillisOf(acquiredAt),
		UpdatedAt:       record.EpochMillisOf(updatedAt),
	}.Encode()
}

func decodeOwnerLease(value []byte) (record.OwnerLease, error) { return record.DecodeOwnerLease(value) }

func encodeCounter(v uint64) ([]byte, error) {
	return record.Counter{Value: record.Generation(v)}.Encode()
}

func decodeCounter(value []byte) (uint64, error) {
	c, err := record.DecodeCounter(value)
	if err != nil {
		return 0, fmt.Errorf("LeaseGeneration counter: %w", err)
	}
	return uint64(c.Value), nil
}
