// Package memory is the in-process Location Store provider: the embedded
// default for a single-process node and the fast store for unit tests.
//
// It implements the locstore SPI with the same observable semantics as the
// production (Redis) provider, so that code tested against it behaves the same
// in production: provider-issued versions that are never reused for a key,
// expiry judged only by the provider clock (injectable, see ManualClock),
// all-or-nothing conditional batches, and paged scans that read one snapshot.
// The package knows nothing of what the bytes mean.
//
// Everything lives in one map guarded by one lock, which makes every Write a
// single commit that no reader can observe half-done. Committed entries are
// immutable (a Put replaces the entry), so a scan snapshot can share them
// without copying values.
package memory

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshnode/meshnode/internal/storeclock"
	"github.com/meshnode/meshnode/locstore"
)

// ProviderName is the name configuration uses to select this provider.
const ProviderName = "memory"

// Defaults of the scan snapshot bounds.
const (
	// DefaultSnapshotTTL is how long a scan snapshot stays readable after its
	// last page was served.
	DefaultSnapshotTTL = 5 * time.Minute
	// DefaultMaxSnapshots bounds the number of open scan snapshots; opening
	// one more evicts the least recently used.
	DefaultMaxSnapshots = 1024
)

// ErrClosed is the cause of the provider error returned by every operation
// after Close. It is wrapped in a *locstore.ProviderError, so
// errors.Is(err, locstore.ErrUnavailable) holds too.
var ErrClosed = errors.New("memory location store is closed")

// Clock is the provider clock: StoreNow of every result and the only clock
// expiry (of values and of scan snapshots) is judged by.
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
	clock        Clock
	snapshotTTL  time.Duration
	maxSnapshots int
	logger       *slog.Logger
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

// WithSnapshotTTL sets how long a scan snapshot survives without a page
// being read from it (default DefaultSnapshotTTL). A scan whose cursor
// outlived it gets ScanPage{Expired: true} and restarts.
func WithSnapshotTTL(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("memory: WithSnapshotTTL: %v is not positive", d)
		}
		o.snapshotTTL = d
		return nil
	}
}

// WithMaxSnapshots bounds the number of open scan snapshots (default
// DefaultMaxSnapshots), so abandoned scans cannot hold memory without limit.
func WithMaxSnapshots(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("memory: WithMaxSnapshots: %d is below 1", n)
		}
		o.maxSnapshots = n
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

// entry is one committed value. It is never modified after commit: a Put
// installs a new entry, so snapshots may keep pointers to old ones.
type entry struct {
	value     []byte
	version   string
	expiresAt time.Time // zero: durable
}

// live reports whether e exists at now. A value with a retention expires at
// ExpiresAt exactly: from that instant on it is Missing.
func (e *entry) live(now time.Time) bool {
	return e != nil && (e.expiresAt.IsZero() || now.Before(e.expiresAt))
}

type snapItem struct {
	key string
	e   *entry
}

// snapshot is the sorted, immutable list of items a scan's first request
// saw. Only lastUsed changes (under Store.snapMu).
type snapshot struct {
	prefix   string
	items    []snapItem
	lastUsed time.Time
}

// Store is the in-memory Location Store. The zero value is not usable; call
// New. It is safe for concurrent use.
type Store struct {
	clock        Clock
	snapshotTTL  time.Duration
	maxSnapshots int
	log          *slog.Logger
	// macKey authenticates cursors, so a garbage, truncated, edited or
	// foreign cursor (another store, another prefix) is detected and answered
	// with Expired instead of a page from the wrong place.
	macKey [32]byte

	mu     sync.RWMutex // guards everything below up to snapMu
	closed bool
	data   map[string]*entry
	seq    uint64 // last issued version number; versions are never reused
	// writesSinceSweep counts commits since expired entries were last
	// purged; a purge every len(data) commits keeps memory bounded at an
	// amortised O(1) cost per write.
	writesSinceSweep int

	snapMu sync.Mutex // guards snaps and snapSeq; taken after mu when both are held
	snaps  map[uint64]*snapshot
	// snapSeq numbers snapshots; cursors are authenticated, so the id need
	// only be unique within the store, not unguessable.
	snapSeq uint64
}

