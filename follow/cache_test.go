package follow

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func mustCache(t testing.TB, c Clock, opts CacheOptions) *Cache {
	t.Helper()
	cache, err := NewCache(c, opts)
	if err != nil {
		t.Fatalf("NewCache(%+v): %v", opts, err)
	}
	return cache
}

func TestNewCacheRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name  string
		clock Clock
		opts  CacheOptions
	}{
		{"nil clock", nil, CacheOptions{MaxAge: time.Second}},
		{"negative max age", newClock(), CacheOptions{MaxAge: -time.Nanosecond}},
		{"negative max entries", newClock(), CacheOptions{MaxAge: time.Second, MaxEntries: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCache(tt.clock, tt.opts)
			if !errors.Is(err, ErrInvalidArgument) || c != nil {
				t.Fatalf("NewCache = %v, %v; want nil, ErrInvalidArgument", c, err)
			}
		})
	}
}

// TestCacheAgeBound covers spec §7.3: an entry lives until
// min(put + RouteCacheMaxAge, owner admission deadline), and 0 disables.
func TestCacheAgeBound(t *testing.T) {
	tests := []struct {
		name       string
		maxAge     time.Duration
		validUntil time.Duration // relative to the Put instant
		wantPut    bool
		advance    time.Duration
		wantHit    bool
	}{
		{"max age bound: just before", 15 * time.Second, time.Hour, true, 15*time.Second - 1, true},
		{"max age bound: at", 15 * time.Second, time.Hour, true, 15 * time.Second, false},
		{"max age bound: after", 15 * time.Second, time.Hour, true, 16 * time.Second, false},
		{"deadline bound: just before", 15 * time.Second, 3 * time.Second, true, 3*time.Second - 1, true},
		{"deadline bound: at", 15 * time.Second, 3 * time.Second, true, 3 * time.Second, false},
		{"deadline equals max age", 15 * time.Second, 15 * time.Second, true, 15 * time.Second, false},
		{"deadline is now: not cached", 15 * time.Second, 0, false, 0, false},
		{"deadline passed: not cached", 15 * time.Second, -time.Second, false, 0, false},
		{"disabled: not cached", 0, time.Hour, false, 0, false},
		{"huge max age saturates", time.Duration(1<<63 - 1), time.Hour, true, time.Hour - 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			c := mustCache(t, clk, CacheOptions{MaxAge: tt.maxAge})
			r := ready(actorA, 1, 1)
			r.ValidUntil = clk.Now() + tt.validUntil
			put, err := c.Put(r)
			if err != nil || put != tt.wantPut {
				t.Fatalf("Put = %v, %v; want %v, nil", put, err, tt.wantPut)
			}
			clk.Advance(tt.advance)
			got, hit := c.Get(actorA)
			if hit != tt.wantHit {
				t.Fatalf("Get after %v: hit = %v, want %v", tt.advance, hit, tt.wantHit)
			}
			if hit && (got.ObjectGeneration != 1 || got.StoreVersion != "v1" || string(got.Route.NodeRID) != "n1") {
				t.Fatalf("Get = %+v, not what was put", got)
			}
			if !hit && c.Len() != 0 {
				t.Fatalf("Len = %d after a miss; an expired entry must be removed on lookup", c.Len())
			}
		})
	}
}

