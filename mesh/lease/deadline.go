package lease

import (
	"errors"
	"fmt"
	"time"
)

// Observation is one successful store answer about this host's owner-lease
// record, bracketed by two readings of the local monotonic Clock.
type Observation struct {
	// SentAt (t0) is the local monotonic reading taken just before the
	// request was sent.
	SentAt time.Duration
	// ReceivedAt (t1) is the reading taken just after the result arrived.
	ReceivedAt time.Duration
	// StoreNow is the store's clock as reported by the result.
	StoreNow time.Time
	// ExpiresAt is the store time at which the record expires (from a Read,
	// or WriteExpiry for a Write).
	ExpiresAt time.Time
}

// ErrInvalidObservation reports an Observation the deadline cannot be derived
// from (times missing, t1 before t0, a record without expiry). The gate is
// never opened or extended from it.
var ErrInvalidObservation = errors.New("lease: invalid store observation")

// AdmissionDeadline computes the local admission deadline (§5) from one
// successful register/read/renew result, in the Clock's monotonic terms:
//
//	remaining = ExpiresAt - StoreNow - fencingMargin
//	deadline  = t0 + remaining
//
// Why t0: the store read its clock at some unknown local instant s in
// [t0, t1]. The record expires when the store clock reaches ExpiresAt, i.e.
// (clocks running at the same rate) at local time s + (ExpiresAt - StoreNow)
// >= t0 + (ExpiresAt - StoreNow). Anchoring at t0 is therefore the earliest
// instant the store can consider the record expired, whatever part of the
// round trip was spent before or after the store read its clock. Anchoring at
// t1 would be optimistic by up to the whole round trip; that is why a slow
// round trip costs admission time here instead of being subtracted again.
//
// Why the margin: it absorbs what t0 anchoring cannot see — the rate
// difference between the local and store clocks over one TTL, and the time
// between a successful Gate.Admit and the last store change the admitted
// work makes. Nothing else is subtracted: the round trip is already covered
// by t0, and the store's millisecond rounding is covered by WriteExpiry.
//
// If remaining is not positive the result is <= t0, which is already in the
// past when the result arrives (t1 >= t0): the gate is closed. The value is
// clamped to t0 in that case so that callers see "closed from the start"
// rather than an arbitrary negative offset. Arithmetic saturates instead of
// overflowing.
func AdmissionDeadline(o Observation, fencingMargin time.Duration) (time.Duration, error) {
	switch {
	case o.StoreNow.IsZero():
		return 0, fmt.Errorf("%w: no StoreNow", ErrInvalidObservation)
	case o.ExpiresAt.IsZero():
		return 0, fmt.Errorf("%w: the record has no expiry; an owner lease must expire", ErrInvalidObservation)
	case o.ReceivedAt < o.SentAt:
		return 0, fmt.Errorf("%w: received at %v before sent at %v", ErrInvalidObservation, o.ReceivedAt, o.SentAt)
	case fencingMargin < 0:
		return 0, fmt.Errorf("%w: negative fencing margin %v", ErrInvalidObservation, fencingMargin)
	}
	// time.Time.Sub saturates at the Duration bounds.
	remaining, _ := addSat(o.ExpiresAt.Sub(o.StoreNow), -fencingMargin)
	if remaining <= 0 {
		return o.SentAt, nil
	}
	d, _ := addSat(o.SentAt, remaining)
	return d, nil
}

// WriteExpiry is the store time at which a record written with retention ttl
// expires, given the StoreNow of the applied Write (the SPI defines the
// expiry as "retention after StoreNow of the commit").
//
// StoreNow is truncated to the millisecond first: stores keep expiry in
// milliseconds (Redis computes it from its millisecond clock, which is the
// floor of TIME), so the real expiry may be up to 1 ms earlier than
// StoreNow + ttl but never earlier than the truncated value. Being early by
// under a millisecond is the conservative side.
func WriteExpiry(storeNow time.Time, ttl time.Duration) time.Time {
	return storeNow.Truncate(time.Millisecond).Add(ttl)
}
