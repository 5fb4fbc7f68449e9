// Package relocstore defines the Relocation Store provider SPI: immutable
// payloads under framework-issued references, with retention judged by the
// provider's clock (spec §1.2, §7.1, §9.3, §10; shared design STORE-SPI.md).
//
// Only two things live here: an Instance Spot cold activation's creation info
// plus first message, and completion records of requests that finish after a
// relocation. The relocation handoff payload never touches this store.
//
// Outcomes are results, not errors: Stored / AlreadyStored / Conflict for Put,
// Found / Missing for Read, Renewed / Missing for Renew. Bad input is an
// *ArgumentError (errors.Is(err, ErrArgument)); a provider failure matches
// ErrUnavailable, after which the outcome is unknown and the caller reads or
// Puts the same bytes again (both are safe by contract) — except a Read
// that also matches ErrIntegrity: the stored bytes are known to be corrupt.
package relocstore

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Bounds of the SPI.
const (
	MaxRefBytes      = 4096     // reference: UTF-8, 1..4096 bytes
	MaxPayloadBytes  = 64 << 20 // one Put: at most 64 MiB
	DefaultRetention = 24 * time.Hour
	MaxRetention     = 100 * 365 * 24 * time.Hour
)

// Store is the Relocation Store SPI. Implementations are safe for concurrent
// use and never change bytes they have returned.
type Store interface {
	// Put stores payload under ref. The same bytes at the same ref are
	// AlreadyStored (retention is not shortened); different bytes are
	// Conflict. Retention 0 means DefaultRetention. The provider copies what
	// it keeps; the caller may reuse payload after Put returns.
	Put(ctx context.Context, ref string, payload []byte, retention time.Duration) (PutResult, error)
	// Read returns the stored bytes, or Found == false when absent/expired.
	Read(ctx context.Context, ref string) (ReadResult, error)
	// Renew extends retention to StoreNow+retention (0 = DefaultRetention).
	// It never changes the bytes.
	Renew(ctx context.Context, ref string, retention time.Duration) (RenewResult, error)
	// Delete removes ref; it is idempotent and succeeds when ref is absent.
	Delete(ctx context.Context, ref string) error
	// Close releases provider resources; called exactly once.
	Close() error
}

// PutOutcome is the result kind of a Put.
type PutOutcome uint8

const (
	Stored PutOutcome = iota + 1
	AlreadyStored
	Conflict
)

func (o PutOutcome) String() string {
	switch o {
	case Stored:
		return "Stored"
	case AlreadyStored:
		return "AlreadyStored"
	case Conflict:
		return "Conflict"
	}
	return fmt.Sprintf("PutOutcome(%d)", uint8(o))
}

// PutResult: ExpiresAt is set for Stored and AlreadyStored.
type PutResult struct {
	Outcome   PutOutcome
	ExpiresAt time.Time
	StoreNow  time.Time
}

// ReadResult is Found{Bytes, ExpiresAt, StoreNow} or Missing{StoreNow}.
type ReadResult struct {
	Found     bool
	Bytes     []byte // never changes after return
	ExpiresAt time.Time
	StoreNow  time.Time
}

// RenewResult is Renewed{ExpiresAt, StoreNow} or Missing{StoreNow}.
type RenewResult struct {
	Renewed   bool
	ExpiresAt time.Time
	StoreNow  time.Time
}

// ErrArgument is matched by every *ArgumentError.
var ErrArgument = errors.New("relocstore: invalid argument")

// ErrUnavailable is matched by provider failures.
var ErrUnavailable = errors.New("relocstore: store unavailable")

// ErrIntegrity is matched (besides ErrUnavailable) by a Read whose provider
// found the stored bytes not matching the length or digest recorded at Put
// (the Redis provider checks both on every Read). The bytes are not
// returned, and reading again does not help: for a caller the payload is
// corrupt — for an Instance Spot's stored first message that is DataLost
// (§10 "If the payload is permanently missing or the checksum differs, it's
// DataLost"). A provider that cannot tell returns its bytes as Found and
// lets the caller's own checksum judge them.
var ErrIntegrity = errors.New("stored bytes do not match the length or SHA-256 recorded when they were stored")

// ArgumentError reports input outside the SPI bounds; nothing reached the store.
type ArgumentError struct {
	Op, Field, Reason string
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("relocstore %s: invalid %s: %s", e.Op, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrArgument) true.
func (e *ArgumentError) Is(target error) bool { return target == ErrArgument }

// ProviderError wraps a provider failure.
type ProviderError struct {
	Provider, Op string
	Err          error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("relocstore %s %s: %v", e.Provider, e.Op, e.Err)
}

// Unwrap exposes the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *ProviderError) Is(target error) bool { return target == ErrUnavailable }

// ValidateRef checks a reference against the SPI bounds.
func ValidateRef(op, ref string) error {
	switch {
	case len(ref) == 0:
		return &ArgumentError{Op: op, Field: "ref", Reason: "empty reference"}
	case len(ref) > MaxRefBytes:
		return &ArgumentError{Op: op, Field: "ref", Reason: fmt.Sprintf("reference is %d bytes, limit %d", len(ref), MaxRefBytes)}
	case !utf8.ValidString(ref):
		return &ArgumentError{Op: op, Field: "ref", Reason: "reference is not valid UTF-8"}
	}
	return nil
}

// ValidatePayload checks a Put payload size.
func ValidatePayload(payload []byte) error {
	if len(payload) > MaxPayloadBytes {
		return &ArgumentError{Op: "put", Field: "payload", Reason: fmt.Sprintf("payload is %d bytes, limit %d", len(payload), MaxPayloadBytes)}
	}
	return nil
}

// EffectiveRetention validates a retention and applies the default for 0.
func EffectiveRetention(op string, d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return DefaultRetention, nil
	case d < time.Millisecond || d > MaxRetention:
		return 0, &ArgumentError{Op: op, Field: "retention", Reason: fmt.Sprintf("retention %v outside 1ms..%v", d, MaxRetention)}
	}
	return d, nil
}

// ValidatePut checks Put's arguments — the reference, the payload size, the
// retention, in that order, so every provider refuses bad input with the same
// error — and returns the effective retention (0 is DefaultRetention).
func ValidatePut(ref string, payload []byte, retention time.Duration) (time.Duration, error) {
	const op = "put"
	if err := ValidateRef(op, ref); err != nil {
		return 0, err
	}
	if err := ValidatePayload(payload); err != nil {
		return 0, err
	}
	return EffectiveRetention(op, retention)
}

// ValidateRenew checks Renew's arguments (reference, then retention) and
// returns the effective retention, as ValidatePut does for Put.
func ValidateRenew(ref string, retention time.Duration) (time.Duration, error) {
	const op = "renew"
	if err := ValidateRef(op, ref); err != nil {
		return 0, err
	}
	return EffectiveRetention(op, retention)
}
