// Package storeclock is the provider clock of the in-memory stores: the
// clock StoreNow is read from and the only clock expiry is judged by. Both
// memory providers (Location and Relocation Store) use it, so a test can
// drive them from one ManualClock.
package storeclock

import (
	"sync"
	"time"
)

// Clock is a provider clock.
type Clock interface {
	Now() time.Time
}

// System is the default Clock: the host's time (with its monotonic reading,
// so expiry is immune to wall-clock steps within the process).
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Manual is a Clock that only moves when told to, for deterministic tests
// of expiry. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the current manual time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d. A negative d is ignored: a provider
// clock never runs backwards, which the expiry rules rely on.
func (c *Manual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
