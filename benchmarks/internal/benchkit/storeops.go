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
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// StoreValueBytes is the value size of the raw store baselines: about an
// authority record's encoded size.
const StoreValueBytes = 512

// StoreOps is the Location Store calls of one operation — one object's move
// or one creation — in raw form, on rows of its own: no decoding, no
// planning, no rows shared with another operation (so no contention).
//
// Reads read calls read ReadKeys rows in all (a call of several rows is one
// ReadMany, as the subject's snapshot reads are), Missing of them absent.
// Then Writes conditional batches: Conflicts of them are refused by their
// conditions (a subject's batch that lost a race: the store checked it and
// wrote nothing), the others put or delete their share of the rows, and
// every batch is conditioned on the version of each row it updates and on
// its share of CondKeys rows it only conditions (the subject's batches
// verify owner leases, counters and reservations besides the rows they
// write). Rows is the rows of all batches, ConflictRows of them in the
// refused ones; CondKeys the rows only conditioned, ConflictConds of them
// in the refused ones (a refused batch of no rows conditions one: the
// present row it is refused on). Each batch has a row or a condition-only
// row, as a store requires. Of the rows applied, New are new durable rows
// (put under IfMissing), NewExpiring new rows with a retention, Expiring
// rows that exist put with a retention, Deletes deleted — the rows made
// new earlier by this object's operations when there are (expiring ones
// first, newest first), absent rows otherwise — and the rest updates of
// durable rows.
//
// A store prices these kinds differently: a read of five rows and a batch
// that checks six cost Redis about twice a one-row read and a two-row
// batch, and a new or deleted row costs an index entry an update does not
// (benchmarks/README.md). A ceiling of fewer kinds is a ceiling for other
// work than the subject's (Shape).
type StoreOps struct {
	Reads, ReadKeys, Missing              int
	Writes, Conflicts, Rows, ConflictRows int
	CondKeys, ConflictConds               int
	New, NewExpiring, Expiring, Deletes   int
}

// Plain is o without its shape: one row per read, every batch applied and
// conditioned on the rows it puts only, every row an update.
func (o StoreOps) Plain() StoreOps { return StoreOps{Reads: o.Reads, Writes: o.Writes, Rows: o.Rows} }

// Updates is o with every read row present, every batch applied and every
// row an update of a durable row.
func (o StoreOps) Updates() StoreOps {
	return StoreOps{Reads: o.Reads, ReadKeys: o.ReadKeys, Writes: o.Writes, Rows: o.Rows, CondKeys: o.CondKeys}
}

// Shape is what of the subject's calls a ceiling replays.
type Shape uint8

// Shapes.
const (
	// ShapeSubject replays the subject's calls as counted: the rows per read
	// and the absent ones, refused batches, the rows each batch only
	// conditions, new, expiring and deleted rows; and the totals exactly
	// (operation i replays its share, so that over the subject's number of
	// operations the sums are the subject's), not rounded per operation.
	ShapeSubject Shape = iota
	// ShapeUpdates is the shape of the ceilings of 2026-12-03 to 12-05:
	// rounded per operation, every batch applied, every row an update of a
	// seeded row. Kept to compare.
	ShapeUpdates
	// ShapePlain is the shape before 2026-12-03: also one row per read and
	// batches conditioned on their own rows only.
	ShapePlain
)

// EnvCeilingShape selects the shape a ceiling replays: subject (the
// default), updates or plain.
const EnvCeilingShape = "MESHNODE_BENCH_CEILING_SHAPE"

var shapeNames = map[string]Shape{"": ShapeSubject, "subject": ShapeSubject, "updates": ShapeUpdates, "plain": ShapePlain}

// Shaped is r as the ceiling replays it (EnvCeilingShape).
func Shaped(b *testing.B, r Replay) Replay {
	b.Helper()
	v := os.Getenv(EnvCeilingShape)
	sh, ok := shapeNames[v]
	if !ok {
		b.Fatalf("%s=%q: want subject, updates or plain", EnvCeilingShape, v)
	}
	r.Shape = sh
	return r
}

// Replay is a subject's store calls, Total over Ops operations, as a
// ceiling replays them in Shape.
type Replay struct {
	Total Counts
	Ops   int
	Shape Shape
}

