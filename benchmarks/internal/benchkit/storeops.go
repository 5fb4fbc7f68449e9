package benchkit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// StoreValueBytes is the value size of the raw store baselines: about an
// authority record's encoded size.
const StoreValueBytes = 512

// StoreOps is the Location Store round trips of one object's move in raw
// form, on rows of its own: Reads reads (round robin over its rows, each at
// least once), then Writes conditional batches in sequence that put Rows
// rows in all, spread as evenly as the count allows (the object has as many
// rows as the largest batch); each batch is conditional on the version of
// every row it puts, as the previous call left it. It prices the store
// calls alone: no decoding, no planning, no shared rows (so no conflicts).
type StoreOps struct{ Reads, Writes, Rows int }

// batch is how many rows write w (0-based) puts.
func (o StoreOps) batch(w int) int {
	n := o.Rows / max(o.Writes, 1)
	if w < o.Rows%max(o.Writes, 1) {
		n++
	}
	return max(n, 1)
}

func (o StoreOps) keys(prefix string) []string {
	k := make([]string, o.batch(0))
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
	for i := range max(o.Reads, len(keys)) {
		rr, err := s.Read(ctx, keys[i%len(keys)])
		if err != nil {
			return err
		}
		versions[i%len(keys)] = rr.Version
	}
	for w := range o.Writes {
		n := o.batch(w)
		req := locstore.WriteRequest{Conditions: make([]locstore.Condition, n), Mutations: make([]locstore.Mutation, n)}
		for i, k := range keys[:n] {
			req.Conditions[i], req.Mutations[i] = locstore.IfVersion(k, versions[i]), locstore.Put(k, value)
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
