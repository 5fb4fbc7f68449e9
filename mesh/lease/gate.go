package lease

import (
	"errors"
	"sync"
	"time"
)

// Errors of a closed gate. Gate.Admit returns exactly one of them (match with
// errors.Is).
var (
	// ErrLeaseExpired: the local admission deadline has passed without a
	// successful renew. The gate opens again only if a later renew succeeds
	// under the same record version, i.e. the store never expired the lease.
	ErrLeaseExpired = errors.New("lease: owner lease expired: local admission deadline passed")
	// ErrLeaseLost: the store no longer holds this host's (OwnerId,
	// LeaseGeneration). Permanent: the process must restart to get a new
	// generation.
	ErrLeaseLost = errors.New("lease: owner lease lost: the store holds another owner-lease state")
	// ErrLeaseReleased: the host released the lease (shutdown, §11) or the
	// manager was closed. Permanent.
	ErrLeaseReleased = errors.New("lease: owner lease released")
)

// Admitter is what a blocked target of §5 depends on: callers take an
// Admitter rather than a *Gate so that their tests can supply their own.
type Admitter interface {
	Admit() error
}

var _ Admitter = (*Gate)(nil)

// Gate is the admission gate of one host: the single place every §5 blocked
// target asks "may I start new work now?". Each of them calls Admit first and
// does nothing (no store change, no handler start) unless it returns nil:
//
//   - descriptor publishing and automatic RID owner change;
//   - starting Actor/Spot/Instance messages and timer callbacks;
//   - recording factory/restore (creation) results in the store;
//   - relocation source/target state changes and capacity reservation.
//
// Work already admitted may finish within its own deadline (§5); the gate
// only refuses new work.
//
// Admit compares the Clock's current reading against the deadline on every
// call, so the gate is closed exactly from the deadline on even if no renew
// tick or timer runs (a stalled process, a late timer). The closing
// notification (Closing, the manager's events) is driven by a timer and may
// come late; it is for reacting, not for deciding.
//
// A Gate is safe for concurrent use. The zero value is not usable; gates are
// made by the lease Manager.
type Gate struct {
	clock Clock

	mu       sync.Mutex
	deadline time.Duration
	final    error         // nil, ErrLeaseLost or ErrLeaseReleased
	closing  chan struct{} // closed when the current open period ends
	closed   bool          // closing has been closed
	timer    Timer         // fires at deadline to notify expiry
	stopped  bool          // no more timers may be scheduled
	onClose  func(reason error)
	// inTimer counts timer callbacks past their locked section (notifying);
	// stop waits for it to reach zero so no callback outlives the manager.
	inTimer int
	idle    *sync.Cond
}

// newGate returns a gate that is closed (expired at deadline 0) until
// extend is called. onClose, if set, is called (outside the lock) each time
// the gate goes from open to closed.
func newGate(clock Clock, onClose func(reason error)) *Gate {
	g := &Gate{clock: clock, closing: make(chan struct{}), onClose: onClose}
	g.idle = sync.NewCond(&g.mu)
	return g
}

// Admit returns nil while the gate is open, else ErrLeaseLost,
// ErrLeaseReleased or ErrLeaseExpired (permanent reasons first).
func (g *Gate) Admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reasonLocked(g.clock.Now())
}

func (g *Gate) reasonLocked(now time.Duration) error {
	if g.final != nil {
		return g.final
	}
	if now >= g.deadline {
		return ErrLeaseExpired
	}
	return nil
}

// Open reports whether Admit would return nil now.
func (g *Gate) Open() bool { return g.Admit() == nil }

// Deadline returns the current local admission deadline as a reading of the
// gate's Clock. It is meaningless once the gate is permanently closed.
func (g *Gate) Deadline() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deadline
}

// Remaining returns how long the gate stays open without another successful
// renew (0 when closed).
func (g *Gate) Remaining() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	if g.reasonLocked(now) != nil {
		return 0
	}
	return g.deadline - now
}

