package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/gen"
)

// Errors of the manager (the gate's own are in gate.go).
var (
	// ErrInvalidConfig reports a Config that cannot work (missing store,
	// bad timing); it wraps the *TimingError values when timing is
	// the cause.
	ErrInvalidConfig = errors.New("lease: invalid configuration")
	// ErrOwnerIDInUse reports that the freshly generated OwnerId already has
	// an owner-lease record written by someone else. With 128 random bits
	// this means a broken random source or foreign data; acquisition stops
	// rather than guessing.
	ErrOwnerIDInUse = errors.New("lease: owner id already has a foreign owner-lease record")
	// ErrRenewTimeout is the cause a store call is cancelled with when it
	// exceeds Timing.RenewTimeout.
	ErrRenewTimeout = errors.New("lease: store call exceeded the renew timeout")
	// ErrManagerStopped is the cause in-flight store calls are cancelled with
	// by Release and Close.
	ErrManagerStopped = errors.New("lease: manager stopped")
)

// Config configures Acquire.
type Config struct {
	// Store is the Location Store. Required. The manager never closes it.
	Store locstore.Store
	// Timing is the §5 configuration; the zero value means DefaultTiming().
	Timing Timing
	// Clock is the local monotonic clock; nil means SystemClock().
	Clock Clock
	// Logger receives structured logs (keys: owner, gen, deadline,
	// remaining, err); nil means slog.Default().
	Logger *slog.Logger
	// OnEvent, if set, is called synchronously for every lease event (from
	// the renew goroutine, a clock timer or the caller of Acquire/Release).
	// It must return quickly and must not call Release or Close.
	OnEvent func(Event)
	// Reacquire: after the lease is lost (expired in the store, or
	// replaced — not after data loss or a release) keep trying to acquire
	// it again, with the same OwnerId and a new LeaseGeneration, at once
	// and then every renew interval. On success EventReacquired reports the new generation
	// while the gate stays shut; the owner calls Resume once it has
	// re-adopted what it still holds (docs/LEASE.md "Riding out a store
	// outage").
	Reacquire bool
}

// EventKind classifies an Event.
type EventKind uint8

// Event kinds.
const (
	// EventAcquired: the lease was acquired; the gate is open until Deadline.
	EventAcquired EventKind = iota + 1
	// EventRenewed: a renew applied; Deadline is the refreshed deadline.
	EventRenewed
	// EventRenewFailed: a renew attempt timed out or failed; the deadline
	// was not extended (Err says why).
	EventRenewFailed
	// EventReconstructed: a lost result was settled by re-reading the
	// record, which is still ours; Deadline comes from that read.
	EventReconstructed
	// EventExpired: the gate closed because the deadline passed.
	EventExpired
	// EventLost: the lease is lost for good (Err says why).
	EventLost
	// EventReleased: the lease was released or the manager closed.
	EventReleased
	// EventReacquired: after a loss, a new LeaseGeneration was acquired
	// (Generation); the gate stays shut until Resume.
	EventReacquired
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventRenewed:
		return "renewed"
	case EventRenewFailed:
		return "renew-failed"
	case EventReconstructed:
		return "reconstructed"
	case EventExpired:
		return "expired"
	case EventLost:
		return "lost"
	case EventReleased:
		return "released"
	case EventReacquired:
		return "reacquired"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event reports a change of the lease.
type Event struct {
	Kind       EventKind
	OwnerID    string
	Generation uint64
	// Deadline is the gate's local admission deadline after the event (a
	// reading of the manager's Clock).
	Deadline time.Duration
	Err      error
}

// Manager holds one host's owner lease (§3.1, §5): it acquires a new
// LeaseGeneration, renews the owner-lease record every renew interval,
// drives the admission Gate, and releases the record at shutdown (§11).
//
// Exactly one goroutine (the renew loop) runs between Acquire and
// Release/Close; Close waits for it, and for every timer, to finish.
type Manager struct {
	store  locstore.Store
	timing Timing
	clock  Clock
	log    *slog.Logger // with the owner id; logger() adds the generation
	// genLog is log with the current generation ("lease_gen": the node's
	// own lines name its lifecycle generation "gen"), replaced when the
	// generation changes: read by the renewal loop and by callers of
	// Resume, so swapped atomically rather than assigned.
	genLog  atomic.Pointer[slog.Logger]
	onEvent func(Event)

	ownerID   string
	key       string // owner-lease record key
	gate      *Gate
	reacquire bool

	mu           sync.Mutex
	gen          uint64    // set once by acquire
	acquiredAt   time.Time // store time the generation was planned (record field)
	lastStoreNow time.Time // latest StoreNow observed (the record's updatedAt)
	version      string    // last known version of our record
	uncertain    bool      // a write's outcome is unknown: re-read before writing
	lost         bool
	lostFor      error         // why (markLost)
	lostHeals    bool          // the loss was reported as one a reacquisition heals
	lostRecord   LostRecord    // what became of the owner-lease record (markLost)
	resumable    bool          // reacquired after a loss; the gate waits for Resume
	lastDeadline time.Duration // the deadline of the latest acquire/renew (Resume reopens at it)
	lastStart    time.Duration // t0 of the last successful acquire/renew; the first tick is due at lastStart + interval
	renewErr     error         // why the renewals since the last success failed (nil: the last one succeeded)
	renewFails   int           // renewals failed since the last success (failed: the WARN lines of a store outage)

	cancelLoop context.CancelCauseFunc
	loopDone   chan struct{}
	stopOnce   sync.Once

	releaseOnce sync.Once
	releaseErr  error
	closeOnce   sync.Once
}

// NewOwnerID returns a fresh OwnerId: 128 bits from crypto/rand as 32
// lowercase hex characters. OwnerIds are never reused (§3.1) because nothing
// ever derives one from configuration or persists it: each Acquire makes a
// new one, and a collision of 128 random bits is not a practical event (it is
// still detected, see ErrOwnerIDInUse).
func NewOwnerID() string {
	var b [16]byte
	// crypto/rand.Read never returns an error (it aborts the program if the
	// system source fails).
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Acquire creates a new OwnerId, issues a new LeaseGeneration and writes the
// owner-lease record, all in one conditional batch:
//
//	conditions: counter unchanged (IfVersion, or IfMissing when absent),
//	            owner-lease key IfMissing
//	mutations:  Put counter = next, PutExpiring owner-lease record (TTL)
//
// A Conflict (another host took the next generation first) re-reads the
// counter and tries again until ctx ends. A lost result is settled by reading
// the owner-lease key (§10). A counter that cannot issue (§3.2) returns an
// error matching gen.ErrGenerationExhausted and writes nothing.
//
// On success the renew loop runs until Release or Close. ctx bounds only the
// acquisition.
func Acquire(ctx context.Context, cfg Config) (*Manager, error) {
	m, err := newManager(cfg)
	if err != nil {
		return nil, err
	}
	if err := m.acquire(ctx); err != nil {
		m.gate.shut(ErrLeaseReleased)
		m.gate.stop()
		return nil, err
	}
	loopCtx, cancel := context.WithCancelCause(context.Background())
	m.cancelLoop = cancel
	m.loopDone = make(chan struct{})
	go m.run(loopCtx)
	return m, nil
}

func newManager(cfg Config) (*Manager, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: no Location Store", ErrInvalidConfig)
	}
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming()
	}
	if err := cfg.Timing.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ownerID := NewOwnerID()
	key, err := ownerLeaseKey(ownerID)
	if err != nil {
		return nil, fmt.Errorf("lease: owner-lease key: %w", err)
	}
	m := &Manager{
		store:     cfg.Store,
		timing:    cfg.Timing,
		clock:     cfg.Clock,
		log:       cfg.Logger.With("owner", ownerID),
		onEvent:   cfg.OnEvent,
		ownerID:   ownerID,
		key:       key,
		reacquire: cfg.Reacquire,
	}
	m.gate = newGate(cfg.Clock, m.onGateClose)
	return m, nil
}