var (
	_ locstore.Store       = (*Store)(nil)
	_ locstore.MultiReader = (*Store)(nil)
)

// New returns an empty store. It fails only on an invalid option.
func New(opts ...Option) (*Store, error) {
	o := options{
		clock:        SystemClock{},
		snapshotTTL:  DefaultSnapshotTTL,
		maxSnapshots: DefaultMaxSnapshots,
		logger:       slog.Default(),
	}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Store{
		clock:        o.clock,
		snapshotTTL:  o.snapshotTTL,
		maxSnapshots: o.maxSnapshots,
		log:          o.logger.With("provider", ProviderName),
		data:         make(map[string]*entry),
		snaps:        make(map[uint64]*snapshot),
	}
	// crypto/rand.Read never returns an error (it aborts the program if the
	// system source fails), so there is nothing to handle.
	_, _ = rand.Read(s.macKey[:])
	return s, nil
}

// fail wraps a provider failure so errors.Is(err, locstore.ErrUnavailable)
// holds and the cause (ErrClosed, context.Canceled...) stays matchable.
func fail(op string, err error) error {
	return &locstore.ProviderError{Provider: ProviderName, Op: op, Err: err}
}

// start performs the checks common to every operation once its arguments
// are valid: a context cancelled before the start means the store is not
// touched at all (spec §10).
func start(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fail(op, err)
	}
	return nil
}

// Read observes one key exactly once, under the store lock, so the value,
// version and expiry it returns come from one commit.
func (s *Store) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	const op = "read"
	if err := locstore.ValidateKey(op, "key", key); err != nil {
		return locstore.ReadResult{}, err
	}
	if err := start(ctx, op); err != nil {
		return locstore.ReadResult{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return locstore.ReadResult{}, fail(op, ErrClosed)
	}
	return s.readLocked(key, s.clock.Now()), nil
}

// ReadMany implements locstore.MultiReader: every key under one read lock,
// at one StoreNow.
func (s *Store) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	const op = "readMany"
	if err := locstore.ValidateReadKeys(op, keys); err != nil {
		return nil, err
	}
	if err := start(ctx, op); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fail(op, ErrClosed)
	}
	now := s.clock.Now()
	out := make([]locstore.ReadResult, len(keys))
	for i, k := range keys {
		out[i] = s.readLocked(k, now)
	}
	return out, nil
}

// readLocked is one key's ReadResult at now; s.mu is held.
func (s *Store) readLocked(key string, now time.Time) locstore.ReadResult {
	e := s.data[key]
	if !e.live(now) {
		return locstore.ReadResult{StoreNow: now}
	}
	return locstore.ReadResult{
		Found:     true,
		Value:     clone(e.value),
		Version:   e.version,
		ExpiresAt: e.expiresAt,
		StoreNow:  now,
	}
}

// Write validates the whole request before anything, then, under the store
// lock, checks every condition and applies every mutation only if all hold.
func (s *Store) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	const op = "write"
	if err := req.Validate(); err != nil {
		return locstore.WriteResult{}, err
	}
	if err := start(ctx, op); err != nil {
		return locstore.WriteResult{}, err
	}
	// Values are copied before taking the lock: the caller may reuse its
	// buffers as soon as Write returns, and copying outside the critical
	// section keeps a 4 MiB batch from stalling readers.
	values := make([][]byte, len(req.Mutations))
	for i, m := range req.Mutations {
		if m.Kind == locstore.MutPut {
			values[i] = clone(m.Value)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return locstore.WriteResult{}, fail(op, ErrClosed)
	}
	now := s.clock.Now()
	for _, c := range req.Conditions {
		e := s.data[c.Key]
		var holds bool
		switch c.Kind {
		case locstore.CondMissing:
			holds = !e.live(now)
		case locstore.CondVersion:
			holds = e.live(now) && e.version == c.Version
		}
		if !holds {
			// No hint of which condition failed: the SPI promises none.
			return locstore.WriteResult{StoreNow: now}, nil
		}
	}
	versions := make([]string, len(req.Mutations))
	for i, m := range req.Mutations {
		switch m.Kind {
		case locstore.MutPut:
			s.seq++
			e := &entry{value: values[i], version: strconv.FormatUint(s.seq, 10)}
			if m.Retention > 0 {
				e.expiresAt = now.Add(m.Retention)
			}
			s.data[m.Key] = e
			versions[i] = e.version
		case locstore.MutDelete:
			delete(s.data, m.Key)
		}
	}
	s.writesSinceSweep++
	if s.writesSinceSweep >= max(len(s.data), 1024) {
		s.sweepLocked(now)
	}
	return locstore.WriteResult{Applied: true, Versions: versions, StoreNow: now}, nil
}