// Fixed is the Replay of o for every operation.
func Fixed(o StoreOps) Replay {
	return Replay{Ops: 1, Total: Counts{Reads: uint64(o.Reads), ReadKeys: uint64(o.ReadKeys), MissingKeys: uint64(o.Missing),
		Writes: uint64(o.Writes), Conflicts: uint64(o.Conflicts), WriteKeys: uint64(o.Rows), ConflictKeys: uint64(o.ConflictRows),
		CondKeys: uint64(o.CondKeys), NewKeys: uint64(o.New), NewExpiringKeys: uint64(o.NewExpiring),
		ExpiringKeys: uint64(o.Expiring), DeleteKeys: uint64(o.Deletes)}}
}

// Mean is the calls per operation, rounded, of every kind.
func (r Replay) Mean() StoreOps {
	t, n := r.Total, r.Ops
	return StoreOps{Reads: perOp(t.Reads, n), ReadKeys: perOp(t.ReadKeys, n), Missing: perOp(t.MissingKeys, n),
		Writes: perOp(t.Writes, n), Conflicts: perOp(t.Conflicts, n), Rows: perOp(t.WriteKeys, n),
		ConflictRows: perOp(t.ConflictKeys, n), CondKeys: perOp(t.CondKeys, n), New: perOp(t.NewKeys, n),
		NewExpiring: perOp(t.NewExpiringKeys, n), Expiring: perOp(t.ExpiringKeys, n), Deletes: perOp(t.DeleteKeys, n)}
}

// span is the slots [lo, hi) of a count: an operation's reads, batches,
// or rows.
type span struct{ lo, hi uint64 }

func (s span) n() int { return int(s.hi - s.lo) }

// of is the span of the k items, spread evenly over total slots, that fall
// in s's slots: over consecutive spans these sum to k, a span of no slots
// has none, and with k >= total each slot has at least one.
func (s span) of(k, total uint64) span {
	if total == 0 {
		return span{}
	}
	return span{s.lo * k / total, s.hi * k / total}
}

// take splits s, slots of total, into those of k items of one a slot and
// the rest, slots of total-k.
func (s span) take(k, total uint64) (part, rest span) {
	part = s.of(min(k, total), total)
	return part, span{s.lo - part.lo, s.hi - part.hi}
}

// carried is the batches of s, an operation's span of n, of the subject's
// batches, and of the rows and condition-only rows they carry: nested in
// its batches, so that an operation has them only where it has a batch,
// and (with at least as many as batches, as a subject's) one on each.
func (s span) carried(n, batches, rows, conds uint64) (b, r span, c int) {
	b = s.of(batches, n)
	items := b.of(rows+conds, batches)
	r, rest := items.take(rows, rows+conds)
	return b, r, rest.n()
}

// Op is operation i's calls in r's shape.
//
// In the subject's shape the counts are shared out jointly, each nested in
// the operation's span of what carries it: read rows in its read calls
// (missing ones in those rows), refused batches' rows in its refused
// batches, and the applied batches' rows and condition-only rows in its
// applied batches — an operation has rows only where it has a batch, and
// every batch has a row or a condition — the kinds of row in its applied
// rows. So over any r.Ops consecutive operations the sums are r.Total,
// and each operation's counts are within about one of the mean.
func (r Replay) Op(i int) StoreOps {
	switch r.Shape {
	case ShapeUpdates:
		return r.Mean().Updates()
	case ShapePlain:
		return r.Mean().Plain()
	}
	t, n := r.Total, uint64(max(r.Ops, 1))
	op := span{uint64(i) % n, uint64(i)%n + 1}
	reads := op.of(t.Reads, n)
	readKeys := reads.of(t.ReadKeys, t.Reads)
	// The condition-only rows ride on the applied batches, but for one on
	// each refused batch of no rows (its condition), and for all of them
	// when no batch applied.
	applied := t.Writes - t.Conflicts
	refusedConds := min(t.CondKeys, t.Conflicts-min(t.Conflicts, t.ConflictKeys))
	if applied == 0 {
		refusedConds = t.CondKeys
	}
	refused, refusedRows, refusedCond := op.carried(n, t.Conflicts, t.ConflictKeys, refusedConds)
	batches, rows, conds := op.carried(n, applied, t.WriteKeys-t.ConflictKeys, t.CondKeys-refusedConds)
	o := StoreOps{Reads: reads.n(), ReadKeys: readKeys.n(), Missing: readKeys.of(t.MissingKeys, t.ReadKeys).n(),
		Writes: refused.n() + batches.n(), Conflicts: refused.n(),
		Rows: refusedRows.n() + rows.n(), ConflictRows: refusedRows.n(),
		CondKeys: refusedCond + conds, ConflictConds: refusedCond}
	// The kinds of row ride, one after the other, on the applied rows
	// (the expiring updates on the rows left, the updates).
	left := t.WriteKeys - t.ConflictKeys
	for _, k := range []struct {
		n     *int
		total uint64
	}{{&o.NewExpiring, t.NewExpiringKeys}, {&o.New, t.NewKeys}, {&o.Deletes, t.DeleteKeys}, {&o.Expiring, t.ExpiringKeys}} {
		var part span
		part, rows = rows.take(k.total, left)
		left -= min(k.total, left)
		*k.n = part.n()
	}
	return o
}