// OwnerID returns this host run's OwnerId.
func (m *Manager) OwnerID() string { return m.ownerID }

// logger is the manager's logger with the current generation once there
// is one.
func (m *Manager) logger() *slog.Logger {
	if l := m.genLog.Load(); l != nil {
		return l
	}
	return m.log
}

// Generation returns this host run's LeaseGeneration.
func (m *Manager) Generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// Gate returns the admission gate every §5 blocked target consults.
func (m *Manager) Gate() *Gate { return m.gate }

// Timing returns the validated timing in use.
func (m *Manager) Timing() Timing { return m.timing }

// Fence returns the owner-lease record's key and its version as of the
// latest successful acquire, renew or re-read. A store change that may only
// happen while this host run holds its lease (descriptor publishing) puts
// locstore.IfVersion(key, version) into its batch, so the batch conflicts
// once the record expired, was deleted or replaced.
//
// version is empty once the lease is lost. After a renew whose answer was
// lost it may be stale until the next tick re-reads the record; a batch
// fenced on it then conflicts, and the caller re-reads the key itself.
func (m *Manager) Fence() (key, version string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost {
		return m.key, ""
	}
	return m.key, m.version
}

// callContext bounds one store call (or one renew attempt) by RenewTimeout
// on the manager's Clock, so that a fake clock controls timeouts in tests as
// it controls ticks.
func (m *Manager) callContext(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	t := m.clock.AfterFunc(m.timing.RenewTimeout, func() { cancel(ErrRenewTimeout) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// annotate adds the cancellation cause (ErrRenewTimeout, ErrManagerStopped)
// to a store error, so that logs and errors.Is can tell a timeout from a
// store failure.
func annotate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

func (m *Manager) read(ctx context.Context, key string) (locstore.ReadResult, Observation, error) {
	cctx, done := m.callContext(ctx)
	defer done()
	t0 := m.clock.Now()
	rr, err := m.store.Read(cctx, key)
	t1 := m.clock.Now()
	return rr, Observation{SentAt: t0, ReceivedAt: t1, StoreNow: rr.StoreNow, ExpiresAt: rr.ExpiresAt}, annotate(cctx, err)
}

func (m *Manager) acquire(ctx context.Context) error {
	counterKey, err := leaseCounterKey()
	if err != nil {
		return fmt.Errorf("lease: acquire: counter key: %w", err)
	}
	var pause time.Duration
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lease: acquire: %w", context.Cause(ctx))
		}
		done, err := m.acquireOnce(ctx, counterKey, EventAcquired)
		var failed *notAppliedError
		if !errors.As(err, &failed) {
			if err != nil || done {
				return err
			}
			continue // a conflict: another host took the counter value; again at once
		}
		// The store answers reads but failed the write (a read-only
		// replica in a failover, too few replicas): asked again at once,
		// it was asked thousands of times a second, each with a WARN line.
		// The first retry goes at once, then paced, doubling up to the
		// renew interval.
		if attempt > 1 {
			pause = min(max(2*pause, acquireRetryMin), m.timing.RenewInterval)
		}
		if attempt == 1 || attempt%10 == 0 {
			m.logger().Warn("owner lease: not acquired yet: the store failed the write; trying again",
				"attempt", attempt, "retry_in", pause, "err", failed.err)
		}
		if pause > 0 && !m.waitUntil(ctx, m.clock.Now()+pause) {
			return fmt.Errorf("lease: acquire: %w (last failure: %w)", context.Cause(ctx), failed.err)
		}
	}
}

// acquireRetryMin is the first pause between acquire attempts whose write
// failed.
const acquireRetryMin = 50 * time.Millisecond

// notAppliedError is an acquire attempt whose write failed and, as the read
// of the lease key then showed, did not apply: try again.
type notAppliedError struct{ err error }

func (e *notAppliedError) Error() string {
	return "lease: acquire: the write failed and did not apply: " + e.err.Error()
}

func (e *notAppliedError) Unwrap() error { return e.err }

// acquireOnce makes one attempt. It returns done=false to ask for another
// attempt: with no error after a Conflict, with a *notAppliedError after a
// write that failed and did not apply.
func (m *Manager) acquireOnce(ctx context.Context, counterKey string, kind EventKind) (bool, error) {
	cr, _, err := m.read(ctx, counterKey)
	if err != nil {
		return false, fmt.Errorf("lease: acquire: read LeaseGeneration counter: %w", err)
	}
	var current uint64
	if cr.Found {
		if current, err = decodeCounter(cr.Value); err != nil {
			return false, fmt.Errorf("lease: acquire: %w: %w", gen.ErrInvalidCounter, err)
		}
	}
	next, err := gen.Next(current, cr.Found)
	if err != nil {
		m.logger().Error("cannot issue a LeaseGeneration", "counter", current, "err", err)
		return false, fmt.Errorf("lease: acquire: %w", err)
	}
	rec, err := encodeOwnerLease(m.ownerID, next, cr.StoreNow, cr.StoreNow)
	if err != nil {
		return false, fmt.Errorf("lease: acquire: encode owner lease: %w", err)
	}
	cval, err := encodeCounter(next)
	if err != nil {
		return false, fmt.Errorf("lease: acquire: encode counter: %w", err)
	}
	counterCond := locstore.IfMissing(counterKey)
	if cr.Found {
		counterCond = locstore.IfVersion(counterKey, cr.Version)
	}
	req := locstore.WriteRequest{
		Conditions: []locstore.Condition{counterCond, locstore.IfMissing(m.key)},
		Mutations: []locstore.Mutation{
			locstore.Put(counterKey, cval),
			locstore.PutExpiring(m.key, rec, m.timing.TTL),
		},
	}
	cctx, done := m.callContext(ctx)
	t0 := m.clock.Now()
	wr, err := m.store.Write(cctx, req)
	t1 := m.clock.Now()
	err = annotate(cctx, err)
	done()

	switch {
	case err != nil && errors.Is(err, locstore.ErrArgument):
		return false, fmt.Errorf("lease: acquire: %w", err)
	case err == nil && wr.Applied && len(wr.Versions) == 2 && wr.Versions[1] != "":
		m.mu.Lock()
		m.gen, m.version, m.lastStart, m.renewErr, m.renewFails = next, wr.Versions[1], t0, nil, 0
		m.acquiredAt, m.lastStoreNow = cr.StoreNow, wr.StoreNow
		m.mu.Unlock()
		obs := Observation{SentAt: t0, ReceivedAt: t1, StoreNow: wr.StoreNow, ExpiresAt: WriteExpiry(wr.StoreNow, m.timing.TTL)}
		return true, m.opened(obs, kind)
	}
	// Conflict, a lost result, or an applied result without the version we
	// need: only our own key can say whether we hold a lease now (§10).
	// Another host bumping the counter is the ordinary Conflict; then the key
	// is missing and we try again with a fresh counter read.
	switch {
	case errors.Is(err, locstore.ErrWriteRefused):
		// Nothing written now; the read says whether an earlier attempt
		// whose answer was lost did write.
		m.logger().Debug("owner-lease acquire refused by the store; reading the lease key", "next_lease_gen", next, "err", err)
	case err != nil:
		m.logger().Debug("owner-lease acquire result unknown; re-reading", "next_lease_gen", next, "err", err)
	}
	rr, obs, rerr := m.read(ctx, m.key)
	if rerr != nil {
		if err == nil {
			err = errors.New("conflict")
		}
		return false, fmt.Errorf("lease: acquire: outcome unknown: %w", errors.Join(err, rerr))
	}
	if rr.Found && errors.Is(err, locstore.ErrPermission) {
		// The script was stopped at a command the account may not run
		// after it had written part of the batch (a Redis rule without
		// +pexpireat: the record, without its expiry). Not a lease to
		// adopt: every renewal would be denied the same. Remove what was
		// written if the store lets us, and fail as below (until review
		// O, 2026-12-08, such a record was adopted and the node started,
		// to fail each renewal: TestAcquireDeniedPartWayOnRedis).
		cctx, done := m.callContext(ctx)
		_, _ = m.store.Write(cctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion(m.key, rr.Version)},
			Mutations: []locstore.Mutation{locstore.Delete(m.key)}})
		done()
		return false, fmt.Errorf("lease: acquire: %w", err)
	}
	if !rr.Found {
		if errors.Is(err, locstore.ErrWriteRefused) || errors.Is(err, locstore.ErrPermission) {
			// Nothing was written and the store will refuse the next
			// attempt too (out of memory, a failed save, an account
			// that may not run the write): say so rather than try
			// again as after a conflict.
			return false, fmt.Errorf("lease: acquire: %w", err)
		}
		if err != nil {
			return false, &notAppliedError{err: err}
		}
		return false, nil
	}
	l, derr := decodeOwnerLease(rr.Value)
	if derr != nil || l.OwnerID != m.ownerID || !gen.Valid(uint64(l.LeaseGeneration)) {
		return false, fmt.Errorf("%w: key %s (decode error: %v)", ErrOwnerIDInUse, m.key, derr)
	}
	// Our own record: a write of ours applied (possibly an earlier attempt's
	// that we had given up on). Whatever generation it carries was issued to
	// us by the counter in the same batch, so we adopt it.
	m.mu.Lock()
	m.gen, m.version, m.lastStart, m.renewErr, m.renewFails = uint64(l.LeaseGeneration), rr.Version, obs.SentAt, nil, 0
	m.acquiredAt, m.lastStoreNow = l.AcquiredAt.Time(), rr.StoreNow
	m.mu.Unlock()
	return true, m.opened(obs, kind)
}