func TestCacheDisabledIsInert(t *testing.T) {
	c := mustCache(t, newClock(), CacheOptions{MaxAge: 0, MaxEntries: 10})
	if c.Enabled() {
		t.Fatal("Enabled with MaxAge 0")
	}
	if ok, err := c.Put(ready(actorA, 1, 1)); ok || err != nil {
		t.Fatalf("Put = %v, %v", ok, err)
	}
	// Malformed input is still reported when disabled.
	if _, err := c.Put(Ready{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Put(Ready{}) = %v, want ErrInvalidArgument", err)
	}
	if c.Observe(actorA, Version{ObjectGeneration: 9}) || c.Drop(actorA) || c.DropOwner("owner-1", 0) != 0 || c.Len() != 0 {
		t.Fatal("disabled cache reported state")
	}
	if _, hit := c.Get(actorA); hit {
		t.Fatal("disabled cache hit")
	}
}

func TestCachePutRejectsMalformed(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Ready)
		want   string
	}{
		{"unknown kind", func(r *Ready) { r.Key.Kind = 3 }, "kind(3)"},
		{"zero kind", func(r *Ready) { r.Key.Kind = 0 }, "kind(0)"},
		{"empty id", func(r *Ready) { r.Key.ID = "" }, "0 bytes"},
		{"id too long", func(r *Ready) { r.Key.ID = strings.Repeat("x", 256) }, "256 bytes"},
		{"id not UTF-8", func(r *Ready) { r.Key.ID = "\xff" }, "UTF-8"},
		{"object generation 0", func(r *Ready) { r.ObjectGeneration = 0 }, "ObjectGeneration 0"},
		{"object generation sentinel", func(r *Ready) { r.ObjectGeneration = 1<<63 - 1 }, "ObjectGeneration"},
		{"owner generation 0", func(r *Ready) { r.AuthorityOwnerGeneration = 0 }, "AuthorityOwnerGeneration 0"},
		{"empty store version", func(r *Ready) { r.StoreVersion = "" }, "StoreVersion"},
		{"empty owner", func(r *Ready) { r.Owner.ID = "" }, "OwnerId"},
		{"lease generation 0", func(r *Ready) { r.Owner.LeaseGeneration = 0 }, "OwnerLeaseGeneration"},
		{"empty RID", func(r *Ready) { r.Route.NodeRID = nil }, "RID"},
		{"RID too long", func(r *Ready) { r.Route.NodeRID = make([]byte, 256) }, "RID"},
		{"node generation 0", func(r *Ready) { r.Route.NodeGeneration = 0 }, "node run generation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
			r := ready(actorA, 1, 1)
			tt.mutate(&r)
			ok, err := c.Put(r)
			if ok || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Put = %v, %v; want false, ErrInvalidArgument mentioning %q", ok, err, tt.want)
			}
			if c.Len() != 0 {
				t.Fatalf("Len = %d after a rejected Put", c.Len())
			}
		})
	}
}

// TestCachePutOrder: a slower read of an older generation must not replace a
// newer cached one; an equal or newer read replaces; a newer read that is
// already past its deadline still evicts the stale older entry.
func TestCachePutOrder(t *testing.T) {
	type gens struct{ obj, own uint64 }
	tests := []struct {
		name       string
		old, put   gens
		putExpired bool
		wantPut    bool
		want       *gens // cached afterwards; nil = nothing
	}{
		{"newer owner generation replaces", gens{2, 3}, gens{2, 4}, false, true, &gens{2, 4}},
		{"newer object generation replaces", gens{2, 9}, gens{3, 1}, false, true, &gens{3, 1}},
		{"same generations replace", gens{2, 3}, gens{2, 3}, false, true, &gens{2, 3}},
		{"older owner generation ignored", gens{2, 3}, gens{2, 2}, false, false, &gens{2, 3}},
		{"older object generation ignored", gens{3, 1}, gens{2, 9}, false, false, &gens{3, 1}},
		{"newer but expired drops the stale entry", gens{2, 3}, gens{2, 4}, true, false, nil},
		{"older and expired keeps the entry", gens{2, 3}, gens{2, 2}, true, false, &gens{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			c := mustCache(t, clk, CacheOptions{MaxAge: time.Minute})
			if ok, err := c.Put(ready(actorA, tt.old.obj, tt.old.own)); !ok || err != nil {
				t.Fatalf("first Put = %v, %v", ok, err)
			}
			r := ready(actorA, tt.put.obj, tt.put.own)
			r.StoreVersion = "v2"
			if tt.putExpired {
				r.ValidUntil = clk.Now()
			}
			if ok, err := c.Put(r); ok != tt.wantPut || err != nil {
				t.Fatalf("second Put = %v, %v; want %v, nil", ok, err, tt.wantPut)
			}
			got, hit := c.Get(actorA)
			switch {
			case tt.want == nil && hit:
				t.Fatalf("Get = %+v, want a miss", got)
			case tt.want != nil && !hit:
				t.Fatalf("Get missed, want %+v", *tt.want)
			case tt.want != nil && (got.ObjectGeneration != tt.want.obj || got.AuthorityOwnerGeneration != tt.want.own):
				t.Fatalf("Get = gens (%d, %d), want %+v", got.ObjectGeneration, got.AuthorityOwnerGeneration, *tt.want)
			}
		})
	}
}

