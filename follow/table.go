package follow

import (
	"container/list"
	"fmt"
	"sync"
	"time"
)

// Move is the source→target information a previous owner records when a move
// of one of its objects completes (spec §7.3). The source is the recording
// node itself.
type Move struct {
	Key              Key
	ObjectGeneration uint64 // unchanged by the move
	// PreviousAuthorityOwnerGeneration is the owner generation under which
	// this node owned the object until the move.
	PreviousAuthorityOwnerGeneration uint64
	// AuthorityOwnerGeneration is the new owner's generation; it must be
	// greater than PreviousAuthorityOwnerGeneration.
	AuthorityOwnerGeneration uint64
	// Owner is the new owner's lease, the ExpectedOwnerLeaseGeneration of
	// the forwarded message's route fence.
	Owner Owner
	// Route reaches the new owner's node run.
	Route Route
}

func (m Move) validate() error {
	if err := m.Key.validate(); err != nil {
		return err
	}
	if err := validGeneration("ObjectGeneration", m.ObjectGeneration); err != nil {
		return err
	}
	if err := validGeneration("previous AuthorityOwnerGeneration", m.PreviousAuthorityOwnerGeneration); err != nil {
		return err
	}
	if err := validGeneration("AuthorityOwnerGeneration", m.AuthorityOwnerGeneration); err != nil {
		return err
	}
	if m.AuthorityOwnerGeneration <= m.PreviousAuthorityOwnerGeneration {
		return fmt.Errorf("%w: %s moved to owner generation %d, not greater than the previous %d",
			ErrInvalidOperation, m.Key, m.AuthorityOwnerGeneration, m.PreviousAuthorityOwnerGeneration)
	}
	if err := m.Owner.validate(); err != nil {
		return err
	}
	return m.Route.validate()
}

func (m Move) equal(o Move) bool {
	return m.Key == o.Key && m.ObjectGeneration == o.ObjectGeneration &&
		m.PreviousAuthorityOwnerGeneration == o.PreviousAuthorityOwnerGeneration &&
		m.AuthorityOwnerGeneration == o.AuthorityOwnerGeneration && m.Owner == o.Owner &&
		string(m.Route.NodeRID) == string(o.Route.NodeRID) &&
		m.Route.NodeGeneration == o.Route.NodeGeneration && m.Route.Endpoint == o.Route.Endpoint
}

// Inbound describes a message that arrived for an object this node no longer
// owns.
type Inbound struct {
	Key Key
	// ObjectGeneration is the generation of the ActorRef/SpotRef the
	// message targets.
	ObjectGeneration uint64
	// AuthorityOwnerGeneration is the ExpectedAuthorityOwnerGeneration of
	// the message's route fence: the owner generation it was addressed to.
	AuthorityOwnerGeneration uint64
	// Hop is the message's MessageFollowHopCount as received, 0..MaxHops.
	Hop int
}

// Forwarding is Forward's answer: send the message, otherwise unchanged, to
// Target with hop count Hop and a route fence built from Target
// (TargetNodeRID, TargetNodeGeneration, ExpectedAuthorityOwnerGeneration =
// Target.AuthorityOwnerGeneration, ExpectedOwnerLeaseGeneration =
// Target.Owner.LeaseGeneration).
type Forwarding struct {
	Target Move // Target.Route.NodeRID is shared with the table: read-only
	Hop    int  // 1..MaxHops
}

// Table is the Message Follow table of one node. It is safe for concurrent
// use; the zero value is not usable, call NewTable.
//
// Entries are per object, not per message: any number of messages can be
// forwarded through one recorded move (spec §7.3 sets no cap on the amount
// retained per move), and the table grows only with the number of objects
// that moved away within the last MessageFollowDuration. Expired entries are
// reclaimed in order of expiry by every Record, Forward and Len, so no
// background sweep is needed.
type Table struct {
	clock    Clock
	duration time.Duration

	mu sync.Mutex
	// m holds, per object, one entry per departure from this node within
	// the period, oldest (lowest new owner generation) first: an object
	// that left, came back and left again is followed along the departure
	// of the stay a message was addressed to, so that every message with
	// one fence takes the same links.
	m map[Key][]*list.Element // of *tableEntry
	// byExpiry orders entries by expiresAt: the duration is fixed and the
	// clock monotonic, so recording order is expiry order.
	byExpiry list.List
}

