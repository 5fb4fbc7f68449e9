package authority

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Executor is the I/O around the planners: for one operation it reads the
// rows the planner needs, plans, writes the batch, and
//   - on Conflict (the batch did not apply because a row changed since it
//     was read) reads again and plans again — the planner re-checks the
//     caller's intent against the fresh rows, so a retry can only succeed
//     where the first attempt would have, or end with the decisive error;
//   - on a lost result (a provider error after the request may have
//     reached the store) reads again and lets the rows decide whether the
//     batch applied (Plan.Observed, and the final result when the plan
//     recorded one), as §10 requires; it never guesses.
//
// An unkeyed capacity-only batch (SecureCapacity, ReleaseCapacity without a
// ReservationID) whose result is lost is not retried: counters are shared,
// so no re-read can tell whether it applied, and retrying could reserve
// twice. That outcome is reported as unknown (the provider error, matching
// locstore.ErrUnavailable). The keyed forms are confirmed by re-reading
// their reservation row, like every other operation.
//
// A plan that finds its effect already in the store (Plan.AlreadyApplied)
// sends no batch and succeeds with Result.AlreadyApplied.
type Executor struct {
	store       locstore.Store
	log         *slog.Logger
	maxAttempts int
	backoff     func(attempt int) time.Duration
	hints       *rowHints // nil: every attempt reads (WithRowHints)
	lanes       *lanes    // nil: no queueing on hot counters (WithoutLanes)
	stats       execStats // conflicts and lane waits by operation (Stats)
}

// ExecutorOption configures NewExecutor.
type ExecutorOption func(*Executor) error

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) ExecutorOption {
	return func(e *Executor) error {
		if l == nil {
			return errors.New("authority: WithLogger: nil logger")
		}
		e.log = l
		return nil
	}
}

// DefaultMaxAttempts bounds the write attempts of one operation. Every
// Conflict means another batch applied, so the system as a whole makes
// progress; the bound only stops one caller that keeps losing.
const DefaultMaxAttempts = 256

// WithMaxAttempts sets the attempt bound; 0 means until the context ends.
func WithMaxAttempts(n int) ExecutorOption {
	return func(e *Executor) error {
		if n < 0 {
			return fmt.Errorf("authority: WithMaxAttempts: %d is negative", n)
		}
		e.maxAttempts = n
		return nil
	}
}

// WithoutLanes turns off the queueing of this executor's operations on a
// hot counter (lanes.go); for comparison in benchmarks and tests.
func WithoutLanes() ExecutorOption {
	return func(e *Executor) error {
		e.lanes = nil
		return nil
	}
}

// WithBackoff sets the pause before attempt n+1 after attempt n conflicted
// (default: a random pause of up to min(n, 8) milliseconds, which spreads
// contending writers).
func WithBackoff(f func(attempt int) time.Duration) ExecutorOption {
	return func(e *Executor) error {
		if f == nil {
			return errors.New("authority: WithBackoff: nil function")
		}
		e.backoff = f
		return nil
	}
}

// defaultBackoff fits hot keys (the ObjectGeneration counter, a target's
// capacity counter): a conflict means another batch just committed, so the
// first retry re-reads at once — waiting would only let more batches in
// ahead — and later ones spread over a window growing by 250 µs (a store
// round trip) per attempt, up to 2 ms, so that a crowd of creators does not
// retry in lock step.
func defaultBackoff(attempt int) time.Duration {
	if attempt <= 1 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(min(attempt, 8)) * int64(250*time.Microsecond)))
}

// NewExecutor returns an Executor over store.
func NewExecutor(store locstore.Store, opts ...ExecutorOption) (*Executor, error) {
	if store == nil {
		return nil, errors.New("authority: NewExecutor: nil store")
	}
	e := &Executor{store: store, log: slog.Default(), maxAttempts: DefaultMaxAttempts, backoff: defaultBackoff, lanes: &lanes{}}
	for _, o := range opts {
		if err := o(e); err != nil {
			return nil, err
		}
	}
	if e.lanes != nil && e.hints != nil {
		e.lanes.now = e.hints.now
	}
	return e, nil
}