// Mix is the mean of what r's operations replay, over one period of its
// shares: what the ceiling reports it replayed.
func (r Replay) Mix() map[string]float64 {
	var sum Counts
	for i := range r.Ops {
		o := r.Op(i)
		sum = sum.Add(Fixed(o).Total)
	}
	n := float64(r.Ops)
	return map[string]float64{
		"ceiling-reads": float64(sum.Reads) / n, "ceiling-read-keys": float64(sum.ReadKeys) / n,
		"ceiling-missing-keys": float64(sum.MissingKeys) / n, "ceiling-writes": float64(sum.Writes) / n,
		"ceiling-conflicts": float64(sum.Conflicts) / n, "ceiling-write-keys": float64(sum.WriteKeys) / n,
		"ceiling-cond-keys": float64(sum.CondKeys) / n, "ceiling-new-keys": float64(sum.NewKeys+sum.NewExpiringKeys) / n,
		"ceiling-expiring-keys": float64(sum.NewExpiringKeys+sum.ExpiringKeys) / n, "ceiling-delete-keys": float64(sum.DeleteKeys) / n,
	}
}

// Report reports what the ceiling replayed per operation (Mix); call it
// after the timed part (b.ResetTimer deletes reported metrics).
func (r Replay) Report(b *testing.B) {
	for unit, v := range r.Mix() {
		b.ReportMetric(v, unit)
	}
}

// Need is how many rows an object of r's operations must be seeded with.
func (r Replay) Need() int {
	n := 1
	for i := range r.Ops {
		n = max(n, r.Op(i).need())
	}
	return n
}

// applied is how many batches apply, and how many rows they write: one
// batch at least for rows (the shapes rounded per operation can have rows
// and no batch; the subject's never has).
func (o StoreOps) applied() (batches, rows int) {
	rows = max(o.Rows-o.ConflictRows, 0)
	batches = max(o.Writes-o.Conflicts, 0)
	if rows > 0 {
		batches = max(batches, 1)
	}
	return batches, rows
}

// updates is how many applied rows are updates of seeded rows (durable or
// put with a retention).
func (o StoreOps) updates() int {
	_, rows := o.applied()
	return max(rows-o.New-o.NewExpiring-o.Deletes, 0)
}

// spread is the share that call i (0-based) of n gets of total, as even as
// the count allows, the larger shares first.
func spread(total, n, i int) int {
	n = max(n, 1)
	k := total / n
	if i < total%n {
		k++
	}
	return k
}

// readCalls is the rows each read call reads, absent ones first.
func (o StoreOps) readCalls() []int {
	if o.Reads <= 0 {
		return nil
	}
	calls := make([]int, o.Reads)
	for r := range calls {
		calls[r] = 1
		if o.ReadKeys > o.Reads {
			calls[r] = max(spread(o.ReadKeys, o.Reads, r), 1)
		}
	}
	return calls
}

