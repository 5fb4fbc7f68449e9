package transport

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time source of every timed decision the transport makes on its
// own: liveness probe schedule, the peer-timeout deadline, the default
// request deadline and inbound idle reaping. It is injected so that tests can
// step liveness deterministically instead of sleeping. Socket-level deadlines
// (handshake, write stall) are kernel deadlines and necessarily use real time.
type Clock interface {
	// Now returns the current time. Only differences between readings are
	// used, so a monotonic reading is enough.
	Now() time.Time
	// AfterFunc calls f in its own goroutine (or, for a manual clock, from
	// Advance) once d has elapsed, unless the returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// SystemClock is the default Clock: the host's monotonic time.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ManualClock is a Clock that moves only when Advance is called. Timer
// callbacks run synchronously inside Advance, in deadline order, so a test
// that advances past a deadline observes its effect when Advance returns
// (effects the callback starts in other goroutines still need waiting for).
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers map[uint64]*manualTimer
}

type manualTimer struct {
	c   *ManualClock
	id  uint64
	at  time.Time
	f   func()
	seq uint64
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, timers: make(map[uint64]*manualTimer)}
}

// Now returns the manual time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d. A non-positive d fires on the next Advance
// (even Advance(0)), never synchronously inside AfterFunc: callers may hold
// locks that f needs.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &manualTimer{c: c, id: c.seq, at: c.now.Add(d), f: f, seq: c.seq}
	c.timers[t.id] = t
	return t
}

// Stop cancels the timer.
func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if _, ok := t.c.timers[t.id]; !ok {
		return false
	}
	delete(t.c.timers, t.id)
	return true
}

// Pending reports how many timers are scheduled and not yet fired or stopped.
// Tests use it to check that Close stops every timer.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Stall moves the clock forward by d without running any timer, as a
// process that was stopped (SIGSTOP, a VM freeze) finds the time when it
// runs again; the next Advance (even Advance(0)) runs what became due
// meanwhile, late, with the clock reading the later time.
func (c *ManualClock) Stall(d time.Duration) {
	if d < 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Advance moves the clock forward by d (negative d is ignored) and runs every
// timer that became due, earliest first, with the clock reading each timer's
// deadline while its callback runs. Timers scheduled by callbacks that fall
// inside the advanced window run too.
func (c *ManualClock) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due []*manualTimer
		for _, t := range c.timers {
			if !t.at.After(target) {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			c.now = target
			c.mu.Unlock()
			return
		}
		sort.Slice(due, func(i, j int) bool {
			if !due[i].at.Equal(due[j].at) {
				return due[i].at.Before(due[j].at)
			}
			return due[i].seq < due[j].seq
		})
		t := due[0]
		delete(c.timers, t.id)
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
	}
}
