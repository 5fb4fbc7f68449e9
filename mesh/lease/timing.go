package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// Defaults of the §5 settings.
const (
	DefaultRenewInterval = 5 * time.Second
	DefaultTTL           = 15 * time.Second
	DefaultRenewTimeout  = 3 * time.Second
	DefaultFencingMargin = 5 * time.Second
)

// Timing is the per-host owner lease configuration of spec §5.
type Timing struct {
	// RenewInterval is the time between the starts of two renew attempts.
	RenewInterval time.Duration
	// TTL is the retention the owner-lease record is written with: the store
	// expires it TTL after the commit unless renewed.
	TTL time.Duration
	// RenewTimeout bounds one renew attempt (and every other store call the
	// lease manager makes).
	RenewTimeout time.Duration
	// FencingMargin is subtracted from the store-reported remaining time to
	// get the local admission deadline (see AdmissionDeadline).
	FencingMargin time.Duration
}

// DefaultTiming returns the §5 defaults: renew 5 s, TTL 15 s, timeout 3 s,
// margin 5 s.
func DefaultTiming() Timing {
	return Timing{
		RenewInterval: DefaultRenewInterval,
		TTL:           DefaultTTL,
		RenewTimeout:  DefaultRenewTimeout,
		FencingMargin: DefaultFencingMargin,
	}
}

// ErrInvalidTiming is matched by every *TimingError: a startup configuration
// error (§5).
var ErrInvalidTiming = errors.New("lease: invalid owner lease timing")

// TimingError is one violated §5 rule.
type TimingError struct {
	Field  string // "renewInterval", "ttl", "renewTimeout", "fencingMargin" or "relationship"
	Reason string
}

func (e *TimingError) Error() string {
	return fmt.Sprintf("lease: invalid owner lease timing: %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidTiming) true.
func (e *TimingError) Is(target error) bool { return target == ErrInvalidTiming }

// Validate returns every violated rule (joined with errors.Join), or nil:
//
//   - every value is positive (§5);
//   - renew interval + renew timeout < TTL - fencing margin (§5). This is what
//     lets a healthy host keep its gate open without a gap: after a success
//     at t0 the deadline is t0 + TTL - margin, and the next attempt starts at
//     t0 + interval and ends by t0 + interval + timeout, before the deadline;
//   - TTL is a whole number of milliseconds no longer than
//     locstore.MaxRetention, because stores keep expiry in milliseconds
//     (an addition of this package: a sub-millisecond TTL would be rounded by
//     the provider in a direction the framework cannot know).
func (t Timing) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &TimingError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	positive := []struct {
		field string
		v     time.Duration
	}{
		{"renewInterval", t.RenewInterval},
		{"ttl", t.TTL},
		{"renewTimeout", t.RenewTimeout},
		{"fencingMargin", t.FencingMargin},
	}
	allPositive := true
	for _, p := range positive {
		if p.v <= 0 {
			add(p.field, "%v is not positive", p.v)
			allPositive = false
		}
	}
	if t.TTL > 0 && t.TTL%time.Millisecond != 0 {
		add("ttl", "%v is not a whole number of milliseconds", t.TTL)
	}
	if t.TTL > locstore.MaxRetention {
		add("ttl", "%v exceeds the store's maximum retention %v", t.TTL, locstore.MaxRetention)
	}
	// The relationship is only meaningful (and overflow-free) once every
	// value is positive and bounded.
	if allPositive && t.TTL <= locstore.MaxRetention {
		lhs, ok := addSat(t.RenewInterval, t.RenewTimeout)
		if !ok || lhs >= t.TTL-t.FencingMargin {
			add("relationship", "renew interval %v + renew timeout %v must be < TTL %v - fencing margin %v",
				t.RenewInterval, t.RenewTimeout, t.TTL, t.FencingMargin)
		}
	}
	return errors.Join(errs...)
}

// addSat adds two non-negative durations, reporting false on overflow.
func addSat(a, b time.Duration) (time.Duration, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return maxDuration, false
		}
		return minDuration, false
	}
	return s, true
}

const (
	maxDuration = time.Duration(1<<63 - 1)
	minDuration = time.Duration(-1 << 63)
)
