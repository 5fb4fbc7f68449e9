package lease

import "time"

// Clock is the local monotonic clock the lease is judged by (spec §5,
// ARCHITECTURE principle 4). The host wall clock is never used: a wall-clock
// step (NTP, an operator) must neither open nor keep open the admission gate.
//
// Now is a monotonic reading: the time elapsed since an arbitrary origin that
// is fixed for the life of the Clock. Only differences and comparisons of two
// readings of the same Clock mean anything.
//
// AfterFunc calls f in its own goroutine (or, for a manual clock, from the
// goroutine advancing it) once at least d has elapsed. Timers are used only
// to schedule renew ticks, bound renew attempts and notify gate closure; the
// gate itself never relies on a timer firing on time (Gate.Admit compares Now
// against the deadline).
type Clock interface {
	Now() time.Duration
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did so. Like time.Timer.Stop, it does not wait for a running call.
	Stop() bool
}

// SystemClock returns the process's monotonic clock: readings are
// time.Since(origin), which Go computes from the monotonic clock reading, so
// wall-clock adjustments do not affect them.
func SystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (c systemClock) Now() time.Duration { return time.Since(c.origin) }

func (c systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