// TestCacheObserve covers "removed immediately on confirming a higher
// StoreVersion" (spec §7.3) with an opaque StoreVersion: ordering comes from
// the generations, and a different version at equal or unknown generations
// drops the entry.
func TestCacheObserve(t *testing.T) {
	// Cached: ObjectGeneration 5, AuthorityOwnerGeneration 3, StoreVersion "v1".
	tests := []struct {
		name string
		key  Key
		v    Version
		drop bool
	}{
		{"higher owner generation", actorA, Version{5, 4, ""}, true},
		{"higher owner generation, same version", actorA, Version{5, 4, "v1"}, true},
		{"lower owner generation", actorA, Version{5, 2, "v0"}, false},
		{"higher object generation, lower owner generation", actorA, Version{6, 1, ""}, true},
		{"lower object generation, higher owner generation", actorA, Version{4, 9, "v9"}, false},
		{"equal generations, same version", actorA, Version{5, 3, "v1"}, false},
		{"equal generations, different version", actorA, Version{5, 3, "v2"}, true},
		{"equal generations, version unknown", actorA, Version{5, 3, ""}, false},
		{"only version known, different", actorA, Version{0, 0, "v2"}, true},
		{"only version known, same", actorA, Version{0, 0, "v1"}, false},
		{"nothing known", actorA, Version{}, false},
		{"owner generation without object generation is ignored", actorA, Version{0, 9, ""}, false},
		{"object generation equal, owner unknown, different version", actorA, Version{5, 0, "v2"}, true},
		{"object generation equal, owner unknown, same version", actorA, Version{5, 0, "v1"}, false},
		{"other kind, same id", spotA, Version{9, 9, "v9"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
			if _, err := c.Put(ready(actorA, 5, 3)); err != nil {
				t.Fatal(err)
			}
			if got := c.Observe(tt.key, tt.v); got != tt.drop {
				t.Fatalf("Observe(%v, %+v) = %v, want %v", tt.key, tt.v, got, tt.drop)
			}
			if _, hit := c.Get(actorA); hit == tt.drop {
				t.Fatalf("after Observe: hit = %v, want %v", hit, !tt.drop)
			}
		})
	}
}

func TestCacheDropOwner(t *testing.T) {
	type ent struct {
		id    string
		owner string
		lease uint64
	}
	all := []ent{{"a", "o1", 1}, {"b", "o1", 2}, {"c", "o1", 3}, {"d", "o2", 1}, {"e", "o2", 2}}
	tests := []struct {
		name  string
		owner string
		lease uint64
		kept  string // ids left, in order
	}{
		{"expired lease 2 drops 1 and 2", "o1", 2, "cde"},
		{"expired lease 1", "o1", 1, "bcde"},
		{"generation 0 drops every lease of the owner", "o1", 0, "de"},
		{"other owner", "o2", 5, "abc"},
		{"unknown owner", "o3", 0, "abcde"},
		{"owner id is matched exactly", "o", 0, "abcde"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
			for _, e := range all {
				r := ready(Key{KindActor, e.id}, 1, 1)
				r.Owner = Owner{ID: e.owner, LeaseGeneration: e.lease}
				if _, err := c.Put(r); err != nil {
					t.Fatal(err)
				}
			}
			n := c.DropOwner(tt.owner, tt.lease)
			kept := ""
			for _, e := range all {
				if _, hit := c.Get(Key{KindActor, e.id}); hit {
					kept += e.id
				}
			}
			if kept != tt.kept || n != len(all)-len(tt.kept) {
				t.Fatalf("DropOwner(%q, %d) = %d, kept %q; want %d, %q", tt.owner, tt.lease, n, kept, len(all)-len(tt.kept), tt.kept)
			}
		})
	}
}

