package discovery

// Discovery at scale (issue 16; docs/DISCOVERY.md "Cost at scale"): what one
// node's discovery rounds cost in store reads and bytes when the namespace
// holds N MeshNode descriptors with live owner leases, before (Lister.List:
// the whole list and every lease, every round) and after (Tracker: the
// change counter, the list only when it moved, a lease only when new,
// changed or at its known expiry) — measured in the same run on the same
// simulated mesh, and how soon each notices a node that joined and one that
// died.
//
//	BenchmarkDiscoveryMinute/churn-C/nodes-…  memory store, virtual time: 12 rounds of 5 s
//	                                 (tracked: with watching and the descriptor journal,
//	                                 every other link up; relist: the same without the
//	                                 journal (whole list on every change); expiry-only:
//	                                 every lease at its expiry, no watching; C nodes
//	                                 republish their capacity copy each round)
//	                                 (one minute) with every lease renewed every
//	                                 5 s (TTL 15 s, renewals spread over the
//	                                 interval), a node joining and one dying;
//	                                 reports reads, bytes and scan pages per round
//	                                 for both, and the time to notice each event
//	BenchmarkDiscoveryRoundRedis/…   real Redis, N descriptors: one round's latency,
//	                                 full list vs a round with nothing changed
//
// Counts, not timings, carry the comparison; Redis adds what a round costs
// in wall time on a real store.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

const (
	meshName  = "scale"
	leaseTTL  = 15 * time.Second
	interval  = 5 * time.Second
	rounds    = 12
	pageItems = locstore.MaxPageItems
)

// counting counts what reads and scans bring back.
type counting struct {
	locstore.Store
	mu                  sync.Mutex
	reads, pages, bytes int
}

func (c *counting) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	rr, err := c.Store.Read(ctx, key)
	c.mu.Lock()
	c.reads++
	c.bytes += len(key) + len(rr.Value)
	c.mu.Unlock()
	return rr, err
}

func (c *counting) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	p, err := c.Store.Scan(ctx, req)
	c.mu.Lock()
	c.pages++
	for _, it := range p.Items {
		c.bytes += len(it.Key) + len(it.Value)
	}
	c.mu.Unlock()
	return p, err
}

func (c *counting) take() (reads, pages, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, p, b := c.reads, c.pages, c.bytes
	c.reads, c.pages, c.bytes = 0, 0, 0
	return r, p, b
}

// simNode is one simulated MeshNode: its owner lease (renewed by the
// simulator) and its published descriptor.
type simNode struct {
	owner string
	key   string // owner-lease key
	rid   []byte
	mu    sync.Mutex
	ver   string
	pub   *directory.Publisher
	desc  record.MeshNodeDescriptor
}

// republish changes the descriptor's capacity copy (what a busy node
// publishes now and then) and publishes it.
func (s *simNode) republish(b testing.TB) {
	s.desc.Capacity.Actors.Active++
	if res, err := s.pub.Publish(context.Background(), s.desc); err != nil || res.Outcome != directory.Published {
		b.Fatalf("republish %s: %v %+v", s.owner, err, res)
	}
}

func (s *simNode) OwnerID() string    { return s.owner }
func (s *simNode) Generation() uint64 { return 1 }
func (s *simNode) Fence() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, s.ver
}

type openGate struct{}

func (openGate) Admit() error { return nil }

func (s *simNode) renew(b testing.TB, st locstore.Store) {
	v, err := record.OwnerLease{OwnerID: s.owner, LeaseGeneration: 1, AcquiredAt: 1, UpdatedAt: 1}.Encode()
	if err != nil {
		b.Fatal(err)
	}
	res, err := st.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring(s.key, v, leaseTTL)}})
	if err != nil || !res.Applied {
		b.Fatalf("renew %s: %v", s.owner, err)
	}
	s.mu.Lock()
	s.ver = res.Versions[0]
	s.mu.Unlock()
}

func newSimNode(b testing.TB, st locstore.Store, i int) *simNode {
	owner := fmt.Sprintf("sim-owner-%05d", i)
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		b.Fatal(err)
	}
	s := &simNode{owner: owner, key: key, rid: []byte{0x5, byte(i >> 16), byte(i >> 8), byte(i)}}
	s.renew(b, st)
	p, err := directory.NewPublisher(directory.PublisherConfig{Store: st, Lease: s, Gate: openGate{}, MeshName: meshName, RoutingID: s.rid})
	if err != nil {
		b.Fatal(err)
	}
	entry := fmt.Sprintf("entry:%x:1", s.rid)
	d := record.MeshNodeDescriptor{MeshName: meshName, RoutingID: s.rid, LifecycleGeneration: 1,
		Endpoint: fmt.Sprintf("tcp://10.%d.%d.%d:7000", byte(i>>16), byte(i>>8), byte(i)), ObjectRole: record.RoleServer,
		EntrySpotID:     &entry,
		PlacementWeight: 100, Capacity: record.NodeCapacity{Actors: record.SlotUsage{Limit: 10000}},
		State: record.StateServing, OwnerID: owner, LeaseGeneration: 1, DescriptorRevision: 1}
	if res, err := p.Publish(context.Background(), d); err != nil || res.Outcome != directory.Published {
		b.Fatalf("publish %d: %v %+v", i, err, res)
	}
	s.pub, s.desc = p, d
	return s
}

