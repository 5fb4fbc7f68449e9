package authority

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Object names the Actor or Spot an operation is about. Kind selects the
// authority key (actor, or spot for both Spot kinds) and must match the
// record's allocation.objectKind. StableType is required by Reserve; for
// the other operations it is optional and, when set, must match.
type Object struct {
	ID         string
	Kind       record.ObjectKind
	StableType string
}

// Key is the object's authority store key.
func (o Object) Key() (string, error) {
	switch o.Kind {
	case record.ObjectActor, record.ObjectUserSpot, record.ObjectInstanceSpot:
	default:
		return "", fmt.Errorf("object kind %q is not actor, userSpot or instanceSpot (an Entry Spot has no authority allocation; its Actors are actors)", o.Kind)
	}
	return record.AuthorityKey(o.Kind.IdentityKind(), o.ID)
}

// Owner is a host run: (OwnerId, LeaseGeneration) (§3.1).
type Owner struct {
	ID              string
	LeaseGeneration uint64
}

func (o Owner) validate() error {
	if err := record.ValidateOwnerID(o.ID); err != nil {
		return err
	}
	if !record.Generation(o.LeaseGeneration).Valid() {
		return fmt.Errorf("lease generation %d outside 1..2^63-1", o.LeaseGeneration)
	}
	return nil
}

// OwnerOf returns the owner an authority record names.
func OwnerOf(a record.Authority) Owner {
	return Owner{ID: a.OwnerID, LeaseGeneration: uint64(a.OwnerLeaseGeneration)}
}

// Target is where Reserve places and NewOwner moves an object: the node run
// whose capacity is used, the host run that will own the record, and the
// node's limits for the object's counters (from its descriptor, §4).
type Target struct {
	Node   Node
	Owner  Owner
	Limits Limits
}

func (t Target) validate() error {
	if err := t.Node.validate(); err != nil {
		return fmt.Errorf("target node: %w", err)
	}
	if err := t.Owner.validate(); err != nil {
		return fmt.Errorf("target owner: %w", err)
	}
	if err := t.Limits.validate(); err != nil {
		return fmt.Errorf("target limits: %w", err)
	}
	return nil
}

// PayloadUpdate replaces the record's framework-internal payload when Set;
// otherwise the payload is kept.
type PayloadUpdate struct {
	Set   bool
	Value []byte
}

// SetPayload is PayloadUpdate{Set: true, Value: b}.
func SetPayload(b []byte) PayloadUpdate { return PayloadUpdate{Set: true, Value: b} }

// CapacityChange reports what a plan does to one capacity counter.
type CapacityChange struct {
	ID     CounterID
	Before Usage
	After  Usage
}

// Plan is one planned Location Store batch and what it leaves behind.
type Plan struct {
	Op Op
	// Key is the authority key ("" for the capacity-only operations).
	Key     string
	Request locstore.WriteRequest
	// Record is the authority record after the batch (Reserve, Commit,
	// Preserve, NewOwner); nil when the batch deletes it (Abort, Delete) or
	// does not touch it (capacity-only operations). Value is its bytes.
	Record *record.Authority
	Value  []byte
	// AuthorityMutation is the index in Request.Mutations of the authority
	// Put or Delete (its new version is WriteResult.Versions at that index),
	// or -1.
	AuthorityMutation int
	// Capacity lists the counters the batch changes, in key order.
	Capacity []CapacityChange
	// Terminal is the creation final result recorded in the same batch
	// under TerminalKey, nil if none.
	Terminal    *TerminalRecord
	TerminalKey string
	// TerminalSkipped reports that a final result was asked for but its
	// retention (original deadline + 5 min) had already passed by the read's
	// StoreNow, so no reader could ever see it and none is written.
	TerminalSkipped bool
	// Reservation is the relocation capacity reservation the plan is about:
	// the one a keyed SecureCapacity writes (or found already written), the
	// one ReleaseCapacity or the relocation's NewOwner deletes, the one
	// RecordCaptured and RecordPrepared rely on. ReservationKey is its key.
	Reservation    *Reservation
	ReservationKey string
	// AlreadyApplied reports that the rows already show this operation's
	// effect, so there is no batch to send (Request is empty): a keyed
	// SecureCapacity whose reservation exists with the same content (§8.1
	// "returns the previously issued value"), a keyed ReleaseCapacity whose
	// reservation is gone (released, or consumed by the NewOwner), a
	// relocation NewOwner whose row already names the target as owner
	// committed by this relocation and target attempt (§10: "confirming
	// ownership by that specific target converges to success"), a
	// CompleteRelocation whose progress is already gone.
	AlreadyApplied bool

	from AuthorityRow
}

