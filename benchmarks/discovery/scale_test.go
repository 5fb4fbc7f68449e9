package discovery

// The discovery scale test and benchmark with real nodes (issue 16): one
// real Redis holding N simulated MeshNode host runs (benchmarks/internal/
// meshsim: live owner leases renewed on the lease schedule, descriptors,
// and real transport endpoints the nodes link to), plus three real nodes
// (mesh.Start, loopback TCP) placed among them in the watch ring. What each
// real node's control plane reads and writes per discovery round in the
// steady state, what a whole-list round (the behaviour before the Tracker)
// would read in the same run, and how soon every real node notices a run
// that joined, one that crashed (links drop) and one that lost its lease
// while its links stayed up.
//
//	TestDiscoveryScaleRedis         N = 100, in make test: asserts the bounds
//	BenchmarkDiscoveryScaleRedis    N = 1,000 (MESHNODE_BENCH_SCALE_NODES to
//	                                change; 5,000 measured): reports the figures
//
// Beyond runsPerProcess simulated runs, the simulators run in child
// processes (this test binary again, TestMain), so that no process needs
// more file descriptors than this machine allows.
//
// Timing is the lease's at a fifth of the defaults (renew 1 s, TTL 3 s, the
// same 1:3 ratio, so reads per round are what the defaults give; notice
// times scale by 5).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/benchmarks/internal/meshsim"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/directory"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
)

const (
	scaleRenew = time.Second
	scaleTTL   = 3 * time.Second
	// scaleProbe is the links' liveness interval: a crashed run's links
	// drop when its sockets close, so probes only keep idle links
	// checked; at the nodes' default they would cost 3·N probes a second.
	scaleProbe = 5 * time.Second
)

// opCounter counts every store call of one node and the bytes they carry.
type opCounter struct {
	locstore.Store
	reads, writes, scans, bytes atomic.Int64
}

func (c *opCounter) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	rr, err := c.Store.Read(ctx, key)
	c.reads.Add(1)
	c.bytes.Add(int64(len(key) + len(rr.Value)))
	return rr, err
}

// ReadMany keeps the store's one-call read visible; one call is one read.
func (c *opCounter) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	rs, err := locstore.ReadMany(ctx, c.Store, keys)
	c.reads.Add(1)
	for i, rr := range rs {
		c.bytes.Add(int64(len(keys[i]) + len(rr.Value)))
	}
	return rs, err
}

func (c *opCounter) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	c.writes.Add(1)
	n := 0
	for _, m := range req.Mutations {
		n += len(m.Key) + len(m.Value)
	}
	for _, cd := range req.Conditions {
		n += len(cd.Key) + len(cd.Version)
	}
	c.bytes.Add(int64(n))
	return c.Store.Write(ctx, req)
}

func (c *opCounter) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	p, err := c.Store.Scan(ctx, req)
	c.scans.Add(1)
	n := 0
	for _, it := range p.Items {
		n += len(it.Key) + len(it.Value)
	}
	c.bytes.Add(int64(n))
	return p, err
}

type opSnapshot struct {
	reads, writes, scans, bytes int64
	disc                        mesh.DiscoveryStats
}

// scaleMesh is the simulated runs and the three real nodes.
type scaleMesh struct {
	n      int
	addr   string
	ns     string
	sim    *meshsim.Sim
	nodes  []*mesh.Node
	counts []*opCounter
	store  locstore.Store // the simulator's and the baseline's
	// dead and zombie are the runs the scenario crashes and makes lose
	// their lease (zombie is watched by node 0).
	dead, zombie *meshsim.Run
}

func scaleConfig(rid []byte) config.Config {
	cfg := config.Default()
	cfg.Node.MeshName = meshName
	cfg.Node.Endpoint = "tcp://127.0.0.1:0"
	cfg.Node.RoutingID = fmt.Sprintf("%x", rid)
	cfg.LocationStore.Provider = config.ProviderMemory // the store is passed in Options
	cfg.RelocationStore.Provider = config.ProviderMemory
	cfg.Lease.RenewInterval, cfg.Lease.TTL = scaleRenew, scaleTTL
	cfg.Lease.RenewTimeout, cfg.Lease.FencingMargin = 500*time.Millisecond, time.Second
	cfg.Transport.LivenessInterval, cfg.Transport.PeerTimeout = scaleProbe, 3*scaleProbe
	cfg.Log.Level = config.LogError
	return cfg
}

