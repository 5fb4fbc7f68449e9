// Package gen plans the issuance of the framework's generation numbers
// (spec §3.1, §3.2): LeaseGeneration, ObjectGeneration and
// AuthorityOwnerGeneration are all issued by conditionally incrementing a
// counter kept in the Location Store, and all share one range rule.
//
// The package is a pure planner: it says what the next stored value must be
// (or that there is none), and the caller turns that into a conditional
// Location Store write. Keeping the rule in one function means the three
// generations cannot drift apart in how they treat 0 and the sentinel.
//
// The range rule (§3.2): the stored range is 1..2^63-1, where 2^63-1 is the
// exhausted sentinel and is never issued, so the issued range is 1..2^63-2.
// The counter holds the last issued value (or the sentinel), so:
//
//	counter absent        -> issue 1
//	counter c in 1..2^63-3 -> issue c+1
//	counter 2^63-2        -> GenerationExhausted (c+1 would be the sentinel)
//	counter 2^63-1        -> GenerationExhausted (the sentinel itself)
//
// Exhaustion never plans a write: the caller changes neither the counter nor
// any record, so a retry gives the same answer (§3.1 "Retrying this result
// doesn't succeed, and it doesn't change the Store record or counter"). The
// counter is never reset to 0 or wrapped.
package gen

import (
	"errors"
	"fmt"
)

// Sentinel is the exhausted sentinel, 2^63-1: a valid stored counter value
// that is never issued.
const Sentinel uint64 = 1<<63 - 1

// MaxIssued is the largest generation ever issued, 2^63-2.
const MaxIssued = Sentinel - 1

// ErrGenerationExhausted is the spec's GenerationExhausted: the counter has
// no next value. It is permanent for that counter.
var ErrGenerationExhausted = errors.New("generation exhausted")

// ErrInvalidCounter reports a stored counter outside 1..2^63-1 (or a value
// passed for an absent counter). It means corrupt or foreign data; nothing
// should be issued from it.
var ErrInvalidCounter = errors.New("invalid generation counter")

// Next returns the value to issue (and to store as the new counter) given the
// current stored counter. present is false when the counter key is absent, in
// which case current must be 0.
func Next(current uint64, present bool) (uint64, error) {
	switch {
	case !present && current != 0:
		return 0, fmt.Errorf("%w: value %d given for an absent counter", ErrInvalidCounter, current)
	case !present:
		return 1, nil
	case current == 0:
		return 0, fmt.Errorf("%w: stored counter is 0, which is never issued", ErrInvalidCounter)
	case current > Sentinel:
		return 0, fmt.Errorf("%w: stored counter %d exceeds 2^63-1", ErrInvalidCounter, current)
	case current >= MaxIssued:
		return 0, fmt.Errorf("%w: counter is at %d, issued range ends at %d", ErrGenerationExhausted, current, MaxIssued)
	default:
		return current + 1, nil
	}
}

// Valid reports whether g is a generation that can have been issued
// (1..2^63-2). Readers use it to reject 0 and the sentinel found in records.
func Valid(g uint64) bool { return g >= 1 && g <= MaxIssued }