// opened applies the first observation after acquisition.
func (m *Manager) opened(obs Observation, kind EventKind) error {
	deadline, err := AdmissionDeadline(obs, m.timing.FencingMargin)
	if err != nil {
		return fmt.Errorf("lease: acquire: %w", err)
	}
	m.mu.Lock()
	m.lastDeadline = deadline
	m.mu.Unlock()
	if kind == EventReacquired {
		// The gate stays shut (ErrLeaseLost) until the owner resumes. The
		// manager is resumable before the event goes out: the owner may
		// re-adopt its objects and call Resume at once (with nothing to
		// re-adopt, before this goroutine runs again), and a Resume that
		// found the manager not yet resumable left the gate shut for good.
		m.mu.Lock()
		m.lost, m.lostFor, m.lostRecord, m.uncertain, m.resumable = false, nil, 0, false, true
		m.mu.Unlock()
		m.logger().Warn("owner lease reacquired after its loss: new generation; new work waits until this run re-adopted its objects",
			m.deadlineAttrs(deadline, "new_lease_gen", m.Generation())...)
		m.emit(kind, deadline, nil)
		return nil
	}
	m.genLog.Store(m.log.With("lease_gen", m.Generation()))
	m.gate.extend(deadline)
	m.logger().Info("owner lease acquired", m.deadlineAttrs(deadline)...)
	m.emit(kind, deadline, nil)
	return nil
}