func openRedis(tb testing.TB, addr, ns string) locstore.Store {
	tb.Helper()
	st, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns, PoolSize: 32})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// simConfig is the simulators' configuration, in this process and in the
// child processes.
func simConfig(store locstore.Store) meshsim.Config {
	return meshsim.Config{Store: store, MeshName: meshName, SecurityIdentity: mesh.AnonymousIdentity,
		LeaseTTL: scaleTTL, RenewEvery: scaleRenew, Links: true, ProbeInterval: scaleProbe, PeerTimeout: 3 * scaleProbe,
		Logger: slog.New(slog.DiscardHandler)}
}

// runsPerProcess bounds the simulated runs one process holds: each has a
// listener and an accepted connection per real node, and this machine
// allows 20,000 file descriptors per process (the three real nodes' own
// process holds 3 × N outbound links).
const runsPerProcess = 1500

func startScaleMesh(tb testing.TB, n int) *scaleMesh {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m := &scaleMesh{n: n, addr: testredis.Addr(tb), ns: testredis.Namespace(tb)}
	m.store = openRedis(tb, m.addr, m.ns)
	quiet := slog.New(slog.DiscardHandler)
	sim, err := meshsim.New(simConfig(m.store))
	if err != nil {
		tb.Fatal(err)
	}
	m.sim = sim
	tb.Cleanup(func() { _ = sim.Close() })
	// The real nodes sit right after runs n/4, n/2, 3n/4 in the ring
	// (RID(at)+0x80): each watches runs at+1 and at+2. The runs the
	// scenario acts on — one that crashes (n/8, watched by no real node)
	// and one that loses its lease (n/4+1, watched by node 0) — live in
	// this process; the others, beyond runsPerProcess, in child processes.
	local := map[int]bool{n / 8: true, n/4 + 1: true}
	var bulk []int
	for i := range n {
		if !local[i] {
			bulk = append(bulk, i)
		}
	}
	own := []int{n / 8, n/4 + 1}
	if n <= runsPerProcess {
		own, bulk = append(own, bulk...), nil
	}
	runs, err := sim.AddAt(ctx, own)
	if err != nil {
		tb.Fatal(err)
	}
	m.dead, m.zombie = runs[0], runs[1]
	for len(bulk) > 0 {
		part := bulk[:min(len(bulk), runsPerProcess)]
		bulk = bulk[len(part):]
		startSimChild(tb, m.addr, m.ns, part)
	}
	reloc, err := relmemory.New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = reloc.Close() })
	for _, at := range []int{n / 4, n / 2, 3 * n / 4} {
		rid := append(meshsim.RID(at), 0x80)
		c := &opCounter{Store: openRedis(tb, m.addr, m.ns)}
		node, err := mesh.Start(ctx, mesh.Options{Config: scaleConfig(rid), Location: c, Relocation: reloc, Logger: quiet})
		if err != nil {
			tb.Fatalf("start node: %v", err)
		}
		tb.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = node.Close(cctx)
		})
		m.nodes, m.counts = append(m.nodes, node), append(m.counts, c)
	}
	for _, node := range m.nodes {
		if err := node.WaitPeers(ctx, n+len(m.nodes)-1); err != nil {
			tb.Fatalf("links: %v", err)
		}
	}
	return m
}

// Child simulator processes: this test binary run again with
// envSimChild set holds the simulated runs it is given, prints "ready" and
// keeps them until its stdin closes (the parent ended).
const envSimChild = "MESHNODE_MESHSIM_CHILD"