// Result is an applied operation.
type Result struct {
	// Plan is the plan that applied.
	Plan Plan
	// Version is the authority row's StoreVersion after the batch ("" when
	// the batch deleted it or did not touch it).
	Version string
	// StoreNow is the store time of the write (or of the confirming read).
	StoreNow time.Time
	// Recovered reports that the write's answer was lost and a re-read
	// showed that the batch applied.
	Recovered bool
	// AlreadyApplied reports that the rows already showed this operation's
	// effect and nothing was written (Plan.AlreadyApplied): for a keyed
	// SecureCapacity the §8.1 "same Reservation ID, same content" answer
	// (AlreadySecured), for a keyed ReleaseCapacity "already released or
	// consumed", for a relocation NewOwner "already committed by this
	// target attempt", for CompleteRelocation "already completed".
	AlreadyApplied bool
	// Attempts is the number of batches sent.
	Attempts int
}

// Reserve runs PlanReserve. A Reserve that finds the record present ends
// with the planner's ErrConflict or ErrTypeMismatch carrying the current
// row (*Error.Current), which the caller follows (§7).
func (e *Executor) Reserve(ctx context.Context, req ReserveRequest) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	key, _ := req.Object.Key()
	counterKey, err := record.CounterKey(record.CounterObjectGeneration)
	if err != nil {
		return Result{}, invalidCause(OpReserve, err, "ObjectGeneration counter key")
	}
	var ids []CounterID
	if b, err := BundleFor(req.Object.Kind, req.Object.StableType); err == nil {
		ids = CountersFor(req.Target.Node, b)
	}
	// One call: the authority row and, for the common case that it is
	// missing, everything a creation plans on.
	read := func(ctx context.Context, v *view) (Snapshot, error) {
		const op = OpReserve
		var r rowSet
		ai, ci := r.add(key, true), r.add(counterKey, false)
		li := r.addLease(op, req.Target.Owner.ID)
		capAt := r.addCapacity(op, ids)
		got, err := e.fetch(ctx, v, op, r)
		if err != nil {
			return Snapshot{}, err
		}
		s := Snapshot{StoreNow: got.now}
		if s.Authority, err = e.authorityAt(op, key, got.rr[ai]); err != nil || s.Authority.Found {
			return s, err
		}
		if s.ObjectGeneration, err = CounterRowOf(counterKey, got.rr[ci]); err != nil {
			return s, withOp(op, err)
		}
		if s.TargetLease, err = got.lease(op, r, li); err != nil {
			return s, err
		}
		s.Capacity, err = capacityAt(op, ids, got, capAt)
		return s, err
	}
	return e.run(ctx, OpReserve, req.Object, read, func(s Snapshot) (Plan, error) { return PlanReserve(req, s) })
}

// Commit runs PlanCommit.
func (e *Executor) Commit(ctx context.Context, req CommitRequest) (Result, error) {
	read := e.existingReader(OpCommit, req.Object, reads{owner: &req.Owner, capacity: true})
	return e.run(ctx, OpCommit, req.Object, read, func(s Snapshot) (Plan, error) { return PlanCommit(req, s) })
}

// Abort runs PlanAbort.
func (e *Executor) Abort(ctx context.Context, req AbortRequest) (Result, error) {
	read := e.existingReader(OpAbort, req.Object, reads{owner: req.Owner, capacity: true})
	return e.run(ctx, OpAbort, req.Object, read, func(s Snapshot) (Plan, error) { return PlanAbort(req, s) })
}

// Preserve runs PlanPreserve.
func (e *Executor) Preserve(ctx context.Context, req PreserveRequest) (Result, error) {
	read := e.existingReader(OpPreserve, req.Object, reads{owner: &req.Owner})
	return e.run(ctx, OpPreserve, req.Object, read, func(s Snapshot) (Plan, error) { return PlanPreserve(req, s) })
}

// NewOwner runs PlanNewOwner. For a relocation (req.Relocation) a lost
// answer is decided by the row: the target as owner with the progress
// committed by this relocation and target attempt is success (Recovered);
// a later call finding the same is success with AlreadyApplied.
func (e *Executor) NewOwner(ctx context.Context, req NewOwnerRequest) (Result, error) {
	r := reads{target: &req.Target.Owner, capacity: true, targetNode: &req.Target.Node}
	if req.Relocation != nil {
		r.reservation = &req.Relocation.ReservationID
	}
	read := e.existingReader(OpNewOwner, req.Object, r)
	return e.run(ctx, OpNewOwner, req.Object, read, func(s Snapshot) (Plan, error) { return PlanNewOwner(req, s) })
}