// deadlineAttrs presents an admission deadline for a log reader, followed
// by more. The deadline itself is a reading of the monotonic Clock, an
// offset from an origin private to this process ("deadline=1m35.02s" told
// an operator nothing), so the log shows the wall-clock instant it falls on
// ("deadline", RFC 3339 in the text format) and the time left
// ("remaining", negative once passed). Presentation only: the gate still
// judges by the monotonic clock alone.
func (m *Manager) deadlineAttrs(d time.Duration, more ...any) []any {
	left := d - m.clock.Now()
	attrs := []any{"deadline", time.Now().Add(left).Round(time.Millisecond), "remaining", left.Round(time.Millisecond)}
	return append(attrs, more...)
}

func (m *Manager) emit(kind EventKind, deadline time.Duration, err error) {
	if m.onEvent == nil {
		return
	}
	m.onEvent(Event{Kind: kind, OwnerID: m.ownerID, Generation: m.Generation(), Deadline: deadline, Err: err})
}

// onGateClose is the gate's closing callback. Lost and released are logged
// where they happen; expiry is only observable here.
func (m *Manager) onGateClose(reason error) {
	if !errors.Is(reason, ErrLeaseExpired) {
		return
	}
	d := m.gate.Deadline()
	m.logger().Warn("admission gate closed: local admission deadline passed without a successful renew", m.deadlineAttrs(d)...)
	m.emit(EventExpired, d, reason)
}