func TestCacheDrop(t *testing.T) {
	c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
	for _, k := range []Key{actorA, spotA} {
		if _, err := c.Put(ready(k, 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Drop(actorA) {
		t.Fatal("Drop(actor/a) = false")
	}
	if c.Drop(actorA) {
		t.Fatal("second Drop(actor/a) = true")
	}
	if _, hit := c.Get(actorA); hit {
		t.Fatal("actor/a still cached")
	}
	if _, hit := c.Get(spotA); !hit {
		t.Fatal("spot/a dropped with actor/a: the kind is part of the key")
	}
}

func TestCacheLRUEviction(t *testing.T) {
	clk := newClock()
	c, err := newCache(clk, CacheOptions{MaxAge: time.Minute, MaxEntries: 3}, 1)
	if err != nil {
		t.Fatal(err)
	}
	put := func(id string) {
		t.Helper()
		if ok, err := c.Put(ready(Key{KindActor, id}, 1, 1)); !ok || err != nil {
			t.Fatalf("Put(%s) = %v, %v", id, ok, err)
		}
	}
	kept := func() string {
		// Peek at the shard without Get, which would change the order.
		var ids []string
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			if c.shards[0].m[Key{KindActor, id}] != nil {
				ids = append(ids, id)
			}
		}
		return strings.Join(ids, "")
	}
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"fill", func() { put("a"); put("b"); put("c") }, "abc"},
		{"a hit makes b the least recently used", func() { c.Get(Key{KindActor, "a"}); put("d") }, "acd"},
		{"replacing c makes a the least recently used", func() { put("c"); put("e") }, "cde"},
	}
	for _, st := range steps {
		st.do()
		if got := kept(); got != st.want {
			t.Fatalf("%s: kept %q, want %q", st.name, got, st.want)
		}
	}
}

func TestCacheSizeBound(t *testing.T) {
	for _, max := range []int{1, 5, 16, 100} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute, MaxEntries: max})
			total := 0
			for i := range c.shards {
				total += c.shards[i].cap
				if c.shards[i].cap < 1 {
					t.Fatalf("shard %d has capacity %d", i, c.shards[i].cap)
				}
			}
			if total != max {
				t.Fatalf("shard capacities add up to %d, want %d", total, max)
			}
			for i := range 20 * max {
				if _, err := c.Put(ready(Key{KindSpot, fmt.Sprint("s", i)}, 1, 1)); err != nil {
					t.Fatal(err)
				}
				if n := c.Len(); n > max {
					t.Fatalf("Len = %d > MaxEntries %d after %d puts", n, max, i+1)
				}
			}
			if n := c.Len(); n != max {
				t.Fatalf("Len = %d after %d puts, want the full %d", n, 20*max, max)
			}
		})
	}
	c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
	total := 0
	for i := range c.shards {
		total += c.shards[i].cap
	}
	if total != DefaultMaxEntries {
		t.Fatalf("default capacity %d, want %d", total, DefaultMaxEntries)
	}
}

func TestCacheCopiesRID(t *testing.T) {
	c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
	r := ready(actorA, 1, 1)
	rid := []byte("node-7")
	r.Route.NodeRID = rid
	if _, err := c.Put(r); err != nil {
		t.Fatal(err)
	}
	copy(rid, "XXXXXX")
	got, _ := c.Get(actorA)
	if string(got.Route.NodeRID) != "node-7" {
		t.Fatalf("cached RID = %q, changed through the caller's buffer", got.Route.NodeRID)
	}
}

