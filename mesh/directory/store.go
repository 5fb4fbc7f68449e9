package directory

import (
	"context"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Store helpers shared by the publisher, List and Reclaim.

// Default bounds.
const (
	// DefaultPageSize is the scan page size Reclaim uses when none is given.
	DefaultPageSize = 500
	// DefaultListAttempts bounds how many times List re-reads the whole
	// list when the change counter moved (or the scan expired).
	DefaultListAttempts = 5
	// DefaultPublishAttempts bounds the read/write rounds of one Publish.
	DefaultPublishAttempts = 64
	// DefaultReclaimAge is how long a descriptor whose owner lease is gone
	// is kept, measured from its updatedAtEpochMs, before Reclaim deletes it.
	DefaultReclaimAge = time.Hour
)

// descriptorPrefix is the scan prefix of every MeshNode descriptor key.
var descriptorPrefix = record.KindPrefix(record.KindMeshNode)

// changeCounterKey is the store key of the MeshNode descriptor change
// counter (docs/RECORDS.md §1.4).
func changeCounterKey() (string, error) {
	name, err := record.DescriptorCounter(record.KindMeshNode)
	if err != nil {
		return "", err
	}
	return record.CounterKey(name)
}

// counterState is one observation of the change counter.
type counterState struct {
	Found   bool
	Version string
	Value   record.Generation // 0 when not found
	// StoreNow is the read's store time (not part of the comparison).
	StoreNow time.Time
}

func readCounter(ctx context.Context, store locstore.Store, key string) (counterState, error) {
	rr, err := store.Read(ctx, key)
	if err != nil {
		return counterState{}, fmt.Errorf("read descriptor change counter: %w", err)
	}
	if !rr.Found {
		return counterState{StoreNow: rr.StoreNow}, nil
	}
	c, err := record.DecodeCounter(rr.Value)
	if err != nil {
		return counterState{}, fmt.Errorf("%w: %w", ErrCounter, err)
	}
	return counterState{Found: true, Version: rr.Version, Value: c.Value, StoreNow: rr.StoreNow}, nil
}

// same reports whether two observations saw the same counter state. The
// store version changes with every Put, so equal versions mean no publish
// or reclaim committed in between.
func (c counterState) same(o counterState) bool {
	return c.Found == o.Found && c.Version == o.Version
}

// condition asserts the counter is still as observed.
func (c counterState) condition(key string) locstore.Condition {
	if c.Found {
		return locstore.IfVersion(key, c.Version)
	}
	return locstore.IfMissing(key)
}

// journalKey is the store key of the MeshNode descriptor journal
// (record.DescriptorJournal; docs/DISCOVERY.md §3.2).
func journalKey() (string, error) { return record.DescriptorJournalKey(record.KindMeshNode) }

// change is what a writer of a MeshNode descriptor read before its batch:
// the change counter and the journal. Every descriptor put or delete bumps
// the counter and appends its key to the journal in the same batch,
// conditioned on both as read (a concurrent change makes it a Conflict).
type change struct {
	counterKey, journalKey string
	counter                counterState
	journalFound           bool
	journalVersion         string
	journal                record.DescriptorJournal
}

// readChange reads the counter and the journal. A journal that does not
// decode (another version's) is replaced: readers that cannot follow it
// read the whole list, which is always correct.
func readChange(ctx context.Context, store locstore.Store) (change, error) {
	ck, err := changeCounterKey()
	if err != nil {
		return change{}, err
	}
	jk, err := journalKey()
	if err != nil {
		return change{}, err
	}
	c := change{counterKey: ck, journalKey: jk}
	if c.counter, err = readCounter(ctx, store, ck); err != nil {
		return change{}, err
	}
	rr, err := store.Read(ctx, jk)
	if err != nil {
		return change{}, fmt.Errorf("read descriptor journal: %w", err)
	}
	if rr.Found {
		c.journalFound, c.journalVersion = true, rr.Version
		if j, derr := record.DecodeDescriptorJournal(rr.Value); derr == nil {
			c.journal = j
		}
	}
	return c, nil
}

// conditions assert the counter and the journal are still as read.
func (c change) conditions() []locstore.Condition {
	jc := locstore.IfMissing(c.journalKey)
	if c.journalFound {
		jc = locstore.IfVersion(c.journalKey, c.journalVersion)
	}
	return []locstore.Condition{c.counter.condition(c.counterKey), jc}
}

// mutations are the counter's next value and the journal with descKey
// appended.
func (c change) mutations(descKey string) ([]locstore.Mutation, error) {
	bump, next, err := c.counter.bump(c.counterKey)
	if err != nil {
		return nil, err
	}
	j, err := c.journal.Append(next, descKey).Encode()
	if err != nil {
		return nil, fmt.Errorf("%w: journal: %w", ErrCounter, err)
	}
	return []locstore.Mutation{bump, locstore.Put(c.journalKey, j)}, nil
}

// bump returns the Put of the next counter value. The counter is a change
// number, not an issued generation, so it may reach 2^63-1 itself; only a
// value beyond is refused.
func (c counterState) bump(key string) (locstore.Mutation, record.Generation, error) {
	next, err := record.NextRevision(c.Value)
	if err != nil {
		return locstore.Mutation{}, 0, fmt.Errorf("%w: at %d, cannot count another change", ErrCounter, c.Value)
	}
	v, err := record.Counter{Value: next}.Encode()
	if err != nil {
		return locstore.Mutation{}, 0, fmt.Errorf("%w: %w", ErrCounter, err)
	}
	return locstore.Put(key, v), next, nil
}

// leaseCheck is the verdict on one host run's owner lease, read directly
// by its OwnerId key (spec §3.1: never judged from an enumeration).
type leaseCheck struct {
	Key string
	// Found: a live (unexpired) record exists at the key.
	Found   bool
	Version string
	// Valid: the record is found, decodes, names the same OwnerId and
	// LeaseGeneration, and is not expired by the store's clock.
	Valid bool
	// Unreadable: a live record exists but does not decode (for example a
	// newer recordVersion). It cannot be proven dead, nor confirmed alive.
	Unreadable bool
	// Reacquired: not Valid, but a live record names the same OwnerId
	// under a newer LeaseGeneration — the host run lost its lease and
	// reacquired it, and republishes its descriptor under the new one
	// (its process is alive).
	Reacquired bool
	ExpiresAt  time.Time
	StoreNow   time.Time
}

func checkLease(ctx context.Context, store locstore.Store, ownerID string, gen record.Generation) (leaseCheck, error) {
	key, err := record.OwnerLeaseKey(ownerID)
	if err != nil {
		return leaseCheck{}, err
	}
	rr, err := store.Read(ctx, key)
	if err != nil {
		return leaseCheck{}, fmt.Errorf("read owner lease of %s: %w", ownerID, err)
	}
	lc := leaseCheck{Key: key, StoreNow: rr.StoreNow}
	if !rr.Found {
		return lc, nil
	}
	// Found already means unexpired by the SPI; the explicit comparison
	// keeps the rule visible and guards a provider that returned an expired
	// value anyway.
	if !rr.ExpiresAt.IsZero() && !rr.StoreNow.Before(rr.ExpiresAt) {
		return lc, nil
	}
	lc.Found, lc.Version, lc.ExpiresAt = true, rr.Version, rr.ExpiresAt
	l, derr := record.DecodeOwnerLease(rr.Value)
	if derr != nil {
		lc.Unreadable = true
		return lc, nil
	}
	lc.Valid = l.OwnerID == ownerID && l.LeaseGeneration == gen
	lc.Reacquired = l.OwnerID == ownerID && l.LeaseGeneration > gen
	return lc, nil
}

// condition asserts the lease is still in the state observed: absent, or
// the same record version. Used when acting on a lease being gone, so that
// the batch proves at commit time what was decided on.
func (lc leaseCheck) condition() locstore.Condition {
	if lc.Found {
		return locstore.IfVersion(lc.Key, lc.Version)
	}
	return locstore.IfMissing(lc.Key)
}

// scanAll reads every item under prefix from one scan snapshot. expired
// reports a ScanExpired answer; the caller restarts from the first page.
func scanAll(ctx context.Context, store locstore.Store, prefix string, pageSize int) (items []locstore.Item, expired bool, err error) {
	req := locstore.ScanRequest{Prefix: prefix, Limit: pageSize}
	for {
		page, err := store.Scan(ctx, req)
		if err != nil {
			return nil, false, fmt.Errorf("scan %q: %w", prefix, err)
		}
		if page.Expired {
			return nil, true, nil
		}
		items = append(items, page.Items...)
		if page.Next == "" {
			return items, false, nil
		}
		req.Cursor = page.Next
	}
}

// scanSnapshot is scanAll started again from the first page after a
// ScanExpired, up to attempts times in all, then ErrScanExpired.
func scanSnapshot(ctx context.Context, store locstore.Store, prefix string, pageSize, attempts int) ([]locstore.Item, error) {
	for attempt := 1; ; attempt++ {
		items, expired, err := scanAll(ctx, store, prefix, pageSize)
		if err != nil {
			return nil, err
		}
		if !expired {
			return items, nil
		}
		if attempt >= attempts {
			return nil, fmt.Errorf("%w (%d attempts)", ErrScanExpired, attempts)
		}
	}
}

func validPageSize(n int) error {
	if n < 1 || n > locstore.MaxPageItems {
		return fmt.Errorf("%w: page size %d outside 1..%d", ErrInvalidArgument, n, locstore.MaxPageItems)
	}
	return nil
}