// run is the renew loop: one attempt every RenewInterval, measured from the
// start of the previous attempt (the first from the acquiring write's t0), so
// that a healthy host renews before its deadline (see Timing.Validate). An
// attempt longer than the interval delays the next one; attempts never
// overlap.
func (m *Manager) run(ctx context.Context) {
	defer close(m.loopDone)
	m.mu.Lock()
	next := m.lastStart + m.timing.RenewInterval
	m.mu.Unlock()
	for {
		if !m.waitUntil(ctx, next) {
			return
		}
		start := m.clock.Now()
		if !m.tick(ctx) {
			if !m.reacquireAfterLoss(ctx) {
				return
			}
			m.mu.Lock()
			start = m.lastStart
			m.mu.Unlock()
		}
		next = start + m.timing.RenewInterval
	}
}

// reacquireAfterLoss tries, at once and then every renew interval, to
// acquire a new LeaseGeneration for the same OwnerId once the lease was
// lost (Config.Reacquire), until it succeeds (true: the renew loop goes on
// under the new generation, the gate still shut until Resume) or the
// manager stops (false). A lease lost to store data loss is not reacquired: the store
// no longer holds what this run relied on.
func (m *Manager) reacquireAfterLoss(ctx context.Context) bool {
	m.mu.Lock()
	ok := m.lost && m.willReacquire()
	m.mu.Unlock()
	if !ok || ctx.Err() != nil {
		return false
	}
	counterKey, err := leaseCounterKey()
	if err != nil {
		return false
	}
	for attempt := 1; ; attempt++ {
		// The first attempt goes at once: the loss was found by a store
		// that answers, and every interval waited here is one more in
		// which the node's objects refuse work. A record still held by
		// another generation (not expired yet) is tried again every
		// renew interval.
		if attempt > 1 && !m.waitUntil(ctx, m.clock.Now()+m.timing.RenewInterval) {
			return false
		}
		if ctx.Err() != nil {
			return false
		}
		cctx, done := m.callContext(ctx)
		got, err := m.acquireOnce(cctx, counterKey, EventReacquired)
		done()
		if got && err == nil {
			return true // resumable since opened, before the event
		}
		if ctx.Err() != nil {
			return false
		}
		if attempt == 1 || attempt%10 == 0 {
			var why any = err
			if err == nil {
				why = "conflict: this owner's previous lease record has not expired yet, or another node took a lease generation meanwhile"
			}
			m.logger().Warn("owner lease: not reacquired yet; trying again every renew interval", "attempt", attempt, "err", why)
		}
	}
}

// willReacquire reports whether a loss for m.lostFor is followed by
// reacquireAfterLoss; m.mu is held. A data loss is not, nor anything
// after Fail.
func (m *Manager) willReacquire() bool {
	return m.reacquire && !errors.Is(m.lostFor, locstore.ErrDataLost)
}

// Resume reopens the gate after the reacquisition of generation gen
// (EventReacquired), at the deadline of the latest acquire or renew. It
// reports whether it did: not without a pending reacquisition, nor after a
// release or a new loss, nor for another generation than the current one
// (a re-adoption for an earlier reacquisition finishing late must not open
// the gate before the later one's has).
func (m *Manager) Resume(gen uint64) bool {
	m.mu.Lock()
	if !m.resumable || m.lost || m.gen != gen {
		m.mu.Unlock()
		return false
	}
	m.resumable = false
	d := m.lastDeadline
	m.mu.Unlock()
	if !m.gate.reopen(d) {
		return false
	}
	m.genLog.Store(m.log.With("lease_gen", m.Generation()))
	m.logger().Info("owner lease resumed: new work admitted again", m.deadlineAttrs(d)...)
	return true
}

