package locstore

import (
	"errors"
	"fmt"
)

// ErrArgument is matched (errors.Is) by every *ArgumentError.
var ErrArgument = errors.New("locstore: invalid argument")

// ErrUnavailable is matched by provider failures: the store could not be
// reached or did not answer in time. After such an error the outcome of a
// Write is unknown; the caller re-reads the same key (spec §10).
var ErrUnavailable = errors.New("locstore: store unavailable")

// ErrWriteRefused is matched by a provider failure in which the store
// refused a write outright and wrote nothing, and will refuse writes until
// an operator acts: Redis at its maxmemory with the noeviction policy, or
// writes stopped after a failed snapshot save. Such an error also matches
// ErrUnavailable, but unlike the others its outcome is known — not applied
// — so the caller need not re-read to decide, and asking again at once
// does not help. (Refusals that pass by themselves — a read-only replica
// during a failover, too few replicas while one reconnects — are ordinary
// ErrUnavailable failures.)
var ErrWriteRefused = errors.New("locstore: write refused by the store, nothing written")

// ErrPermission is matched by a provider failure in which the store
// refused an operation to the account the provider uses (a Redis ACL rule
// without a command the operation runs). Such an error also matches
// ErrUnavailable; asking again does not help until an operator changes the
// rule. Unlike ErrWriteRefused it does not say that nothing was written: a
// script stopped at a command it may not run keeps what it wrote before.
var ErrPermission = errors.New("locstore: operation not permitted to the store's account")

// ErrDataLost is matched when the framework finds that the store no longer
// holds what it wrote and saw (its namespace marker gone, a live owner lease
// vanished): the store lost data — FLUSHALL, eviction, a failover to a
// replica without persistence (docs/store-redis.md). The framework detects
// it (mesh/marker, mesh/lease); a provider that can see its store go back in
// time returns it too, inside its *ProviderError (locstore/redis: the commit
// sequence going back after a failover that lost acknowledged writes).
var ErrDataLost = errors.New("locstore: store data lost")

// ArgumentError reports input outside the SPI bounds. Nothing was sent to
// the store.
type ArgumentError struct {
	Op     string // "read", "write", "scan"
	Field  string // e.g. "key", "mutations[3].value"
	Reason string
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("locstore %s: invalid %s: %s", e.Op, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrArgument) true.
func (e *ArgumentError) Is(target error) bool { return target == ErrArgument }

// ProviderError wraps a provider failure (network, timeout, server error).
type ProviderError struct {
	Provider string
	Op       string
	Err      error
	// Refused: the store refused the write and wrote nothing
	// (ErrWriteRefused).
	Refused bool
	// Denied: the store refused the operation to this account
	// (ErrPermission).
	Denied bool
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("locstore %s %s: %v", e.Provider, e.Op, e.Err)
}

// Unwrap exposes the cause (for example context.DeadlineExceeded).
func (e *ProviderError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true, errors.Is(err,
// ErrWriteRefused) for a refusal and errors.Is(err, ErrPermission) for a
// denial.
func (e *ProviderError) Is(target error) bool {
	return target == ErrUnavailable || e.Refused && target == ErrWriteRefused || e.Denied && target == ErrPermission
}
