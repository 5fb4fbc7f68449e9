package benchkit

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// CountingStore counts what passes through a Location Store: the calls and
// the rows they touch, by the kinds of row a store prices differently (a
// new row is a new index entry on Redis, an expiring one also an entry in
// the expiry index, a delete removes them, a batch refused by its
// conditions writes nothing). A ceiling replays these counts (Replay).
type CountingStore struct {
	locstore.Store
	reads, writes, conflicts, writeKeys, readKeys, condKeys atomic.Uint64
	// Of the rows read, those not found; of the rows of applied batches,
	// the kinds (rowKinds); of all rows written, those of refused batches.
	missingKeys, conflictKeys                          atomic.Uint64
	newKeys, newExpiringKeys, expiringKeys, deleteKeys atomic.Uint64
	// errors counts the calls that failed (none of the counts above).
	errors atomic.Uint64
	// nanos is the time callers spent in store calls: beside ns/op it says
	// how much of an operation is waiting on the store and how much is the
	// node's own work (issue 15).
	nanos atomic.Int64
}

// timed adds the time since start to the store-call time.
func (s *CountingStore) timed(start time.Time) { s.nanos.Add(int64(time.Since(start))) }

// Read implements locstore.Store. A call that failed is counted apart
// (Errors), not as a read: its rows are unknown.
func (s *CountingStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	start := time.Now()
	rr, err := s.Store.Read(ctx, key)
	s.timed(start)
	if err != nil {
		s.errors.Add(1)
		return rr, err
	}
	s.reads.Add(1)
	s.readKeys.Add(1)
	if !rr.Found {
		s.missingKeys.Add(1)
	}
	return rr, err
}

// ReadMany implements locstore.MultiReader: one call, counted as one read
// (what it costs is a call, like a Read's), its keys in ReadKeys.
func (s *CountingStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	start := time.Now()
	rs, err := locstore.ReadMany(ctx, s.Store, keys)
	s.timed(start)
	if err != nil {
		s.errors.Add(1)
		return rs, err
	}
	s.reads.Add(1)
	s.readKeys.Add(uint64(len(keys)))
	for _, rr := range rs {
		if !rr.Found {
			s.missingKeys.Add(1)
		}
	}
	return rs, err
}

// Write implements locstore.Store; a write that was not applied is a
// conflict, one that failed is counted apart (Errors): whether the store
// applied it is unknown, and a ceiling must not replay it as applied.
func (s *CountingStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	start := time.Now()
	res, err := s.Store.Write(ctx, req)
	s.timed(start)
	if err != nil {
		s.errors.Add(1)
		return res, err
	}
	s.writes.Add(1)
	s.writeKeys.Add(uint64(len(req.Mutations)))
	s.condKeys.Add(uint64(condOnly(req)))
	if !res.Applied {
		s.conflicts.Add(1)
		s.conflictKeys.Add(uint64(len(req.Mutations)))
		return res, nil
	}
	k := kindsOf(req)
	s.newKeys.Add(uint64(k.new))
	s.newExpiringKeys.Add(uint64(k.newExpiring))
	s.expiringKeys.Add(uint64(k.expiring))
	s.deleteKeys.Add(uint64(k.deletes))
	return res, nil
}

// condOnly counts the rows a batch conditions without writing them.
func condOnly(req locstore.WriteRequest) int {
	n := 0
	for _, c := range req.Conditions {
		if _, written := mutationOf(req, c.Key); !written {
			n++
		}
	}
	return n
}

func mutationOf(req locstore.WriteRequest, key string) (locstore.Mutation, bool) {
	for _, m := range req.Mutations {
		if m.Key == key {
			return m, true
		}
	}
	return locstore.Mutation{}, false
}

// rowKinds counts a batch's mutations by kind. A put makes a new row unless
// it is conditioned on the row's version: under IfMissing it must, and the
// puts conditioned on nothing here are the rows named by a reference no
// other row has (a creation's stored request). The rest are updates of
// durable rows.
type rowKinds struct{ new, newExpiring, expiring, deletes int }