// mutation is one row of an applied batch, in the order a replay writes
// them: new rows first, then updates, deletes last (a creation makes its
// rows and deletes its stored request at Commit; a move makes its
// reservation and deletes it at the owner CAS).
type mutation uint8

const (
	mutNewExpiring mutation = iota
	mutNew
	mutUpdate
	mutUpdateExpiring
	mutDelete
)

// batches is the mutations of each applied batch, and the rows each only
// conditions: the mutations the larger shares first, the condition-only
// rows the larger shares last, so that with as many rows and
// condition-only rows as batches no batch is empty.
func (o StoreOps) batches() ([][]mutation, []int) {
	n, _ := o.applied()
	var all []mutation
	add := func(m mutation, k int) {
		for range max(k, 0) {
			all = append(all, m)
		}
	}
	up := o.updates()
	add(mutNewExpiring, o.NewExpiring)
	add(mutNew, o.New)
	add(mutUpdate, up-min(o.Expiring, up))
	add(mutUpdateExpiring, min(o.Expiring, up))
	add(mutDelete, o.Deletes)
	out := make([][]mutation, n)
	conds := make([]int, n)
	at := 0
	for w := range n {
		k := spread(len(all), n, w)
		out[w] = all[at : at+k]
		at += k
		conds[w] = spread(max(o.CondKeys-o.ConflictConds, 0), n, n-1-w)
	}
	return out, conds
}

// need is how many seeded rows o touches at once: the updated and only
// conditioned rows of its largest batch (each batch starts at the first
// row, as the subject's batches each write the object's authority row),
// the present rows of its largest read, one for the refused batches.
func (o StoreOps) need() int {
	n := 1
	bs, conds := o.batches()
	for w, b := range bs {
		u := 0
		for _, m := range b {
			if m == mutUpdate || m == mutUpdateExpiring {
				u++
			}
		}
		n = max(n, u+conds[w])
	}
	missing := o.Missing
	for _, k := range o.readCalls() {
		absent := min(missing, k)
		missing -= absent
		n = max(n, k-absent)
	}
	return n
}

// replayRetention is the retention of the rows a replay puts expiring:
// long enough that none expires while the benchmark runs.
const replayRetention = 10 * time.Minute

// keptMade bounds the rows an object remembers having made, for its
// deletes; older ones stay in the store, as the subject's objects do.
const keptMade = 64

// Rows is one replayed object's rows: the seeded ones with their versions,
// and the rows its operations made and did not delete yet.
type Rows struct {
	prefix   string
	keys     []string
	versions []string
	made     [2][]string // expiring, durable; newest last
	seq      int         // names the rows the replay makes and reads absent
}

// Seed puts the n rows of the object named prefix.
func Seed(ctx context.Context, s locstore.Store, prefix string, n int, value []byte) (*Rows, error) {
	r := &Rows{prefix: prefix, keys: make([]string, max(n, 1))}
	var req locstore.WriteRequest
	for i := range r.keys {
		r.keys[i] = prefix + "/" + strconv.Itoa(i)
		req.Mutations = append(req.Mutations, locstore.Put(r.keys[i], value))
	}
	res, err := s.Write(ctx, req)
	if err == nil && !res.Applied {
		err = errors.New("seed write not applied")
	}
	if err != nil {
		return nil, err
	}
	r.versions = res.Versions
	return r, nil
}

// name is a key of this object no row has had.
func (r *Rows) name(kind string) string {
	r.seq++
	return r.prefix + "/" + kind + "/" + strconv.Itoa(r.seq)
}