// Delete runs PlanDelete.
func (e *Executor) Delete(ctx context.Context, req DeleteRequest) (Result, error) {
	read := e.existingReader(OpDelete, req.Object, reads{owner: &req.Owner, capacity: true})
	return e.run(ctx, OpDelete, req.Object, read, func(s Snapshot) (Plan, error) { return PlanDelete(req, s) })
}

// RecordCaptured runs PlanRecordCaptured (performed by the source).
func (e *Executor) RecordCaptured(ctx context.Context, req CaptureRequest) (Result, error) {
	read := e.existingReader(OpRecordCaptured, req.Object, reads{owner: &req.Source.Owner, reservation: &req.Move.ReservationID})
	return e.run(ctx, OpRecordCaptured, req.Object, read, func(s Snapshot) (Plan, error) { return PlanRecordCaptured(req, s) })
}

// RecordPrepared runs PlanRecordPrepared (performed by the target).
func (e *Executor) RecordPrepared(ctx context.Context, req PrepareRequest) (Result, error) {
	read := e.existingReader(OpRecordPrepared, req.Object, reads{target: &req.Target.Owner, reservation: &req.Move.ReservationID})
	return e.run(ctx, OpRecordPrepared, req.Object, read, func(s Snapshot) (Plan, error) { return PlanRecordPrepared(req, s) })
}

// CompleteRelocation runs PlanCompleteRelocation (performed by the new
// owner once dispatch is open).
func (e *Executor) CompleteRelocation(ctx context.Context, req CompleteRequest) (Result, error) {
	read := e.existingReader(OpCompleteRelocation, req.Object, reads{owner: &req.Owner})
	return e.run(ctx, OpCompleteRelocation, req.Object, read, func(s Snapshot) (Plan, error) { return PlanCompleteRelocation(req, s) })
}

// SecureCapacity runs PlanSecureCapacity. Keyed (req.ReservationID set), a
// lost result is confirmed by re-reading the reservation row and the same
// request answers AlreadyApplied once the row exists; unkeyed, a lost
// result is reported as unknown, not retried (see Executor).
func (e *Executor) SecureCapacity(ctx context.Context, req CapacityRequest) (Result, error) {
	if req.keyed() {
		return e.run(ctx, OpSecureCapacity, req.Object, e.secureKeyedReader(req), func(s Snapshot) (Plan, error) { return PlanSecureCapacity(req, s) })
	}
	return e.capacityOnly(ctx, OpSecureCapacity, req, true, PlanSecureCapacity)
}

// ReleaseCapacity runs PlanReleaseCapacity. Keyed (req.ReservationID set), a
// missing reservation is success with AlreadyApplied and a lost result is
// confirmed by re-reading the row; unkeyed, a lost result is reported as
// unknown, not retried (see Executor).
func (e *Executor) ReleaseCapacity(ctx context.Context, req CapacityRequest) (Result, error) {
	if req.keyed() {
		return e.run(ctx, OpReleaseCapacity, Object{}, e.releaseKeyedReader(req), func(s Snapshot) (Plan, error) { return PlanReleaseCapacity(req, s) })
	}
	return e.capacityOnly(ctx, OpReleaseCapacity, req, false, PlanReleaseCapacity)
}

// secureKeyedReader reads the reservation row and, while it is missing,
// the authority row, the source's and the target's leases and the target's
// counters.
func (e *Executor) secureKeyedReader(req CapacityRequest) func(context.Context, *view) (Snapshot, error) {
	const op = OpSecureCapacity
	return func(ctx context.Context, v *view) (Snapshot, error) {
		key, err := req.Object.Key()
		if err != nil {
			return Snapshot{}, invalidCause(op, err, "object")
		}
		ids := CountersFor(req.Target.Node, req.Bundle)
		var r rowSet
		ri, ai := r.addReservation(op, req.ReservationID), r.add(key, true)
		oi, ti := r.addLease(op, req.Source.Owner.ID), r.addLease(op, req.Target.Owner.ID)
		capAt := r.addCapacity(op, ids)
		got, err := e.fetch(ctx, v, op, r)
		if err != nil {
			return Snapshot{}, err
		}
		s := Snapshot{StoreNow: got.now}
		if s.Reservation, err = e.reservationAt(op, r.keys[ri], got.rr[ri]); err != nil || s.Reservation.Found {
			return s, err
		}
		if s.Authority, err = e.authorityAt(op, key, got.rr[ai]); err != nil {
			return s, err
		}
		if s.OwnerLease, err = got.lease(op, r, oi); err != nil {
			return s, err
		}
		if s.TargetLease, err = got.lease(op, r, ti); err != nil {
			return s, err
		}
		if !s.Authority.Found {
			return s, nil
		}
		s.Capacity, err = capacityAt(op, ids, got, capAt)
		return s, err
	}
}

