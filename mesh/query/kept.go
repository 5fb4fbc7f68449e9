package query

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Kept continuation state. Most continuations carry the store's cursor in
// the token. Two do not fit there, and List keeps them in the Location
// Store instead, under keptPrefix + hex(SHA-256(value)), expiring after
// KeptRetention; the token carries the digest (tokenKeptCursor,
// tokenKeptRows):
//
//   - a store cursor longer than maxInlineCursor (the SPI allows 4,096
//     bytes, which with the token's own fields would cross the 4,096-byte
//     bound of §6.2/§12). Neither shipped provider issues one: memory
//     cursors are 46 characters, Redis ones at most 1,410;
//   - the matching rows of a snapshot's last scan page that the page being
//     built had no room for (see Reader.lookAhead). Both shipped providers
//     release a snapshot when they serve its last scan page, so those rows
//     cannot be read again; keeping them is how the next page still lists
//     them as they were in the snapshot.
//
// These are the only writes List makes; in a listing that needs neither it
// writes nothing. The value is this package's own (not a record of
// docs/RECORDS.md) and nobody else reads it.

// KeptKind is the kind part of a kept continuation's store key. The value
// is this package's own (a store cursor or rows), not a record of
// docs/RECORDS.md; "meshnode ctl record" says so.
const KeptKind record.Kind = "query-continuation"

const keptPrefix = string(KeptKind) + ":"

// KeptRetention is how long kept continuation state lives. It only needs
// to outlast the pause between two pages, and is longer than the snapshots
// of the shipped providers (5 minutes idle by default), so the store's own
// snapshot expiry, not this one, normally ends an idle cycle.
const KeptRetention = time.Hour

// maxLookAhead bounds a look-ahead scan page, so that the rows kept from one
// always fit in one store value (TestKeptRowsFit).
const maxLookAhead = 256

func keptKey(digest [digestBytes]byte) string { return keptPrefix + hex.EncodeToString(digest[:]) }

// keep writes value to the store under its digest. The write is
// unconditional, so it always applies; keeping the same value twice (a page
// built again) writes the same bytes.
func (r Reader) keep(ctx context.Context, value []byte) ([digestBytes]byte, error) {
	digest := sha256.Sum256(value)
	put := locstore.PutExpiring(keptKey(digest), value, KeptRetention)
	if _, err := r.Store.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{put}}); err != nil {
		return digest, fmt.Errorf("keep the continuation state: %w", err)
	}
	return digest, nil
}

// recall reads a kept value. One that is gone (expired) or does not match
// its digest is ErrScanExpired: the cycle cannot go on, the caller restarts
// it.
func (r Reader) recall(ctx context.Context, digest [digestBytes]byte, what string) ([]byte, error) {
	rr, err := r.Store.Read(ctx, keptKey(digest))
	if err != nil {
		return nil, storeErr(what+": read the kept continuation state", err)
	}
	if !rr.Found || sha256.Sum256(rr.Value) != digest {
		return nil, fmt.Errorf("%s: the kept continuation state is gone (kept for %v): %w", what, KeptRetention, ErrScanExpired)
	}
	return rr.Value, nil
}

// heldRow is a matching snapshot row not listed yet: its entry, whose State
// is judged when a page lists it (owner leases are read per page), and
// whether the row is committed (Active).
type heldRow struct {
	Entry  Entry
	Active bool
}

func encodeRows(rows []heldRow) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(rows); err != nil {
		return nil, fmt.Errorf("encode kept rows: %w", err)
	}
	return b.Bytes(), nil
}

func decodeRows(v []byte) ([]heldRow, error) {
	var rows []heldRow
	if err := gob.NewDecoder(bytes.NewReader(v)).Decode(&rows); err != nil {
		return nil, fmt.Errorf("decode kept rows: %w", err)
	}
	return rows, nil
}
