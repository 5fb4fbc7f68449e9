// Package marker keeps the namespace marker: one record a Location Store
// namespace gets when it is first used, so that a running node can tell
// that the store lost its data (FLUSHALL, eviction, a failover to a replica
// without persistence) instead of silently issuing generations again from 1
// (§3.1, §3.2 forbid reusing one). See docs/store-redis.md.
//
// What it can and cannot see: a node that saw the marker and finds it gone
// (or replaced) knows the data is lost. A namespace whose every node was
// down while its data was lost looks like a new namespace to the first node
// that starts: nothing survives in the store to tell the two apart.
package marker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// ErrDataLost reports that the store no longer holds what this process saw
// in it (it is locstore.ErrDataLost).
var ErrDataLost = locstore.ErrDataLost

// Key is the marker's store key: "namespace-marker:" and the SHA-256 of its
// preimage, like every record key (record.Key).
var Key = record.Key([]byte(preimage))

const preimage = "namespace-marker"

// Kind is the kind part of the marker's store key, what "meshnode ctl
// record" reads to know how to decode it.
const Kind record.Kind = preimage

// Marker is the namespace's marker record.
type Marker struct {
	// ID is 128 random bits, hex: a namespace recreated after a loss gets
	// another one.
	ID string `json:"markerId"`
	// CreatedAt is the store time it was written (Unix milliseconds).
	CreatedAt int64 `json:"createdAt"`
}

// Ensure returns the namespace's marker, writing a new one (IfMissing) when
// there is none; created reports that this call wrote it.
func Ensure(ctx context.Context, st locstore.Store) (m Marker, created bool, err error) {
	var lastErr error // of the last write, when it failed
	for attempt := 0; attempt < 3; attempt++ {
		rr, err := st.Read(ctx, Key)
		if err != nil {
			return Marker{}, false, fmt.Errorf("marker: read: %w", err)
		}
		if rr.Found {
			m, err := Decode(rr.Value)
			return m, false, err
		}
		var id [16]byte
		_, _ = rand.Read(id[:]) // never fails (crypto/rand)
		m = Marker{ID: hex.EncodeToString(id[:]), CreatedAt: rr.StoreNow.UnixMilli()}
		v, err := json.Marshal(m)
		if err != nil {
			return Marker{}, false, fmt.Errorf("marker: encode: %w", err)
		}
		wr, err := st.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing(Key)},
			Mutations: []locstore.Mutation{locstore.Put(Key, v)}})
		if errors.Is(err, locstore.ErrWriteRefused) || errors.Is(err, locstore.ErrPermission) {
			return Marker{}, false, fmt.Errorf("marker: write: %w", err) // refused, and so would the next be
		}
		lastErr = err
		if err != nil {
			// The write may have applied: the next read decides.
			continue
		}
		if wr.Applied {
			return m, true, nil
		}
		// Another node wrote one first: read it.
	}
	if lastErr != nil {
		// Say why: "could not write" alone left an operator whose store
		// refuses writes (a read-only replica) nothing to go on.
		return Marker{}, false, fmt.Errorf("marker: could not write the namespace marker: %w", lastErr)
	}
	return Marker{}, false, errors.New("marker: could not read or write the namespace marker: every write conflicted and no marker could be read")
}

// Check reports ErrDataLost when the store no longer holds m (missing, or
// another marker: the namespace was recreated). A store failure is returned
// as it is (it says nothing about the data).
func Check(ctx context.Context, st locstore.Store, m Marker) error {
	rr, err := st.Read(ctx, Key)
	if err != nil {
		return fmt.Errorf("marker: read: %w", err)
	}
	if !rr.Found {
		return fmt.Errorf("%w: the namespace marker %s (written %s) is gone from the Location Store", ErrDataLost,
			m.ID, time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339))
	}
	got, err := Decode(rr.Value)
	if err != nil {
		return fmt.Errorf("%w: the namespace marker is unreadable: %w", ErrDataLost, err)
	}
	if got.ID != m.ID {
		return fmt.Errorf("%w: the namespace marker is %s (written %s), not the %s this node saw: the namespace was emptied and started again",
			ErrDataLost, got.ID, time.UnixMilli(got.CreatedAt).UTC().Format(time.RFC3339), m.ID)
	}
	return nil
}

// Decode reads a stored marker, refusing unknown members and a malformed
// id.
func Decode(v []byte) (Marker, error) {
	var m Marker
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Marker{}, fmt.Errorf("marker: decode: %w", err)
	}
	if len(m.ID) != 32 {
		return Marker{}, fmt.Errorf("marker: decode: markerId %q is not 32 hex digits", m.ID)
	}
	if _, err := hex.DecodeString(m.ID); err != nil {
		return Marker{}, fmt.Errorf("marker: decode: markerId: %w", err)
	}
	return m, nil
}