// releaseKeyedReader reads the reservation row and, when it exists, the
// counters of its target.
func (e *Executor) releaseKeyedReader(req CapacityRequest) func(context.Context, *view) (Snapshot, error) {
	const op = OpReleaseCapacity
	return func(ctx context.Context, v *view) (Snapshot, error) {
		var rows rowSet
		ri := rows.addReservation(op, req.ReservationID)
		got, err := e.fetch(ctx, v, op, rows)
		if err != nil {
			return Snapshot{}, err
		}
		s := Snapshot{StoreNow: got.now}
		if s.Reservation, err = e.reservationAt(op, rows.keys[ri], got.rr[ri]); err != nil || !s.Reservation.Found {
			return s, err
		}
		r := s.Reservation.Reservation
		s.Capacity, err = e.readCapacity(ctx, v, op, CountersFor(r.Target.Node, r.Bundle))
		return s, err
	}
}

func (e *Executor) capacityOnly(ctx context.Context, op Op, req CapacityRequest, lease bool, plan func(CapacityRequest, Snapshot) (Plan, error)) (Result, error) {
	ids := CountersFor(req.Target.Node, req.Bundle)
	read := func(ctx context.Context, v *view) (Snapshot, error) {
		var r rowSet
		owner := ""
		if lease {
			owner = req.Target.Owner.ID
		}
		li := r.addLease(op, owner)
		capAt := r.addCapacity(op, ids)
		got, err := e.fetch(ctx, v, op, r)
		if err != nil {
			return Snapshot{}, err
		}
		s := Snapshot{StoreNow: got.now}
		if s.TargetLease, err = got.lease(op, r, li); err != nil {
			return s, err
		}
		s.Capacity, err = capacityAt(op, ids, got, capAt)
		return s, err
	}
	return e.run(ctx, op, Object{}, read, func(s Snapshot) (Plan, error) { return plan(req, s) })
}

// LookupTerminal reads the stored final result of a creation request
// (§7: checked before creating; only the same request can read it). Missing
// is ErrNotFound.
func (e *Executor) LookupTerminal(ctx context.Context, op OperationRef, requestSHA256 [32]byte) (TerminalRecord, error) {
	key, err := TerminalKey(op)
	if err != nil {
		return TerminalRecord{}, invalidCause(OpTerminalLookup, err, "operation")
	}
	rr, err := e.store.Read(ctx, key)
	if err != nil {
		return TerminalRecord{}, fmt.Errorf("authority: read final result: %w", err)
	}
	return CheckTerminal(op, requestSHA256, rr)
}

// reads names the rows an operation on an existing record reads besides
// the authority row.
type reads struct {
	owner       *Owner    // OwnerLease
	target      *Owner    // TargetLease
	capacity    bool      // the counters of the record's node (and of targetNode)
	targetNode  *Node     // with capacity: also the target's counters
	reservation *[16]byte // Reservation
}