// sweepLocked drops expired entries. Expired entries already read as
// Missing; this only reclaims their memory.
func (s *Store) sweepLocked(now time.Time) {
	for k, e := range s.data {
		if !e.live(now) {
			delete(s.data, k)
		}
	}
	s.writesSinceSweep = 0
}

// Scan returns one page of a snapshot. The first request (no cursor) copies
// the matching live entries into a sorted list; later requests page through
// that list only, whatever was written since. A cursor names a position in
// its snapshot, so re-sending one (after a lost response) returns the same
// page again. A snapshot lives SnapshotTTL after its last page was served
// (an idle timeout, so a long scan that keeps reading does not expire), is
// released once its last page is served, and the least recently used one is
// evicted when MaxSnapshots are open.
func (s *Store) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	const op = "scan"
	if err := req.Validate(); err != nil {
		return locstore.ScanPage{}, err
	}
	if err := start(ctx, op); err != nil {
		return locstore.ScanPage{}, err
	}
	if req.Cursor == "" {
		return s.firstPage(req)
	}
	return s.nextPage(req)
}

func (s *Store) firstPage(req locstore.ScanRequest) (locstore.ScanPage, error) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return locstore.ScanPage{}, fail("scan", ErrClosed)
	}
	now := s.clock.Now()
	var items []snapItem
	for k, e := range s.data {
		if strings.HasPrefix(k, req.Prefix) && e.live(now) {
			items = append(items, snapItem{key: k, e: e})
		}
	}
	s.mu.RUnlock()

	// Go compares strings byte by byte, which is the order the SPI fixes.
	slices.SortFunc(items, func(a, b snapItem) int { return strings.Compare(a.key, b.key) })
	page, end := buildPage(items, 0, req.Limit)
	page.StoreNow = now
	if end == len(items) {
		return page, nil
	}

	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if s.snaps == nil { // closed while the snapshot was being sorted
		return locstore.ScanPage{}, fail("scan", ErrClosed)
	}
	s.evictLocked(now)
	s.snapSeq++
	id := s.snapSeq
	s.snaps[id] = &snapshot{prefix: req.Prefix, items: items, lastUsed: now}
	page.Next = s.cursor(id, end, req.Prefix)
	return page, nil
}

func (s *Store) nextPage(req locstore.ScanRequest) (locstore.ScanPage, error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return locstore.ScanPage{}, fail("scan", ErrClosed)
	}
	now := s.clock.Now()
	id, offset, ok := s.parseCursor(req.Cursor, req.Prefix)
	if !ok {
		return locstore.ScanPage{Expired: true, StoreNow: now}, nil
	}

	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if s.snaps == nil {
		return locstore.ScanPage{}, fail("scan", ErrClosed)
	}
	snap := s.snaps[id]
	if snap == nil || snap.prefix != req.Prefix || offset > len(snap.items) {
		return locstore.ScanPage{Expired: true, StoreNow: now}, nil
	}
	if !now.Before(snap.lastUsed.Add(s.snapshotTTL)) {
		delete(s.snaps, id)
		return locstore.ScanPage{Expired: true, StoreNow: now}, nil
	}
	page, end := buildPage(snap.items, offset, req.Limit)
	page.StoreNow = now
	if end == len(snap.items) {
		// Exhausted: release the snapshot now rather than at TTL. A caller
		// that lost this last page and retries gets Expired and restarts,
		// which the SPI allows.
		delete(s.snaps, id)
		return page, nil
	}
	snap.lastUsed = now
	page.Next = s.cursor(id, end, req.Prefix)
	return page, nil
}