// Observed reports whether row (a later read of the authority key) shows
// this plan's effect. The Executor uses it after a lost write result (§10):
// the batch is atomic, so the authority row alone tells whether it applied.
//   - Reserve: the row holds this plan's ObjectGeneration and reservation.
//   - Commit: the row is Active with this plan's ObjectGeneration, owner and
//     AuthorityOwnerGeneration (only that reservation's Commit makes it so).
//   - Preserve: the row is byte for byte this plan's record.
//   - NewOwner: the row has this plan's ObjectGeneration,
//     AuthorityOwnerGeneration, owner and node; for a relocation, the row
//     names the target as owner with the progress committed by this
//     relocation and target attempt.
//   - RecordCaptured, RecordPrepared: the row holds this plan's
//     ObjectGeneration and exactly this plan's progress.
//   - CompleteRelocation: the row has this plan's ObjectGeneration, owner
//     and AuthorityOwnerGeneration, and no progress of this relocation.
//   - Abort, Delete: the row is missing or holds another ObjectGeneration.
//     (Another party's Abort or Delete of the same record has the same
//     effect; Executor additionally checks the final result when the plan
//     records one.)
//   - Capacity-only operations: never from the authority row; the keyed
//     forms are decided by the reservation row (ObservedIn).
func (p Plan) Observed(row AuthorityRow) bool {
	switch p.Op {
	case OpRecordCaptured, OpRecordPrepared:
		return row.Found && row.Record.ObjectGeneration == p.Record.ObjectGeneration && row.Record.Relocation.Equal(p.Record.Relocation)
	case OpCompleteRelocation:
		r := row.Record.Relocation
		return row.Found && row.Record.ObjectGeneration == p.Record.ObjectGeneration &&
			row.Record.AuthorityOwnerGeneration == p.Record.AuthorityOwnerGeneration && OwnerOf(row.Record) == OwnerOf(*p.Record) &&
			(r == nil || r.RelocationID != p.from.Record.Relocation.RelocationID)
	case OpNewOwner:
		if rel := p.Record.Relocation; rel != nil {
			r := row.Record.Relocation
			return row.Found && row.Record.ObjectGeneration == p.Record.ObjectGeneration && PartyOf(row.Record).Equal(PartyOf(*p.Record)) &&
				r != nil && r.Stage == record.RelocationCommitted && r.RelocationID == rel.RelocationID && r.TargetAttempt == rel.TargetAttempt
		}
		return row.Found && row.Record.ObjectGeneration == p.Record.ObjectGeneration &&
			row.Record.AuthorityOwnerGeneration == p.Record.AuthorityOwnerGeneration &&
			OwnerOf(row.Record) == OwnerOf(*p.Record) && NodeOf(row.Record).Equal(NodeOf(*p.Record))
	case OpReserve:
		pc := row.Record.PendingCreation
		return row.Found && row.Record.ObjectGeneration == p.Record.ObjectGeneration &&
			pc != nil && pc.ReservationID == p.Record.PendingCreation.ReservationID
	case OpReadopt:
		return row.Found && row.Record.ObjectGeneration == p.Record.ObjectGeneration &&
			row.Record.AuthorityOwnerGeneration == p.Record.AuthorityOwnerGeneration &&
			OwnerOf(row.Record) == OwnerOf(*p.Record)
	case OpCommit:
		return row.Found && row.Record.Allocation.State == record.AllocationActive &&
			row.Record.ObjectGeneration == p.Record.ObjectGeneration &&
			row.Record.AuthorityOwnerGeneration == p.Record.AuthorityOwnerGeneration &&
			OwnerOf(row.Record) == OwnerOf(*p.Record)
	case OpPreserve:
		if !row.Found {
			return false
		}
		v, err := row.Record.Encode()
		return err == nil && bytes.Equal(v, p.Value)
	case OpAbort, OpDelete, OpReclaim:
		return !row.Found || row.Record.ObjectGeneration != p.from.Record.ObjectGeneration
	}
	return false
}

