package authority

import (
	"context"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Reading a snapshot: the rows one step of an operation needs (an
// authority row, the leases and the reservation it names, the counters it
// moves) are read together, in one store call when the store is a
// locstore.MultiReader — one round trip and one script run instead of one
// per row, which is what bounds creations and moves per second on Redis
// (benchmarks/README.md, issues 11 and 15) — and then observed at one
// instant, so no batch can apply between two of them. A store without it is
// read one row after the other in the order the rows were added, which the
// readers keep as the torn-read argument of existingReader requires
// (reservation before authority, counters after the rows they follow from).
//
// Anchor rows (authority, reservation, leases) may be answered by the row
// hints on an attempt that allows it (hints.go); counters only by a value a
// caller has just read and handed over, under the rules of counter_hints.go:
// every concurrent operation moves them.

// rowSet is the rows one step reads together. A key that cannot be built
// is kept as err, which fetch returns before reading anything.
type rowSet struct {
	keys   []string
	anchor []bool // may be answered by a hint
	err    error
}

// add appends a row and returns its index.
func (r *rowSet) add(key string, anchor bool) int {
	if r.keys == nil {
		// A step reads a few rows: room for them at once.
		r.keys, r.anchor = make([]string, 0, batchRows), make([]bool, 0, batchRows)
	}
	r.keys, r.anchor = append(r.keys, key), append(r.anchor, anchor)
	return len(r.keys) - 1
}

// rowsRead is what a rowSet read: a result per row, in order, and the
// store time of the store call (zero when every row came from hints).
type rowsRead struct {
	rr  []locstore.ReadResult
	now time.Time
}

// fetch reads r: hinted anchors from the hints when v allows, the rest in
// one call (locstore.ReadMany). Anchors read from the store are remembered
// as hints.
func (e *Executor) fetch(ctx context.Context, v *view, op Op, r rowSet) (rowsRead, error) {
	if r.err != nil {
		return rowsRead{}, r.err
	}
	out := rowsRead{rr: make([]locstore.ReadResult, len(r.keys))}
	// Prefetched counters are taken all or none: a counter is two rows, and
	// one row prefetched beside the other read now would not be one
	// snapshot. Rows a lane was left (carry.go) likewise.
	var counters map[string]locstore.ReadResult
	switch {
	case v == nil:
	case v.hold != nil:
		counters = v.hold.leftFor(r.counterKeys(), v.prior)
	case v.counters:
		counters = e.takeCounters(r)
		if counters != nil {
			v.prefetched = true
		}
	}
	var keys []string
	var at []int
	for i, k := range r.keys {
		if r.anchor[i] && v != nil && v.prior != nil {
			if rr, ok := rowIn(v.prior, k); ok {
				v.used.Store(true)
				out.rr[i] = rr
				continue
			}
		}
		if r.anchor[i] && e.hints != nil && v != nil && v.hinted {
			if rr, ok := e.hints.get(k); ok {
				v.used.Store(true)
				out.rr[i] = rr
				continue
			}
		}
		if rr, ok := counters[k]; ok {
			v.used.Store(true)
			out.rr[i] = rr
			continue
		}
		keys, at = append(keys, k), append(at, i)
	}
	for len(keys) > 0 {
		n := min(len(keys), locstore.MaxReadKeys)
		rs, err := locstore.ReadMany(ctx, e.store, keys[:n])
		if err != nil {
			return rowsRead{}, fmt.Errorf("authority %s: read rows: %w", op, err)
		}
		for j, rr := range rs {
			i := at[j]
			out.rr[i] = rr
			if out.now.IsZero() {
				out.now = rr.StoreNow
			}
			if r.anchor[i] && e.hints != nil {
				e.hints.put(r.keys[i], rr)
			}
		}
		keys, at = keys[n:], at[n:]
	}
	if out.now.IsZero() && len(out.rr) > 0 {
		out.now = out.rr[0].StoreNow // every row hinted: the first hint's time
	}
	if v != nil && v.seen != nil {
		for i, k := range r.keys {
			v.seen = append(v.seen, keyRow{k, out.rr[i]})
		}
	}
	return out, nil
}

// counterKeys are the rows of r that are not anchors: its counters.
func (r rowSet) counterKeys() []string {
	var keys []string
	for i, k := range r.keys {
		if !r.anchor[i] {
			keys = append(keys, k)
		}
	}
	return keys
}

// Row keys and decoders. A decode error names the operation.

func (e *Executor) authorityAt(op Op, key string, rr locstore.ReadResult) (AuthorityRow, error) {
	row, err := e.authorityRowOf(key, rr)
	return row, withOp(op, err)
}

// addLease adds the owner lease of ownerID (an anchor) and returns its
// index; -1 and nothing added when ownerID is empty.
func (r *rowSet) addLease(op Op, ownerID string) int {
	if ownerID == "" {
		return -1
	}
	key, err := record.OwnerLeaseKey(ownerID)
	if err != nil {
		r.fail(invalidCause(op, err, "owner id"))
		return -1
	}
	return r.add(key, true)
}

// addReservation adds the reservation row of id (an anchor).
func (r *rowSet) addReservation(op Op, id [16]byte) int {
	key, err := ReservationKey(id)
	if err != nil {
		r.fail(invalidCause(op, err, "reservation"))
		return -1
	}
	return r.add(key, true)
}

// addCapacity adds the two rows of each counter of ids and returns the
// index of each counter's first row. The active row is read before the
// secured row: on a store without MultiReader a Commit (active +n, secured
// unchanged) that applies between the two reads then shows more reserved
// slots, not fewer, so it cannot make a counter look short (tornRead).
func (r *rowSet) addCapacity(op Op, ids []CounterID) []int {
	at := make([]int, len(ids))
	for i, id := range ids {
		secured, active, err := CounterKeys(id)
		if err != nil {
			r.fail(invalidCause(op, err, "capacity counter %s", id))
			return nil
		}
		at[i] = r.add(active, false)
		r.add(secured, false)
	}
	return at
}

func (r *rowSet) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// lease decodes the lease row at index i of r (the zero row when i < 0).
func (got rowsRead) lease(op Op, r rowSet, i int) (LeaseRow, error) {
	if i < 0 {
		return LeaseRow{}, nil
	}
	row, err := LeaseRowOf(r.keys[i], got.rr[i])
	return row, withOp(op, err)
}

func (e *Executor) reservationAt(op Op, key string, rr locstore.ReadResult) (ReservationRow, error) {
	row, err := e.reservationRowOf(key, rr)
	return row, withOp(op, err)
}

// capacityAt decodes the counters ids from got at the indexes at.
func capacityAt(op Op, ids []CounterID, got rowsRead, at []int) ([]CapacityRow, error) {
	rows := make([]CapacityRow, len(ids))
	for i, id := range ids {
		row, err := CapacityRowOf(id, got.rr[at[i]+1], got.rr[at[i]])
		if err != nil {
			return nil, withOp(op, err)
		}
		rows[i] = row
	}
	return rows, nil
}

// readCapacity reads the counters ids in one call (or takes prefetched
// values, when v allows).
func (e *Executor) readCapacity(ctx context.Context, v *view, op Op, ids []CounterID) ([]CapacityRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var r rowSet
	at := r.addCapacity(op, ids)
	got, err := e.fetch(ctx, v, op, r)
	if err != nil {
		return nil, err
	}
	return capacityAt(op, ids, got, at)
}

// ReadCounters reads the counters ids (both rows of each) outside an
// operation — placement's pre-check, the descriptor's capacity copy — in as
// few store calls as locstore.MaxReadKeys allows.
func ReadCounters(ctx context.Context, store locstore.Store, ids []CounterID) ([]CapacityRow, error) {
	out := make([]CapacityRow, 0, len(ids))
	const perCall = locstore.MaxReadKeys / 2
	for from := 0; from < len(ids); from += perCall {
		part := ids[from:min(from+perCall, len(ids))]
		var r rowSet
		at := r.addCapacity("", part)
		if r.err != nil {
			return nil, r.err
		}
		rs, err := locstore.ReadMany(ctx, store, r.keys)
		if err != nil {
			return nil, err
		}
		rows, err := capacityAt("", part, rowsRead{rr: rs}, at)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}
