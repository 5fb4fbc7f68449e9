// Package memory is the in-process Relocation Store provider: the embedded
// default for a single-process node and the fast store for unit tests.
//
// It implements the relocstore SPI with the same observable semantics as the
// production (Redis) provider, checked by the same contract suite
// (relocstore/storetest): immutable payloads under framework-issued
// references, whole-payload comparison on Put, expiry judged only by the
// provider clock (injectable, see ManualClock), and tombstones that keep a
// deleted or expired reference from ever being reused for other bytes.
//
// Everything lives in one map guarded by one lock, so each operation is one
// atomic step. The store keeps a private copy of every payload it accepts and
// hands out copies on Read, so neither the caller's buffer nor a returned
// slice can change the stored bytes.
package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meshnode/meshnode/internal/storeclock"
	"github.com/meshnode/meshnode/relocstore"
)

// ProviderName is the name configuration uses to select this provider.
const ProviderName = "memory"

// sweepInterval is how often (on the provider clock) an operation also
// purges expired payloads and outlived tombstones, so memory stays bounded
// without a background goroutine.
const sweepInterval = time.Minute

// ErrClosed is the cause of the provider error returned by every operation
// after Close. It is wrapped in a *relocstore.ProviderError, so
// errors.Is(err, relocstore.ErrUnavailable) holds too.
var ErrClosed = errors.New("memory relocation store is closed")

// Clock is the provider clock: StoreNow of every result and the only clock
// expiry is judged by.
type Clock = storeclock.Clock

// SystemClock is the default Clock: the host's time.
type SystemClock = storeclock.System

// ManualClock is a Clock that only moves when told to (Advance), for
// deterministic tests of expiry.
type ManualClock = storeclock.Manual

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock { return storeclock.NewManual(start) }

// Option configures New.
type Option func(*options) error

type options struct {
	clock     Clock
	tombstone time.Duration
	logger    *slog.Logger
}

// WithClock sets the provider clock (default SystemClock).
func WithClock(c Clock) Option {
	return func(o *options) error {
		if c == nil {
			return errors.New("memory: WithClock: nil clock")
		}
		o.clock = c
		return nil
	}
}

// WithTombstoneRetention sets how long a deleted or expired reference keeps
// the digest of its bytes (default relocstore.DefaultRetention). While it
// does, a Put of other bytes to that reference is Conflict. Bounds are those
// of a payload retention: 1ms..relocstore.MaxRetention.
func WithTombstoneRetention(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Millisecond || d > relocstore.MaxRetention {
			return fmt.Errorf("memory: WithTombstoneRetention: %v outside 1ms..%v", d, relocstore.MaxRetention)
		}
		o.tombstone = d
		return nil
	}
}

// WithLogger sets the logger for diagnostic events (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("memory: WithLogger: nil logger")
		}
		o.logger = l
		return nil
	}
}

// entry is the state of one reference: a live payload or a tombstone.
type entry struct {
	// data is the private copy of the payload while live; nil once the entry
	// is a tombstone (the bytes are freed, the digest stays).
	data []byte
	live bool
	// expiresAt is the payload's expiry (live entries).
	expiresAt time.Time
	// size and digest identify the bytes of a tombstone, so a later Put can
	// tell "the same bytes again" from "other bytes" without keeping them.
	size   int
	digest [sha256.Size]byte
	// tombUntil is when a tombstone is forgotten.
	tombUntil time.Time
}

// Store is the in-memory Relocation Store. The zero value is not usable;
// call New. It is safe for concurrent use.
type Store struct {
	clock     Clock
	tombstone time.Duration
	log       *slog.Logger

	mu        sync.Mutex // guards everything below
	closed    bool
	refs      map[string]*entry
	nextSweep time.Time
}

var _ relocstore.Store = (*Store)(nil)

// New returns an empty store. It fails only on an invalid option.
func New(opts ...Option) (*Store, error) {
	o := options{
		clock:     SystemClock{},
		tombstone: relocstore.DefaultRetention,
		logger:    slog.Default(),
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Store{
		clock:     o.clock,
		tombstone: o.tombstone,
		log:       o.logger.With("provider", ProviderName, "store", "relocation"),
		refs:      make(map[string]*entry),
	}, nil
}

// fail wraps a provider failure so errors.Is(err, relocstore.ErrUnavailable)
// holds and the cause stays visible to errors.Is / errors.As.
func fail(op string, err error) error {
	return &relocstore.ProviderError{Provider: ProviderName, Op: op, Err: err}
}

// begin takes the lock and checks the preconditions every operation shares:
// the store is open and the caller has not given up. A cancelled context is
// honoured before anything changes, so such a call has no effect at all.
// On success the caller holds s.mu and gets the provider's now.
func (s *Store) begin(ctx context.Context, op string) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, fail(op, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return time.Time{}, fail(op, ErrClosed)
	}
	now := s.clock.Now()
	if !now.Before(s.nextSweep) {
		s.sweepLocked(now)
		s.nextSweep = now.Add(sweepInterval)
	}
	return now, nil
}