// ObservedIn is Observed for a whole snapshot: the keyed capacity
// operations are decided by the reservation row (SecureCapacity: the row
// holds this plan's reservation; ReleaseCapacity: the row is gone), the
// others by the authority row. An unkeyed capacity-only plan is never
// observed: counters are shared, so no read can tell whether it applied.
func (p Plan) ObservedIn(s Snapshot) bool {
	switch p.Op {
	case OpSecureCapacity:
		return p.Reservation != nil && s.Reservation.Found && s.Reservation.Reservation.Equal(*p.Reservation)
	case OpReleaseCapacity:
		return p.ReservationKey != "" && s.Reservation.Key == p.ReservationKey && !s.Reservation.Found
	}
	return p.Observed(s.Authority)
}

// batch accumulates one plan's conditions and mutations in the documented
// order and refuses a key conditioned twice (a framework bug the store
// would refuse too, but later and less clearly).
type batch struct {
	op    Op
	conds []locstore.Condition
	muts  []locstore.Mutation
	// terminal is the final-result Put, appended last by finish.
	terminal *locstore.Mutation
}

// batchRows is the room a new batch makes for conditions and mutations: a
// batch touches a handful of rows (an object, its reservation, counters,
// leases), so the slices do not grow one row at a time.
const batchRows = 8

func newBatch(op Op) *batch {
	return &batch{op: op, conds: make([]locstore.Condition, 0, batchRows), muts: make([]locstore.Mutation, 0, batchRows)}
}

func (b *batch) cond(c locstore.Condition) error {
	// A linear search: a batch has a few conditions.
	if slices.ContainsFunc(b.conds, func(o locstore.Condition) bool { return o.Key == c.Key }) {
		return invalid(b.op, "key %s would be conditioned twice in one batch", c.Key)
	}
	b.conds = append(b.conds, c)
	return nil
}

func (b *batch) fences(fs []Fence) error {
	for i, f := range fs {
		if err := locstore.ValidateKey("write", "fence.key", f.Key); err != nil || f.Version == "" {
			return invalid(b.op, "fence %d: needs a valid key and a version", i)
		}
		if err := b.cond(locstore.IfVersion(f.Key, f.Version)); err != nil {
			return err
		}
	}
	return nil
}

func (b *batch) mut(m locstore.Mutation) int {
	b.muts = append(b.muts, m)
	return len(b.muts) - 1
}

func (b *batch) request() locstore.WriteRequest {
	return locstore.WriteRequest{Conditions: b.conds, Mutations: b.muts}
}

// capDelta is one contribution to a counter: slots added to (or, negative,
// taken from) reserved and active. limit is checked when the contribution
// comes from a target (an increase).
type capDelta struct {
	id               CounterID
	reserved, active int
	limit            int
	checkLimit       bool
	// guarded: the reserved slots this contribution takes (reserved < 0)
	// are held for it by another row the batch is conditioned on — a
	// Commit's own Reserved authority record, a relocation's reservation
	// row — so no other batch can take them meanwhile and the secured row,
	// which the move from reserved to active leaves as it is, need not be
	// conditioned (applyCapacity).
	guarded bool
}

// guardedBy marks contributions as guarded (see capDelta).
func guardedBy(ds []capDelta) []capDelta {
	for i := range ds {
		ds[i].guarded = true
	}
	return ds
}