// Run makes the store calls of o on the object's rows.
func (r *Rows) Run(ctx context.Context, s locstore.Store, o StoreOps, value []byte) error {
	if need := o.need(); need > len(r.keys) {
		return fmt.Errorf("%s: an operation of this shape needs %d seeded rows, not %d", r.prefix, need, len(r.keys))
	}
	if err := r.read(ctx, s, o); err != nil {
		return err
	}
	for w := range o.Conflicts {
		// Refused on the first row, present: it puts its rows and
		// conditions its condition-only ones missing, after them (the
		// first row too when it puts none).
		key := func(i int) string {
			if i < len(r.keys) {
				return r.keys[i]
			}
			return r.prefix + "/refused/" + strconv.Itoa(i) // never written: the batch is refused
		}
		rows := spread(o.ConflictRows, o.Conflicts, w)
		conds := spread(o.ConflictConds, o.Conflicts, o.Conflicts-1-w)
		req := locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing(r.keys[0])}}
		for i := range rows {
			req.Mutations = append(req.Mutations, locstore.Put(key(i), value))
		}
		for i := max(rows, 1); i < rows+conds; i++ {
			req.Conditions = append(req.Conditions, locstore.IfMissing(key(i)))
		}
		res, err := s.Write(ctx, req)
		if err != nil {
			return err
		}
		if res.Applied {
			return fmt.Errorf("%s: a batch conditioned on a present row being missing was applied", r.prefix)
		}
	}
	bs, conds := o.batches()
	for w, b := range bs {
		if err := r.write(ctx, s, b, conds[w], value); err != nil {
			return fmt.Errorf("%s: batch %d: %w", r.prefix, w+1, err)
		}
	}
	return nil
}

// read makes o's read calls: absent rows first, then seeded rows in turn.
func (r *Rows) read(ctx context.Context, s locstore.Store, o StoreOps) error {
	missing, next := o.Missing, 0
	for _, k := range o.readCalls() {
		keys := make([]string, k)
		for i := range keys {
			if missing > 0 {
				keys[i] = r.name("absent")
				missing--
				continue
			}
			keys[i] = r.keys[next%len(r.keys)]
			next++
		}
		var err error
		if k == 1 {
			_, err = s.Read(ctx, keys[0])
		} else {
			_, err = locstore.ReadMany(ctx, s, keys)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// write applies one batch: its mutations, conditioned on the version of
// every seeded row it updates and of conds more, IfMissing on the rows it
// makes.
func (r *Rows) write(ctx context.Context, s locstore.Store, b []mutation, conds int, value []byte) error {
	var req locstore.WriteRequest
	type made struct {
		key      string
		expiring bool
	}
	var makes []made
	seeded := 0 // the next seeded row
	for _, m := range b {
		switch m {
		case mutNew, mutNewExpiring:
			k := r.name("new")
			req.Conditions = append(req.Conditions, locstore.IfMissing(k))
			if m == mutNew {
				req.Mutations = append(req.Mutations, locstore.Put(k, value))
			} else {
				req.Mutations = append(req.Mutations, locstore.PutExpiring(k, value, replayRetention))
			}
			makes = append(makes, made{k, m == mutNewExpiring})
		case mutUpdate, mutUpdateExpiring:
			req.Conditions = append(req.Conditions, locstore.IfVersion(r.keys[seeded], r.versions[seeded]))
			if m == mutUpdate {
				req.Mutations = append(req.Mutations, locstore.Put(r.keys[seeded], value))
			} else {
				req.Mutations = append(req.Mutations, locstore.PutExpiring(r.keys[seeded], value, replayRetention))
			}
			seeded++
		case mutDelete:
			req.Mutations = append(req.Mutations, locstore.Delete(r.takeMade()))
		}
	}
	for range conds {
		req.Conditions = append(req.Conditions, locstore.IfVersion(r.keys[seeded], r.versions[seeded]))
		seeded++
	}
	res, err := s.Write(ctx, req)
	if err != nil {
		return err
	}
	if !res.Applied {
		return errors.New("conditional write not applied")
	}
	u := 0
	for i, m := range b {
		if m == mutUpdate || m == mutUpdateExpiring {
			r.versions[u] = res.Versions[i]
			u++
		}
	}
	for _, m := range makes {
		k := 1
		if m.expiring {
			k = 0
		}
		r.made[k] = append(r.made[k], m.key)
		if len(r.made[k]) > keptMade {
			r.made[k] = append(r.made[k][:0], r.made[k][len(r.made[k])-keptMade/2:]...)
		}
	}
	return nil
}

// takeMade is the row a delete removes: the newest this object made and
// did not delete, expiring ones first; an absent row if none.
func (r *Rows) takeMade() string {
	for k := range r.made {
		if n := len(r.made[k]); n > 0 {
			key := r.made[k][n-1]
			r.made[k] = r.made[k][:n-1]
			return key
		}
	}
	return r.name("gone")
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
