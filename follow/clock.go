package follow

import "time"

// Clock is the local monotonic clock entries expire by. Now returns the time
// elapsed since an arbitrary origin fixed for the life of the Clock; only
// comparisons of readings of the same Clock mean anything.
//
// It has the shape of the Now method of package mesh/lease's Clock on
// purpose: a lease.Clock satisfies it, so the owner admission deadlines the
// caller derives with that clock can be passed as Ready.ValidUntil directly.
// The host wall clock must not be used (spec §5).
type Clock interface {
	Now() time.Duration
}

// addSat returns a+b, saturating at the time.Duration bounds instead of
// wrapping, so that a huge max age near the end of the clock's range cannot
// turn an expiry into the distant past.
func addSat(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case b > 0 && s < a:
		return time.Duration(1<<63 - 1)
	case b < 0 && s > a:
		return time.Duration(-1 << 63)
	}
	return s
}
