package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// The provider's 3-key compare-and-set is measured next to its physical
// baseline: the smallest Lua script doing the same work on the same server
// in the same run (check three versions, issue three new versions from a
// counter, store three values). The ratio provider/raw is the cost of
// everything the provider adds: TIME, expiry and snapshot bookkeeping,
// argument layout, validation and result decoding.

const benchValueSize = 256

var benchValue = make([]byte, benchValueSize)

// rawCASSrc: KEYS[1..3] data hashes, KEYS[4] counter; ARGV[1..3] expected
// versions, ARGV[4..6] new values. Returns {0} or {1, v1, v2, v3}.
const rawCASSrc = `
for i = 1, 3 do
  if redis.call('HGET', KEYS[i], 'ver') ~= ARGV[i] then return {0} end
end
local base = redis.call('INCRBY', KEYS[4], 3) - 3
local out = {1}
for i = 1, 3 do
  local v = string.format('%.0f', base + i)
  redis.call('HSET', KEYS[i], 'v', ARGV[3 + i], 'ver', v)
  out[#out + 1] = v
end
return out
`

var rawCAS = goredis.NewScript(rawCASSrc)

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := New(context.Background(), Options{Addrs: []string{testredis.Addr(b)}, Namespace: testredis.Namespace(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// providerCAS is one writer's three keys and their current versions.
type providerCAS struct {
	s    *Store
	keys [3]string
	vers [3]string
}

func newProviderCAS(b *testing.B, s *Store, id int64) *providerCAS {
	c := &providerCAS{s: s}
	req := locstore.WriteRequest{}
	for i := range c.keys {
		c.keys[i] = fmt.Sprintf("bench/%d/%d", id, i)
		req.Mutations = append(req.Mutations, locstore.Put(c.keys[i], benchValue))
	}
	res, err := s.Write(context.Background(), req)
	if err != nil || !res.Applied {
		b.Fatalf("setup: %v", err)
	}
	copy(c.vers[:], res.Versions)
	return c
}

func (c *providerCAS) step(ctx context.Context) error {
	req := locstore.WriteRequest{
		Conditions: make([]locstore.Condition, 3),
		Mutations:  make([]locstore.Mutation, 3),
	}
	for i, k := range c.keys {
		req.Conditions[i] = locstore.IfVersion(k, c.vers[i])
		req.Mutations[i] = locstore.Put(k, benchValue)
	}
	res, err := c.s.Write(ctx, req)
	if err != nil {
		return err
	}
	if !res.Applied {
		return fmt.Errorf("conflict on %v", c.keys)
	}
	copy(c.vers[:], res.Versions)
	return nil
}

// rawCASState is the baseline's equivalent of providerCAS.
type rawCASState struct {
	c    *goredis.Client
	keys []string
	vers [3]string
}

func newRawCAS(b *testing.B, c *goredis.Client, ns string, id int64) *rawCASState {
	r := &rawCASState{c: c}
	for i := range 3 {
		r.keys = append(r.keys, fmt.Sprintf("{%s}:raw/%d/%d", ns, id, i))
	}
	r.keys = append(r.keys, "{"+ns+"}:rawseq")
	for i := range 3 {
		r.vers[i] = "0"
		if err := c.HSet(context.Background(), r.keys[i], "v", benchValue, "ver", "0").Err(); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

func (r *rawCASState) step(ctx context.Context) error {
	v, err := rawCAS.Run(ctx, r.c, r.keys, r.vers[0], r.vers[1], r.vers[2], benchValue, benchValue, benchValue).Slice()
	if err != nil {
		return err
	}
	if len(v) != 4 {
		return fmt.Errorf("raw CAS conflict: %v", v)
	}
	for i := range 3 {
		r.vers[i] = v[1+i].(string)
	}
	return nil
}

func benchRawClient(b *testing.B) *goredis.Client {
	b.Helper()
	// Same connection settings as the provider's own client.
	c := goredis.NewClient(&goredis.Options{
		Addr: testredis.Addr(b), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: DefaultOperationTimeout, ReadTimeout: DefaultOperationTimeout,
		WriteTimeout: DefaultOperationTimeout, PoolTimeout: DefaultOperationTimeout,
	})
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func BenchmarkWrite3KeyCAS(b *testing.B) {
	s := benchStore(b)
	c := newProviderCAS(b, s, 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawLua3KeyCAS(b *testing.B) {
	c := benchRawClient(b)
	r := newRawCAS(b, c, testredis.Namespace(b), 0)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := r.step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWrite3KeyCASParallel(b *testing.B) { runParallelCAS(b, benchStore(b)) }

// runParallelCAS runs the provider's 3-key batch from GOMAXPROCS writers
// on s, each on keys of its own.
func runParallelCAS(b *testing.B, s *Store) {
	var ids atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := newProviderCAS(b, s, ids.Add(1))
		for pb.Next() {
			if err := c.step(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkRawLua3KeyCASParallel(b *testing.B) {
	c := benchRawClient(b)
	ns := testredis.Namespace(b)
	var ids atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := newRawCAS(b, c, ns, ids.Add(1))
		for pb.Next() {
			if err := r.step(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkWrite3KeyCASSnapshotOpen measures the same batch while a scan
// snapshot is open (an unfinished scan): writes look up the newest open
// snapshot on every commit and keep history for the first rewrite of each
// key after it.
func BenchmarkWrite3KeyCASSnapshotOpen(b *testing.B) {
	s := benchStore(b)
	c := newProviderCAS(b, s, 0)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(fmt.Sprintf("pad/%d", i), benchValue)}}); err != nil {
			b.Fatal(err)
		}
	}
	// Keep a snapshot open for the whole run; re-open it as it ages.
	openSnapshot := func() {
		p, err := s.Scan(ctx, locstore.ScanRequest{Limit: 1})
		if err != nil || p.Next == "" {
			b.Fatalf("open snapshot: %v", err)
		}
	}
	openSnapshot()
	opened := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if time.Since(opened) > time.Minute {
			openSnapshot()
			opened = time.Now()
		}
		if err := c.step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// What replica_acks costs a write: the provider's 3-key compare-and-set
// on a master with one replica, without (acks-0, the baseline of the same
// run on the same servers) and with every write waiting for the replica
// (acks-1: WAIT in the write's round trip), one writer and several.
func BenchmarkWrite3KeyCASReplicated(b *testing.B) {
	master := testredis.NewServer(b)
	testredis.NewReplica(b, master)
	for _, acks := range []int{0, 1} {
		open := func(b *testing.B) *Store {
			s, err := New(context.Background(), Options{Addrs: []string{master.Addr}, Namespace: testredis.Namespace(b),
				ReplicaAcks: acks, ReplicaAckTimeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}
		b.Run(fmt.Sprintf("acks-%d", acks), func(b *testing.B) {
			c := newProviderCAS(b, open(b), 0)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := c.step(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("parallel-acks-%d", acks), func(b *testing.B) {
			s := open(b)
			runParallelCAS(b, s)
			if s.ReplicasBehind() {
				b.Error("the replica fell behind: the figures are not those of writes that waited")
			}
		})
	}
}
