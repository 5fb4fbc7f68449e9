package follow

import (
	"fmt"
	"hash/maphash"
	"sync"
	"time"
)

// DefaultMaxEntries bounds a Cache whose CacheOptions.MaxEntries is 0.
const DefaultMaxEntries = 65536

// defaultShards is the shard count of a Cache. Measured with BenchmarkGet
// (docs/FOLLOW.md): with one mutex, parallel Gets serialize on it because a
// hit also moves the entry to the LRU front, which is a write.
const defaultShards = 16

// Ready is one Ready location read from the Location Store, as the route
// cache keeps it (spec §7.3). It is the only thing Cache.Put accepts, and it
// has no state field: a Missing or Creating record or a failed read cannot be
// expressed as a Ready, so it cannot be cached (spec §7.4, §12). Build one
// only from an authority read whose state is Ready.
type Ready struct {
	Key                      Key
	ObjectGeneration         uint64
	AuthorityOwnerGeneration uint64
	// StoreVersion is the provider's opaque CAS version of the authority
	// record. It is compared only for equality, never ordered.
	StoreVersion string
	// Owner is the owner lease the record named when it was read.
	Owner Owner
	// ValidUntil is the owner's local admission deadline as known to the
	// sender, as a reading of the Cache's Clock (for example derived from
	// the owner-lease record's StoreNow and ExpiresAt the way package
	// mesh/lease derives its own deadline). The entry never outlives it.
	ValidUntil time.Duration
	Route      Route
}

func (r Ready) validate() error {
	if err := r.Key.validate(); err != nil {
		return err
	}
	if err := validGeneration("ObjectGeneration", r.ObjectGeneration); err != nil {
		return err
	}
	if err := validGeneration("AuthorityOwnerGeneration", r.AuthorityOwnerGeneration); err != nil {
		return err
	}
	if r.StoreVersion == "" {
		return fmt.Errorf("%w: empty StoreVersion", ErrInvalidArgument)
	}
	if err := r.Owner.validate(); err != nil {
		return err
	}
	return r.Route.validate()
}

// Version is what a caller learned about an object's current authority, for
// Observe. Zero fields are unknown: ObjectGeneration 0 means no generation is
// known (AuthorityOwnerGeneration is then ignored, because an owner
// generation only orders owner changes within one object generation), and
// StoreVersion "" means no version is known.
type Version struct {
	ObjectGeneration         uint64
	AuthorityOwnerGeneration uint64
	StoreVersion             string
}

// CacheOptions configures a Cache.
type CacheOptions struct {
	// MaxAge is RouteCacheMaxAge: the longest an entry is used after it
	// was put. 0 disables the cache: Put stores nothing and Get always
	// misses. Negative is invalid. Package config validates it against
	// MessageFollowDuration; the default (15 s) lives there too.
	MaxAge time.Duration
	// MaxEntries bounds the number of entries; 0 means DefaultMaxEntries.
	// Negative is invalid. The bound is split evenly over the shards
	// (MaxEntries/shards each, never fewer than one entry per shard), and a
	// Put into a full shard evicts that shard's least recently used entry.
	// Because keys never hash perfectly evenly, eviction can start a little
	// before the whole cache holds MaxEntries (a few percent at the
	// default); size it with headroom rather than to the exact working set.
	MaxEntries int
}

// Cache is the route cache of Ready locations. It is safe for concurrent use.
// The zero value is not usable; call NewCache.
type Cache struct {
	clock  Clock
	maxAge time.Duration // > 0 unless disabled
	seed   maphash.Seed
	shards []cacheShard // empty when disabled
	mask   uint64
}

type cacheShard struct {
	mu  sync.Mutex
	m   map[Key]*cacheEntry
	lru cacheEntry // sentinel of the recency ring: lru.next is the most recent
	cap int
	// Keep neighbouring shards' mutexes off one cache line.
	_ [64]byte
}

type cacheEntry struct {
	r          Ready
	expiresAt  time.Duration
	prev, next *cacheEntry
}

// NewCache returns an empty route cache reading time from clock.
func NewCache(clock Clock, opts CacheOptions) (*Cache, error) {
	return newCache(clock, opts, defaultShards)
}

