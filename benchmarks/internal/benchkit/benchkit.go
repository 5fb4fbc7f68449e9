// Package benchkit is what the benchmark suites under benchmarks/ share: a
// mesh of in-process nodes on loopback TCP over a counted Location Store
// (memory or a real Redis), the movable Blob Actor and a client sender for
// the relocation suites (blob.go, sender.go), a bare transport pair with
// the mesh's transport settings, a move's records and stock zmq4 sockets
// for the wire baselines (wire.go), a move's store calls in raw form for
// the store baselines (storeops.go), and percentiles. It only uses exported
// API, as an application would.
package benchkit

import (
	"context"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/relocstore"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	relredis "github.com/meshnode/meshnode/relocstore/redis"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// MeshName is the mesh every benchmark node and transport joins.
const MeshName = "bench"

// ErrorLog keeps the benchmark output parseable: only errors are logged.
var ErrorLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// --- stores -----------------------------------------------------------------

// Backend selects the Location Store provider.
type Backend uint8

// Backends.
const (
	Memory Backend = iota + 1
	Redis
)

// CloseLater closes c when the benchmark ends.
//
// The cleanups here drop what they closed: the testing package keeps a
// benchmark's finished cleanup functions reachable (it shortens the slice
// that holds them), and with them whatever they captured — a whole mesh and
// its stores, in the heap of the benchmarks that run after it.
func CloseLater(b *testing.B, c interface{ Close() error }) {
	b.Cleanup(func() { _ = c.Close(); c = nil })
}

// OpenLocation returns a function giving each node its Location Store: one
// shared memory store, or one Redis client per node on one namespace (as
// separate processes would have), on MESHNODE_TEST_REDIS_ADDR.
func OpenLocation(b *testing.B, be Backend) func() *CountingStore {
	b.Helper()
	switch be {
	case Memory:
		mem, err := locmemory.New()
		if err != nil {
			b.Fatal(err)
		}
		CloseLater(b, mem)
		shared := &CountingStore{Store: mem}
		return func() *CountingStore { return shared }
	case Redis:
		addr, ns := testredis.Addr(b), testredis.Namespace(b)
		return func() *CountingStore {
			s, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns})
			if err != nil {
				b.Fatal(err)
			}
			CloseLater(b, s)
			return &CountingStore{Store: s}
		}
	}
	b.Fatalf("unknown backend %d", be)
	return nil
}

// OpenRelocation returns the Relocation Store the nodes share: memory, or
// relocstore/redis on MESHNODE_TEST_REDIS_ADDR under a namespace of its own
// (what Instance Spot activations store).
func OpenRelocation(b *testing.B, be Backend) relocstore.Store {
	b.Helper()
	var s relocstore.Store
	var err error
	if be == Redis {
		s, err = relredis.New(context.Background(), relredis.Options{Addrs: []string{testredis.Addr(b)}, Namespace: testredis.Namespace(b) + "-reloc"})
	} else {
		s, err = relmemory.New()
	}
	if err != nil {
		b.Fatal(err)
	}
	CloseLater(b, s)
	return s
}

// NodeConfig is production timing (lease, routing, transport) with errors
// logged only.
func NodeConfig(role config.ObjectRole) config.Config {
	cfg := config.Default()
	cfg.Node.MeshName = MeshName
	cfg.Node.ObjectRole = role
	cfg.LocationStore.Provider = config.ProviderMemory // the store itself is passed in Options
	cfg.RelocationStore.Provider = config.ProviderMemory
	cfg.Log.Level = config.LogError
	return cfg
}

// --- the mesh ---------------------------------------------------------------

// Cluster is in-process nodes of one mesh.
type Cluster struct {
	Nodes  []*mesh.Node
	Stores []*CountingStore // distinct stores (memory: one shared)

	roles    []config.ObjectRole // of each node
	loc      func() *CountingStore
	reloc    relocstore.Store
	register func(*spot.Registry) error
	edits    []func(*config.Config) // applied to every node's configuration
}

// Counts sums the store calls of every node.
func (c *Cluster) Counts() Counts {
	var n Counts
	for _, s := range c.Stores {
		n = n.Add(s.Counts())
	}
	return n
}

// ReportStore adds the store operations per op since before.
func (c *Cluster) ReportStore(b *testing.B, before Counts) {
	after := c.Counts()
	n := float64(b.N)
	b.ReportMetric(float64(after.Reads-before.Reads)/n, "store-reads/op")
	b.ReportMetric(float64(after.ReadKeys-before.ReadKeys)/n, "store-read-keys/op")
	b.ReportMetric(float64(after.Writes-before.Writes)/n, "store-writes/op")
	b.ReportMetric(float64(after.WriteKeys-before.WriteKeys)/n, "store-write-keys/op")
	b.ReportMetric(float64(after.CondKeys-before.CondKeys)/n, "store-cond-keys/op")
	d := after.Sub(before)
	b.ReportMetric(float64(d.MissingKeys)/n, "store-missing-keys/op")
	b.ReportMetric(float64(d.NewKeys+d.NewExpiringKeys)/n, "store-new-keys/op")
	b.ReportMetric(float64(d.NewExpiringKeys+d.ExpiringKeys)/n, "store-expiring-keys/op")
	b.ReportMetric(float64(d.DeleteKeys)/n, "store-delete-keys/op")
	b.ReportMetric(float64(after.Conflicts-before.Conflicts)/n, "store-conflicts/op")
	b.ReportMetric(float64(d.Errors)/n, "store-errors/op")
	b.ReportMetric(float64((after.Time-before.Time).Microseconds())/n, "store-us/op")
}