// existingReader reads the rows of an operation on an existing record: the
// reservation row (when r names one), the authority row, then (when it
// exists) the other rows r names.
//
// The rows are read one at a time, so a batch can apply between two reads.
// The order keeps such a torn snapshot from deciding wrongly: the
// reservation row is read before the authority row, because the batch that
// consumes a reservation (the relocation's NewOwner) also changes the
// authority row, so a reservation read as present next to an authority row
// already changed leads to the answer the newer row gives. Counters are read
// after the authority row (their keys come from it) — in the same call as
// the other rows when the authority row is a hint, which is read before any
// of them; a counter read short because of a later batch is re-read (see
// tornRead in run).
func (e *Executor) existingReader(op Op, obj Object, r reads) func(context.Context, *view) (Snapshot, error) {
	return func(ctx context.Context, v *view) (Snapshot, error) {
		key, err := obj.Key()
		if err != nil {
			return Snapshot{}, invalidCause(op, err, "object")
		}
		// One call for the anchor rows, in the order above; the leases are
		// read beside the authority row: only their versions matter, as
		// conditions.
		var rows rowSet
		ri := -1
		if r.reservation != nil && *r.reservation != ([16]byte{}) {
			ri = rows.addReservation(op, *r.reservation)
		}
		ai := rows.add(key, true)
		ownerID := func(o *Owner) string {
			if o == nil {
				return ""
			}
			return o.ID
		}
		oi, ti := rows.addLease(op, ownerID(r.owner)), rows.addLease(op, ownerID(r.target))
		// When the authority row will come from the hints, its counters'
		// keys are known now: they join this call instead of a call of
		// their own after it (a relocation's NewOwner read the reservation
		// row, then the counters).
		var early []CounterID
		var earlyAt []int
		if r.capacity && v != nil && v.hinted && e.hints != nil {
			if rr, ok := e.hints.get(key); ok && rr.Found {
				if row, err := e.authorityRowOf(key, rr); err == nil {
					early = r.counterIDs(row)
					earlyAt = rows.addCapacity(op, early)
				}
			}
		}
		got, err := e.fetch(ctx, v, op, rows)
		if err != nil {
			return Snapshot{}, err
		}
		s := Snapshot{StoreNow: got.now}
		if ri >= 0 {
			if s.Reservation, err = e.reservationAt(op, rows.keys[ri], got.rr[ri]); err != nil {
				return s, err
			}
		}
		if s.Authority, err = e.authorityAt(op, key, got.rr[ai]); err != nil {
			return s, err
		}
		if s.OwnerLease, err = got.lease(op, rows, oi); err != nil {
			return s, err
		}
		if s.TargetLease, err = got.lease(op, rows, ti); err != nil {
			return s, err
		}
		if !s.Authority.Found || !r.capacity {
			return s, nil
		}
		ids := r.counterIDs(s.Authority)
		if earlyAt != nil && slices.EqualFunc(ids, early, CounterID.equal) {
			s.Capacity, err = capacityAt(op, ids, got, earlyAt)
			return s, err
		}
		s.Capacity, err = e.readCapacity(ctx, v, op, ids)
		return s, err
	}
}