// waitUntil blocks until the clock reads at least at, or ctx ends (false).
func (m *Manager) waitUntil(ctx context.Context, at time.Duration) bool {
	if d := at - m.clock.Now(); d > 0 {
		fired := make(chan struct{})
		t := m.clock.AfterFunc(d, func() { close(fired) })
		select {
		case <-fired:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return ctx.Err() == nil
}

// tick runs one renew attempt bounded by RenewTimeout. It returns false when
// the loop must end (lease lost, or the manager is stopping).
func (m *Manager) tick(parent context.Context) bool {
	ctx, done := m.callContext(parent)
	defer done()

	m.mu.Lock()
	uncertain := m.uncertain
	m.mu.Unlock()
	if uncertain {
		ok, cont := m.reconstruct(ctx)
		if !cont {
			return false
		}
		if !ok {
			return parent.Err() == nil
		}
	}
	if ctx.Err() != nil {
		// The reconstruction used up the attempt; the next tick writes.
		return parent.Err() == nil
	}
	return m.renew(ctx, parent)
}

// renew writes the same record under the last known version with a fresh
// TTL. Applied refreshes the deadline; Conflict means the store no longer
// holds our record at that version — expired, deleted or replaced (lost),
// or renewed by an earlier write whose answer was lost and which applied
// after the read that settled it: a read of our key decides.
func (m *Manager) renew(ctx, parent context.Context) bool {
	m.mu.Lock()
	version := m.version
	rec, err := encodeOwnerLease(m.ownerID, m.gen, m.acquiredAt, m.lastStoreNow)
	m.mu.Unlock()
	if err != nil {
		// Cannot happen for values acquire already encoded; never write a
		// record we could not build.
		m.failed(fmt.Errorf("encode owner lease: %w", err))
		return true
	}
	req := locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion(m.key, version)},
		Mutations:  []locstore.Mutation{locstore.PutExpiring(m.key, rec, m.timing.TTL)},
	}
	t0 := m.clock.Now()
	wr, err := m.store.Write(ctx, req)
	t1 := m.clock.Now()
	err = annotate(ctx, err)
	switch {
	case err != nil:
		if !errors.Is(err, locstore.ErrArgument) && !errors.Is(err, locstore.ErrWriteRefused) {
			// The request may have been applied: settle it by a read before
			// the next write (§10); never assume either outcome. (A refused
			// write wrote nothing: the next tick simply writes again.)
			m.mu.Lock()
			m.uncertain = true
			m.mu.Unlock()
		}
		if parent.Err() != nil {
			return false
		}
		m.failed(err)
		return true
	case !wr.Applied:
		// A Conflict says only that the record is no longer at the version
		// we knew: an earlier renew whose answer was lost may have applied
		// after the re-read that settled it. Only our key can say (§10).
		ok, cont := m.reconstruct(ctx)
		if !ok && cont {
			m.mu.Lock()
			m.uncertain = true // the read failed: the next tick reads again
			m.mu.Unlock()
		}
		return cont
	case len(wr.Versions) != 1 || wr.Versions[0] == "":
		m.mu.Lock()
		m.uncertain = true
		m.mu.Unlock()
		m.failed(fmt.Errorf("store applied the renew without reporting a version (%d versions)", len(wr.Versions)))
		return true
	}
	obs := Observation{SentAt: t0, ReceivedAt: t1, StoreNow: wr.StoreNow, ExpiresAt: WriteExpiry(wr.StoreNow, m.timing.TTL)}
	deadline, derr := AdmissionDeadline(obs, m.timing.FencingMargin)
	m.mu.Lock()
	m.version, m.lastStart, m.lastStoreNow = wr.Versions[0], t0, wr.StoreNow
	m.mu.Unlock()
	if derr != nil {
		// The record is renewed but the answer cannot justify a deadline
		// (e.g. no StoreNow): keep the old one.
		m.failed(derr)
		return true
	}
	m.mu.Lock()
	m.lastDeadline = deadline
	fails := m.renewedAfterFailuresLocked()
	m.mu.Unlock()
	m.gate.extend(deadline)
	m.logger().Debug("owner lease renewed", m.deadlineAttrs(deadline)...)
	m.logRenewedAgain(fails, deadline)
	m.emit(EventRenewed, deadline, nil)
	return true
}

// reconstruct settles a lost write by reading our key (§10). ok reports a
// fresh, valid observation of our record (the deadline is refreshed from the
// read itself); cont=false means the loop must end.
func (m *Manager) reconstruct(ctx context.Context) (ok, cont bool) {
	t0 := m.clock.Now()
	rr, err := m.store.Read(ctx, m.key)
	t1 := m.clock.Now()
	if err = annotate(ctx, err); err != nil {
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrManagerStopped) {
			return false, false
		}
		m.failed(fmt.Errorf("re-read after a lost renew result: %w", err))
		return false, true
	}
	if !rr.Found {
		if t1 < m.gate.Deadline() {
			m.markLost(dataLost(), RecordDataLost)
		} else {
			m.markLost(errors.New("owner-lease record missing on re-read: expired or deleted"), RecordNotOurs)
		}
		return false, false
	}
	l, derr := decodeOwnerLease(rr.Value)
	if derr != nil || l.OwnerID != m.ownerID || uint64(l.LeaseGeneration) != m.Generation() {
		m.markLost(fmt.Errorf("owner-lease record holds (%q, %d), not ours (decode error: %v)", l.OwnerID, l.LeaseGeneration, derr), RecordNotOurs)
		return false, false
	}
	deadline, derr := AdmissionDeadline(Observation{SentAt: t0, ReceivedAt: t1, StoreNow: rr.StoreNow, ExpiresAt: rr.ExpiresAt}, m.timing.FencingMargin)
	if derr != nil {
		// Our identity, but no expiry: not a record this package wrote.
		m.markLost(fmt.Errorf("owner-lease record unusable: %w", derr), RecordNotOurs)
		return false, false
	}
	m.mu.Lock()
	applied := rr.Version != m.version
	m.version, m.uncertain, m.lastStoreNow = rr.Version, false, rr.StoreNow
	fails := 0
	if applied {
		fails = m.renewedAfterFailuresLocked() // the renew whose answer was lost did renew
	}
	m.mu.Unlock()
	m.logRenewedAgain(fails, deadline)
	m.gate.extend(deadline)
	m.logger().Info("lost renew result settled by re-read", m.deadlineAttrs(deadline, "applied", applied)...)
	m.emit(EventReconstructed, deadline, nil)
	return true, true
}

func dataLost() error {
	return fmt.Errorf("%w: the owner-lease record vanished while it was still valid by the store's own clock", locstore.ErrDataLost)
}