func validOf(s directory.Snapshot, rid []byte) (found, valid bool) {
	for _, e := range s.Entries {
		if string(e.Descriptor.RoutingID) == string(rid) {
			return true, e.LeaseValid
		}
	}
	return false, false
}

// minute simulates one minute of n nodes and returns per-round averages
// and notice times for the full list and the Tracker (0: never noticed,
// which the benchmark fails rather than report).
type minuteResult struct {
	fullReads, fullPages, fullBytes float64
	trReads, trPages, trBytes       float64
	rlReads, rlBytes                float64 // tracked, whole list on every change (no journal)
	exReads, exBytes                float64 // expiry reads without watching
	joinFull, joinTracked           int     // rounds until the joined node is listed valid
	deathFull, deathTracked         time.Duration
}

// unnoticed names the events of the minute that a way of listing never
// noticed: their notice figures are 0 then, which would read as instant.
func (r minuteResult) unnoticed() []string {
	var out []string
	for _, e := range []struct {
		what   string
		missed bool
	}{
		{"the dead node (full list)", r.deathFull == 0},
		{"the dead node (tracked)", r.deathTracked == 0},
		{"the joined node (full list)", r.joinFull == 0},
		{"the joined node (tracked)", r.joinTracked == 0},
	} {
		if e.missed {
			out = append(out, e.what)
		}
	}
	return out
}