// lookupLocked returns the entry for ref as seen at now: expired payloads
// become tombstones and outlived tombstones disappear.
func (s *Store) lookupLocked(ref string, now time.Time) *entry {
	e := s.refs[ref]
	if e == nil {
		return nil
	}
	if e.live && !now.Before(e.expiresAt) {
		// Expired: from ExpiresAt on the payload is Missing, and the
		// tombstone is kept for the tombstone retention counted from expiry.
		e.toTombstone(e.expiresAt.Add(s.tombstone))
	}
	if !e.live && !now.Before(e.tombUntil) {
		delete(s.refs, ref)
		return nil
	}
	return e
}

// toTombstone drops the bytes and keeps only their identity.
func (e *entry) toTombstone(until time.Time) {
	e.size = len(e.data)
	e.digest = sha256.Sum256(e.data)
	e.data = nil
	e.live = false
	e.tombUntil = until
}

func (s *Store) sweepLocked(now time.Time) {
	for ref := range s.refs {
		s.lookupLocked(ref, now)
	}
}

// Put implements relocstore.Store.
func (s *Store) Put(ctx context.Context, ref string, payload []byte, retention time.Duration) (relocstore.PutResult, error) {
	const op = "put"
	ret, err := relocstore.ValidatePut(ref, payload, retention)
	if err != nil {
		return relocstore.PutResult{}, err
	}
	now, err := s.begin(ctx, op)
	if err != nil {
		return relocstore.PutResult{}, err
	}
	defer s.mu.Unlock()

	e := s.lookupLocked(ref, now)
	switch {
	case e == nil:
		// Never seen (or its tombstone has been forgotten): store.
	case e.live:
		if !bytes.Equal(e.data, payload) {
			return relocstore.PutResult{Outcome: relocstore.Conflict, StoreNow: now}, nil
		}
		// The same bytes again, typically a retry after a lost result: keep
		// the longer of the two expiries, never shorten.
		if exp := now.Add(ret); exp.After(e.expiresAt) {
			e.expiresAt = exp
		}
		return relocstore.PutResult{Outcome: relocstore.AlreadyStored, ExpiresAt: e.expiresAt, StoreNow: now}, nil
	default:
		// Tombstone: only the very same bytes may come back.
		if len(payload) != e.size || sha256.Sum256(payload) != e.digest {
			return relocstore.PutResult{Outcome: relocstore.Conflict, StoreNow: now}, nil
		}
	}
	// Private copy: the caller may reuse its buffer as soon as Put returns.
	data := make([]byte, len(payload))
	copy(data, payload)
	exp := now.Add(ret)
	s.refs[ref] = &entry{data: data, live: true, expiresAt: exp}
	return relocstore.PutResult{Outcome: relocstore.Stored, ExpiresAt: exp, StoreNow: now}, nil
}

// Read implements relocstore.Store. The returned bytes are a fresh copy, so
// nothing the caller does to them reaches the store.
func (s *Store) Read(ctx context.Context, ref string) (relocstore.ReadResult, error) {
	const op = "read"
	if err := relocstore.ValidateRef(op, ref); err != nil {
		return relocstore.ReadResult{}, err
	}
	now, err := s.begin(ctx, op)
	if err != nil {
		return relocstore.ReadResult{}, err
	}
	defer s.mu.Unlock()
	e := s.lookupLocked(ref, now)
	if e == nil || !e.live {
		return relocstore.ReadResult{StoreNow: now}, nil
	}
	out := make([]byte, len(e.data))
	copy(out, e.data)
	return relocstore.ReadResult{Found: true, Bytes: out, ExpiresAt: e.expiresAt, StoreNow: now}, nil
}

// Renew implements relocstore.Store. It extends the expiry to
// StoreNow+retention and never shortens it.
func (s *Store) Renew(ctx context.Context, ref string, retention time.Duration) (relocstore.RenewResult, error) {
	const op = "renew"
	ret, err := relocstore.ValidateRenew(ref, retention)
	if err != nil {
		return relocstore.RenewResult{}, err
	}
	now, err := s.begin(ctx, op)
	if err != nil {
		return relocstore.RenewResult{}, err
	}
	defer s.mu.Unlock()
	e := s.lookupLocked(ref, now)
	if e == nil || !e.live {
		return relocstore.RenewResult{StoreNow: now}, nil
	}
	if exp := now.Add(ret); exp.After(e.expiresAt) {
		e.expiresAt = exp
	}
	return relocstore.RenewResult{Renewed: true, ExpiresAt: e.expiresAt, StoreNow: now}, nil
}

// Delete implements relocstore.Store. A live payload becomes a tombstone for
// the tombstone retention; deleting a tombstone or an unknown ref is a no-op.
func (s *Store) Delete(ctx context.Context, ref string) error {
	const op = "delete"
	if err := relocstore.ValidateRef(op, ref); err != nil {
		return err
	}
	now, err := s.begin(ctx, op)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	if e := s.lookupLocked(ref, now); e != nil && e.live {
		e.toTombstone(now.Add(s.tombstone))
	}
	return nil
}

// Close implements relocstore.Store: it drops every payload; later calls
// fail with ErrClosed. A second Close is a no-op.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.refs = nil
		s.log.Debug("relocation store closed")
	}
	return nil
}