func kindsOf(req locstore.WriteRequest) rowKinds {
	var k rowKinds
	for _, m := range req.Mutations {
		if m.Kind == locstore.MutDelete {
			k.deletes++
			continue
		}
		existing := false
		for _, c := range req.Conditions {
			if c.Key == m.Key && c.Kind == locstore.CondVersion {
				existing = true
				break
			}
		}
		switch {
		case existing && m.Retention > 0:
			k.expiring++
		case existing:
		case m.Retention > 0:
			k.newExpiring++
		default:
			k.new++
		}
	}
	return k
}

// Counts are store calls so far (a ReadMany is one read); WriteKeys sums the
// rows the writes put or deleted, ReadKeys the rows the reads read, CondKeys
// the rows the writes only conditioned; MissingKeys of the rows read were
// not found; ConflictKeys of WriteKeys were in batches not applied; of the
// rows of applied batches, NewKeys were new durable rows, NewExpiringKeys
// new rows with a retention, ExpiringKeys rows that existed put with a
// retention, DeleteKeys deleted (the rest are updates of durable rows);
// Errors are the calls that failed, counted in none of the others (a
// ceiling does not replay them); Time is the time callers spent in store
// calls, failed ones included (summed over concurrent callers).
type Counts struct {
	Reads, Writes, Conflicts, WriteKeys, ReadKeys, CondKeys uint64
	MissingKeys, ConflictKeys                               uint64
	NewKeys, NewExpiringKeys, ExpiringKeys, DeleteKeys      uint64
	Errors                                                  uint64
	Time                                                    time.Duration
}

// fields lists c's counters, for the arithmetic below.
func (c *Counts) fields() []*uint64 {
	return []*uint64{&c.Reads, &c.Writes, &c.Conflicts, &c.WriteKeys, &c.ReadKeys, &c.CondKeys,
		&c.MissingKeys, &c.ConflictKeys, &c.NewKeys, &c.NewExpiringKeys, &c.ExpiringKeys, &c.DeleteKeys, &c.Errors}
}

// combine is c with each counter f(c's, o's).
func (c Counts) combine(o Counts, f func(a, b uint64) uint64) Counts {
	out := c
	of := o.fields()
	for i, p := range out.fields() {
		*p = f(*p, *of[i])
	}
	return out
}

// Add is c plus o.
func (c Counts) Add(o Counts) Counts {
	out := c.combine(o, func(a, b uint64) uint64 { return a + b })
	out.Time = c.Time + o.Time
	return out
}

// Sub is c minus before.
func (c Counts) Sub(before Counts) Counts {
	out := c.combine(before, func(a, b uint64) uint64 { return a - b })
	out.Time = c.Time - before.Time
	return out
}

// Replay is c, counted over ops operations, as a ceiling replays it.
func (c Counts) Replay(ops int) Replay { return Replay{Total: c, Ops: max(ops, 1)} }

// Counts is what passed through s so far.
func (s *CountingStore) Counts() Counts {
	return Counts{Reads: s.reads.Load(), Writes: s.writes.Load(), Conflicts: s.conflicts.Load(),
		WriteKeys: s.writeKeys.Load(), ReadKeys: s.readKeys.Load(), CondKeys: s.condKeys.Load(),
		MissingKeys: s.missingKeys.Load(), ConflictKeys: s.conflictKeys.Load(),
		NewKeys: s.newKeys.Load(), NewExpiringKeys: s.newExpiringKeys.Load(),
		ExpiringKeys: s.expiringKeys.Load(), DeleteKeys: s.deleteKeys.Load(), Errors: s.errors.Load(),
		Time: time.Duration(s.nanos.Load())}
}

// perOp is x over ops, rounded.
func perOp(x uint64, ops int) int { return int(math.Round(float64(x) / float64(max(ops, 1)))) }