type tableEntry struct {
	move      Move
	expiresAt time.Duration
}

// dropLocked removes el from byExpiry and from its object's departures.
func (t *Table) dropLocked(el *list.Element) {
	e := el.Value.(*tableEntry)
	t.byExpiry.Remove(el)
	deps := t.m[e.move.Key]
	for i, d := range deps {
		if d == el {
			deps = append(deps[:i:i], deps[i+1:]...)
			break
		}
	}
	if len(deps) == 0 {
		delete(t.m, e.move.Key)
	} else {
		t.m[e.move.Key] = deps
	}
}

// NewTable returns an empty Message Follow table whose entries are followed
// for duration (MessageFollowDuration) after their move is recorded.
// duration 0 disables Message Follow: Record stores nothing and Forward is
// always ErrNotFound. Negative is invalid. Package config validates it
// against RouteCacheMaxAge; the default (30 s) lives there too.
func NewTable(clock Clock, duration time.Duration) (*Table, error) {
	if clock == nil {
		return nil, fmt.Errorf("%w: nil Clock", ErrInvalidArgument)
	}
	if duration < 0 {
		return nil, fmt.Errorf("%w: negative message follow duration %v", ErrInvalidArgument, duration)
	}
	return &Table{clock: clock, duration: duration, m: make(map[Key][]*list.Element)}, nil
}

// Enabled reports whether Message Follow is on (duration > 0).
func (t *Table) Enabled() bool { return t.duration > 0 }

// Record keeps m for MessageFollowDuration from now and reports whether it
// did (false, nil when Message Follow is disabled). A move of the same object
// replaces the one kept if it is later — a higher ObjectGeneration, or the
// same one with a higher new owner generation — and restarts the period,
// because it is a new move. Recording the identical move again changes
// nothing. A move that is not later than the one kept, but differs from it,
// is ErrInvalidOperation: moves of one object complete in generation order,
// so it can only be a stale or conflicting report. Malformed m is
// ErrInvalidArgument; a new owner generation not greater than the previous
// is ErrInvalidOperation.
func (t *Table) Record(m Move) (bool, error) {
	if err := m.validate(); err != nil {
		return false, err
	}
	if !t.Enabled() {
		return false, nil
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.purgeLocked(now)
	if deps := t.m[m.Key]; len(deps) > 0 {
		old := deps[len(deps)-1].Value.(*tableEntry).move
		if old.equal(m) {
			return true, nil
		}
		if !newer(m.ObjectGeneration, m.AuthorityOwnerGeneration, old.ObjectGeneration, old.AuthorityOwnerGeneration) {
			return false, fmt.Errorf("%w: %s move to owner generation %d (object generation %d) is not later than the kept move to %d (object generation %d)",
				ErrInvalidOperation, m.Key, m.AuthorityOwnerGeneration, m.ObjectGeneration, old.AuthorityOwnerGeneration, old.ObjectGeneration)
		}
		if m.ObjectGeneration != old.ObjectGeneration {
			// Another object of the same id: its moves are not followed.
			for _, el := range deps {
				t.byExpiry.Remove(el)
			}
			delete(t.m, m.Key)
		}
	}
	m.Route = m.Route.clone()
	t.m[m.Key] = append(t.m[m.Key], t.byExpiry.PushBack(&tableEntry{move: m, expiresAt: addSat(now, t.duration)}))
	return true, nil
}

// Revert forgets the one departure m (a move taken back: the object is
// hosted here again at m's previous owner generation) and keeps the
// earlier departures of the object; it reports whether m was kept.
func (t *Table) Revert(m Move) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, el := range t.m[m.Key] {
		if el.Value.(*tableEntry).move.equal(m) {
			t.dropLocked(el)
			return true
		}
	}
	return false
}

// Remove forgets key's move and reports whether one was kept. The caller
// removes it when this node becomes the object's owner again or the object
// is destroyed, so that the node never forwards messages for an object it
// hosts.
func (t *Table) Remove(key Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	deps := t.m[key]
	for _, el := range deps {
		t.byExpiry.Remove(el)
	}
	delete(t.m, key)
	return len(deps) > 0
}

