package record

import (
	"errors"
	"fmt"
)

// Sentinels matched with errors.Is by the typed errors below.
var (
	// ErrInvalidField: a field (or key input) is missing, has the wrong JSON
	// type, is out of range, is not in canonical string form, or is unknown.
	ErrInvalidField = errors.New("record: invalid field")
	// ErrMalformed: the value is not well-formed JSON, is not valid UTF-8,
	// or repeats a member name.
	ErrMalformed = errors.New("record: malformed JSON")
	// ErrUnknownVersion: recordVersion is not one this package reads.
	ErrUnknownVersion = errors.New("record: unknown recordVersion")
	// ErrMismatch: the top-level and in-descriptor copies of ownerId,
	// leaseGeneration or descriptorRevision disagree.
	ErrMismatch = errors.New("record: top-level and descriptor copies disagree")
	// ErrLimit: a size or count bound is exceeded (1 MiB value, 1,024
	// capabilities, ...).
	ErrLimit = errors.New("record: limit exceeded")
	// ErrNonCanonical: the value decodes but is not the canonical byte
	// sequence of the record it decodes to.
	ErrNonCanonical = errors.New("record: value is not canonical")
	// ErrRevisionExhausted: the next descriptor revision would pass 2^63-1
	// (§4: the host switches to Error and stops publishing). Generation
	// issuance has its own rule and error in package mesh/gen.
	ErrRevisionExhausted = errors.New("record: descriptor revision exhausted")
)

// FieldError reports one invalid field. Field is a JSON path inside the
// record ("descriptor.capacity.spotTypes[2].limit") or the name of a key
// input ("meshName", "routingId", "id").
type FieldError struct {
	Kind   Kind
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("record %s: field %s: %s", e.Kind, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidField) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidField }

// SyntaxError reports JSON that this package refuses to read at all.
// Offset is the byte offset of the problem in the value.
type SyntaxError struct {
	Kind   Kind
	Offset int
	Reason string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("record %s: malformed JSON at byte %d: %s", e.Kind, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *SyntaxError) Is(target error) bool { return target == ErrMalformed }

// UnknownVersionError reports a recordVersion this package does not read.
// Version is the member's value as canonical JSON text (for example `2`,
// `"1"` or `null`), so that the error names exactly what was found; text
// longer than 64 bytes is cut and ends in "…".
type UnknownVersionError struct {
	Kind    Kind
	Version string
}

func (e *UnknownVersionError) Error() string {
	return fmt.Sprintf("record %s: unknown recordVersion %s (this runtime reads %d)", e.Kind, e.Version, RecordVersion)
}

// Is makes errors.Is(err, ErrUnknownVersion) true.
func (e *UnknownVersionError) Is(target error) bool { return target == ErrUnknownVersion }

// MismatchError reports a top-level field whose copy inside descriptor
// differs.
type MismatchError struct {
	Kind       Kind
	Field      string // "ownerId", "leaseGeneration" or "descriptorRevision"
	TopLevel   string // the top-level value as canonical JSON text
	Descriptor string // the descriptor's value as canonical JSON text
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("record %s: %s is %s at top level but %s in descriptor", e.Kind, e.Field, e.TopLevel, e.Descriptor)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// LimitError reports a bound exceeded by a record or value.
type LimitError struct {
	Kind   Kind
	What   string // "value bytes", "descriptor.objectCapabilities entries", ...
	Limit  int
	Actual int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("record %s: %s is %d, limit %d", e.Kind, e.What, e.Actual, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// NonCanonicalError reports a value that decodes but differs from the
// canonical encoding of what it decodes to. Offset is the first differing
// byte.
type NonCanonicalError struct {
	Kind   Kind
	Offset int
}

func (e *NonCanonicalError) Error() string {
	return fmt.Sprintf("record %s: value is not canonical (first difference at byte %d)", e.Kind, e.Offset)
}

// Is makes errors.Is(err, ErrNonCanonical) true.
func (e *NonCanonicalError) Is(target error) bool { return target == ErrNonCanonical }