// evictLocked makes room for one more snapshot: it drops every snapshot past
// its TTL and, if still at the bound, the least recently used one. An
// evicted snapshot's cursors then read as Expired.
func (s *Store) evictLocked(now time.Time) {
	for id, sn := range s.snaps {
		if !now.Before(sn.lastUsed.Add(s.snapshotTTL)) {
			delete(s.snaps, id)
		}
	}
	for len(s.snaps) >= s.maxSnapshots {
		var oldest uint64
		var oldestSnap *snapshot
		for id, sn := range s.snaps {
			// Ties (same clock reading) go to the lower id, i.e. the older.
			if oldestSnap == nil || sn.lastUsed.Before(oldestSnap.lastUsed) ||
				(sn.lastUsed.Equal(oldestSnap.lastUsed) && id < oldest) {
				oldest, oldestSnap = id, sn
			}
		}
		delete(s.snaps, oldest)
		s.log.Debug("scan snapshot evicted", "snapshot", oldest, "open", len(s.snaps), "max", s.maxSnapshots)
	}
}

// buildPage returns the page starting at items[from] and the index after
// its last item. It holds at most limit items and at most MaxPageBytes by
// Item.EncodedSize; an item that would cross the byte cap begins the next
// page. Every item fits alone (key+value+version bounds sum far below the
// cap), so a page is never empty while items remain.
func buildPage(items []snapItem, from, limit int) (locstore.ScanPage, int) {
	page := locstore.ScanPage{Items: make([]locstore.Item, 0, min(limit, len(items)-from))}
	size := 0
	i := from
	for ; i < len(items) && len(page.Items) < limit; i++ {
		it := locstore.Item{
			Key:       items[i].key,
			Value:     items[i].e.value,
			Version:   items[i].e.version,
			ExpiresAt: items[i].e.expiresAt,
		}
		n := it.EncodedSize()
		if len(page.Items) > 0 && size+n > locstore.MaxPageBytes {
			break
		}
		size += n
		// Copy out: the caller owns the page; the snapshot keeps its entry.
		it.Value = clone(it.Value)
		page.Items = append(page.Items, it)
	}
	return page, i
}

// Cursor layout (before base64url): format byte, snapshot id, offset of the
// next item, then a MAC over those and the prefix. Binding the prefix makes
// a cursor replayed with another prefix fail verification (Expired).
const (
	cursorFormat  = 1
	cursorBodyLen = 1 + 8 + 8
	cursorMACLen  = 16
)

func (s *Store) cursor(id uint64, offset int, prefix string) string {
	var b [cursorBodyLen + cursorMACLen]byte
	b[0] = cursorFormat
	binary.BigEndian.PutUint64(b[1:9], id)
	binary.BigEndian.PutUint64(b[9:17], uint64(offset))
	copy(b[cursorBodyLen:], s.mac(b[:cursorBodyLen], prefix))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Store) parseCursor(c, prefix string) (id uint64, offset int, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != cursorBodyLen+cursorMACLen || b[0] != cursorFormat {
		return 0, 0, false
	}
	if !hmac.Equal(b[cursorBodyLen:], s.mac(b[:cursorBodyLen], prefix)) {
		return 0, 0, false
	}
	off := binary.BigEndian.Uint64(b[9:17])
	if off > math.MaxInt32 { // cannot come from this store; keeps int conversion safe
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b[1:9]), int(off), true
}

func (s *Store) mac(body []byte, prefix string) []byte {
	h := hmac.New(sha256.New, s.macKey[:])
	h.Write(body)
	h.Write([]byte(prefix))
	return h.Sum(nil)[:cursorMACLen]
}

// Close drops all data and snapshots. It is idempotent; every operation
// after it fails with ErrClosed (matching locstore.ErrUnavailable).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.data = nil
	s.snapMu.Lock()
	s.snaps = nil
	s.snapMu.Unlock()
	return nil
}

// clone returns a copy of b that is never nil, so a stored empty value reads
// back as a present, empty value.
func clone(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