// Forward decides what to do with a message that arrived for an object that
// moved away from this node. The checks, in order:
//
//   - malformed in (bad key, generation out of range, negative hop) is
//     ErrInvalidArgument;
//   - no move kept for the key, the move expired (at recorded +
//     MessageFollowDuration and later) or Message Follow disabled:
//     ErrNotFound;
//   - in.ObjectGeneration differs from the moved object's generation:
//     ErrGenerationMismatch (ErrInvalidOperation);
//   - forwarding would be hop in.Hop+1 > MaxHops: ErrHopLimit
//     (ErrUnavailable);
//   - the message was addressed to an owner generation not lower than the
//     new owner's: ErrCycle (ErrUnavailable).
//
// Why the last rule detects cycles: the forwarded message carries the new
// owner's AuthorityOwnerGeneration in its route fence, and every node
// forwards only to a strictly higher generation than the one the message
// carries. The generation carried therefore strictly increases along any
// follow path, so no path can come back to a (node, generation) it has
// passed; a loop formed by stale follow records (A says B, B says A) is cut
// at the first hop that would not increase it. The wire carries no visited
// set, only the hop count and the fence, which is why a visited set is not
// used. The hop limit bounds the legitimate chains of consecutive moves.
func (t *Table) Forward(in Inbound) (Forwarding, error) {
	if err := in.Key.validate(); err != nil {
		return Forwarding{}, err
	}
	if err := validGeneration("ObjectGeneration", in.ObjectGeneration); err != nil {
		return Forwarding{}, err
	}
	if err := validGeneration("AuthorityOwnerGeneration", in.AuthorityOwnerGeneration); err != nil {
		return Forwarding{}, err
	}
	if in.Hop < 0 {
		return Forwarding{}, fmt.Errorf("%w: negative hop count %d", ErrInvalidArgument, in.Hop)
	}
	if !t.Enabled() {
		return Forwarding{}, fmt.Errorf("%w: %s: Message Follow is disabled", ErrNotFound, in.Key)
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.purgeLocked(now)
	for _, el := range t.m[in.Key] {
		if now >= el.Value.(*tableEntry).expiresAt {
			t.dropLocked(el)
		}
	}
	deps := t.m[in.Key]
	if len(deps) == 0 {
		return Forwarding{}, fmt.Errorf("%w: %s", ErrNotFound, in.Key)
	}
	// The departure of the stay the message was addressed to: the first
	// whose new owner generation is above its fence (else the latest, and
	// the cycle rule below refuses it).
	mv := deps[len(deps)-1].Value.(*tableEntry).move
	for _, el := range deps {
		if d := el.Value.(*tableEntry).move; in.AuthorityOwnerGeneration < d.AuthorityOwnerGeneration {
			mv = d
			break
		}
	}
	switch {
	case in.ObjectGeneration != mv.ObjectGeneration:
		return Forwarding{}, fmt.Errorf("%w: %s message for object generation %d, moved generation is %d",
			ErrGenerationMismatch, in.Key, in.ObjectGeneration, mv.ObjectGeneration)
	case in.Hop >= MaxHops:
		return Forwarding{}, fmt.Errorf("%w: %s message already followed %d hops, at most %d",
			ErrHopLimit, in.Key, in.Hop, MaxHops)
	case in.AuthorityOwnerGeneration >= mv.AuthorityOwnerGeneration:
		return Forwarding{}, fmt.Errorf("%w: %s message addressed to owner generation %d, follow route leads to %d",
			ErrCycle, in.Key, in.AuthorityOwnerGeneration, mv.AuthorityOwnerGeneration)
	}
	return Forwarding{Target: mv, Hop: in.Hop + 1}, nil
}

// Latest returns the latest move of key kept (not expired), if any.
func (t *Table) Latest(key Key) (Move, bool) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.purgeLocked(now)
	for i := len(t.m[key]) - 1; i >= 0; i-- {
		if e := t.m[key][i].Value.(*tableEntry); now < e.expiresAt {
			return e.move, true
		}
	}
	return Move{}, false
}

// Len returns the number of moves kept (expired ones are reclaimed first).
func (t *Table) Len() int {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.purgeLocked(now)
	return t.byExpiry.Len()
}

// purgeLocked drops expired entries from the front of byExpiry. Were the
// clock ever to run backwards, the order could break and the walk stop early;
// that only delays reclamation, because Forward also checks the expiry of the
// entry it uses.
func (t *Table) purgeLocked(now time.Duration) {
	for el := t.byExpiry.Front(); el != nil; el = t.byExpiry.Front() {
		e := el.Value.(*tableEntry)
		if now < e.expiresAt {
			return
		}
		t.dropLocked(el)
	}
}