// StartCluster starts one node per role, in order, on one Location Store
// backend and one shared memory Relocation Store; server nodes register
// their factories with register. It returns once every node sees every
// other server serving with a valid lease (so it can place on it) and has
// admitted links to every other node.
// edits change every node's configuration (NodeConfig) before it starts.
func StartCluster(b *testing.B, be Backend, roles []config.ObjectRole, register func(*spot.Registry) error, edits ...func(*config.Config)) *Cluster {
	b.Helper()
	reloc := OpenRelocation(b, be)
	c := &Cluster{loc: OpenLocation(b, be), reloc: reloc, register: register, edits: edits}
	c.Add(b, roles...)
	return c
}

// Add starts one more node per role on the cluster's stores, and returns
// like StartCluster once every node can place on every server.
func (c *Cluster) Add(b *testing.B, roles ...config.ObjectRole) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, role := range roles {
		reg := spot.NewRegistry()
		if role == config.RoleServer {
			if err := c.register(reg); err != nil {
				b.Fatal(err)
			}
		}
		s := c.loc()
		if !slices.Contains(c.Stores, s) {
			c.Stores = append(c.Stores, s)
		}
		cfg := NodeConfig(role)
		for _, edit := range c.edits {
			edit(&cfg)
		}
		n, err := mesh.Start(ctx, mesh.Options{Config: cfg, Factories: reg, Location: s,
			Relocation: c.reloc, Logger: ErrorLog})
		if err != nil {
			b.Fatalf("start %s node: %v", role, err)
		}
		b.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer ccancel()
			_ = n.Close(cctx)
			n = nil // see CloseLater
		})
		c.Nodes = append(c.Nodes, n)
		c.roles = append(c.roles, role)
	}
	// Discovery runs every lease renew interval (5 s); run rounds now
	// instead of waiting for the ticker.
	for !c.placeable() {
		if ctx.Err() != nil {
			b.Fatal("the nodes never saw every server serving with a valid lease")
		}
		for _, n := range c.Nodes {
			_ = n.Discover(ctx)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range c.Nodes {
		if err := n.WaitPeers(ctx, len(c.Nodes)-1); err != nil {
			b.Fatal(err)
		}
	}
}

// Close closes every node now (the benchmark's cleanup closes them again,
// which is a no-op).
func (c *Cluster) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		_ = n.Close(ctx)
	}
}

// placeable: every node's descriptor list offers every other server.
func (c *Cluster) placeable() bool {
	for i, n := range c.Nodes {
		for j, s := range c.Nodes {
			if i != j && c.roles[j] == config.RoleServer && !offers(n, s) {
				return false
			}
		}
	}
	return true
}

func offers(n, server *mesh.Node) bool {
	snap, ok := n.LastSnapshot()
	if !ok {
		return false
	}
	for _, e := range snap.Entries {
		if string(e.Descriptor.RoutingID) == string(server.RID()) && e.LeaseValid &&
			e.Descriptor.State == record.StateServing {
			return true
		}
	}
	return false
}

// --- bare transport ---------------------------------------------------------

// TransportPair is two bare transport nodes with the mesh's transport
// settings, the first admitted on the second; handler serves the second.
func TransportPair(b *testing.B, handler transport.Handler) (*transport.Node, *transport.Node) {
	b.Helper()
	tc := config.Default().Transport
	mk := func(h transport.Handler) *transport.Node {
		n, err := transport.New(transport.Config{
			Endpoint: "tcp://127.0.0.1:0", MeshName: MeshName, SecurityIdentity: mesh.AnonymousIdentity,
			LifecycleGeneration: 1, DescriptorRevision: 1,
			ProbeInterval: tc.LivenessInterval, PeerTimeout: tc.PeerTimeout, RequestTimeout: tc.RequestTimeout,
			SendQueueRecords: tc.SendQueueLimit, Handler: h, Logger: ErrorLog,
		})
		if err != nil {
			b.Fatal(err)
		}
		CloseLater(b, n)
		return n
	}
	a, t := mk(nil), mk(handler)
	if err := a.Connect(t.RID(), t.Endpoint()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.WaitAdmitted(ctx, t.RID()); err != nil {
		b.Fatal(err)
	}
	return a, t
}

// --- figures ----------------------------------------------------------------

// maxWarmUps bounds WarmUp.
const maxWarmUps = 10

// WarmUp runs op until the Go heap stopped growing during one run of it
// (at most 10 times), so that the measured ops pay what a running process
// pays: while the heap grows, every large allocation faults fresh pages in
// from the OS (a 64 MiB buffer costs ~100 ms of page faults on the 2-core
// VM, ~25× the copy into it). Call it before b.ResetTimer (it reads the
// memory statistics, which stops the world) and Report after it (which
// clears reported metrics).
func WarmUp(b *testing.B, op func() error) Warm {
	b.Helper()
	var ms runtime.MemStats
	var w Warm
	for w.Runs < maxWarmUps {
		runtime.ReadMemStats(&ms)
		before := ms.HeapSys
		start := time.Now()
		if err := op(); err != nil {
			b.Fatalf("warm-up %d: %v", w.Runs+1, err)
		}
		if w.Runs++; w.Runs == 1 {
			w.First = time.Since(start)
		}
		runtime.ReadMemStats(&ms)
		if ms.HeapSys <= before {
			break
		}
	}
	return w
}

// Warm is what WarmUp did.
type Warm struct {
	First time.Duration // the first run
	Runs  int
}

// Report adds first-op-ms and warm-ups.
func (w Warm) Report(b *testing.B) {
	b.ReportMetric(float64(w.First)/float64(time.Millisecond), "first-op-ms")
	b.ReportMetric(float64(w.Runs), "warm-ups")
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of d; 0 for
// no samples. With fewer than 100 samples p99 is the maximum.
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Micros is d in µs, for b.ReportMetric.
func Micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