// TestCacheConcurrent runs every operation from several goroutines while the
// clock moves, for the race detector, and checks the invariants that must
// hold at any interleaving: size bound, no hit past the owner's deadline
// (always shorter than the max age here, so it is the binding bound), and
// entries that are whole (never a mix of two Puts).
func TestCacheConcurrent(t *testing.T) {
	const (
		workers = 8
		ops     = 2000
		max     = 64
		maxAge  = 50 * time.Millisecond
	)
	clk := newClock()
	c := mustCache(t, clk, CacheOptions{MaxAge: maxAge, MaxEntries: max})
	var wg sync.WaitGroup
	var hits atomic.Int64
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range ops {
				key := Key{Kind: Kind(1 + i%2), ID: fmt.Sprint("o", (i*7+w)%100)}
				gen := uint64(1 + i%5)
				switch i % 6 {
				case 0, 1:
					r := ready(key, 1, gen)
					r.StoreVersion = fmt.Sprint("v", gen)
					r.Owner.LeaseGeneration = gen
					r.ValidUntil = clk.Now() + time.Duration(i%40)*time.Millisecond
					if _, err := c.Put(r); err != nil {
						errs <- err
						return
					}
				case 2, 3:
					// Look up what this worker put two operations ago, so
					// that hits happen however the workers interleave.
					key = Key{Kind: Kind(1 + (i-2)%2), ID: fmt.Sprint("o", ((i-2)*7+w)%100)}
					before := clk.Now()
					got, hit := c.Get(key)
					if !hit {
						continue
					}
					hits.Add(1)
					if got.Key != key || got.StoreVersion != fmt.Sprint("v", got.AuthorityOwnerGeneration) ||
						got.Owner.LeaseGeneration != got.AuthorityOwnerGeneration {
						errs <- fmt.Errorf("torn entry %+v for %v", got, key)
						return
					}
					if got.ValidUntil <= before {
						errs <- fmt.Errorf("hit at %v past the deadline %v", before, got.ValidUntil)
						return
					}
				case 4:
					c.Observe(key, Version{ObjectGeneration: 1, AuthorityOwnerGeneration: gen})
				case 5:
					if i%12 == 5 {
						c.DropOwner("owner-1", gen)
					} else {
						c.Drop(key)
					}
				}
				if i%50 == 0 {
					clk.Advance(time.Millisecond)
				}
				if n := c.Len(); n > max {
					errs <- fmt.Errorf("Len %d > %d", n, max)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if hits.Load() == 0 {
		t.Error("no Get hit: the invariants on hits were never checked")
	}
}

// DropRoute (command 50) drops only the entry the notice names: every field
// of the fence must equal the cached route, so an entry the sender has since
// replaced (another owner, a later generation, another node run) is kept.
func TestCacheDropRoute(t *testing.T) {
	cached := ready(actorA, 5, 3) // owner-1 lease 1 on n1 run 1
	exact := Fence{ObjectGeneration: 5, AuthorityOwnerGeneration: 3, OwnerLeaseGeneration: 1, NodeRID: []byte("n1"), NodeGeneration: 1}
	tests := []struct {
		name  string
		key   Key
		edit  func(*Fence)
		wantD bool
	}{
		{"exact route", actorA, func(*Fence) {}, true},
		{"other kind, same id", spotA, func(*Fence) {}, false},
		{"other object generation", actorA, func(f *Fence) { f.ObjectGeneration = 4 }, false},
		{"older owner generation (entry already newer)", actorA, func(f *Fence) { f.AuthorityOwnerGeneration = 2 }, false},
		{"newer owner generation", actorA, func(f *Fence) { f.AuthorityOwnerGeneration = 4 }, false},
		{"other owner lease generation", actorA, func(f *Fence) { f.OwnerLeaseGeneration = 2 }, false},
		{"other node", actorA, func(f *Fence) { f.NodeRID = []byte("n2") }, false},
		{"RID prefix", actorA, func(f *Fence) { f.NodeRID = []byte("n") }, false},
		{"other node run", actorA, func(f *Fence) { f.NodeGeneration = 2 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCache(t, newClock(), CacheOptions{MaxAge: time.Minute})
			if _, err := c.Put(cached); err != nil {
				t.Fatal(err)
			}
			f := exact
			f.NodeRID = append([]byte(nil), exact.NodeRID...)
			tc.edit(&f)
			if got := c.DropRoute(tc.key, f); got != tc.wantD {
				t.Fatalf("DropRoute = %v, want %v", got, tc.wantD)
			}
			if _, hit := c.Get(actorA); hit == tc.wantD {
				t.Fatalf("entry cached after DropRoute: %v, want %v", hit, !tc.wantD)
			}
			if c.DropRoute(tc.key, f) {
				t.Fatal("second DropRoute removed something")
			}
		})
	}
	t.Run("disabled cache", func(t *testing.T) {
		c := mustCache(t, newClock(), CacheOptions{MaxAge: 0})
		if c.DropRoute(actorA, exact) {
			t.Fatal("disabled cache dropped")
		}
	})
}
