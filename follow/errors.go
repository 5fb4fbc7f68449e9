package follow

import (
	"errors"
	"fmt"
)

// The error vocabulary of the package. Every error it returns matches exactly
// one of ErrInvalidArgument, ErrInvalidOperation, ErrUnavailable or
// ErrNotFound with errors.Is; the finer sentinels below wrap one of those so
// a caller can map to the spec's outcomes without knowing the detail.
var (
	// ErrInvalidArgument reports malformed input: an empty or overlong ID,
	// an unknown object kind, a zero or out-of-range generation, a negative
	// hop count, an empty RID or StoreVersion, a nil Clock or a negative
	// duration. Nothing is stored or changed.
	ErrInvalidArgument = errors.New("follow: invalid argument")

	// ErrInvalidOperation is the spec's InvalidOperation: the request names
	// a different object generation than the recorded move (Forward), or a
	// move that cannot be recorded (Record: the new owner generation is not
	// greater than the previous one, or an older move than the one kept).
	ErrInvalidOperation = errors.New("follow: invalid operation")

	// ErrUnavailable is the spec's Unavailable: the message cannot be
	// delivered by following, because the hop limit is reached or the
	// follow route would not make progress (a cycle).
	ErrUnavailable = errors.New("follow: unavailable")

	// ErrNotFound reports that this node holds no follow route for the
	// object: never recorded, removed, expired, or Message Follow disabled.
	// The caller answers as it would for an object it does not host.
	ErrNotFound = errors.New("follow: no follow route")
)

// Finer reasons; each matches its parent with errors.Is.
var (
	// ErrHopLimit: forwarding once more would exceed MaxHops.
	ErrHopLimit = fmt.Errorf("%w: hop limit reached", ErrUnavailable)
	// ErrCycle: the message already carries an authority owner generation
	// at least as high as the one it would be forwarded with.
	ErrCycle = fmt.Errorf("%w: follow cycle", ErrUnavailable)
	// ErrGenerationMismatch: the message is for another ObjectGeneration
	// than the one that moved.
	ErrGenerationMismatch = fmt.Errorf("%w: object generation mismatch", ErrInvalidOperation)
)
