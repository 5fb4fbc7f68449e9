package chunk

import (
	"errors"
	"fmt"
	"sync"
)

// BeginStatus says how a Restore request was taken.
type BeginStatus uint8

// Begin statuses.
const (
	// Started: a new assembly was opened for the binding.
	Started BeginStatus = iota + 1
	// Reused: the binding's open assembly was kept, because the
	// retransmitted Restore declares the same length, count and checksum
	// as the first one (§9.1). Chunks already received stay.
	Reused
	// AlreadyCompleted: the binding's payload was already verified and
	// handed out, and the retransmitted Restore declares the same values.
	// Nothing is reassembled; the coordinator answers as it did before.
	AlreadyCompleted
)

func (s BeginStatus) String() string {
	switch s {
	case Started:
		return "started"
	case Reused:
		return "reused"
	case AlreadyCompleted:
		return "alreadyCompleted"
	}
	return fmt.Sprintf("BeginStatus(%d)", uint8(s))
}

// Begun is the result of a successful Begin.
type Begun struct {
	Status   BeginStatus
	Progress Progress
	// Superseded is set when this Begin replaced an open assembly of an
	// earlier target attempt of the same RelocationId from the same
	// source (§8.2: re-preparing on the same target replaces the attempt).
	// That assembly was dropped; the coordinator discards the attempt's
	// temporary queue too.
	Superseded *Binding
}

// Stats are a registry's counters since it was created (Open,
// InFlightBytes and Remembered are current values).
type Stats struct {
	Open          int    // open assemblies
	InFlightBytes uint64 // sum of their declared lengths
	Remembered    int    // ended bindings remembered

	Started, Reused, Completed, Aborted, Superseded uint64
	// Rejected counts Begins refused without creating state (invalid
	// binding or declaration, too large, capacity).
	Rejected uint64
	// Failed counts terminal failures by kind.
	FailedChecksum, FailedLength, FailedOutOfOrder, FailedConflict uint64
	// Discarded counts discarded chunks by reason, indexed by DiscardReason.
	Discarded [discardReasons]uint64
}

// DiscardedBy returns the count of chunks discarded for reason.
func (s Stats) DiscardedBy(reason DiscardReason) uint64 {
	if int(reason) < len(s.Discarded) {
		return s.Discarded[reason]
	}
	return 0
}

// ended is what the registry remembers about a binding that is over.
type ended struct {
	state assemblyState // completed, failed or aborted
	// superseded marks an aborted binding replaced by a newer attempt.
	superseded bool
	decl       Declaration
	err        error // the terminal failure, for failed bindings
}

// entry is an open assembly. Its own mutex lets chunks of different
// bindings be copied and checksummed in parallel; the registry mutex only
// guards the maps. Lock order: Registry.mu before entry.mu.
type entry struct {
	b  Binding
	mu sync.Mutex
	a  *Assembly
}

// Registry holds the target's assemblies keyed by binding and applies
// §9.1's rules:
//
//   - A chunk is linked only to the assembly whose binding equals its own
//     exactly; anything else is discarded with a typed reason.
//   - A retransmitted Restore with the same binding reuses the open
//     assembly only when it declares the same length, count and checksum;
//     otherwise it is ErrConflict, and the open assembly is neither reused
//     nor overwritten: it ends failed (conflict), its bytes are dropped.
//   - A Restore with a new target attempt for a RelocationId whose earlier
//     attempt (same source) is open supersedes it: the earlier assembly is
//     dropped and never used by the new attempt; its late chunks and
//     Restores are discarded / refused. A different source fence for an
//     open RelocationId is ErrConflict and leaves the open attempt alone.
//   - A terminal failure (checksum, length, gap, conflict) ends the
//     binding for good; Begin on it returns the same failure.
//   - Abort drops the binding's assembly (§9.4 step 4).
//   - Ended bindings are remembered (at most Limits.Remember, oldest
//     forgotten first), so late chunks and Restores do not recreate state.
//
// Memory is bounded by MaxInFlight (sum of declared lengths of open
// assemblies) and MaxOpen, checked before anything is allocated.
// A Registry is safe for concurrent use.
type Registry struct {
	lim Limits

	mu       sync.Mutex
	open     map[Binding]*entry
	current  map[RelocationID]*entry // the open attempt of each relocation
	inFlight uint64
	ended    map[Binding]ended
	order    []Binding // ring of remembered bindings, oldest at head
	head     int
	stats    Stats
}