// newCache is NewCache with the shard count given; the benchmark compares
// one shard (one mutex) with the default. The count used is the largest
// power of two not above shards or MaxEntries, so per-shard capacities stay
// at least 1 and add up to exactly MaxEntries.
func newCache(clock Clock, opts CacheOptions, shards int) (*Cache, error) {
	if clock == nil {
		return nil, fmt.Errorf("%w: nil Clock", ErrInvalidArgument)
	}
	if opts.MaxAge < 0 {
		return nil, fmt.Errorf("%w: negative route cache max age %v", ErrInvalidArgument, opts.MaxAge)
	}
	if opts.MaxEntries < 0 {
		return nil, fmt.Errorf("%w: negative route cache max entries %d", ErrInvalidArgument, opts.MaxEntries)
	}
	c := &Cache{clock: clock, maxAge: opts.MaxAge, seed: maphash.MakeSeed()}
	if opts.MaxAge == 0 {
		return c, nil
	}
	max := opts.MaxEntries
	if max == 0 {
		max = DefaultMaxEntries
	}
	n := 1
	for n*2 <= shards && n*2 <= max {
		n *= 2
	}
	c.shards = make([]cacheShard, n)
	c.mask = uint64(n - 1)
	for i := range c.shards {
		s := &c.shards[i]
		s.m = make(map[Key]*cacheEntry)
		s.lru.next, s.lru.prev = &s.lru, &s.lru
		s.cap = max / n
		if i < max%n {
			s.cap++
		}
	}
	return c, nil
}

// Enabled reports whether the cache stores anything (MaxAge > 0).
func (c *Cache) Enabled() bool { return len(c.shards) > 0 }

func (c *Cache) shard(k Key) *cacheShard {
	if c.mask == 0 {
		return &c.shards[0]
	}
	h := maphash.String(c.seed, k.ID) ^ uint64(k.Kind)*0x9e3779b97f4a7c15
	return &c.shards[h&c.mask]
}

// Get returns the cached Ready location of key, if one is cached and has not
// expired. A hit marks the entry most recently used. The returned
// Route.NodeRID is shared with the cache: do not modify it.
func (c *Cache) Get(key Key) (Ready, bool) {
	if !c.Enabled() {
		return Ready{}, false
	}
	now := c.clock.Now()
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil {
		return Ready{}, false
	}
	if now >= e.expiresAt {
		s.remove(e)
		return Ready{}, false
	}
	s.touch(e)
	return e.r, true
}

