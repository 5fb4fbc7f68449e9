package directory

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Following the descriptor journal (docs/DISCOVERY.md §3.2): when the
// change counter moved from the last complete list's n to m, and the
// journal names the keys of changes n+1..m, the Tracker reads just those
// keys and the counter once more instead of the whole list:
//
//	counter (m, read by Round) · journal (last change j ≥ m) ·
//	each changed key · counter again
//
// The list it builds is exact at change j — the same-point-in-time list of
// §4 — when the closing counter read says j: the journal and the counter
// are written in the same batch, so the counter was j when the journal was
// read, and an unchanged counter afterwards proves no descriptor was put or
// deleted while the keys were read; every key not in the journal is as the
// last complete list had it. Anything else (journal missing, a gap, more
// changes than it keeps, a value that does not decode, the counter moved
// again) falls back to the whole list, which is always correct.

// followJournal returns the list at the journal's last change, or ok false
// when the whole list must be read.
func (t *Tracker) followJournal(ctx context.Context, meshName string, c counterState, st *RoundStats) (l listed, ok bool, err error) {
	last := t.last
	// A value the last complete list could not decode (a newer runtime's
	// descriptor, of this mesh or another) does not stop the following:
	// until 2026-12-07 it did, for good (undecodable values are never
	// reclaimed), and every change then cost every node a whole-list read
	// and a WARN per such value (review). A changed value that does not
	// decode still falls back (below).
	if last == nil || !c.Found || c.Value <= t.counter.Value {
		return listed{}, false, nil
	}
	jk, err := journalKey()
	if err != nil {
		return listed{}, false, err
	}
	rr, err := t.Store.Read(ctx, jk)
	st.JournalReads++
	if err != nil {
		return listed{}, false, fmt.Errorf("read descriptor journal: %w", err)
	}
	if !rr.Found {
		return listed{}, false, nil
	}
	j, err := record.DecodeDescriptorJournal(rr.Value)
	if err != nil {
		t.logger().Warn("descriptor journal does not decode; reading the whole list", "err", err)
		return listed{}, false, nil
	}
	keys, covered := j.Since(t.counter.Value)
	if !covered || j.Last() < c.Value {
		return listed{}, false, nil
	}
	changed, err := t.readKeys(ctx, keys)
	st.JournalReads += len(keys)
	if err != nil {
		return listed{}, false, err
	}
	after, err := readCounter(ctx, t.Store, t.counterKey)
	st.CounterReads++
	if err != nil {
		return listed{}, false, err
	}
	if !after.Found || after.Value != j.Last() {
		return listed{}, false, nil // moved again while the keys were read
	}
	byKey := make(map[string]Entry, len(last.Entries)+len(changed))
	for _, e := range last.Entries {
		byKey[e.Key] = e
	}
	for _, k := range keys {
		it, found := changed[k]
		if !found {
			delete(byKey, k)
			continue
		}
		d, derr := decodeItem(it)
		if derr != nil {
			t.logger().Warn("undecodable MeshNode descriptor; reading the whole list", "key", k, "err", derr)
			return listed{}, false, nil
		}
		if meshName != "" && d.MeshName != meshName {
			delete(byKey, k)
			continue
		}
		byKey[k] = Entry{Descriptor: d, Key: k, Version: it.Version}
	}
	// Undecodable is carried from the last complete list: the values not
	// named by the journal are as it read them (one that a change made
	// readable is counted until the next whole-list read).
	snap := Snapshot{MeshName: meshName, Entries: slices.Collect(maps.Values(byKey)),
		ChangeNumber: after.Value, StoreNow: after.StoreNow, Attempts: 1, Complete: true, Undecodable: last.Undecodable}
	sortEntries(snap.Entries)
	st.Followed = true
	return listed{snap: snap, closing: after}, true, nil
}

// readKeys reads keys; a key missing from the result is not stored.
func (t *Tracker) readKeys(ctx context.Context, keys []string) (map[string]locstore.Item, error) {
	got, err := readAll(keys, func(k string) (locstore.ReadResult, error) {
		rr, err := t.Store.Read(ctx, k)
		if err != nil {
			return rr, fmt.Errorf("read descriptor %s: %w", k, err)
		}
		return rr, nil
	})
	items := make(map[string]locstore.Item, len(got))
	for k, rr := range got {
		if rr.Found {
			items[k] = locstore.Item{Key: k, Value: rr.Value, Version: rr.Version, ExpiresAt: rr.ExpiresAt}
		}
	}
	return items, err
}