// applyCapacity merges the contributions per counter, checks each result
// against the snapshot row, the limits and the slot range, and adds the
// conditions and mutations of the counters' stored rows in key order.
// Contributions that cancel out leave the counter untouched (no condition,
// no write).
//
// A counter is two stored rows (capacity.go): secured = reserved + active,
// and active. A row is conditioned and written only when its count
// changes, so a move from reserved to active (a Commit, a pre-secured
// NewOwner) writes the active row alone — except when the reserved slots
// it takes are not guarded by another row of the batch: then the secured
// row is conditioned too (unchanged, not written), so that no concurrent
// batch can release those slots between the read and the write.
func applyCapacity(b *batch, snap Snapshot, deltas []capDelta) ([]CapacityChange, error) {
	// A batch touches a handful of counters: merged in first-seen order by
	// a linear search (a map keyed by the counters' names cost two string
	// builds per contribution).
	merged := make([]capDelta, 0, 4)
	for _, d := range deltas {
		i := slices.IndexFunc(merged, func(m capDelta) bool { return m.id.equal(d.id) })
		if i < 0 {
			merged = append(merged, capDelta{id: d.id, guarded: true})
			i = len(merged) - 1
		}
		m := &merged[i]
		m.reserved += d.reserved
		m.active += d.active
		if d.checkLimit {
			m.checkLimit, m.limit = true, d.limit
		}
		if d.reserved < 0 && !d.guarded {
			m.guarded = false
		}
	}
	type rowOp struct {
		key  string
		cond locstore.Condition
		mut  *locstore.Mutation
	}
	var ops []rowOp
	var changes []CapacityChange
	for i := range merged {
		m := &merged[i]
		if m.reserved == 0 && m.active == 0 {
			continue
		}
		row, ok := snap.capacity(m.id)
		if !ok {
			return nil, invalid(b.op, "snapshot lacks capacity counter %s", m.id)
		}
		before := row.Usage
		after := Usage{Reserved: before.Reserved + m.reserved, Active: before.Active + m.active}
		if after.Reserved < 0 || after.Active < 0 {
			id := m.id
			return nil, &Error{Op: b.op, Kind: ErrCorruptRecord, Counter: &id,
				Reason: fmt.Sprintf("counter %s holds reserved=%d active=%d, fewer than the record's slots being released (reserved %+d, active %+d)",
					m.id, before.Reserved, before.Active, m.reserved, m.active)}
		}
		grows := after.Total() > before.Total()
		overRange := after.Reserved > record.MaxSlots || after.Active > record.MaxSlots || after.Total() > record.MaxSlots
		overLimit := grows && m.checkLimit && m.limit > 0 && after.Total() > m.limit
		if overRange || overLimit {
			id := m.id
			return nil, &Error{Op: b.op, Kind: ErrCapacityExhausted, Counter: &id,
				Reason: fmt.Sprintf("counter %s: reserved=%d active=%d, limit %s, needs %d more",
					m.id, before.Reserved, before.Active, limitText(m.limit, m.checkLimit), after.Total()-before.Total())}
		}
		securedKey, activeKey, err := CounterKeys(m.id)
		if err != nil {
			return nil, invalidCause(b.op, err, "capacity counter %s", m.id)
		}
		for _, r := range []struct {
			key           string
			m             Measure
			stored        StoredCount
			before, after int
			condOnly      bool
		}{
			{securedKey, MeasureSecured, row.Secured, before.Total(), after.Total(), m.reserved < 0 && !m.guarded},
			{activeKey, MeasureActive, row.Active, before.Active, after.Active, false},
		} {
			if r.before == r.after && !r.condOnly {
				continue
			}
			op := rowOp{key: r.key, cond: locstore.IfMissing(r.key)}
			if r.stored.Found {
				op.cond = locstore.IfVersion(r.key, r.stored.Version)
			}
			switch {
			case r.before == r.after:
			case r.after == 0:
				mut := locstore.Delete(r.key) // a missing row reads as zero
				op.mut = &mut
			default:
				v, err := EncodeCapacity(m.id, r.m, r.after)
				if err != nil {
					return nil, invalidCause(b.op, err, "capacity counter %s", m.id)
				}
				mut := locstore.Put(r.key, v)
				op.mut = &mut
			}
			ops = append(ops, op)
		}
		changes = append(changes, CapacityChange{ID: m.id, Before: before, After: after})
	}
	slices.SortFunc(ops, func(x, y rowOp) int { return strings.Compare(x.key, y.key) })
	for _, op := range ops {
		if err := b.cond(op.cond); err != nil {
			return nil, err
		}
		if op.mut != nil {
			b.mut(*op.mut)
		}
	}
	return changes, nil
}

func limitText(limit int, checked bool) string {
	if !checked || limit == 0 {
		return "unlimited (slot range 2^31-1)"
	}
	return fmt.Sprint(limit)
}

// bundleDeltas turns a bundle on node n into counter contributions: each
// slot count times reserved (+1, -1 or 0) and active. limits, when given,
// are checked on the increases (the target's).
func bundleDeltas(n Node, bun Bundle, reserved, active int, limits *Limits) []capDelta {
	var out []capDelta
	for _, s := range slotsOf(n, bun) {
		d := capDelta{id: s.id, reserved: reserved * s.slots, active: active * s.slots}
		if limits != nil {
			d.checkLimit, d.limit = true, limits.of(s.id.Class)
		}
		out = append(out, d)
	}
	return out
}