func minute(b testing.TB, n, churn int) minuteResult {
	clock := locmemory.NewManualClock(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	mem, err := locmemory.New(locmemory.WithClock(clock), locmemory.WithSnapshotTTL(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	nodes := make([]*simNode, n)
	for i := range nodes {
		nodes[i] = newSimNode(b, mem, i)
	}
	full, tracked, expiry, relisted := &counting{Store: mem}, &counting{Store: mem}, &counting{Store: mem}, &counting{Store: mem}
	dead := nodes[n/2]
	deadLinks := false // the dead node's links drop when it dies (round 3)
	// The measuring node is one of the simulated ones (nodes[0]): it has a
	// link to every live node and watches its two ring successors.
	linked := func(rid []byte, _ uint64) bool { return !(deadLinks && string(rid) == string(dead.rid)) }
	tr := &directory.Tracker{Store: tracked, PageSize: pageItems, Self: nodes[0].rid, Linked: linked}
	rl := &directory.Tracker{Store: relisted, PageSize: pageItems, Self: nodes[0].rid, Linked: linked, FullRelist: true}
	ex := &directory.Tracker{Store: expiry, PageSize: pageItems} // no watching: every lease at its expiry
	ctx := context.Background()
	for _, t := range []*directory.Tracker{tr, rl, ex} { // the node's first round
		if _, _, err := t.Round(ctx, meshName); err != nil {
			b.Fatal(err)
		}
	}
	tracked.take()
	expiry.take()
	relisted.take()
	var res minuteResult
	var joined *simNode
	var deathAt time.Time
	for round := 1; round <= rounds; round++ {
		// Leases renew every interval, spread over it (each node renews on
		// its own schedule), the dead one stops at round 3.
		for step := 0; step < 5; step++ {
			clock.Advance(interval / 5)
			for i, s := range nodes {
				if i%5 == step && !(s == dead && round >= 3) {
					s.renew(b, mem)
				}
			}
			if joined != nil && step == 0 {
				joined.renew(b, mem)
			}
		}
		if round == 3 && deathAt.IsZero() {
			deathAt = clock.Now()
			deadLinks = true
		}
		if round == 6 {
			joined = newSimNode(b, mem, n+1)
		}
		// Busy nodes republish their capacity copy: churn changes per
		// round, spread over the live nodes.
		for c := 0; c < churn; c++ {
			if s := nodes[(round*churn+c)*7919%n]; s != dead {
				s.republish(b)
			}
		}
		fs, err := directory.List(ctx, full, meshName, pageItems)
		if err != nil {
			b.Fatal(err)
		}
		ts, _, err := tr.Round(ctx, meshName)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := ex.Round(ctx, meshName); err != nil {
			b.Fatal(err)
		}
		if _, _, err := rl.Round(ctx, meshName); err != nil {
			b.Fatal(err)
		}
		r1, _, b1 := relisted.take()
		res.rlReads, res.rlBytes = res.rlReads+float64(r1), res.rlBytes+float64(b1)
		r0, _, b0 := expiry.take()
		res.exReads, res.exBytes = res.exReads+float64(r0), res.exBytes+float64(b0)
		r, p, by := full.take()
		res.fullReads, res.fullPages, res.fullBytes = res.fullReads+float64(r), res.fullPages+float64(p), res.fullBytes+float64(by)
		r, p, by = tracked.take()
		res.trReads, res.trPages, res.trBytes = res.trReads+float64(r), res.trPages+float64(p), res.trBytes+float64(by)
		if _, v := validOf(fs, dead.rid); !v && res.deathFull == 0 && round >= 3 {
			res.deathFull = clock.Now().Sub(deathAt)
		}
		if _, v := validOf(ts, dead.rid); !v && res.deathTracked == 0 && round >= 3 {
			res.deathTracked = clock.Now().Sub(deathAt)
		}
		if joined != nil {
			if _, v := validOf(fs, joined.rid); v && res.joinFull == 0 {
				res.joinFull = round - 5
			}
			if _, v := validOf(ts, joined.rid); v && res.joinTracked == 0 {
				res.joinTracked = round - 5
			}
		}
	}
	for _, p := range []*float64{&res.fullReads, &res.fullPages, &res.fullBytes, &res.trReads, &res.trPages, &res.trBytes, &res.exReads, &res.exBytes, &res.rlReads, &res.rlBytes} {
		*p /= rounds
	}
	return res
}

func BenchmarkDiscoveryMinute(b *testing.B) {
	for _, churn := range []int{0, 2} {
		for _, n := range []int{10, 100, 1000, 5000} {
			b.Run(fmt.Sprintf("churn-%d/nodes-%d", churn, n), func(b *testing.B) {
				var res minuteResult
				for i := 0; i < b.N; i++ {
					res = minute(b, n, churn)
					if missed := res.unnoticed(); len(missed) > 0 {
						b.Fatalf("never noticed within the minute: %v", missed)
					}
				}
				b.ReportMetric(res.rlReads, "relist-reads/round")
				b.ReportMetric(res.rlBytes, "relist-bytes/round")
				b.ReportMetric(res.fullReads, "full-reads/round")
				b.ReportMetric(res.trReads, "tracked-reads/round")
				b.ReportMetric(res.exReads, "expiry-only-reads/round")
				b.ReportMetric(res.exBytes, "expiry-only-bytes/round")
				b.ReportMetric(res.fullPages, "full-pages/round")
				b.ReportMetric(res.trPages, "tracked-pages/round")
				b.ReportMetric(res.fullBytes, "full-bytes/round")
				b.ReportMetric(res.trBytes, "tracked-bytes/round")
				b.ReportMetric(res.deathFull.Seconds(), "full-death-notice-s")
				b.ReportMetric(res.deathTracked.Seconds(), "tracked-death-notice-s")
				b.ReportMetric(float64(res.joinFull), "full-join-notice-rounds")
				b.ReportMetric(float64(res.joinTracked), "tracked-join-notice-rounds")
			})
		}
	}
}

// BenchmarkDiscoveryRoundRedis: one round on a real Redis holding n
// descriptors with live leases: the full list (before) and a Tracker round
// with nothing changed (after, the steady state between lease expiries).
func BenchmarkDiscoveryRoundRedis(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		st, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{testredis.Addr(b)},
			Namespace: testredis.Namespace(b) + fmt.Sprint(n), PoolSize: 16})
		if err != nil {
			b.Fatal(err)
		}
		nodes := make([]*simNode, n)
		for i := range nodes {
			nodes[i] = newSimNode(b, st, i)
		}
		ctx := context.Background()
		b.Run(fmt.Sprintf("full/nodes-%d", n), func(b *testing.B) {
			c := &counting{Store: st}
			for i := 0; i < b.N; i++ {
				if _, err := directory.List(ctx, c, meshName, pageItems); err != nil {
					b.Fatal(err)
				}
			}
			r, _, by := c.take()
			b.ReportMetric(float64(r)/float64(b.N), "reads/round")
			b.ReportMetric(float64(by)/float64(b.N), "bytes/round")
		})
		b.Run(fmt.Sprintf("tracked-unchanged/nodes-%d", n), func(b *testing.B) {
			c := &counting{Store: st}
			tr := &directory.Tracker{Store: c, PageSize: pageItems}
			if _, _, err := tr.Round(ctx, meshName); err != nil {
				b.Fatal(err)
			}
			c.take()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, err := tr.Round(ctx, meshName); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			r, _, by := c.take()
			b.ReportMetric(float64(r)/float64(b.N), "reads/round")
			b.ReportMetric(float64(by)/float64(b.N), "bytes/round")
		})
		_ = st.Close()
	}
}
