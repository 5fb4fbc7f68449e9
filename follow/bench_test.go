package follow

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// monoClock is the process's monotonic clock, as production uses (a manual
// clock's mutex would dominate and serialize a parallel benchmark).
type monoClock struct{ origin time.Time }

func (c monoClock) Now() time.Duration { return time.Since(c.origin) }

// BenchmarkGet measures parallel cache hits. The "shards=1" case is the
// baseline, one mutex around the whole cache, measured in the same run; the
// ratio of the two is what docs/FOLLOW.md reports. Every hit takes its
// shard's lock exclusively because it moves the entry to the LRU front.
func BenchmarkGet(b *testing.B) {
	const keys = 4096
	ks := make([]Key, keys)
	for i := range ks {
		ks[i] = Key{Kind: KindActor, ID: fmt.Sprint("actor-", i)}
	}
	for _, shards := range []int{1, defaultShards} {
		b.Run(fmt.Sprint("shards=", shards), func(b *testing.B) {
			// Room for every key in every shard: capacity is per shard, see CacheOptions.
			c, err := newCache(monoClock{time.Now()}, CacheOptions{MaxAge: time.Hour, MaxEntries: 4 * keys}, shards)
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range ks {
				r := ready(k, 1, 1)
				r.ValidUntil = time.Hour
				if ok, err := c.Put(r); !ok || err != nil {
					b.Fatalf("Put = %v, %v", ok, err)
				}
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, hit := c.Get(ks[i%keys]); !hit {
						b.Error("miss on a populated cache")
						return
					}
					i += 7
				}
			})
		})
	}
}

// BenchmarkForward measures one Message Follow decision.
func BenchmarkForward(b *testing.B) {
	tab, err := NewTable(monoClock{time.Now()}, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tab.Record(move(actorA, 1, 2, "n2")); err != nil {
		b.Fatal(err)
	}
	in := Inbound{Key: actorA, ObjectGeneration: 1, AuthorityOwnerGeneration: 1}
	for b.Loop() {
		if _, err := tab.Forward(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheEntryBytes reports the heap one cached route takes, with
// the sizes a mesh has (a 16-byte RID, a 32-character OwnerId shared by
// the node's routes, a Redis-style store version, ~12-byte ids): the
// figure behind routing.route_cache_max_entries' "~N bytes each" in
// docs/OPERATIONS.md.
func BenchmarkCacheEntryBytes(b *testing.B) {
	const entries = 100_000
	owner := Owner{ID: "0123456789abcdef0123456789abcdef", LeaseGeneration: 3}
	rid := []byte("0123456789abcdef")
	var perEntry float64
	for range b.N {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c, err := NewCache(monoClock{time.Now()}, CacheOptions{MaxAge: time.Hour, MaxEntries: entries})
		if err != nil {
			b.Fatal(err)
		}
		for i := range entries {
			r := Ready{Key: Key{Kind: KindActor, ID: fmt.Sprintf("user:%07d", i)}, ObjectGeneration: uint64(i + 1),
				AuthorityOwnerGeneration: 2, StoreVersion: fmt.Sprintf("%d-0", 1_700_000_000_000+i), Owner: owner,
				ValidUntil: time.Hour, Route: Route{NodeRID: rid, NodeGeneration: 7, Endpoint: "tcp://10.0.0.5:7001"}}
			if ok, err := c.Put(r); !ok || err != nil {
				b.Fatalf("Put = %v, %v", ok, err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		perEntry = float64(m1.HeapAlloc-m0.HeapAlloc) / entries
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perEntry, "bytes/entry")
}