// Put caches r until min(now + MaxAge, r.ValidUntil) and reports whether it
// did. It stores nothing and returns false, nil when the cache is disabled,
// when that expiry is not after now (the owner's admission deadline already
// passed), or when the cache already holds a later generation of the object
// (a slower, older read must not replace a newer one). Otherwise r replaces
// any entry of the same key; if r is newer but already expired, the older
// entry is dropped anyway, because it is known stale. Malformed r is
// ErrInvalidArgument. NodeRID is copied.
func (c *Cache) Put(r Ready) (bool, error) {
	if err := r.validate(); err != nil {
		return false, err
	}
	if !c.Enabled() {
		return false, nil
	}
	now := c.clock.Now()
	exp := min(addSat(now, c.maxAge), r.ValidUntil)
	s := c.shard(r.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[r.Key]; old != nil {
		if newer(old.r.ObjectGeneration, old.r.AuthorityOwnerGeneration, r.ObjectGeneration, r.AuthorityOwnerGeneration) {
			return false, nil
		}
		s.remove(old)
	}
	if exp <= now {
		return false, nil
	}
	r.Route = r.Route.clone()
	e := &cacheEntry{r: r, expiresAt: exp}
	s.m[r.Key] = e
	s.pushFront(e)
	for len(s.m) > s.cap {
		s.remove(s.lru.prev)
	}
	return true, nil
}

// Observe tells the cache what the caller confirmed about key's current
// authority (a store read, a fence rejection, a command reply) and reports
// whether the cached entry was dropped. The entry is dropped when v is later:
// a higher ObjectGeneration, or the same one with a higher
// AuthorityOwnerGeneration. When the generations are equal or unknown, a
// known StoreVersion different from the cached one also drops the entry:
// StoreVersion is opaque and cannot be ordered, so a different version is
// treated as "the record changed since it was cached". An observation with
// older generations never drops a newer entry.
func (c *Cache) Observe(key Key, v Version) bool {
	return c.dropIf(key, v.supersedes)
}

// supersedes reports whether v, confirmed about an object's authority, shows
// that the cached route r is stale (the rule Observe documents).
func (v Version) supersedes(r Ready) bool {
	switch {
	case v.ObjectGeneration == 0:
		// No generation known: only the version can tell.
	case v.ObjectGeneration != r.ObjectGeneration:
		return v.ObjectGeneration > r.ObjectGeneration
	case v.AuthorityOwnerGeneration == 0:
	case v.AuthorityOwnerGeneration != r.AuthorityOwnerGeneration:
		return v.AuthorityOwnerGeneration > r.AuthorityOwnerGeneration
	}
	return v.StoreVersion != "" && v.StoreVersion != r.StoreVersion
}

// Drop removes key's entry, if any, and reports whether one was removed. The
// caller drops on a delivery failure; command 50 uses DropRoute.
func (c *Cache) Drop(key Key) bool {
	return c.dropIf(key, func(Ready) bool { return true })
}

// dropIf removes key's entry when it exists and match accepts it.
func (c *Cache) dropIf(key Key, match func(Ready) bool) bool {
	if !c.Enabled() {
		return false
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil || !match(e.r) {
		return false
	}
	s.remove(e)
	return true
}

// Fence is the route fence a message was sent with: the cached route as its
// sender used it (spec §7.3). Command 50 messageFollow names it as its
// Source.
type Fence struct {
	ObjectGeneration         uint64
	AuthorityOwnerGeneration uint64
	OwnerLeaseGeneration     uint64
	NodeRID                  []byte
	NodeGeneration           uint64
}

// FenceOf is the fence a message sent on r carries.
func FenceOf(r Ready) Fence {
	return Fence{ObjectGeneration: r.ObjectGeneration, AuthorityOwnerGeneration: r.AuthorityOwnerGeneration,
		OwnerLeaseGeneration: r.Owner.LeaseGeneration, NodeRID: r.Route.NodeRID, NodeGeneration: r.Route.NodeGeneration}
}

// Matches reports whether r is exactly the route f was built from.
func (f Fence) Matches(r Ready) bool {
	return r.ObjectGeneration == f.ObjectGeneration && r.AuthorityOwnerGeneration == f.AuthorityOwnerGeneration &&
		r.Owner.LeaseGeneration == f.OwnerLeaseGeneration && r.Route.NodeGeneration == f.NodeGeneration &&
		string(r.Route.NodeRID) == string(f.NodeRID)
}

// DropRoute removes key's entry only when it is exactly the route f (same
// ObjectGeneration, AuthorityOwnerGeneration, owner lease generation, node
// RID and node run generation), and reports whether it removed one. The
// caller uses it on command 50 messageFollow: the notice says "the route you
// sent with is stale", which must not drop an entry the sender has since
// replaced by a newer read (a route to the new owner, or to a later one).
func (c *Cache) DropRoute(key Key, f Fence) bool { return c.dropIf(key, f.Matches) }

// DropOwner removes every entry routed to owner ownerID under a lease
// generation up to leaseGeneration, and returns how many it removed. The
// caller calls it when it learns that owner lease ended. Entries of a later
// lease generation of the same OwnerId (a takeover after expiry, spec §3.1)
// are kept. leaseGeneration 0 removes the owner's entries of every
// generation. It scans every entry; owner lease ends are rare next to Gets,
// and a per-owner index would cost every Put.
func (c *Cache) DropOwner(ownerID string, leaseGeneration uint64) int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for e := s.lru.next; e != &s.lru; {
			next := e.next
			if e.r.Owner.ID == ownerID && (leaseGeneration == 0 || e.r.Owner.LeaseGeneration <= leaseGeneration) {
				s.remove(e)
				n++
			}
			e = next
		}
		s.mu.Unlock()
	}
	return n
}

// Len returns the number of entries held, including expired ones not yet
// removed (an expired entry is removed when it is next looked up or evicted).
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (s *cacheShard) pushFront(e *cacheEntry) {
	e.prev = &s.lru
	e.next = s.lru.next
	e.prev.next = e
	e.next.prev = e
}

func (s *cacheShard) unlink(e *cacheEntry) {
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
}

func (s *cacheShard) touch(e *cacheEntry) {
	if s.lru.next == e {
		return
	}
	s.unlink(e)
	s.pushFront(e)
}

func (s *cacheShard) remove(e *cacheEntry) {
	s.unlink(e)
	delete(s.m, e.r.Key)
}
