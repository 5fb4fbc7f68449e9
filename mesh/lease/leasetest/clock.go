// Package leasetest provides deterministic clocks for tests of the owner
// lease and of anything that consults its admission gate.
//
// ManualClock implements lease.Clock and only moves when a test calls
// Advance; timers fire synchronously inside Advance, in due order, with Now
// reading each timer's due time while it runs. StoreClock derives a
// Location Store clock (a time.Time source such as memory.Clock needs) from
// the same ManualClock, optionally stepped, so one Advance moves both the
// local monotonic clock and the store's clock.
package leasetest

import (
	"sort"
	"sync"
	"time"

	"github.com/meshnode/meshnode/mesh/lease"
)

// ManualClock is a lease.Clock moved only by Advance. It is safe for
// concurrent use. The zero value is not usable; call NewManualClock.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Duration
	seq     uint64
	timers  []*manualTimer
	changed chan struct{} // closed and replaced whenever timers change
}

type manualTimer struct {
	c   *ManualClock
	due time.Duration
	seq uint64 // tie-breaker: equal due times fire in registration order
	f   func()
}

var _ lease.Clock = (*ManualClock)(nil)

// NewManualClock returns a clock reading start.
func NewManualClock(start time.Duration) *ManualClock {
	return &ManualClock{now: start, changed: make(chan struct{})}
}

// Now returns the current reading.
func (c *ManualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc registers f to run when the clock reaches Now()+d. A
// non-positive d runs f at once in its own goroutine, as time.AfterFunc does.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) lease.Timer {
	if d <= 0 {
		go f()
		return stopped{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, due: c.now + d, seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	c.signalLocked()
	return t
}

// Stop removes the timer if it has not fired.
func (t *manualTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.signalLocked()
			return true
		}
	}
	return false
}

type stopped struct{}

func (stopped) Stop() bool { return false }

// Advance moves the clock forward by d (a negative d is ignored), firing
// every timer that falls due on the way, in due order, synchronously, with
// Now reading the timer's due time while it runs. Timers registered by a
// firing timer fire too if they fall due within the same Advance.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	target := c.now + d
	for {
		t := c.nextDueLocked(target)
		if t == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		if t.due > c.now {
			c.now = t.due
		}
		c.signalLocked()
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
}

// AdvanceTo moves the clock to the reading at (no-op if already past it).
func (c *ManualClock) AdvanceTo(at time.Duration) {
	c.Advance(at - c.Now())
}

// nextDueLocked removes and returns the earliest timer due at or before
// target, or nil.
func (c *ManualClock) nextDueLocked(target time.Duration) *manualTimer {
	if len(c.timers) == 0 {
		return nil
	}
	sort.SliceStable(c.timers, func(i, j int) bool {
		a, b := c.timers[i], c.timers[j]
		if a.due != b.due {
			return a.due < b.due
		}
		return a.seq < b.seq
	})
	t := c.timers[0]
	if t.due > target {
		return nil
	}
	c.timers = c.timers[1:]
	return t
}

// Pending returns the number of registered, unfired timers.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextDue returns the due time of the earliest pending timer.
func (c *ManualClock) NextDue() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextDueOfLocked()
}

func (c *ManualClock) nextDueOfLocked() (time.Duration, bool) {
	if len(c.timers) == 0 {
		return 0, false
	}
	min := c.timers[0].due
	for _, t := range c.timers[1:] {
		if t.due < min {
			min = t.due
		}
	}
	return min, true
}

// WaitFor blocks until cond(Pending()) holds or the real-time limit passes;
// it reports whether cond held. Tests use it to know that the code under
// test is parked on its timers before advancing the clock. limit is a
// safety net against a hung test, not a speed assertion.
func (c *ManualClock) WaitFor(cond func(pending int) bool, limit time.Duration) bool {
	return c.WaitForNext(func(pending int, _ time.Duration) bool { return cond(pending) }, limit)
}

// WaitForNext is WaitFor whose cond also gets how far ahead of Now the
// earliest pending timer is due (0 when none is pending): a test that must
// know *which* timer the code is parked on — a pause, not the timeout timer
// of a call still returning — asks for its distance.
func (c *ManualClock) WaitForNext(cond func(pending int, next time.Duration) bool, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		due, ok := c.nextDueOfLocked()
		next := time.Duration(0)
		if ok {
			next = due - c.now
		}
		ok = cond(len(c.timers), next)
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

func (c *ManualClock) signalLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// StoreClock is a store-side clock (time.Time) that follows a ManualClock:
// Now() = base + clock.Now() + step. It satisfies memory.Clock.
type StoreClock struct {
	c    *ManualClock
	base time.Time

	mu   sync.Mutex
	step time.Duration
}

// StoreClock returns a store clock reading base when c reads 0.
func (c *ManualClock) StoreClock(base time.Time) *StoreClock {
	return &StoreClock{c: c, base: base}
}

// Now returns the store's current time.
func (s *StoreClock) Now() time.Time {
	s.mu.Lock()
	step := s.step
	s.mu.Unlock()
	return s.base.Add(s.c.Now() + step)
}

// Step moves the store clock by d relative to the local clock (a store clock
// step, e.g. a failover to a server whose clock differs).
func (s *StoreClock) Step(d time.Duration) {
	s.mu.Lock()
	s.step += d
	s.mu.Unlock()
}