// Closing returns a channel that is closed when the gate's current open
// period ends: the deadline passes, the lease is lost or released. If the
// gate is closed now, the returned channel is already closed. After the gate
// reopens (a late successful renew), later calls return a fresh channel.
func (g *Gate) Closing() <-chan struct{} {
	g.mu.Lock()
	reason := g.reasonLocked(g.clock.Now())
	fire := reason != nil && !g.closed
	if fire {
		g.closeLocked()
	}
	ch := g.closing
	g.mu.Unlock()
	if fire {
		g.notify(reason)
	}
	return ch
}

// extend sets the deadline from the latest successful observation. It
// replaces the previous value even if it is earlier: the store is the
// authority on the lease, and a newer answer that leaves less time (a store
// clock step) must win over an older, more generous one. If the gate was
// closed only by expiry and the new deadline is in the future, it reopens.
// A permanently closed gate stays closed.
func (g *Gate) extend(deadline time.Duration) {
	g.mu.Lock()
	if g.final != nil || g.stopped {
		g.mu.Unlock()
		return
	}
	g.deadline = deadline
	now := g.clock.Now()
	var fire bool
	if now < deadline {
		if g.closed {
			g.closing = make(chan struct{})
			g.closed = false
		}
		g.scheduleLocked(deadline - now)
	} else if !g.closed {
		g.closeLocked()
		fire = true
	}
	g.mu.Unlock()
	if fire {
		g.notify(ErrLeaseExpired)
	}
}

// reopen lifts a loss (ErrLeaseLost) after the manager reacquired the
// lease under a new generation, and opens the gate until deadline. A
// release (ErrLeaseReleased) is never lifted.
func (g *Gate) reopen(deadline time.Duration) bool {
	g.mu.Lock()
	if g.final != ErrLeaseLost || g.stopped {
		g.mu.Unlock()
		return false
	}
	g.final = nil
	g.mu.Unlock()
	g.extend(deadline)
	return true
}

// scheduleLocked arms the expiry notification timer.
func (g *Gate) scheduleLocked(after time.Duration) {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timer = g.clock.AfterFunc(after, g.checkExpiry)
}

// checkExpiry runs from the timer: it closes the current open period if the
// deadline has passed (a later extend may have moved it; then it re-arms).
func (g *Gate) checkExpiry() {
	g.mu.Lock()
	if g.final != nil || g.closed || g.stopped {
		g.mu.Unlock()
		return
	}
	now := g.clock.Now()
	if now < g.deadline {
		g.scheduleLocked(g.deadline - now)
		g.mu.Unlock()
		return
	}
	g.closeLocked()
	g.inTimer++
	g.mu.Unlock()
	g.notify(ErrLeaseExpired)
	g.mu.Lock()
	g.inTimer--
	if g.inTimer == 0 {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// shut closes the gate permanently with reason (ErrLeaseLost or
// ErrLeaseReleased). The first permanent reason wins. It reports whether this
// call changed the permanent reason.
func (g *Gate) shut(reason error) bool {
	g.mu.Lock()
	if g.final != nil {
		g.mu.Unlock()
		return false
	}
	g.final = reason
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	fire := !g.closed
	if fire {
		g.closeLocked()
	}
	g.mu.Unlock()
	if fire {
		g.notify(reason)
	}
	return true
}

// stop cancels the expiry timer for good and waits for a notification the
// timer already started, so that no timer or callback of the gate outlives
// the manager. The gate's state is unchanged (Admit still works). It must not
// be called from onClose.
func (g *Gate) stop() {
	g.mu.Lock()
	g.stopped = true
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
	for g.inTimer > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}

func (g *Gate) closeLocked() {
	close(g.closing)
	g.closed = true
}

func (g *Gate) notify(reason error) {
	if g.onClose != nil {
		g.onClose(reason)
	}
}