// RenewFailure is why the owner-lease renewals since the last successful
// one failed (the latest failure), or nil when the last renewal succeeded:
// what an operator asks when the admission deadline runs down. It is nil
// too once the lease is lost (nothing renews; the EventLost error says why)
// and after a reacquisition.
func (m *Manager) RenewFailure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewErr
}

// Fail ends the lease for reason, as a lost lease (EventLost): the gate
// shuts for good and renewing stops. The node calls it when it finds the
// store lost its data (mesh/marker). A lease already lost is left as it is.
func (m *Manager) Fail(reason error) {
	m.mu.Lock()
	m.reacquire = false // for good, whatever the reason
	m.mu.Unlock()
	// The record was this run's when last read: the loss is declared
	// here, not found in the store — unless the store lost its data.
	rec := RecordKept
	if errors.Is(reason, locstore.ErrDataLost) {
		rec = RecordDataLost
	}
	m.markLost(reason, rec)
	if m.cancelLoop != nil {
		m.cancelLoop(reason)
	}
}

// renewFailEvery is how many failed renewals in a row one WARN line stands
// for after the first: a store down for an hour failed a renewal every
// interval and logged a line for each (720 an hour at the default interval,
// and the node repeated each), although nothing changes between them but
// the count. The gate's closing at the deadline and the loss are logged
// where they happen.
const renewFailEvery = 12

func (m *Manager) failed(err error) {
	m.mu.Lock()
	m.renewErr = err
	m.renewFails++
	n := m.renewFails
	m.mu.Unlock()
	d := m.gate.Deadline()
	if n == 1 || n%renewFailEvery == 0 {
		m.logger().Warn("owner lease renew failed; deadline not extended", m.deadlineAttrs(d, "err", err, "failed_renews", n)...)
	}
	m.emit(EventRenewFailed, d, err)
}

// renewedAfterFailuresLocked ends a run of failed renewals (m.mu held): it
// returns how many failed, for the line that says the renewals succeed
// again.
func (m *Manager) renewedAfterFailuresLocked() int {
	n := m.renewFails
	m.renewErr, m.renewFails = nil, 0
	return n
}

// logRenewedAgain says that renewing works again after n failures (none
// when n is 0).
func (m *Manager) logRenewedAgain(n int, d time.Duration) {
	if n > 0 {
		m.logger().Info("owner lease renewed again after failed renewals", m.deadlineAttrs(d, "failed_renews", n)...)
	}
}

// LostRecord is what became of this run's owner-lease record when its lease
// was lost: what a stopping node reports as left behind (mesh
// ShutdownIncompleteError), since a lost lease is not released.
type LostRecord uint8

const (
	// RecordKept: the record was still this run's when the loss was
	// declared (Fail: the routing id was taken over, say). Nothing
	// renews it any more; it expires by its TTL.
	RecordKept LostRecord = iota + 1
	// RecordNotOurs: the record was found missing (expired, deleted) or
	// holding another owner-lease state: nothing of it is this run's.
	RecordNotOurs
	// RecordDataLost: the store lost its data, the record with it.
	RecordDataLost
)

// LostRecord says what became of the owner-lease record when the lease was
// lost; 0 while it is not lost (or was reacquired since).
func (m *Manager) LostRecord() LostRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.lost {
		return 0
	}
	return m.lostRecord
}

// markLost ends the lease for reason; rec is what the record became.
func (m *Manager) markLost(reason error, rec LostRecord) {
	m.mu.Lock()
	// Nothing renews after a loss, and a loss is only found on an answer
	// of the store (the re-read, the node's marker check): the failures of
	// an outage before it are over, and RenewFailure must not go on naming
	// them (`ctl status` did beside STORE DATA LOST).
	m.renewErr, m.renewFails = nil, 0
	if rec == RecordDataLost || !m.lost {
		// A data loss found after another loss says more: the record
		// went with the store's data.
		m.lostRecord = rec
	}
	if m.lost {
		// Once (the renew loop and Fail may both get here) — unless the
		// loss was reported as one a reacquisition heals and it turned out
		// final (Fail: the store lost data, the routing id was taken
		// over): then it is reported again with that reason, or the node
		// would say "no restart needed" for good while nothing can
		// reacquire.
		final := m.lostHeals && !m.willReacquire()
		if final {
			m.lostFor, m.lostHeals = reason, false
		}
		m.mu.Unlock()
		if final {
			m.logger().Error("owner lease lost; new work refused until the process restarts", m.deadlineAttrs(m.gate.Deadline(), "err", reason)...)
			m.emit(EventLost, m.gate.Deadline(), fmt.Errorf("%w: %w", ErrLeaseLost, reason))
		}
		return
	}
	m.lost, m.lostFor = true, reason
	again := m.willReacquire()
	m.lostHeals = again
	m.mu.Unlock()
	m.gate.shut(ErrLeaseLost)
	err := fmt.Errorf("%w: %w", ErrLeaseLost, reason)
	// Say what comes next: most losses (an outage or a pause past the
	// TTL) end with a reacquisition, and an operator told to restart
	// would restart a node that was about to serve again.
	msg := "owner lease lost; new work refused until the process restarts"
	if again {
		msg = "owner lease lost; new work refused until a new lease generation is acquired (no restart needed)"
	}
	m.logger().Error(msg, m.deadlineAttrs(m.gate.Deadline(), "err", reason)...)
	m.emit(EventLost, m.gate.Deadline(), err)
}

