package authority

import (
	"errors"
	"fmt"

	"github.com/meshnode/meshnode/mesh/gen"
)

// The closed error vocabulary of the package. Every error a planner returns
// is an *Error whose Kind is one of these; the Executor adds only store
// failures (locstore.ErrUnavailable, locstore.ErrArgument) and context
// errors, wrapped.
var (
	// ErrConflict: the store does not hold what the operation requires
	// (§6.1 "Conflict and changes nothing"): the authority row exists where
	// Reserve needs it absent, is Reserved where Preserve/NewOwner/Delete need
	// it Active (or the reverse for Commit/Abort), belongs to another
	// reservation or owner, a verified owner lease is missing or of another
	// generation, or pre-secured capacity is not there. Nothing was written.
	ErrConflict = errors.New("authority: conflict")
	// ErrNotFound: the authority row is missing. A refinement of ErrConflict:
	// errors.Is(err, ErrConflict) is true as well (§6.1 treats a missing
	// record as Conflict; §7.2 wants it told apart).
	ErrNotFound = errors.New("authority: record not found")
	// ErrStaleGeneration: the row holds another ObjectGeneration of the same
	// Id than the caller's ref (§7.2). Also matches ErrConflict.
	ErrStaleGeneration = errors.New("authority: stale object generation")
	// ErrTypeMismatch: the row holds another object kind or stable type than
	// the caller asked for (§7). Also matches ErrConflict.
	ErrTypeMismatch = errors.New("authority: type mismatch")
	// ErrContended: no batch applied in the executor's attempts because the
	// rows kept changing under other writers (a hot counter): a lost race,
	// not a change of what the operation requires — the target, its lease
	// and its capacity may be fine. A refinement of ErrConflict (nothing was
	// written); a creation places again instead of ruling the target out
	// (review, 2026-12-07).
	ErrContended = errors.New("authority: contended: rows kept changing")
	// ErrCapacityExhausted: a capacity counter of the node would pass its
	// limit (or the 2^31-1 slot range). Placement excludes that node run
	// and may try another candidate (§7). Error.Counter names the counter.
	ErrCapacityExhausted = errors.New("authority: capacity exhausted")
	// ErrGenerationExhausted is gen.ErrGenerationExhausted itself: the
	// ObjectGeneration counter or the record's AuthorityOwnerGeneration has
	// no next value. Permanent; no write was planned (§3.1, §3.2).
	ErrGenerationExhausted = gen.ErrGenerationExhausted
	// ErrInvalidOperation: a framework-internal error — the request itself is
	// invalid (bad Id or name, an Entry Spot or unknown kind, an invalid
	// target combination, a snapshot lacking a row the operation needs, a
	// terminal result that does not fit the operation). Decided before the
	// store is called (§6.1).
	ErrInvalidOperation = errors.New("authority: invalid operation")
	// ErrCorruptRecord: a row read from the store cannot be decoded, or the
	// counters contradict the authority records (a release below zero).
	// Retrying does not help.
	ErrCorruptRecord = errors.New("authority: corrupt record")
	// ErrOutcomeUnknown: a batch was sent, its result was lost, and no
	// re-read could tell whether it applied. The caller must not act as if
	// it had not (an instance closed although its record went Ready, or
	// reopened although its record is gone): it decides from the authority
	// row once the store answers again.
	ErrOutcomeUnknown = errors.New("authority: outcome unknown")
)

// unknownOutcome is an ErrOutcomeUnknown with what happened, worded as
// "authority <op>: outcome unknown (…)".
type unknownOutcome struct {
	op     string
	detail string
	causes []error
}

func outcomeUnknown(op, detail string, causes ...error) error {
	return &unknownOutcome{op: op, detail: detail, causes: causes}
}

func (e *unknownOutcome) Error() string { return "authority " + e.op + ": outcome unknown " + e.detail }

func (e *unknownOutcome) Is(target error) bool { return target == ErrOutcomeUnknown }

func (e *unknownOutcome) Unwrap() []error { return e.causes }

// Op names an operation.
type Op string

// Operations. The six of §6.1, the two capacity batches a relocation uses
// to secure and release target capacity (§8.1, §9.4), and the relocation
// stage changes.
const (
	OpReserve         Op = "reserve"
	OpCommit          Op = "commit"
	OpAbort           Op = "abort"
	OpPreserve        Op = "preserve"
	OpNewOwner        Op = "newOwner"
	OpDelete          Op = "delete"
	OpSecureCapacity  Op = "secureCapacity"
	OpReleaseCapacity Op = "releaseCapacity"
	// The relocation stage changes (§8, §8.2, §9.1): the source records
	// Captured, the target may record Prepared (a new target attempt), the
	// target's owner change is OpNewOwner with NewOwnerRequest.Relocation,
	// and the new owner removes the progress (Completed).
	OpRecordCaptured     Op = "recordCaptured"
	OpRecordPrepared     Op = "recordPrepared"
	OpCompleteRelocation Op = "completeRelocation"
	// OpTerminalLookup reads a creation's stored final result.
	OpTerminalLookup Op = "terminalLookup"
)

// Error is the error every planner returns.
type Error struct {
	Op     Op
	Kind   error  // one of the package's sentinels
	Reason string // what was found, in words
	// Current is the authority row that decided a conflict-class outcome,
	// when the row exists (e.g. the record a Reserve found), so that the
	// caller can follow it (§7: "the current record's result is followed").
	Current *AuthorityRow
	// Counter is the capacity counter an ErrCapacityExhausted (or a corrupt
	// counter) is about.
	Counter *CounterID
	// Err is the underlying cause, if any (a record decoding error, a
	// gen.Next error).
	Err error
}

func (e *Error) Error() string {
	s := "authority: "
	if e.Op != "" {
		s = "authority " + string(e.Op) + ": "
	}
	s += e.Kind.Error()
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is matches Kind; the refinements ErrNotFound, ErrStaleGeneration,
// ErrTypeMismatch and ErrContended also match ErrConflict.
func (e *Error) Is(target error) bool {
	if target == e.Kind {
		return true
	}
	if target == ErrConflict {
		return e.Kind == ErrNotFound || e.Kind == ErrStaleGeneration || e.Kind == ErrTypeMismatch || e.Kind == ErrContended
	}
	return false
}

// Unwrap exposes the cause.
func (e *Error) Unwrap() error { return e.Err }

func newErr(op Op, kind error, format string, args ...any) *Error {
	return &Error{Op: op, Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

func invalid(op Op, format string, args ...any) *Error {
	return newErr(op, ErrInvalidOperation, format, args...)
}

func invalidCause(op Op, cause error, format string, args ...any) *Error {
	e := invalid(op, format, args...)
	e.Err = cause
	return e
}

func conflictWith(op Op, kind error, row AuthorityRow, format string, args ...any) *Error {
	e := newErr(op, kind, format, args...)
	if row.Found {
		r := row
		e.Current = &r
	}
	return e
}
