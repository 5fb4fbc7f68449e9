// Package locstore defines the Location Store provider SPI: a key/bytes store
// with exact reads, conditional all-or-nothing batch writes and paged snapshot
// scans (spec §1.2, §6, §10; shared design STORE-SPI.md).
//
// The package deliberately knows nothing of actors, spots, leases, descriptors
// or capacity: providers store keys and bytes, and the framework (mesh/) gives
// them meaning. Providers (memory, redis) live in sub-packages and are checked
// by one contract suite, locstore/storetest.
//
// Outcomes are kept apart on purpose:
//   - Missing, Conflict and Expired are ordinary results (ReadResult.Found,
//     WriteResult.Applied, ScanPage.Expired), never errors;
//   - bad input is an *ArgumentError (errors.Is(err, ErrArgument));
//   - anything else is a provider failure, wrapped so that
//     errors.Is(err, ErrUnavailable) holds; after such a failure the outcome of
//     a Write is unknown and the caller re-reads (spec §10).
package locstore

import (
	"context"
	"time"
)

// Bounds of the SPI (STORE-SPI.md). They are part of the contract: providers
// reject anything beyond them with an *ArgumentError before touching storage.
const (
	MaxKeyBytes     = 1024    // key: UTF-8, 1..1024 bytes
	MaxValueBytes   = 1 << 20 // value: at most 1 MiB
	MaxVersionBytes = 4096    // version: 1..4096 bytes
	MaxBatchKeys    = 2048    // distinct keys across conditions and mutations
	MaxBatchBytes   = 4 << 20 // encoded request size, see WriteRequest.EncodedSize
	MaxPrefixBytes  = 1024    // scan prefix: 0..1024 bytes
	MaxPageItems    = 1000    // scan page: 1..1000 items
	MaxPageBytes    = 4 << 20 // encoded page size, see Item.EncodedSize
	MaxCursorBytes  = 4096    // scan cursor: 1..4096 bytes
	MaxRetention    = 100 * 365 * 24 * time.Hour
)

// Store is the Location Store SPI. Implementations must be safe for
// concurrent use. Every result carries StoreNow, the provider's clock; expiry
// is judged by that clock only, never by the caller's wall clock.
type Store interface {
	// Read observes one key exactly once. An absent or expired key is
	// ReadResult{Found: false}.
	Read(ctx context.Context, key string) (ReadResult, error)
	// Write checks every condition, and only if all hold applies every
	// mutation as one commit. Otherwise it returns Applied == false with zero
	// mutations and zero version changes.
	Write(ctx context.Context, req WriteRequest) (WriteResult, error)
	// Scan returns one page of a snapshot fixed by the first request (no
	// cursor). A cursor that is invalid, expired or belongs to another scan
	// yields ScanPage{Expired: true}.
	Scan(ctx context.Context, req ScanRequest) (ScanPage, error)
	// Close releases provider resources. The framework calls it exactly once.
	Close() error
}

// ReadResult is Missing{StoreNow} when Found is false, else
// Found{Value, Version, ExpiresAt?, StoreNow}.
type ReadResult struct {
	Found   bool
	Value   []byte // immutable: callers must not modify it
	Version string
	// ExpiresAt is the zero time for a durable value.
	ExpiresAt time.Time
	StoreNow  time.Time
}

// CondKind selects what a Condition asserts.
type CondKind uint8

const (
	// CondMissing holds when the key is absent or expired.
	CondMissing CondKind = iota + 1
	// CondVersion holds when the key is present, unexpired and has Version.
	CondVersion
)

// Condition is one precondition of a Write.
type Condition struct {
	Kind    CondKind
	Key     string
	Version string // only for CondVersion
}

// MutKind selects what a Mutation does.
type MutKind uint8

const (
	// MutPut stores Value under Key (creating or replacing it).
	MutPut MutKind = iota + 1
	// MutDelete removes Key; deleting an absent key is not an error.
	MutDelete
)

// Mutation is one change of a Write.
type Mutation struct {
	Kind  MutKind
	Key   string
	Value []byte // only for MutPut; the provider copies what it keeps
	// Retention makes a Put expire Retention after StoreNow of the commit.
	// Zero means durable.
	Retention time.Duration
}

// IfMissing is a CondMissing condition.
func IfMissing(key string) Condition { return Condition{Kind: CondMissing, Key: key} }

// IfVersion is a CondVersion condition.
func IfVersion(key, version string) Condition {
	return Condition{Kind: CondVersion, Key: key, Version: version}
}

// Put is a durable MutPut.
func Put(key string, value []byte) Mutation { return Mutation{Kind: MutPut, Key: key, Value: value} }

// PutExpiring is a MutPut that expires retention after the commit.
func PutExpiring(key string, value []byte, retention time.Duration) Mutation {
	return Mutation{Kind: MutPut, Key: key, Value: value, Retention: retention}
}

// Delete is a MutDelete.
func Delete(key string) Mutation { return Mutation{Kind: MutDelete, Key: key} }

// WriteRequest is a conditional atomic batch.
type WriteRequest struct {
	Conditions []Condition
	Mutations  []Mutation
}

// WriteResult is Applied{Versions, StoreNow} or Conflict{StoreNow}.
type WriteResult struct {
	Applied bool
	// Versions holds, for an applied write, the new version of each MutPut in
	// the order of WriteRequest.Mutations; deletes have an empty entry.
	Versions []string
	StoreNow time.Time
}

// ScanRequest asks for one page of a snapshot scan.
type ScanRequest struct {
	Prefix string // 0..1024 bytes; only keys starting with it
	Limit  int    // 1..1000 items
	Cursor string // empty for the first page, else ScanPage.Next
}

// Item is one key of a scan page. It is only a candidate: the framework
// re-reads a key before acting on it.
type Item struct {
	Key       string
	Value     []byte
	Version   string
	ExpiresAt time.Time
}

// ScanPage is Page{Items, Next, StoreNow} or Expired.
type ScanPage struct {
	Items []Item
	// Next is empty when the snapshot is exhausted.
	Next     string
	StoreNow time.Time
	// Expired reports that the cursor was invalid, expired or from another
	// scan (the spec's ScanExpired). The caller restarts from the first page.
	Expired bool
}