// counterIDs are the counters an operation on row reads: those of the
// record's node and, with targetNode, the target's.
func (r reads) counterIDs(row AuthorityRow) []CounterID {
	bun := row.Record.Allocation.Capacity
	ids := CountersFor(NodeOf(row.Record), bun)
	if r.targetNode != nil {
		for _, id := range CountersFor(*r.targetNode, bun) {
			if !containsCounter(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func containsCounter(ids []CounterID, id CounterID) bool {
	for _, x := range ids {
		if x.equal(id) {
			return true
		}
	}
	return false
}

func withOp(op Op, err error) error {
	if err == nil {
		return nil // before ae: taking its address moves it to the heap
	}
	var ae *Error
	if errors.As(err, &ae) && ae.Op == "" {
		ae.Op = op
	}
	return err
}

// run is the read-plan-write loop shared by every operation.
// opLogger writes one operation's log lines with its attributes (op, and
// object and kind when there is one). It adds them only when a line is
// written: Logger.With formats them at once into a cloned handler, which cost
// every operation several allocations (a creation runs two) for lines that
// are seldom written.
type opLogger struct {
	l   *slog.Logger
	op  Op
	obj Object
}

func (o opLogger) log(level slog.Level, msg string, args ...any) {
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	all := make([]any, 0, 6+len(args))
	all = append(all, "op", string(o.op))
	if o.obj.ID != "" {
		all = append(all, "object", o.obj.ID, "kind", string(o.obj.Kind))
	}
	o.l.Log(ctx, level, msg, append(all, args...)...)
}

func (o opLogger) Debug(msg string, args ...any) { o.log(slog.LevelDebug, msg, args...) }
func (o opLogger) Info(msg string, args ...any)  { o.log(slog.LevelInfo, msg, args...) }
func (o opLogger) Warn(msg string, args ...any)  { o.log(slog.LevelWarn, msg, args...) }

func (e *Executor) run(ctx context.Context, op Op, obj Object, read func(context.Context, *view) (Snapshot, error), plan func(Snapshot) (Plan, error)) (Result, error) {
	log := opLogger{l: e.log, op: op, obj: obj}
	// unknown holds the plans whose write result was lost; each later read
	// first asks whether one of them applied.
	var unknown []Plan
	var lost error
	// torn is the snapshot of the last plan refused for a counter that
	// holds fewer slots than the rows say it should (see tornRead), when
	// hasTorn. A copy, not a pointer: taking snap's address made every
	// attempt's snapshot escape to the heap.
	var torn Snapshot
	hasTorn := false
	// sent counts the batches written (Result.Attempts); attempt counts
	// rounds, which the attempt bound limits.
	sent := 0
	// hinted: this read may answer rows from the hints (rowHints). Only
	// until the first batch is sent, and never for a decision that writes
	// nothing: such a plan is re-planned on a fresh read.
	hinted := e.hints != nil
	// held is the hot-counter lanes this operation holds (lanes.go); taken
	// at most once, kept until it returns.
	var held *hold
	defer func() { held.release() }()
	// carry: while it holds lanes the operation plans on the counter rows
	// they were left and on prior, its own read before it queued
	// (carry.go) — not after a decision taken on them was refused.
	carry := e.lanes != nil
	var prior []keyRow
	acquire := func(hot []string) error {
		start := time.Now()
		h, err := e.lanes.acquire(ctx, hot)
		c := e.stats.of(op)
		c.laneWaits.Add(1)
		c.laneWait.Add(int64(time.Since(start)))
		if err != nil {
			return fmt.Errorf("authority %s: waiting for a hot counter: %w", op, err)
		}
		held = h
		return nil
	}
	takeLanes := func(req locstore.WriteRequest, always bool) (bool, error) {
		if held != nil || e.lanes == nil {
			return false, nil
		}
		hot := hotKeys(req)
		if len(hot) == 0 || (!always && !e.lanes.busy(hot)) {
			return false, nil
		}
		return true, acquire(hot)
	}
	if e.lanes != nil {
		if hot := e.lanes.expected(op); hot != nil {
			if err := acquire(hot); err != nil {
				return Result{}, err
			}
		}
	}
	for attempt := 1; ; attempt++ {
		// Prefetched counters only while this operation has not queued on a
		// lane: a lane's earlier holder has moved the counter since.
		v := &view{hinted: hinted, counters: hinted && held == nil && e.hints != nil}
		if held != nil || !e.lanes.quiet() {
			// Rows to hand over, or to plan on again after queueing
			// (carry.go); not recorded while no lane is in use.
			v.seen = make([]keyRow, 0, batchRows)
			if carry && held != nil {
				v.hold, v.prior = held, prior
			}
		}
		prior = nil
		snap, err := read(ctx, v)
		if err != nil && v.used.Load() && ctx.Err() == nil {
			// Rows from hints or a hand-over that do not fit together (a
			// counter's rows of two reads): not the store's answer; read
			// it. Both sources go: a hand-over planned on again was the
			// same misfit every time — found in a churn try-out, a Delete
			// re-reading for its whole 5 s while holding its counter's
			// lanes, and every creation and destroy of its node queued
			// behind it timed out together.
			hinted, carry = false, false
			attempt--
			continue
		}
		if err != nil {
			if len(unknown) > 0 {
				return Result{}, outcomeUnknown(string(op), fmt.Sprintf("(write: %v; re-read: %v)", lost, err), lost, err)
			}
			return Result{}, err
		}
		if len(unknown) > 0 {
			res, ok, err := e.confirm(ctx, snap, unknown)
			if err != nil {
				return Result{}, outcomeUnknown(string(op), fmt.Sprintf("(write: %v; re-read: %v)", lost, err), lost, err)
			}
			if ok {
				res.Attempts = sent
				log.Info("lost write result resolved by re-read: the batch applied", "attempts", res.Attempts)
				return res, nil
			}
		}
		p, err := plan(snap)
		if v.used.Load() && (err != nil || p.AlreadyApplied) {
			hinted, carry = false, false
			attempt-- // not an attempt: nothing was decided
			continue
		}
		switch {
		case err != nil && tornRead(err) && (!hasTorn || !sameAnchors(torn, snap)) && !e.exhausted(attempt):
			// The rows are read one by one: a batch that applied between
			// the authority (or reservation) read and the counter reads
			// makes the counters look short. Read again; only the same
			// answer from unchanged anchor rows is a corrupt store.
			torn, hasTorn = snap, true
			log.Debug("counter short of the rows' slots; re-reading in case the snapshot was torn", "err", err)
			continue
		case err != nil:
			return Result{}, err
		}
		if p.AlreadyApplied {
			res := Result{Plan: p, StoreNow: snap.StoreNow, AlreadyApplied: true, Attempts: sent}
			if p.Record != nil {
				res.Version = snap.Authority.Version
			}
			return res, nil
		}
		if p.TerminalSkipped {
			log.Warn("final result not recorded: its retention (deadline + 5 min) had passed by store time")
		}
		if e.lanes != nil {
			e.lanes.remember(op, hotKeys(p.Request))
		}
		// Another operation of this executor is queued on a counter this
		// batch conditions: wait for the turn, then plan again (carry.go).
		if took, err := takeLanes(p.Request, false); err != nil {
			return Result{}, err
		} else if took {
			prior = v.seen
			attempt-- // nothing was sent
			continue
		}
		wr, werr := e.store.Write(ctx, p.Request)
		sent++
		hinted = false
		if held != nil {
			if werr == nil && wr.Applied {
				held.leave(v.seen, p.Request, wr)
			} else {
				held.drop(werr == nil)
			}
		}
		if werr == nil && !wr.Applied {
			e.stats.of(op).conflicts.Add(1)
			if err := e.terminalTaken(ctx, op, p, len(unknown) > 0); err != nil {
				return Result{}, err
			}
		}
		if werr == nil && e.hints != nil {
			e.hints.counterMoved(p.Request, wr.Applied, v.prefetched)
		}
		switch {
		case werr == nil && wr.Applied:
			if e.hints != nil {
				e.hints.wrote(p, wr)
			}
			res := Result{Plan: p, StoreNow: wr.StoreNow, Attempts: sent}
			if p.Record != nil && p.AuthorityMutation >= 0 && p.AuthorityMutation < len(wr.Versions) {
				res.Version = wr.Versions[p.AuthorityMutation]
			}
			return res, nil
		case werr != nil && errors.Is(werr, locstore.ErrArgument):
			return Result{}, invalidCause(op, werr, "the store refused the planned batch")
		case werr != nil && errors.Is(werr, locstore.ErrWriteRefused) && len(unknown) == 0:
			// Not applied, and every write will be refused until an operator
			// acts (out of memory, a failed save): re-reading and
			// asking again until the deadline would only hide the cause
			// behind a timeout. After a lost result the re-read decides.
			return Result{}, fmt.Errorf("authority %s: %w", op, werr)
		case werr != nil && p.AuthorityMutation < 0 && p.ReservationKey == "":
			return Result{}, outcomeUnknown(string(op), fmt.Sprintf("(an unkeyed capacity-only batch cannot be confirmed by re-reading): %v", werr), werr)
		case werr != nil:
			level := slog.LevelDebug
			if len(unknown) == 0 && !ended(ctx) {
				// A write its caller's own deadline cut (a drain's moves
				// at their deadline) says nothing about the store — Redis
				// reports it as an "i/o timeout" — and the caller reports
				// its deadline: DEBUG.
				level = slog.LevelWarn
			}
			log.log(level, "write result lost; re-reading to decide", "attempt", attempt, "err", werr)
			unknown = append(unknown, p)
			lost = werr
			if ctx.Err() != nil {
				// The re-read still runs with ctx: it fails at once and the
				// outcome is reported as unknown rather than guessed.
				continue
			}
			// A store that fails writes at once while it still answers
			// reads (out of memory, a read-only replica) was asked again
			// in a tight loop, up to maxAttempts times: pause first. A
			// pause cut short by ctx leaves the re-read to report the
			// outcome unknown.
			_ = ctxsleep.For(ctx, lostWritePause(len(unknown)))
		}
		if e.exhausted(attempt) {
			if len(unknown) > 0 {
				return Result{}, outcomeUnknown(string(op), fmt.Sprintf("after %d attempts: %v", attempt, lost), lost)
			}
			return Result{}, newErr(op, ErrContended, "no batch applied in %d attempts", attempt)
		}
		if werr == nil {
			// Lost on a counter: queue on it before reading again, so the
			// operations of this executor stop losing to each other.
			if _, err := takeLanes(p.Request, true); err != nil {
				return Result{}, err
			}
			if err := ctxsleep.For(ctx, e.backoff(attempt)); err != nil {
				return Result{}, fmt.Errorf("authority %s: %w", op, err)
			}
		}
	}
}

// ended reports whether ctx has ended or its deadline has passed (a
// provider's network deadline, set from ctx's, may fire a moment before
// ctx's own timer).
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// lostWritePause is the pause before re-reading after the n-th lost write
// result of one operation: 2 ms doubling to 200 ms.
func lostWritePause(n int) time.Duration {
	return min(2*time.Millisecond<<min(n-1, 7), 200*time.Millisecond)
}

// terminalTaken is, after a batch of p that did not apply, ErrInvalidOperation
// when p records a final result and one is stored under its key already:
// another request under the same OperationId finished first (its check
// before anything was written saw none), and p's IfMissing on that key can
// never hold — until 2026-12-07 the executor re-planned it 256 times and the
// creation ended Unavailable, its built instance dropped (review). Not after
// a lost result of this executor's own (afterLost): the re-read decides
// whether that was this plan's. Read only on a conflict: a commit that
// applies pays nothing.
func (e *Executor) terminalTaken(ctx context.Context, op Op, p Plan, afterLost bool) error {
	if p.TerminalKey == "" || afterLost {
		return nil
	}
	rr, err := e.store.Read(ctx, p.TerminalKey)
	if err != nil || !rr.Found {
		return nil // the retry decides as before
	}
	return newErr(op, ErrInvalidOperation, "a final result is already stored under this OperationId: another request used it")
}

func (e *Executor) exhausted(attempt int) bool { return e.maxAttempts > 0 && attempt >= e.maxAttempts }

// tornRead reports a planner refusal that a torn snapshot can cause: a
// counter holding fewer slots than a record or reservation releases.
func tornRead(err error) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Kind == ErrCorruptRecord && ae.Counter != nil
}

// sameAnchors reports whether a and b read the authority row and the
// reservation row at the same versions. A counter only loses the slots such
// a row holds in a batch that also changes (or deletes) that row, so a
// counter short of those slots under unchanged anchors is no torn read.
func sameAnchors(a, b Snapshot) bool {
	return a.Authority.Found == b.Authority.Found && a.Authority.Version == b.Authority.Version &&
		a.Reservation.Found == b.Reservation.Found && a.Reservation.Version == b.Reservation.Version
}

// confirm decides from a fresh snapshot whether one of the plans whose
// result was lost applied. A plan that recorded a final result is decided
// by that result (written only by a batch of the same operation with the
// same outcome); the others by Plan.Observed.
func (e *Executor) confirm(ctx context.Context, snap Snapshot, unknown []Plan) (Result, bool, error) {
	for _, p := range unknown {
		applied := false
		if p.Terminal != nil {
			rr, err := e.store.Read(ctx, p.TerminalKey)
			if err != nil {
				return Result{}, false, err
			}
			if rr.Found {
				t, err := DecodeTerminal(rr.Value)
				applied = err == nil && t.Operation.OperationID == p.Terminal.Operation.OperationID &&
					t.RequestSHA256 == p.Terminal.RequestSHA256 && t.Outcome == p.Terminal.Outcome
			}
		} else {
			applied = p.ObservedIn(snap)
		}
		if applied {
			res := Result{Plan: p, StoreNow: snap.StoreNow, Recovered: true}
			// The current version, when the row still shows this plan's
			// effect (a later change of the row may have moved it on).
			if p.Record != nil && p.Observed(snap.Authority) {
				res.Version = snap.Authority.Version
			}
			return res, true, nil
		}
	}
	return Result{}, false, nil
}

// DecideNewOwner reads the rows a relocation's owner CAS (req) is
// conditioned on and classifies them (DecideNewOwner): it never writes.
// The target uses it after the Restore deadline, when a CAS answer was lost
// and no further CAS may be sent (§10). For CASCommitted the Result carries
// the authority row's version.
func (e *Executor) DecideNewOwner(ctx context.Context, req NewOwnerRequest) (CASOutcome, Result, error) {
	r := reads{}
	if req.Relocation != nil {
		r.reservation = &req.Relocation.ReservationID
	}
	snap, err := e.existingReader(OpNewOwner, req.Object, r)(ctx, nil)
	if err != nil {
		return CASUndecided, Result{}, err
	}
	out, err := DecideNewOwner(req, snap)
	if err != nil || out != CASCommitted {
		return out, Result{}, err
	}
	return out, Result{Version: snap.Authority.Version, StoreNow: snap.StoreNow, AlreadyApplied: true}, nil
}