// stopLoop cancels an in-flight renew and waits for the loop to end.
func (m *Manager) stopLoop() {
	m.stopOnce.Do(func() {
		if m.cancelLoop == nil {
			return
		}
		m.cancelLoop(ErrManagerStopped)
		<-m.loopDone
	})
}

// Release closes the gate, stops renewing and deletes the owner-lease record
// under its last known version (§11), so other hosts see this host gone
// without waiting for the TTL. It runs once; later calls return the first
// call's result. A record that is no longer ours (expired, lost) is left
// alone and Release returns nil. A store failure is returned (the record
// then expires after at most the TTL); the gate stays closed either way.
func (m *Manager) Release(ctx context.Context) error {
	return m.ReleaseRetrying(ctx, nil)
}

// ReleaseRetrying is Release, but after a store failure of the delete (or
// of the re-read before it) it calls wait and, when wait returns nil,
// tries again — re-reading first, since the failed delete may have
// applied (§10). wait paces the attempts and ends them (a non-nil error:
// the store failure is returned). A stopping node uses it so that a store
// outage of a few seconds does not leave its lease record to expire by its
// TTL (mesh.Node.Close). A nil wait is Release. Like Release it runs once.
func (m *Manager) ReleaseRetrying(ctx context.Context, wait func(context.Context) error) error {
	m.releaseOnce.Do(func() { m.releaseErr = m.release(ctx, wait) })
	return m.releaseErr
}

// retryRelease reports whether release tries its delete again after err:
// a store failure (not a loss of the store's data) that wait allows.
func retryRelease(ctx context.Context, err error, wait func(context.Context) error) bool {
	if wait == nil || !errors.Is(err, locstore.ErrUnavailable) || errors.Is(err, locstore.ErrDataLost) {
		return false
	}
	return wait(ctx) == nil
}

func (m *Manager) release(ctx context.Context, wait func(context.Context) error) error {
	// Close the gate before anything else: no new work may start while the
	// record is going away.
	m.gate.shut(ErrLeaseReleased)
	m.stopLoop()
	m.gate.stop()

	m.mu.Lock()
	lost, uncertain, version := m.lost, m.uncertain, m.version
	m.mu.Unlock()
	if lost {
		m.logger().Info("owner lease release: lease already lost, nothing to delete")
		m.emit(EventReleased, m.gate.Deadline(), nil)
		return nil
	}
	// A Conflict on the Delete, like a renew whose answer was lost, leaves
	// only our key to say whether the record is still ours: a lost renew
	// may have applied after the version we hold was read (§10).
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if uncertain {
			rr, _, err := m.read(ctx, m.key)
			if err != nil {
				if retryRelease(ctx, err, wait) {
					attempt-- // attempts counts conflicts, not store failures
					continue
				}
				return fmt.Errorf("lease: release: re-read of the owner-lease record: %w", err)
			}
			if l, derr := decodeOwnerLease(rr.Value); !rr.Found || derr != nil || l.OwnerID != m.ownerID || uint64(l.LeaseGeneration) != m.Generation() {
				m.logger().Info("owner lease release: record already expired or changed, nothing to delete")
				break
			}
			version = rr.Version
		}
		cctx, done := m.callContext(ctx)
		wr, err := m.store.Write(cctx, locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfVersion(m.key, version)},
			Mutations:  []locstore.Mutation{locstore.Delete(m.key)},
		})
		err = annotate(cctx, err)
		done()
		if err != nil {
			if retryRelease(ctx, err, wait) {
				// The delete may have applied: re-read before the next.
				uncertain = true
				attempt-- // attempts counts conflicts, not store failures
				continue
			}
			m.logger().Warn("owner lease release failed; the record expires by its TTL", "err", err)
			return fmt.Errorf("lease: release: %w", err)
		}
		if wr.Applied {
			m.logger().Info("owner lease released")
			break
		}
		if attempt == attempts {
			m.logger().Warn("owner lease release: the record kept changing under the delete; it expires by its TTL")
			return fmt.Errorf("lease: release: the owner-lease record changed under %d deletes", attempts)
		}
		uncertain = true
	}
	m.emit(EventReleased, m.gate.Deadline(), nil)
	return nil
}

// Close stops the renew loop and every timer without touching the store; the
// gate closes with ErrLeaseReleased (the lease is no longer maintained, and
// the record expires by its TTL). It waits for an in-flight store call,
// which it cancels, so no goroutine or timer of the manager outlives it. Use
// Release first for a clean shutdown. Close is idempotent and returns nil.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		changed := m.gate.shut(ErrLeaseReleased)
		m.stopLoop()
		m.gate.stop()
		if changed {
			m.logger().Info("owner lease manager closed without release; the record expires by its TTL")
			m.emit(EventReleased, m.gate.Deadline(), nil)
		}
	})
	return nil
}