// NewRegistry returns an empty registry with the given limits (zero fields
// take defaults).
func NewRegistry(lim Limits) (*Registry, error) {
	lim, err := lim.Normalize()
	if err != nil {
		return nil, err
	}
	return &Registry{lim: lim, open: map[Binding]*entry{}, current: map[RelocationID]*entry{},
		ended: map[Binding]ended{}}, nil
}

// Limits returns the normalized limits in force.
func (r *Registry) Limits() Limits { return r.lim }

// Begin takes a Restore request (record 40): it opens an assembly for the
// binding, reuses the open one, or refuses. Errors: ErrInvalid (binding),
// ErrTooLarge / ErrLength (declaration), ErrCapacity, ErrConflict, or the
// binding's earlier end (ErrChecksum, ErrLength, ErrOutOfOrder,
// ErrConflict, ErrAborted, ErrSuperseded). Invalid, too large and capacity
// refusals create and remember nothing.
func (r *Registry) Begin(b Binding, d Declaration) (Begun, error) {
	if err := b.Validate(); err != nil {
		r.count(func(s *Stats) { s.Rejected++ })
		return Begun{}, err
	}
	if err := d.Validate(r.lim); err != nil {
		r.count(func(s *Stats) { s.Rejected++ })
		return Begun{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()

	if e, ok := r.ended[b]; ok {
		switch {
		case e.state == stateCompleted && e.decl == d:
			r.stats.Reused++
			return Begun{Status: AlreadyCompleted, Progress: Progress{Received: d.Count, Count: d.Count}}, nil
		case e.state == stateCompleted:
			r.stats.FailedConflict++
			return Begun{}, fmt.Errorf("%w: binding %v completed with %+v, now declared %+v", ErrConflict, b, e.decl, d)
		case e.superseded:
			return Begun{}, fmt.Errorf("%w: binding %v", ErrSuperseded, b)
		case e.state == stateAborted:
			return Begun{}, fmt.Errorf("%w: binding %v", ErrAborted, b)
		default:
			return Begun{}, fmt.Errorf("binding %v already failed: %w", b, e.err)
		}
	}

	if e, ok := r.open[b]; ok {
		e.mu.Lock()
		first := e.a.Declaration()
		if first == d {
			p := e.a.Progress()
			e.mu.Unlock()
			r.stats.Reused++
			return Begun{Status: Reused, Progress: p}, nil
		}
		err := fmt.Errorf("%w: binding %v first declared %+v, now %+v", ErrConflict, b, first, d)
		e.a.fail(err)
		e.mu.Unlock()
		r.endLocked(e, ended{state: stateFailed, decl: first, err: err})
		r.stats.FailedConflict++
		return Begun{}, err
	}

	var superseded *Binding
	if prev, ok := r.current[b.Relocation]; ok {
		if prev.b.Source != b.Source {
			r.stats.FailedConflict++
			return Begun{}, fmt.Errorf("%w: relocation %v is open for source %s/%d, not %s/%d", ErrConflict,
				b.Relocation, prev.b.Source.OwnerID, prev.b.Source.LeaseGeneration, b.Source.OwnerID, b.Source.LeaseGeneration)
		}
		prev.mu.Lock()
		decl := prev.a.Declaration()
		prev.a.Abort()
		prev.mu.Unlock()
		r.endLocked(prev, ended{state: stateAborted, superseded: true, decl: decl})
		r.stats.Superseded++
		pb := prev.b
		superseded = &pb
	}

	if len(r.open) >= r.lim.MaxOpen {
		r.stats.Rejected++
		return Begun{Superseded: superseded}, fmt.Errorf("%w: %d assemblies open (MaxOpen %d)", ErrCapacity, len(r.open), r.lim.MaxOpen)
	}
	if r.inFlight+d.Length > r.lim.MaxInFlight {
		r.stats.Rejected++
		return Begun{Superseded: superseded}, fmt.Errorf("%w: %d bytes in flight + %d declared above MaxInFlight %d", ErrCapacity, r.inFlight, d.Length, r.lim.MaxInFlight)
	}
	a, err := NewAssembly(d, r.lim)
	if err != nil { // unreachable: d was validated above
		return Begun{Superseded: superseded}, err
	}
	e := &entry{b: b, a: a}
	r.open[b] = e
	r.current[b.Relocation] = e
	r.inFlight += d.Length
	r.stats.Started++
	return Begun{Status: Started, Progress: a.Progress(), Superseded: superseded}, nil
}

// Add links one chunk (record 52) to the assembly of exactly its binding.
// Results are as for Assembly.Add; in addition a chunk whose binding has no
// open assembly is discarded with the reason the registry knows
// (DiscardUnknown, DiscardMismatch, DiscardCompleted, DiscardFailed,
// DiscardAborted, DiscardSuperseded). A terminal failure ends the binding.
// data is copied.
func (r *Registry) Add(b Binding, index uint32, data []byte) (Progress, error) {
	r.mu.Lock()
	e, ok := r.open[b]
	if !ok {
		reason := r.unknownReasonLocked(b)
		r.stats.Discarded[reason]++
		r.mu.Unlock()
		return Progress{}, &DiscardError{Reason: reason, Index: index}
	}
	r.mu.Unlock()

	// The copy and checksum run under the entry's lock only.
	e.mu.Lock()
	p, err := e.a.Add(index, data)
	failed := e.a.state == stateFailed
	decl := e.a.Declaration()
	e.mu.Unlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	if reason := DiscardReasonOf(err); reason != 0 {
		if reason != DiscardDuplicate && r.open[b] != e {
			// The binding ended (aborted, superseded, failed) between the
			// lookup and the add: report what the registry now knows.
			reason = r.unknownReasonLocked(b)
			err = &DiscardError{Reason: reason, Index: index}
		}
		r.stats.Discarded[reason]++
		return p, err
	}
	if failed && r.open[b] == e {
		r.endLocked(e, ended{state: stateFailed, decl: decl, err: err})
		r.countFailureLocked(err)
	}
	return p, err
}

// unknownReasonLocked classifies a chunk with no open assembly.
func (r *Registry) unknownReasonLocked(b Binding) DiscardReason {
	if e, ok := r.ended[b]; ok {
		switch {
		case e.state == stateCompleted:
			return DiscardCompleted
		case e.superseded:
			return DiscardSuperseded
		case e.state == stateAborted:
			return DiscardAborted
		default:
			return DiscardFailed
		}
	}
	if _, ok := r.current[b.Relocation]; ok {
		return DiscardMismatch
	}
	return DiscardUnknown
}

// Complete hands out the binding's verified payload (Assembly.Complete).
// On success or terminal failure the binding ends and is remembered;
// ErrIncomplete leaves it open. For a binding with no open assembly it
// returns ErrCompleted, the earlier failure, ErrAborted, ErrSuperseded or
// ErrUnknownBinding.
func (r *Registry) Complete(b Binding) ([]byte, error) {
	r.mu.Lock()
	e, ok := r.open[b]
	if !ok {
		defer r.mu.Unlock()
		if x, ok := r.ended[b]; ok {
			switch {
			case x.state == stateCompleted:
				return nil, fmt.Errorf("%w: binding %v", ErrCompleted, b)
			case x.superseded:
				return nil, fmt.Errorf("%w: binding %v", ErrSuperseded, b)
			case x.state == stateAborted:
				return nil, fmt.Errorf("%w: binding %v", ErrAborted, b)
			default:
				return nil, fmt.Errorf("binding %v already failed: %w", b, x.err)
			}
		}
		return nil, fmt.Errorf("%w: %v", ErrUnknownBinding, b)
	}
	r.mu.Unlock()

	e.mu.Lock()
	out, err := e.a.Complete()
	state := e.a.state
	decl := e.a.Declaration()
	e.mu.Unlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.open[b] != e {
		// Aborted or superseded while verifying: the payload is not handed
		// out, so a cancelled move never restores.
		if err == nil {
			return nil, fmt.Errorf("%w: binding %v ended while completing", ErrAborted, b)
		}
		return nil, err
	}
	switch state {
	case stateCompleted:
		r.endLocked(e, ended{state: stateCompleted, decl: decl})
		r.stats.Completed++
	case stateFailed:
		r.endLocked(e, ended{state: stateFailed, decl: decl, err: err})
		r.countFailureLocked(err)
	}
	return out, err
}

// Abort ends the binding (record 55, a deadline, or a failure elsewhere:
// §9.4 step 4): its open assembly and bytes are dropped, and late chunks
// and Restores for it are discarded / refused. It reports whether an open
// assembly was dropped. A binding never seen is remembered as aborted, so
// that a Restore arriving after its cancellation does not start; a
// completed binding becomes aborted; a failed one stays failed.
func (r *Registry) Abort(b Binding) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.open[b]; ok {
		e.mu.Lock()
		decl := e.a.Declaration()
		e.a.Abort()
		e.mu.Unlock()
		r.endLocked(e, ended{state: stateAborted, decl: decl})
		r.stats.Aborted++
		return true
	}
	if x, ok := r.ended[b]; ok {
		if x.state == stateCompleted {
			x.state = stateAborted
			r.ended[b] = x
			r.stats.Aborted++
		}
		return false
	}
	if b.Validate() == nil {
		r.rememberLocked(b, ended{state: stateAborted})
		r.stats.Aborted++
	}
	return false
}

// Progress reports the open assembly of b.
func (r *Registry) Progress(b Binding) (Progress, bool) {
	r.mu.Lock()
	e, ok := r.open[b]
	r.mu.Unlock()
	if !ok {
		return Progress{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.a.Progress(), true
}

// Stats returns a snapshot of the counters.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Open = len(r.open)
	s.InFlightBytes = r.inFlight
	s.Remembered = len(r.ended)
	return s
}

func (r *Registry) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

func (r *Registry) countFailureLocked(err error) {
	switch {
	case errors.Is(err, ErrChecksum):
		r.stats.FailedChecksum++
	case errors.Is(err, ErrOutOfOrder):
		r.stats.FailedOutOfOrder++
	case errors.Is(err, ErrConflict):
		r.stats.FailedConflict++
	case errors.Is(err, ErrLength):
		r.stats.FailedLength++
	}
}

// endLocked removes an open entry and remembers how it ended.
func (r *Registry) endLocked(e *entry, x ended) {
	if r.open[e.b] != e {
		return
	}
	delete(r.open, e.b)
	if r.current[e.b.Relocation] == e {
		delete(r.current, e.b.Relocation)
	}
	r.inFlight -= e.a.Declaration().Length
	r.rememberLocked(e.b, x)
}

// rememberLocked records an ended binding, forgetting the oldest one when
// Limits.Remember are already remembered.
func (r *Registry) rememberLocked(b Binding, x ended) {
	if _, ok := r.ended[b]; ok {
		r.ended[b] = x
		return
	}
	if len(r.order) < r.lim.Remember {
		r.order = append(r.order, b)
	} else {
		delete(r.ended, r.order[r.head])
		r.order[r.head] = b
		r.head = (r.head + 1) % len(r.order)
	}
	r.ended[b] = x
}
