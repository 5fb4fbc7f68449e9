package benchkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// StoreValueBytes is the value size of the raw store baselines: about an
// authority record's encoded size.
const StoreValueBytes = 512

// StoreOps is the Location Store round trips of one object's move (or
// creation) in raw form, on rows of its own: Reads read calls, then Writes
// conditional batches in sequence that put Rows rows in all, spread as
// evenly as the count allows; each batch is conditional on the version of
// every row it puts, as the previous call left it. It prices the store
// calls alone: no decoding, no planning, no shared rows (so no conflicts).
//
// ReadKeys and CondKeys give the calls the subject's shape: ReadKeys rows
// read in all (a read call of several rows is one ReadMany, as the
// subject's snapshot reads are), and CondKeys rows that a batch only
// conditions, without writing them (the subject's batches verify owner
// leases, counters and reservations besides the rows they write). Zero, or
// ReadKeys at most Reads, is the plain shape: one row per read, batches
// conditioned on their own rows only. A read of five rows and a batch that
// checks six costs Redis about twice a one-row read and a two-row batch
// (benchmarks/README.md), so a ceiling of the plain shape is a ceiling for
// less work than the subject does.
type StoreOps struct{ Reads, Writes, Rows, ReadKeys, CondKeys int }

// Plain is o without its shape: one row per read, batches conditioned on
// the rows they put only.
func (o StoreOps) Plain() StoreOps { return StoreOps{Reads: o.Reads, Writes: o.Writes, Rows: o.Rows} }

// EnvCeilingShape selects the shape a ceiling replays: "subject" (the
// default: rows per read and condition-only rows as the subject made them)
// or "plain" (one row per read, batches conditioned on their own rows: the
// shape of the ceilings before 2026-12-03, kept to compare).
const EnvCeilingShape = "MESHNODE_BENCH_CEILING_SHAPE"

// Shaped is ops as the ceiling replays it (EnvCeilingShape).
func Shaped(b *testing.B, ops StoreOps) StoreOps {
	b.Helper()
	switch v := os.Getenv(EnvCeilingShape); v {
	case "", "subject":
	case "plain":
		ops = ops.Plain()
	default:
		b.Fatalf("%s=%q: want subject or plain", EnvCeilingShape, v)
	}
	return ops
}

// ReportShape reports the rows a ceiling's op read and only conditioned
// (ceiling-read-keys, ceiling-cond-keys); call it after the timed part
// (b.ResetTimer deletes reported metrics).
func (o StoreOps) ReportShape(b *testing.B) {
	keys := o.ReadKeys
	if keys <= o.Reads {
		keys = max(o.Reads, o.rows())
	}
	b.ReportMetric(float64(keys), "ceiling-read-keys")
	b.ReportMetric(float64(o.CondKeys), "ceiling-cond-keys")
	b.ReportMetric(float64(o.Rows), "ceiling-write-keys")
}

// spread is the share of total that call i (0-based) of n gets, as even
// as the count allows.
func spread(total, n, i int) int {
	n = max(n, 1)
	k := total / n
	if i < total%n {
		k++
	}
	return k
}

// batch is how many rows write w (0-based) puts.
func (o StoreOps) batch(w int) int { return max(spread(o.Rows, o.Writes, w), 1) }

// condOnly is how many rows write w only conditions.
func (o StoreOps) condOnly(w int) int { return spread(o.CondKeys, o.Writes, w) }

// readKeys is how many rows read call r reads.
func (o StoreOps) readKeys(r int) int {
	if o.ReadKeys <= o.Reads {
		return 1
	}
	return max(spread(o.ReadKeys, o.Reads, r), 1)
}

// rows is how many rows the object has: enough for the largest read and
// the largest batch with its condition-only rows.
func (o StoreOps) rows() int {
	return max(o.batch(0)+o.condOnly(0), o.readKeys(0))
}

func (o StoreOps) keys(prefix string) []string {
	k := make([]string, o.rows())
	for i := range k {
		k[i] = prefix + "/" + strconv.Itoa(i)
	}
	return k
}

// Seed puts the rows of the object named prefix.
func (o StoreOps) Seed(ctx context.Context, s locstore.Store, prefix string, value []byte) error {
	var req locstore.WriteRequest
	for _, k := range o.keys(prefix) {
		req.Mutations = append(req.Mutations, locstore.Put(k, value))
	}
	res, err := s.Write(ctx, req)
	if err == nil && !res.Applied {
		err = errors.New("seed write not applied")
	}
	return err
}

// Run makes the round trips of one move of the object named prefix (seeded).
func (o StoreOps) Run(ctx context.Context, s locstore.Store, prefix string, value []byte) error {
	keys := o.keys(prefix)
	versions := make([]string, len(keys))
	next := 0 // the row the next read starts at
	read := 0 // rows read so far: every row is read at least once
	for r := 0; r < max(o.Reads, 1) || read < len(keys); r++ {
		n := o.readKeys(r)
		if n == 1 {
			rr, err := s.Read(ctx, keys[next])
			if err != nil {
				return err
			}
			versions[next] = rr.Version
			next = (next + 1) % len(keys)
			read++
			continue
		}
		ks := make([]string, n)
		at := make([]int, n)
		for i := range ks {
			at[i] = (next + i) % len(keys)
			ks[i] = keys[at[i]]
		}
		rs, err := locstore.ReadMany(ctx, s, ks)
		if err != nil {
			return err
		}
		for i, rr := range rs {
			versions[at[i]] = rr.Version
		}
		next = (next + n) % len(keys)
		read += n
	}
	for w := range o.Writes {
		n, c := o.batch(w), o.condOnly(w)
		req := locstore.WriteRequest{Conditions: make([]locstore.Condition, 0, n+c), Mutations: make([]locstore.Mutation, n)}
		for i, k := range keys[:n+c] {
			req.Conditions = append(req.Conditions, locstore.IfVersion(k, versions[i]))
			if i < n {
				req.Mutations[i] = locstore.Put(k, value)
			}
		}
		res, err := s.Write(ctx, req)
		if err != nil {
			return err
		}
		if !res.Applied {
			return fmt.Errorf("conditional write %d of %s not applied", w+1, prefix)
		}
		copy(versions, res.Versions)
	}
	return nil
}

// RunConcurrent calls op(i) for every i in [0, n) from k goroutines, each
// taking the next i when done, and returns the first error (the others
// stop taking work then).
func RunConcurrent(n, k int, op func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Bool
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range max(k, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := op(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// ActorSettled reads Actor id's authority row from s (pass the store under
// a CountingStore, so that the caller's reads are not counted) and reports
// whether the node rid owns it with no move in progress (the target
// recorded the move Completed), and its AuthorityOwnerGeneration.
func ActorSettled(ctx context.Context, s locstore.Store, id string, rid []byte) (bool, uint64, error) {
	key, err := authority.Object{ID: id, Kind: record.ObjectActor}.Key()
	if err != nil {
		return false, 0, err
	}
	rr, err := s.Read(ctx, key)
	if err != nil {
		return false, 0, err
	}
	row, err := authority.AuthorityRowOf(key, rr)
	if err != nil || !row.Found {
		return false, 0, err
	}
	a := row.Record
	return a.Relocation == nil && string(a.Allocation.Descriptor.RoutingID) == string(rid),
		uint64(a.AuthorityOwnerGeneration), nil
}
