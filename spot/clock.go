package spot

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is the time source of the runtime's timers. Production uses
// RealClock; tests use a ManualClock and step it, so no test depends on the
// scheduler's timing.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d. stop reports whether
	// it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the Clock backed by package time.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// ManualClock is a Clock that only moves when Advance is called. Callbacks
// due at or before the new time run synchronously inside Advance, in due
// order, which makes timer tests deterministic.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
	seq uint64
	q   manualQueue
}

// NewManualClock returns a ManualClock starting at start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d.
func (c *ManualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	e := &manualEntry{at: c.now.Add(d), seq: c.seq, f: f}
	heap.Push(&c.q, e)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if e.index < 0 {
			return false
		}
		heap.Remove(&c.q, e.index)
		return true
	}
}

// Advance moves the clock by d and runs every callback that became due.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	for c.q.Len() > 0 && !c.q[0].at.After(target) {
		e := heap.Pop(&c.q).(*manualEntry)
		if e.at.After(c.now) {
			c.now = e.at
		}
		c.mu.Unlock()
		e.f()
		c.mu.Lock()
	}
	c.now = target
	c.mu.Unlock()
}

// Pending reports how many callbacks are scheduled.
func (c *ManualClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.q.Len()
}

type manualEntry struct {
	at    time.Time
	seq   uint64
	f     func()
	index int
}

type manualQueue []*manualEntry

func (q manualQueue) Len() int { return len(q) }
func (q manualQueue) Less(i, j int) bool {
	if q[i].at.Equal(q[j].at) {
		return q[i].seq < q[j].seq
	}
	return q[i].at.Before(q[j].at)
}
func (q manualQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i]; q[i].index = i; q[j].index = j }
func (q *manualQueue) Push(x any) {
	e := x.(*manualEntry)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *manualQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	e.index = -1
	return e
}