// verifyLease checks that row is owner's lease, present (unexpired) and of
// owner's generation, and returns the IfVersion condition that keeps it so
// until the batch commits (§6.1: a stale lease is Conflict).
func verifyLease(op Op, row LeaseRow, owner Owner, role string) (locstore.Condition, error) {
	key, err := record.OwnerLeaseKey(owner.ID)
	if err != nil {
		return locstore.Condition{}, invalidCause(op, err, "%s owner id", role)
	}
	if row.Key != key {
		return locstore.Condition{}, invalid(op, "snapshot's %s lease row is key %q, need %q (the lease of %s)", role, row.Key, key, owner.ID)
	}
	if !row.Found {
		return locstore.Condition{}, newErr(op, ErrConflict, "%s owner lease of %s is missing or expired", role, owner.ID)
	}
	if row.Lease.OwnerID != owner.ID {
		return locstore.Condition{}, newErr(op, ErrCorruptRecord, "owner-lease row %s holds owner %q", key, row.Lease.OwnerID)
	}
	if uint64(row.Lease.LeaseGeneration) != owner.LeaseGeneration {
		return locstore.Condition{}, newErr(op, ErrConflict, "%s owner %s holds lease generation %d, not %d (stale host run)",
			role, owner.ID, row.Lease.LeaseGeneration, owner.LeaseGeneration)
	}
	return locstore.IfVersion(key, row.Version), nil
}

// addTerminal builds the final result for an authority record and adds its
// IfMissing condition and PutExpiring mutation, unless its retention has
// already passed.
func addTerminal(b *batch, p *Plan, t *TerminalResult, a record.Authority, id string, storeNow time.Time) error {
	if t == nil {
		return nil
	}
	if err := t.Operation.validate(); err != nil {
		return invalidCause(b.op, err, "terminal result operation")
	}
	if storeNow.IsZero() || t.Deadline.IsZero() {
		return invalid(b.op, "a terminal result needs the snapshot's StoreNow and the request's deadline")
	}
	key, err := TerminalKey(t.Operation)
	if err != nil {
		return invalidCause(b.op, err, "terminal result key")
	}
	rec := TerminalRecord{
		Operation:     t.Operation,
		RequestSHA256: t.RequestSHA256,
		ID:            id,
		ObjectKind:    a.Allocation.ObjectKind,
		StableType:    a.Allocation.StableType,
		Outcome:       t.Outcome,
		Failure:       t.Failure,
		Reply:         t.Reply,
		Deadline:      record.EpochMillisOf(t.Deadline),
		RecordedAt:    record.EpochMillisOf(storeNow),
	}
	switch t.Outcome {
	case OutcomeCreated:
		if t.Reason != "" {
			return invalid(b.op, "a created result carries no rejection reason")
		}
		rec.Ref = &CreatedRef{
			ObjectGeneration:         uint64(a.ObjectGeneration),
			AuthorityOwnerGeneration: uint64(a.AuthorityOwnerGeneration),
			MeshName:                 a.Allocation.Descriptor.MeshName,
			RoutingID:                a.Allocation.Descriptor.RoutingID,
		}
	case OutcomeRejected:
		r := t.Reason
		rec.Reason = &r
	case OutcomeFailed:
		if t.Reason != "" {
			return invalid(b.op, "a failed result carries its cause in Failure, not Reason")
		}
	}
	v, err := rec.Encode()
	if err != nil {
		return invalidCause(b.op, err, "terminal result")
	}
	retention := terminalRetention(t.Deadline, storeNow)
	if retention <= 0 {
		p.TerminalSkipped = true
		return nil
	}
	if retention > locstore.MaxRetention {
		return invalid(b.op, "terminal result deadline %v is beyond the store's retention bound", t.Deadline)
	}
	if err := b.cond(locstore.IfMissing(key)); err != nil {
		return err
	}
	m := locstore.PutExpiring(key, v, retention)
	b.terminal = &m
	p.Terminal, p.TerminalKey = &rec, key
	return nil
}

// finish appends the deferred terminal mutation (always last), puts the
// batch in p and validates the whole request against the SPI bounds, so that
// a plan the store would refuse is refused here, before any write. It is
// every planner's last step: the finished plan, or Plan{} and the error.
func (b *batch) finish(p Plan) (Plan, error) {
	if b.terminal != nil {
		b.mut(*b.terminal)
	}
	p.Request = b.request()
	if err := p.Request.Validate(); err != nil {
		return Plan{}, invalidCause(b.op, err, "planned batch")
	}
	return p, nil
}

func cloneAuthority(a record.Authority) record.Authority {
	c := a
	c.Payload = slices.Clone(a.Payload)
	c.Allocation.Descriptor.RoutingID = slices.Clone(a.Allocation.Descriptor.RoutingID)
	if st := a.Allocation.Capacity.SpotType; st != nil {
		s := *st
		c.Allocation.Capacity.SpotType = &s
	}
	if pc := a.PendingCreation; pc != nil {
		p := *pc
		c.PendingCreation = &p
	}
	c.Relocation = a.Relocation.Clone()
	return c
}
