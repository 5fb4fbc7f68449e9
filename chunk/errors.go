package chunk

import (
	"errors"
	"fmt"
)

// Errors of the payload format. Every one of them also matches ErrMalformed,
// so a caller that only needs "these bytes are not a valid payload" can test
// for that.
var (
	// ErrMalformed matches every payload format error.
	ErrMalformed = errors.New("chunk: malformed payload")
	// ErrTruncated: a field or declared length runs past the bytes present.
	ErrTruncated = errors.New("chunk: truncated payload")
	// ErrTrailing: bytes are left after the last field.
	ErrTrailing = errors.New("chunk: trailing bytes in payload")
	// ErrMagic: the payload does not start with the format's magic.
	ErrMagic = errors.New("chunk: not a restore payload (bad magic)")
	// ErrVersion: the format version is not one this build reads.
	ErrVersion = errors.New("chunk: unsupported payload version")
	// ErrCorrupt: the compressed body does not decode to exactly the
	// declared body length.
	ErrCorrupt = errors.New("chunk: corrupt compressed body")
)

// Errors shared by encoding, splitting and assembly.
var (
	// ErrInvalid: a value breaks a rule of the format or the API (zero where
	// nonzero is required, an undefined enum, bad UTF-8, a timer name on a
	// non-timer envelope, an invalid binding or limit, …). Format-level
	// occurrences also match ErrMalformed.
	ErrInvalid = errors.New("chunk: invalid value")
	// ErrTooLarge: a length or count is above a configured or fixed bound.
	// It is reported before anything sized by that length is allocated.
	ErrTooLarge = errors.New("chunk: too large")
)

// Terminal failures of one assembly. Once one is returned for a binding
// the assembly is gone: it cannot be resumed, and a retransmitted Restore
// for the same binding gets the same failure again.
var (
	// ErrChecksum: every chunk arrived but the CRC-32C of the assembled
	// payload differs from the declared one (§9.1, §12).
	ErrChecksum = errors.New("chunk: payload checksum mismatch")
	// ErrLength: a chunk index or chunk size does not fit the declared
	// length and chunk count.
	ErrLength = errors.New("chunk: payload length mismatch")
	// ErrOutOfOrder: a chunk arrived past a gap. Chunks travel on one
	// ordered connection, so a gap means a chunk was lost.
	ErrOutOfOrder = errors.New("chunk: chunk out of order")
	// ErrConflict: the same binding was declared again with a different
	// length, count or checksum, a chunk index arrived twice with different
	// bytes, or the RelocationId is claimed by a different source (§9.1).
	ErrConflict = errors.New("chunk: conflicting restore for the same binding")
)

// Non-terminal outcomes and lifecycle errors.
var (
	// ErrCapacity: the registry's open-assembly or in-flight byte budget is
	// exhausted. Nothing is created or remembered.
	ErrCapacity = errors.New("chunk: assembly capacity exhausted")
	// ErrIncomplete: Complete was called before every chunk arrived. The
	// assembly stays open.
	ErrIncomplete = errors.New("chunk: payload incomplete")
	// ErrCompleted: the binding's payload was already handed out.
	ErrCompleted = errors.New("chunk: payload already completed")
	// ErrAborted: the binding was aborted (§9.4 step 4).
	ErrAborted = errors.New("chunk: assembly aborted")
	// ErrSuperseded: a newer target attempt of the same RelocationId
	// replaced this binding (§8.2, §9.1).
	ErrSuperseded = errors.New("chunk: assembly superseded by a newer target attempt")
	// ErrUnknownBinding: no Restore was begun for exactly this binding.
	ErrUnknownBinding = errors.New("chunk: no assembly for this binding")
	// ErrDiscarded matches every *DiscardError.
	ErrDiscarded = errors.New("chunk: chunk discarded")
)

// FormatError is a payload format error with the field where it was found.
// It matches ErrMalformed and its Kind with errors.Is.
type FormatError struct {
	Kind   error  // one of the format or shared sentinels above
	Field  string // dotted field path, e.g. "queue[3].meta"
	Offset int    // byte offset in the payload (or in the decompressed body, see Body)
	Body   bool   // Offset is inside the (decompressed) body rather than the payload
	Detail string
}

func (e *FormatError) Error() string {
	where := "payload"
	if e.Body {
		where = "body"
	}
	s := fmt.Sprintf("%v: %s at %s offset %d", e.Kind, e.Field, where, e.Offset)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap lets errors.Is see both the kind and ErrMalformed.
func (e *FormatError) Unwrap() []error { return []error{e.Kind, ErrMalformed} }

// DiscardReason says why a chunk was not linked to an assembly. Discards are
// not failures: the chunk is dropped and counted, and nothing is replied.
type DiscardReason uint8

// Discard reasons.
const (
	// DiscardUnknown: no Restore was begun for this binding, and the
	// registry remembers nothing about it.
	DiscardUnknown DiscardReason = iota + 1
	// DiscardMismatch: an assembly is open for the same RelocationId but
	// its binding differs (target attempt or source fence).
	DiscardMismatch
	// DiscardDuplicate: the chunk index was already received with
	// identical bytes (a retransmission).
	DiscardDuplicate
	// DiscardCompleted: the binding's payload was already completed.
	DiscardCompleted
	// DiscardFailed: the binding already ended in a terminal failure.
	DiscardFailed
	// DiscardAborted: the binding was aborted.
	DiscardAborted
	// DiscardSuperseded: a newer target attempt replaced this binding.
	DiscardSuperseded

	discardReasons = iota + 1 // size of an array indexed by reason
)

var discardNames = [...]string{"", "unknown", "mismatch", "duplicate", "completed", "failed", "aborted", "superseded"}

func (r DiscardReason) String() string {
	if int(r) < len(discardNames) && r != 0 {
		return discardNames[r]
	}
	return fmt.Sprintf("DiscardReason(%d)", uint8(r))
}

// DiscardError reports a discarded chunk. It matches ErrDiscarded.
type DiscardError struct {
	Reason DiscardReason
	Index  uint32
}

func (e *DiscardError) Error() string {
	return fmt.Sprintf("chunk: chunk %d discarded: %v", e.Index, e.Reason)
}

// Is makes errors.Is(err, ErrDiscarded) true.
func (e *DiscardError) Is(target error) bool { return target == ErrDiscarded }

// DiscardReasonOf returns the reason of a discard error, or 0 if err is not
// one.
func DiscardReasonOf(err error) DiscardReason {
	var d *DiscardError
	if errors.As(err, &d) {
		return d.Reason
	}
	return 0
}