// startSimChild starts a child simulator holding the runs idx and waits
// until they are published and listening.
func startSimChild(tb testing.TB, addr, ns string, idx []int) {
	tb.Helper()
	spec := make([]string, len(idx))
	for i, v := range idx {
		spec[i] = strconv.Itoa(v)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envSimChild+"="+addr+" "+ns+" "+strings.Join(spec, ","))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			// A child that died early or let its runs' leases lapse made
			// live runs look dead: the figures are not the scenario's.
			if err != nil {
				tb.Errorf("simulator child (runs %d…%d): %v", idx[0], idx[len(idx)-1], err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		tb.Fatalf("simulator child: %q, %v", line, err)
	}
}

// runSimChild is the child's side (TestMain).
func runSimChild(spec string) int {
	parts := strings.Fields(spec)
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "meshsim child: bad %s %q\n", envSimChild, spec)
		return 2
	}
	var idx []int
	for _, f := range strings.Split(parts[2], ",") {
		v, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "meshsim child: bad run number %q\n", f)
			return 2
		}
		idx = append(idx, v)
	}
	ctx := context.Background()
	st, err := locredis.New(ctx, locredis.Options{Addrs: []string{parts[0]}, Namespace: parts[1], PoolSize: 32})
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshsim child:", err)
		return 1
	}
	defer st.Close()
	sim, err := meshsim.New(simConfig(st))
	if err != nil {
		fmt.Fprintln(os.Stderr, "meshsim child:", err)
		return 1
	}
	defer sim.Close()
	if _, err := sim.AddAt(ctx, idx); err != nil {
		fmt.Fprintln(os.Stderr, "meshsim child:", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it or ends
	if err := simHealthy(sim); err != nil {
		fmt.Fprintln(os.Stderr, "meshsim child:", err)
		return 3
	}
	return 0
}

// simHealthy fails when a simulated run's lease renewal failed or came
// after its lease expired: a run meant alive looked dead to the real nodes
// for a while, and their discovery's figures counted that.
func simHealthy(sim *meshsim.Sim) error {
	if f, l := sim.Failures(), sim.Lapses(); f+l > 0 {
		return fmt.Errorf("%d lease renewal(s) failed, %d came after the lease expired (the runs looked dead meanwhile)", f, l)
	}
	return nil
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(envSimChild); spec != "" {
		os.Exit(runSimChild(spec))
	}
	os.Exit(m.Run())
}

func (m *scaleMesh) snapshot(i int) opSnapshot {
	c := m.counts[i]
	return opSnapshot{reads: c.reads.Load(), writes: c.writes.Load(), scans: c.scans.Load(), bytes: c.bytes.Load(),
		disc: m.nodes[i].DiscoveryStats()}
}

// steady is one node's control-plane cost per discovery round over a window.
type steady struct {
	rounds                                 float64
	discReads, storeOps, bytes, listRounds float64
}

func (m *scaleMesh) measureSteady(window time.Duration) []steady {
	before := make([]opSnapshot, len(m.nodes))
	for i := range m.nodes {
		before[i] = m.snapshot(i)
	}
	time.Sleep(window)
	out := make([]steady, len(m.nodes))
	for i := range m.nodes {
		a, b := m.snapshot(i), before[i]
		r := float64(a.disc.Rounds - b.disc.Rounds)
		if r == 0 {
			r = 1
		}
		out[i] = steady{rounds: r,
			discReads:  float64((a.disc.CounterReads+a.disc.ScanPages+a.disc.JournalReads+a.disc.LeaseReads)-(b.disc.CounterReads+b.disc.ScanPages+b.disc.JournalReads+b.disc.LeaseReads)) / r,
			storeOps:   float64((a.reads+a.writes+a.scans)-(b.reads+b.writes+b.scans)) / r,
			bytes:      float64(a.bytes-b.bytes) / r,
			listRounds: float64(a.disc.Listed - b.disc.Listed)}
	}
	return out
}

// fullListCost is what one round cost before the Tracker (the whole list
// and every lease), read from the same store now.
func (m *scaleMesh) fullListCost(tb testing.TB) (reads, bytes float64) {
	c := &opCounter{Store: m.store}
	const rounds = 3
	for range rounds {
		if _, err := directory.List(context.Background(), c, meshName, pageItems); err != nil {
			tb.Fatal(err)
		}
	}
	return float64(c.reads.Load()+c.scans.Load()) / rounds, float64(c.bytes.Load()) / rounds
}

// notice waits until every node's list says ok for rid and returns, per
// node, the time and the discovery rounds it took.
func (m *scaleMesh) notice(tb testing.TB, what string, rid []byte, ok func(found, valid bool) bool, limit time.Duration) (times []time.Duration, rounds []uint64) {
	tb.Helper()
	start := time.Now()
	startRounds := make([]uint64, len(m.nodes))
	for i, node := range m.nodes {
		startRounds[i] = node.DiscoveryStats().Rounds
	}
	times, rounds = make([]time.Duration, len(m.nodes)), make([]uint64, len(m.nodes))
	for left := len(m.nodes); left > 0; {
		if time.Since(start) > limit {
			tb.Fatalf("%s: not noticed by every node within %s (noticed: %v)", what, limit, times)
		}
		for i, node := range m.nodes {
			if times[i] != 0 {
				continue
			}
			s, _ := node.LastSnapshot()
			found, valid := validOf(s, rid)
			if ok(found, valid) {
				times[i], rounds[i] = time.Since(start), node.DiscoveryStats().Rounds-startRounds[i]
				left--
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return times, rounds
}

func listedValid(found, valid bool) bool { return found && valid }
func notValid(found, valid bool) bool    { return !found || !valid }

// scaleResult is one run of the scenario.
type scaleResult struct {
	steady                 []steady
	fullReads, fullBytes   float64
	redisCmdsPerSec        float64
	join, death, zombie    []time.Duration
	joinR, deathR, zombieR []uint64
	joinLinked             []bool
	listedAfterChanges     uint64
	followedAfterChanges   uint64
	changeReads            float64 // journal reads per followed round
}

func redisCommands(tb testing.TB, addr string) int64 {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	tb.Fatal("no total_commands_processed in INFO stats")
	return 0
}

func runScale(tb testing.TB, n int, window time.Duration) scaleResult {
	m := startScaleMesh(tb, n)
	var res scaleResult
	// Let the first rounds (every lease new) and the joins of the nodes
	// settle: two lease periods.
	time.Sleep(2 * scaleTTL)
	cmds0, t0 := redisCommands(tb, m.addr), time.Now()
	res.steady = m.measureSteady(window)
	res.redisCmdsPerSec = float64(redisCommands(tb, m.addr)-cmds0) / time.Since(t0).Seconds()
	res.fullReads, res.fullBytes = m.fullListCost(tb)

	before := make([]opSnapshot, len(m.nodes))
	for i := range m.nodes {
		before[i] = m.snapshot(i)
	}
	// A run joins: every node must list it valid, and link to it.
	joined, err := m.sim.AddAt(context.Background(), []int{n}) // after every run, wherever they live
	if err != nil {
		tb.Fatal(err)
	}
	res.join, res.joinR = m.notice(tb, "join", joined[0].RID, listedValid, 30*time.Second)
	for _, node := range m.nodes {
		_, linked := node.Transport().Peer(joined[0].RID)
		res.joinLinked = append(res.joinLinked, linked)
	}
	// A run crashes (lease no longer renewed, links drop): one no real node
	// watches.
	dead := m.dead
	if err := m.sim.Kill(dead); err != nil {
		tb.Fatal(err)
	}
	res.death, res.deathR = m.notice(tb, "crash", dead.RID, notValid, 60*time.Second)
	// A run loses its lease while its links stay up: its watcher (node 0)
	// removes its descriptor, and every node sees that.
	zombie := m.zombie
	m.sim.LoseLease(zombie)
	res.zombie, res.zombieR = m.notice(tb, "lease lost, links up", zombie.RID, notValid, 60*time.Second)
	var followed, changeReads float64
	for i := range m.nodes {
		a := m.snapshot(i)
		res.listedAfterChanges += a.disc.Listed - before[i].disc.Listed
		res.followedAfterChanges += a.disc.Followed - before[i].disc.Followed
		followed += float64(a.disc.Followed - before[i].disc.Followed)
		changeReads += float64(a.disc.JournalReads - before[i].disc.JournalReads)
	}
	if followed > 0 {
		res.changeReads = changeReads / followed
	}
	if err := simHealthy(m.sim); err != nil {
		tb.Fatalf("simulator: %v", err)
	}
	return res
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func durationsMax(ds []time.Duration) time.Duration { return slices.Max(ds) }

// TestDiscoveryScaleRedis: 100 simulated runs with live leases and links
// plus three real nodes on a real Redis. In the steady state a node's
// discovery reads about 1 + 2·renew/TTL per round (never the whole list);
// a joined run is listed and linked by every node within two rounds; a
// crashed run is dropped within its lease TTL plus two rounds; a run that
// lost its lease while its links stayed up within TTL plus three rounds;
// and the changes were followed from the descriptor journal, not re-listed.
func TestDiscoveryScaleRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the scale test takes about half a minute")
	}
	res := runScale(t, 100, 5*time.Second)
	for i, s := range res.steady {
		t.Logf("node %d steady: %.1f rounds, %.2f discovery reads/round, %.2f store ops/round, %.0f bytes/round, %v whole-list rounds",
			i, s.rounds, s.discReads, s.storeOps, s.bytes, s.listRounds)
		if s.discReads > 4 || s.listRounds != 0 {
			t.Errorf("node %d: steady discovery reads %.2f/round (want ≤ 4; 1 + 2·renew/TTL ≈ 1.7 expected), %v whole lists",
				i, s.discReads, s.listRounds)
		}
	}
	t.Logf("before (whole list + every lease): %.0f reads, %.0f bytes per round; Redis served %.0f commands/s in the steady state",
		res.fullReads, res.fullBytes, res.redisCmdsPerSec)
	t.Logf("join noticed after %v (rounds %v), linked %v; crash after %v (rounds %v); lease lost with links up after %v (rounds %v)",
		res.join, res.joinR, res.joinLinked, res.death, res.deathR, res.zombie, res.zombieR)
	t.Logf("after the changes: %d rounds followed the journal (%.1f journal reads each), %d listed",
		res.followedAfterChanges, res.changeReads, res.listedAfterChanges)
	perTTL := uint64(scaleTTL / scaleRenew)
	for i := range res.join {
		if res.joinR[i] > 2 || !res.joinLinked[i] {
			t.Errorf("node %d: join noticed after %d rounds (want ≤ 2), linked %v", i, res.joinR[i], res.joinLinked[i])
		}
		if res.deathR[i] > perTTL+2 {
			t.Errorf("node %d: crash noticed after %d rounds (want ≤ TTL/renew + 2 = %d)", i, res.deathR[i], perTTL+2)
		}
		if res.zombieR[i] > perTTL+3 {
			t.Errorf("node %d: lost lease noticed after %d rounds (want ≤ TTL/renew + 3 = %d)", i, res.zombieR[i], perTTL+3)
		}
	}
	if res.listedAfterChanges != 0 || res.followedAfterChanges == 0 {
		t.Errorf("changes: %d whole lists, %d followed rounds; want every change followed from the journal",
			res.listedAfterChanges, res.followedAfterChanges)
	}
}

// BenchmarkDiscoveryScaleRedis reports the figures at N simulated runs
// (default 1,000): per node and round in the steady state, the whole-list
// round of before for comparison, mesh-wide projections (N+3 nodes), Redis
// commands/s as measured (the simulated runs' renewals included), and the
// notice times (lease timing a fifth of the defaults).
func BenchmarkDiscoveryScaleRedis(b *testing.B) {
	n := 1000
	if v := os.Getenv("MESHNODE_BENCH_SCALE_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 8 {
			b.Fatalf("MESHNODE_BENCH_SCALE_NODES=%q: want a number ≥ 8", v)
		}
	}
	b.Run(fmt.Sprintf("nodes-%d", n), func(b *testing.B) {
		var res scaleResult
		for range b.N {
			res = runScale(b, n, 10*time.Second)
		}
		var disc, ops, bytes []float64
		for _, s := range res.steady {
			disc, ops, bytes = append(disc, s.discReads), append(ops, s.storeOps), append(bytes, s.bytes)
		}
		perSec := float64(n+3) / scaleRenew.Seconds()
		b.ReportMetric(median(disc), "disc-reads/round")
		b.ReportMetric(median(ops), "store-ops/round")
		b.ReportMetric(median(bytes), "bytes/round")
		b.ReportMetric(res.fullReads, "before-reads/round")
		b.ReportMetric(res.fullBytes, "before-bytes/round")
		b.ReportMetric(median(disc)*perSec, "mesh-disc-reads/s")
		b.ReportMetric(res.fullReads*perSec, "before-mesh-reads/s")
		b.ReportMetric(res.redisCmdsPerSec, "redis-cmds/s")
		b.ReportMetric(durationsMax(res.join).Seconds(), "join-notice-s")
		b.ReportMetric(durationsMax(res.death).Seconds(), "crash-notice-s")
		b.ReportMetric(durationsMax(res.zombie).Seconds(), "lease-lost-notice-s")
		b.ReportMetric(res.changeReads, "journal-reads/changed-round")
		b.ReportMetric(float64(res.listedAfterChanges), "whole-lists-after-changes")
	})
}
