package hostrelocate

// Host relocation benchmarks (issue #11: every object of a node moved to
// the other servers by one (*mesh.Node).Relocate). Every subject has a
// baseline measured in the same process and run:
//
//	subject              baseline(s)
//	HostRelocateMemory   HostStoreCeilingMemory: per object, the Location Store calls a move
//	                     made in the subject, by kind (read calls and the rows they
//	                     read, absent ones; conditional batches, refused ones, the
//	                     rows they make, update, delete or only condition), each
//	                     object its share of the subject's totals, on rows of its
//	                     own, K objects at once, memory store (benchkit.Replay)
//	                     HostRawZmq4: stock zmq4 carrying each object's encoded 40 + 52 to
//	                     one of two ROUTERs, the 53 back and the 54, K objects at once
//	HostRelocateRedis    the same, with HostStoreCeilingRedis on locstore/redis
//	HostQuietRelocateRedis  HostRelocateRedis without the senders, against the
//	                     same ceiling (which carries no sender traffic either)
//	HostRelocateHeap     the Go heap before, during and after (no baseline: a footprint)
//
// K is MESHNODE_BENCH_HOST_CONCURRENCY (default relocation.max_concurrent),
// the HostRelocateOptions.MaxConcurrent of the subjects. The ceilings take
// the counts from the subject of the same backend when it ran
// earlier in the process (counts-from-subject 1), else from a calibration
// command of 256 objects on a mesh of their own (0).
//
// The mesh is four nodes of one process on loopback TCP: node 0 a client
// (it creates the objects and, in HostRelocateMemory/Redis, sends them
// requests), node 1 the source, nodes 2 and 3 the servers that take the
// objects. Nodes 2 and 3 start only after node 1 hosts every object, so
// that placement put them all there. The Actors are benchkit.Blob with a
// 1 KiB PreserveStateWith state.
//
// One op is one whole host Relocate of node 1 (MESHNODE_BENCH_HOST_OBJECTS
// objects, default 10,000): ns/op, B/op and allocs/op are the Relocate call
// alone (the clock is not stopped, so that no stop-the-world pauses the
// senders; the metrics are overridden with the call's own figures). Every
// object must end Moved, or the benchmark fails. Between two ops, outside
// the figures, every object is moved back to node 1 one by one
// (RelocateActor to node 1, K at once) and the store is read until every
// move is Completed; after each op the store is read likewise, so that the
// store calls per handoff include the targets' Completed writes.
//
// Per op the subjects report:
//   - handoffs/s: objects moved per second of the Relocate call;
//   - handoff-p50/p99-us: per object, from its capture on the source (the
//     snapshot adapter takes its state: the object is held from here) to
//     its arrival on the target (spot.Relocated: owner changed, dispatch
//     still closed) — RelocationResult.Timings are not reachable through a
//     host Relocate (hostmove.Result carries no timings);
//   - move-mean-us: K × call time / moved, the mean time one move held a
//     concurrency slot (Little's law: secure to confirm, with the wait
//     for a free slot excluded);
//   - gap-p50/p99/max-us: between two successive object outcomes reported
//     by the Progress callback;
//   - store-reads/handoff, store-writes/handoff, store-conflicts/handoff,
//     write-keys/handoff (rows put or deleted by the writes): all nodes'
//     Location Store calls from the call until
//     every move is Completed, per moved object (the senders' route
//     re-reads and the background lease renewals included: a few hundred
//     against hundreds of thousands);
//   - records/handoff, flushes/handoff: the records all nodes' transports
//     wrote during the call and the socket writes that carried them
//     (transport Stats.Flushes), per moved object, senders' traffic included;
//   - host-target-run: relocation.host_target_run of the nodes
//     (MESHNODE_BENCH_HOST_TARGET_RUN, default the configuration's; 0 places
//     every move on its own);
//   - with senders (MESHNODE_BENCH_HOST_SENDERS goroutines on the client,
//     default 2, each requesting "ping" back to back from 16 of the
//     objects): pause-max-us and pause-p99-us, the longest and the p99
//     request that overlapped the call, req-p50-us, the same senders'
//     median before it, pause-p50-us, req-during (requests that overlapped
//     the call) and req-retries. A request left unanswered for 10 s fails
//     the benchmark.
//
// Performance is reported, never asserted.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/benchmarks/internal/benchkit"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/hostmove"
)

const (
	// stateBytes is the state of every moved Actor.
	stateBytes = 1 << 10
	// idPrefix names the objects: idPrefix + their index.
	idPrefix = "h-"
	// hostTimeout bounds one host Relocate.
	hostTimeout = 30 * time.Minute
	// opTimeout bounds one creation, one single move or one settle.
	opTimeout = 60 * time.Second
	// tryTimeout is how long a sender waits for an answer before the
	// request counts as unanswered (the benchmark fails): far above any
	// pause seen here.
	tryTimeout = 10 * time.Second
	// quietRequests is how many requests each sender makes before the
	// command starts; its first pass over its objects (route cache
	// warm-up) is left out of req-p50-us.
	quietRequests = 500
	// senderObjects is how many objects each sender requests, round robin.
	senderObjects = 16
	// createWorkers create the objects at once (creations contend on the
	// mesh-wide ObjectGeneration counter: more callers are not faster).
	createWorkers = 2
	// calibrationObjects is the size of the command that measures the
	// store calls per move when the subject did not run first.
	calibrationObjects = 256
)

// Settings from the environment, so that the suite can run faster.
const (
	envObjects     = "MESHNODE_BENCH_HOST_OBJECTS"
	envHeapObjects = "MESHNODE_BENCH_HOST_HEAP_OBJECTS"
	envConcurrency = "MESHNODE_BENCH_HOST_CONCURRENCY"
	envSenders     = "MESHNODE_BENCH_HOST_SENDERS"
	// envTargetRun sets relocation.host_target_run (default: the
	// configuration's, 256; 0 places every move on its own).
	envTargetRun = "MESHNODE_BENCH_HOST_TARGET_RUN"
	// envCPUProfile names a file for a CPU profile of the Relocate calls
	// alone (go test -cpuprofile also covers creating the objects, moving
	// them back and the baselines).
	envCPUProfile = "MESHNODE_BENCH_HOST_CPUPROFILE"
	// envHeapProfile names a file for a heap profile of the hosted objects
	// (BenchmarkHostRelocateHeap, after a GC, before the command): what
	// each hosted object keeps live.
	envHeapProfile = "MESHNODE_BENCH_HOST_HEAPPROFILE"
)

// setting is the positive integer in the environment variable name, or def.
func setting(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || (n == 0 && name != envSenders && name != envTargetRun) {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func objects(b *testing.B) int { return setting(b, envObjects, 10_000) }

func concurrency(b *testing.B) int {
	return setting(b, envConcurrency, config.Default().Relocation.MaxConcurrent)
}

func objectID(i int) string { return idPrefix + strconv.Itoa(i) }

// --- handoff stamps -------------------------------------------------------------

// handoffs stamps, per object index, when the source captured it and when
// it arrived on the target (benchkit.BlobWatch), while on.
type handoffs struct {
	on                atomic.Bool
	captured, arrived []atomic.Int64 // UnixNano; 0: not seen
}

func newHandoffs(n int) *handoffs {
	return &handoffs{captured: make([]atomic.Int64, n), arrived: make([]atomic.Int64, n)}
}

func (h *handoffs) stamp(at []atomic.Int64, id string) {
	if !h.on.Load() {
		return
	}
	if i, err := strconv.Atoi(strings.TrimPrefix(id, idPrefix)); err == nil && i >= 0 && i < len(at) {
		at[i].Store(time.Now().UnixNano())
	}
}

func (h *handoffs) Captured(id string) { h.stamp(h.captured, id) }
func (h *handoffs) Arrived(id string)  { h.stamp(h.arrived, id) }

// start forgets the stamps and starts stamping.
func (h *handoffs) start() {
	for i := range h.captured {
		h.captured[i].Store(0)
		h.arrived[i].Store(0)
	}
	h.on.Store(true)
}

// durations stops stamping and returns every object's capture-to-arrival
// time; an object without both stamps fails the benchmark.
func (h *handoffs) durations(b *testing.B) []time.Duration {
	b.Helper()
	h.on.Store(false)
	d := make([]time.Duration, len(h.captured))
	for i := range d {
		c, a := h.captured[i].Load(), h.arrived[i].Load()
		if c == 0 || a == 0 {
			b.Fatalf("%s moved without a capture (%d) and an arrival (%d) stamp", objectID(i), c, a)
		}
		d[i] = time.Duration(a - c)
	}
	return d
}

// --- the mesh ---------------------------------------------------------------------

// hostBench is a client, the source node hosting every object, and the two
// servers that take them.
type hostBench struct {
	*benchkit.Cluster
	client, src *mesh.Node
	refs        []mesh.ActorRef // by object index
	watch       *handoffs
	k           int // MaxConcurrent
	run         int // relocation.host_target_run
	created     time.Duration
}

// startHost starts the client and the source, creates n objects from the
// client (all placed on the source, the only server), then starts the two
// other servers.
func startHost(b *testing.B, be benchkit.Backend, n, k int) *hostBench {
	b.Helper()
	watch := newHandoffs(n)
	run := setting(b, envTargetRun, config.Default().Relocation.HostTargetRun)
	c := benchkit.StartCluster(b, be, []config.ObjectRole{config.RoleClient, config.RoleServer},
		benchkit.RegisterBlob(stateBytes, watch), func(cfg *config.Config) { cfg.Relocation.HostTargetRun = run })
	h := &hostBench{Cluster: c, client: c.Nodes[0], src: c.Nodes[1], refs: make([]mesh.ActorRef, n), watch: watch, k: k, run: run}
	start := time.Now()
	create := func(i int) error {
		// The default creation deadline: the target keeps each answer
		// until then (heap-before-MB includes them).
		ctx, cancel := context.WithTimeout(context.Background(), mesh.DefaultCreateTimeout)
		defer cancel()
		ref, err := h.client.Manager().CreateActor(ctx, objectID(i), benchkit.BlobType)
		if err != nil {
			return fmt.Errorf("create %s: %w", objectID(i), err)
		}
		if string(ref.NodeRID) != string(h.src.RID()) {
			return fmt.Errorf("%s placed on %x, not the source", ref.ActorID, ref.NodeRID)
		}
		h.refs[i] = ref
		return nil
	}
	for err := create(0); err != nil; err = create(0) { // the first one as soon as placement works
		if time.Since(start) > opTimeout {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := benchkit.RunConcurrent(n-1, createWorkers, func(i int) error { return create(i + 1) }); err != nil {
		b.Fatal(err)
	}
	h.created = time.Since(start)
	c.Add(b, config.RoleServer, config.RoleServer)
	return h
}

// nodeOf is the cluster's node with routing id rid.
func (h *hostBench) nodeOf(b *testing.B, rid []byte) *mesh.Node {
	b.Helper()
	for _, n := range h.Nodes {
		if string(n.RID()) == string(rid) {
			return n
		}
	}
	b.Fatalf("no node %x", rid)
	return nil
}

// settle reads the store (under the counters) until every object is owned
// by owner(i) with no move in progress.
func (h *hostBench) settle(b *testing.B, owner func(i int) []byte) {
	b.Helper()
	err := benchkit.RunConcurrent(len(h.refs), h.k, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		for {
			ok, _, err := benchkit.ActorSettled(ctx, h.Stores[0].Store, objectID(i), owner(i))
			if ok {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s never settled on %x: %v", objectID(i), owner(i), err)
			}
			time.Sleep(200 * time.Microsecond)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
}

// gather moves every object back to the source, K at once, each with
// RelocateActor from its owner, and waits until every move is Completed.
func (h *hostBench) gather(b *testing.B, res mesh.HostRelocationResult) {
	b.Helper()
	owners := make([]*mesh.Node, len(h.refs))
	for _, o := range res.Objects {
		owners[index(o.Object.ID)] = h.nodeOf(b, o.Target)
	}
	err := benchkit.RunConcurrent(len(h.refs), h.k, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		for {
			r, err := owners[i].Manager().RelocateActor(ctx, h.refs[i], mesh.ToNode(h.src.RID()))
			switch {
			case err == nil && r.Outcome == mesh.Moved:
				return nil
			case ctx.Err() != nil:
				return fmt.Errorf("%s not moved back: %s %s, %v", objectID(i), r.Outcome, r.Reason, err)
			case err != nil && !errors.Is(err, mesh.ErrUnavailable) && !errors.Is(err, mesh.ErrMoving):
				return fmt.Errorf("%s not moved back: %w", objectID(i), err)
			}
			time.Sleep(time.Millisecond) // not Ready yet (Completed pending), or refused: again
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	src := h.src.RID()
	h.settle(b, func(int) []byte { return src })
}

func index(id string) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(id, idPrefix))
	return i
}

// --- one command ------------------------------------------------------------------

// command is what one host Relocate measured.
type command struct {
	res      mesh.HostRelocationResult
	window   benchkit.Window // the call
	outcomes []time.Time     // the Progress calls that reported a new outcome
	handoffs []time.Duration // capture to arrival, per object
	store    benchkit.Counts // the call until every move is Completed
	alloc    allocs          // during the call
	wire     wireCounts      // during the call, all nodes
}

// wireCounts are the records the cluster's nodes wrote and the socket
// writes (flushes) that carried them.
type wireCounts struct{ records, flushes uint64 }

// wire sums the transport counters of every node of the cluster.
func (h *hostBench) wire() wireCounts {
	var w wireCounts
	for _, n := range h.Nodes {
		st := n.Transport().Stats()
		w.records += st.RecordsOut
		w.flushes += st.Flushes
	}
	return w
}

// relocate runs one host Relocate of the source and fails the benchmark
// unless every object moved; then it waits until every move is Completed.
// during, when set, starts right before the call and its result is called
// right after it.
func (h *hostBench) relocate(b *testing.B, during func() (stop func())) command {
	b.Helper()
	var c command
	c.outcomes = make([]time.Time, 0, len(h.refs))
	finished := 0
	progress := func(p mesh.HostProgress) {
		if f := p.Moved + p.Failed + p.Gone; f > finished {
			finished = f
			c.outcomes = append(c.outcomes, time.Now())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostTimeout)
	defer cancel()
	h.watch.start()
	stop := func() {}
	if during != nil {
		stop = during()
	}
	if path := os.Getenv(envCPUProfile); path != "" {
		stop = profile(b, path, stop)
	}
	before, a0, w0 := h.Counts(), readAllocs(), h.wire()
	c.window.Start = time.Now()
	res, err := h.src.Relocate(ctx, mesh.HostRelocateOptions{MaxConcurrent: h.k, Progress: progress})
	c.window.End = time.Now()
	c.alloc = readAllocs().sub(a0)
	w1 := h.wire()
	c.wire = wireCounts{records: w1.records - w0.records, flushes: w1.flushes - w0.flushes}
	stop()
	if err != nil {
		b.Fatalf("host relocate: %v", err)
	}
	c.res = res
	if p := res.Progress; res.End != hostmove.Completed || p.Moved != len(h.refs) {
		left := res.NotMoved()
		for _, o := range left[:min(len(left), 5)] {
			b.Logf("%s: %s (%s)", o.Object.ID, o.Outcome, o.Reason)
		}
		b.Fatalf("host relocate ended %s: %+v; want all %d moved", res.End, p, len(h.refs))
	}
	targets := make([][]byte, len(h.refs))
	for _, o := range res.Objects {
		targets[index(o.Object.ID)] = o.Target
	}
	h.settle(b, func(i int) []byte { return targets[i] })
	// After settling: the source returns once it read the new owner in the
	// store, which can be before the target opened the object (and called
	// Relocated); the target records Completed after that.
	c.handoffs = h.watch.durations(b)
	after := h.Counts()
	c.store = after.Sub(before)
	return c
}

// profile starts a CPU profile into path (appending the benchmark's name)
// and returns then, which stops it before calling then.
func profile(b *testing.B, path string, then func()) func() {
	b.Helper()
	f, err := os.Create(path + "." + strings.ReplaceAll(b.Name(), "/", "_"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
		then()
	}
}

// writeHeapProfile writes the live heap as of the last GC to path.
func writeHeapProfile(b *testing.B, path string) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	// The profile may be up to two GC cycles old: two more make it show
	// what the last heapInuse reading counted.
	runtime.GC()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Error(err)
	}
	if err := f.Close(); err != nil {
		b.Error(err)
	}
}

// check fails the benchmark unless the state of the first, middle and last
// objects and of refs survived.
func (h *hostBench) check(b *testing.B, refs ...[]mesh.ActorRef) {
	b.Helper()
	n := len(h.refs)
	refs = append(refs, []mesh.ActorRef{h.refs[0], h.refs[n/2], h.refs[n-1]})
	want := strconv.FormatUint(uint64(crc32.ChecksumIEEE(benchkit.RandomState(stateBytes))), 10)
	for _, rs := range refs {
		for _, ref := range rs {
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			got, err := h.client.Manager().RequestActor(ctx, ref, []byte("crc"))
			cancel()
			if err != nil || string(got) != want {
				b.Fatalf("%s: state CRC %q (%v), want %s", ref.ActorID, got, err, want)
			}
		}
	}
}

// figures collects the commands of one benchmark.
type figures struct {
	calls          time.Duration
	moved          int
	handoffs, gaps []time.Duration
	store          benchkit.Counts
	alloc          allocs
	wire           wireCounts
	bytes          int64
	during, before []time.Duration // sender requests
	retries, ks    int
	targetRun      int // relocation.host_target_run
}

func (f *figures) add(c command) {
	f.calls += c.window.Len()
	f.moved += c.res.Progress.Moved
	f.bytes += c.res.Progress.Bytes
	f.handoffs = append(f.handoffs, c.handoffs...)
	prev := c.window.Start
	for _, t := range c.outcomes {
		f.gaps, prev = append(f.gaps, t.Sub(prev)), t
	}
	f.store = f.store.Add(c.store)
	f.alloc.objects += c.alloc.objects
	f.alloc.bytes += c.alloc.bytes
	f.wire.records += c.wire.records
	f.wire.flushes += c.wire.flushes
}

// ops is the store calls of the moves, as a ceiling replays them.
func (f *figures) ops() benchkit.Replay { return f.store.Replay(f.moved) }

func (f *figures) report(b *testing.B, k int) {
	n := float64(b.N)
	moved := float64(f.moved)
	b.ReportMetric(float64(f.calls.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(f.alloc.bytes)/n, "B/op")
	b.ReportMetric(float64(f.alloc.objects)/n, "allocs/op")
	b.ReportMetric(moved/f.calls.Seconds(), "handoffs/s")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.handoffs, 50)), "handoff-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.handoffs, 99)), "handoff-p99-us")
	b.ReportMetric(float64(k)*benchkit.Micros(f.calls)/moved, "move-mean-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.gaps, 50)), "gap-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.gaps, 99)), "gap-p99-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.gaps, 100)), "gap-max-us")
	b.ReportMetric(float64(f.bytes)/moved, "payload-bytes")
	b.ReportMetric(float64(f.store.Reads)/moved, "store-reads/handoff")
	b.ReportMetric(float64(f.store.Writes)/moved, "store-writes/handoff")
	b.ReportMetric(float64(f.store.Conflicts)/moved, "store-conflicts/handoff")
	b.ReportMetric(float64(f.store.Errors)/moved, "store-errors/handoff")
	b.ReportMetric(float64(f.store.WriteKeys)/moved, "write-keys/handoff")
	b.ReportMetric(float64(f.store.ReadKeys)/moved, "read-keys/handoff")
	b.ReportMetric(float64(f.store.CondKeys)/moved, "cond-keys/handoff")
	b.ReportMetric(float64(f.store.MissingKeys)/moved, "missing-keys/handoff")
	b.ReportMetric(float64(f.store.NewKeys+f.store.NewExpiringKeys)/moved, "new-keys/handoff")
	b.ReportMetric(float64(f.store.NewExpiringKeys+f.store.ExpiringKeys)/moved, "expiring-keys/handoff")
	b.ReportMetric(float64(f.store.DeleteKeys)/moved, "delete-keys/handoff")
	b.ReportMetric(float64(f.wire.records)/moved, "records/handoff")
	b.ReportMetric(float64(f.wire.flushes)/moved, "flushes/handoff")
	b.ReportMetric(moved/n, "objects")
	b.ReportMetric(float64(k), "max-concurrent")
	b.ReportMetric(float64(f.targetRun), "host-target-run")
	if f.ks == 0 {
		return
	}
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.during, 100)), "pause-max-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.during, 99)), "pause-p99-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.during, 50)), "pause-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(f.before, 50)), "req-p50-us")
	b.ReportMetric(float64(len(f.during))/n, "req-during")
	b.ReportMetric(float64(f.retries)/n, "req-retries")
	b.ReportMetric(float64(f.ks), "senders")
}

// --- senders ----------------------------------------------------------------------

// startSenders starts count senders on the client, each on senderObjects
// objects of its own, and waits until each made quietRequests requests.
func (h *hostBench) startSenders(b *testing.B, count int) ([]*benchkit.Sender, [][]mesh.ActorRef) {
	b.Helper()
	ss := make([]*benchkit.Sender, count)
	refs := make([][]mesh.ActorRef, count)
	for s := range ss {
		for j := range senderObjects {
			refs[s] = append(refs[s], h.refs[(s*senderObjects+j)%len(h.refs)])
		}
		ss[s] = benchkit.StartSender(h.client, refs[s], quietRequests, tryTimeout, opTimeout)
	}
	for _, s := range ss {
		s.WaitQuiet(b)
	}
	return ss, refs
}

// haltSenders stops the senders, fails the benchmark on an unanswered
// request, and adds their requests to f: those overlapping the call, and
// those before it (past each sender's first pass over its objects).
func haltSenders(b *testing.B, ss []*benchkit.Sender, call benchkit.Window, f *figures) {
	b.Helper()
	for _, s := range ss {
		s.Halt(b)
		if len(s.Lost) > 0 {
			b.Fatalf("%d request(s) never answered within %v (late replies: %d)", len(s.Lost), tryTimeout, s.LateReplies())
		}
		for i, sp := range s.Spans {
			switch {
			case call.Overlaps(sp.Start, sp.End):
				f.during = append(f.during, sp.Len())
			case sp.End.Before(call.Start) && i >= senderObjects:
				f.before = append(f.before, sp.Len())
			}
		}
		f.retries += s.Retries
	}
	f.ks = len(ss)
}

// --- the subjects -----------------------------------------------------------------

// measured holds the store calls per moved object of the subjects that ran
// in this process, by backend, for the ceilings. Benchmarks run one after
// another (the testing package orders them), so it needs no lock.
var measured = map[benchkit.Backend]benchkit.Replay{}

// benchHost: one op = one host Relocate of every object of the source to
// the two other servers, while senders request a sample of them.
func benchHost(b *testing.B, be benchkit.Backend) {
	benchHostWith(b, be, setting(b, envSenders, 2), true)
}

// benchHostWith is benchHost with a number of senders; record keeps the
// store calls per handoff for the ceiling of the same backend.
func benchHostWith(b *testing.B, be benchkit.Backend, senders int, record bool) {
	n, k := objects(b), concurrency(b)
	h := startHost(b, be, n, k)
	f := figures{targetRun: h.run}
	meter := benchkit.NewCPUMeter(b, be)
	var cpu benchkit.CPU
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ss, refs := h.startSenders(b, senders)
		// The CPU of the command's window: the nodes, the senders and this
		// benchmark share the process; Redis is measured apart.
		c0 := meter.Read(b)
		c := h.relocate(b, nil)
		used := meter.Read(b).Sub(c0)
		cpu = cpu.Add(used)
		haltSenders(b, ss, c.window, &f)
		f.add(c)
		h.check(b, refs...)
		if i+1 < b.N {
			h.gather(b, c.res)
		}
	}
	f.report(b, k)
	meter.Report(b, cpu, float64(f.moved), "handoff")
	b.ReportMetric(h.created.Seconds(), "create-s")
	if record {
		measured[be] = f.ops()
	}
}

// BenchmarkHostRelocateMemory: host Relocate of N 1 KiB Actors, memory
// store, with senders.
func BenchmarkHostRelocateMemory(b *testing.B) { benchHost(b, benchkit.Memory) }

// BenchmarkHostRelocateRedis: the same on locstore/redis.
func BenchmarkHostRelocateRedis(b *testing.B) { benchHost(b, benchkit.Redis) }

// BenchmarkHostQuietRelocateRedis: BenchmarkHostRelocateRedis without
// senders. The store ceiling replays the moves' store calls alone, while the
// subject above shares the machine's cores with two senders requesting back
// to back (~14 requests per handoff here, each crossing the transport and a
// handler): this is the like-for-like figure for subject / ceiling, the
// other the one under traffic. Both are reported (benchmarks/README.md).
func BenchmarkHostQuietRelocateRedis(b *testing.B) { benchHostWith(b, benchkit.Redis, 0, false) }

// --- heap -------------------------------------------------------------------------

// allocs is what the Go heap allocated.
type allocs struct{ objects, bytes uint64 }

func (a allocs) sub(o allocs) allocs { return allocs{a.objects - o.objects, a.bytes - o.bytes} }

// readAllocs reads the cumulative allocations without stopping the world.
func readAllocs() allocs {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return allocs{s[0].Value.Uint64(), s[1].Value.Uint64()}
}

// heapInuse is runtime.MemStats.HeapInuse after a GC: the heap spans holding
// live objects.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// heapSampler samples, every 10 ms without stopping the world, the heap
// spans in use (HeapInuse: live and not yet swept objects) and the live
// heap the last GC marked.
type heapSampler struct {
	stop        chan struct{}
	done        chan struct{}
	inuse, live uint64 // maxima
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/gc/heap/live:bytes"}}
	read := func() {
		metrics.Read(s)
		h.inuse = max(h.inuse, s[0].Value.Uint64()+s[1].Value.Uint64())
		h.live = max(h.live, s[2].Value.Uint64())
	}
	go func() {
		defer close(h.done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-h.stop:
				read()
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) halt() { close(h.stop); <-h.done }

// quietHeap waits (at most quietWait) until the heap after a GC is below
// quietHeapBytes, and returns it and how long it waited: a closed node stays
// reachable until the timers it left pending fire (a target keeps each
// creation's answer until the creation's deadline, 30 s by default), so
// the meshes of the benchmarks before this one would otherwise count in its
// figures.
func quietHeap() (uint64, time.Duration) {
	start := time.Now()
	for {
		h := heapInuse()
		if h < quietHeapBytes || time.Since(start) > quietWait {
			return h, time.Since(start)
		}
		time.Sleep(2 * time.Second)
	}
}

const (
	quietHeapBytes = 32 << 20
	quietWait      = 2 * time.Minute
)

// mb is bytes in MB (10^6).
func mb(b uint64) float64 { return float64(b) / 1e6 }

// BenchmarkHostRelocateHeap: one op = one host Relocate of
// MESHNODE_BENCH_HOST_HEAP_OBJECTS (default 100,000) 1 KiB Actors, memory
// store, no senders; reports the process's Go heap (all four nodes and the
// shared memory stores) after a GC before the mesh started (heap-empty-MB,
// once what earlier benchmarks left is freed: heap-wait-s), before the command (heap-before-MB), its highest sample
// during the command (heap-peak-MB: HeapInuse, garbage not yet collected
// included; heap-live-peak-MB: the highest live heap a GC marked during it)
// and after a GC once every move is Completed (heap-after-MB).
func BenchmarkHostRelocateHeap(b *testing.B) {
	n, k := setting(b, envHeapObjects, 100_000), concurrency(b)
	empty, waited := quietHeap()
	h := startHost(b, benchkit.Memory, n, k)
	before := heapInuse()
	if path := os.Getenv(envHeapProfile); path != "" {
		writeHeapProfile(b, path)
	}
	var f figures
	var peak, live, after uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var hs *heapSampler
		c := h.relocate(b, func() func() { hs = sampleHeap(); return hs.halt })
		f.add(c)
		h.check(b)
		peak, live = max(peak, hs.inuse), max(live, hs.live)
		after = max(after, heapInuse())
		if i+1 < b.N {
			h.gather(b, c.res)
		}
	}
	f.report(b, k)
	b.ReportMetric(h.created.Seconds(), "create-s")
	b.ReportMetric(mb(empty), "heap-empty-MB")
	b.ReportMetric(waited.Seconds(), "heap-wait-s")
	b.ReportMetric(mb(before), "heap-before-MB")
	b.ReportMetric(mb(peak), "heap-peak-MB")
	b.ReportMetric(mb(live), "heap-live-peak-MB")
	b.ReportMetric(mb(after), "heap-after-MB")
	b.ReportMetric(float64(before-empty)/float64(n), "heap-bytes/object")
}

// --- store ceilings -----------------------------------------------------------------

// storeOps is the store calls per moved object of the subject on be if it
// ran in this process, else of a calibration command of
// calibrationObjects objects on a mesh of its own, closed before return.
func storeOps(b *testing.B, be benchkit.Backend, k int) (benchkit.Replay, bool) {
	b.Helper()
	if ops, ok := measured[be]; ok {
		return ops, true
	}
	h := startHost(b, be, calibrationObjects, k)
	var f figures
	f.add(h.relocate(b, nil))
	h.Close()
	return f.ops(), false
}

// benchStoreCeiling: one op = for each of N objects, on rows of its own,
// the store calls a move made (reads, then conditional batches), K objects
// at once.
func benchStoreCeiling(b *testing.B, be benchkit.Backend) {
	n, k := objects(b), concurrency(b)
	ops, fromSubject := storeOps(b, be, k)
	ops = benchkit.Shaped(b, ops)
	s := benchkit.OpenLocation(b, be)().Store
	ctx := context.Background()
	value := make([]byte, benchkit.StoreValueBytes)
	rows := make([]*benchkit.Rows, n)
	need := ops.Need()
	if err := benchkit.RunConcurrent(n, k, func(i int) (err error) {
		rows[i], err = benchkit.Seed(ctx, s, "bench/host/"+strconv.Itoa(i), need, value)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	meter := benchkit.NewCPUMeter(b, be)
	c0 := meter.Read(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Object i replays move i's share of the subject's calls.
		if err := benchkit.RunConcurrent(n, k, func(i int) error { return rows[i].Run(ctx, s, ops.Op(i), value) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	meter.Report(b, meter.Read(b).Sub(c0), float64(n*b.N), "handoff")
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "handoffs/s")
	ops.Report(b)
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(float64(k), "max-concurrent")
	fs := 0.0
	if fromSubject {
		fs = 1
	}
	b.ReportMetric(fs, "counts-from-subject")
}

// BenchmarkHostStoreCeilingMemory: the memory store's share of N moves.
func BenchmarkHostStoreCeilingMemory(b *testing.B) { benchStoreCeiling(b, benchkit.Memory) }

// BenchmarkHostStoreCeilingRedis: locstore/redis's share of N moves.
func BenchmarkHostStoreCeilingRedis(b *testing.B) { benchStoreCeiling(b, benchkit.Redis) }

// --- wire ceiling -------------------------------------------------------------------

// BenchmarkHostRawZmq4: one op = N moves' records on stock zmq4, K at
// once: K DEALERs, half connected to each of two ROUTERs (the two
// targets); per object a DEALER sends the encoded 40 and 52 of a 1 KiB
// Blob's move, waits for the ROUTER's 53, and sends the 54; the op ends
// when the ROUTERs have every 54.
func BenchmarkHostRawZmq4(b *testing.B) {
	n, k := objects(b), concurrency(b)
	id := objectID(n - 1) // the longest id
	toTarget, back, cutover := benchkit.MoveFrames(b, id, benchkit.BlobPayload(b, id, stateBytes),
		config.Default().Relocation.ChunkSize)
	perMove := len(toTarget) + 1
	var cut, want atomic.Int64
	all := make(chan struct{}, 1)
	serve := func(r zmq4.Socket) {
		seen := map[string]int{}
		for {
			m, err := r.Recv()
			if err != nil {
				return
			}
			from := string(m.Frames[0])
			seen[from]++
			switch seen[from] % perMove {
			case len(toTarget): // the last chunk: relay-ready
				if r.Send(zmq4.NewMsgFrom(append([][]byte{m.Frames[0]}, back...)...)) != nil {
					return
				}
			case 0: // the cutover
				if cut.Add(1) == want.Load() {
					all <- struct{}{}
				}
			}
		}
	}
	routers := [2]zmq4.Socket{benchkit.Zmq4Router(b), benchkit.Zmq4Router(b)}
	for _, r := range routers {
		go serve(r)
	}
	pool := make(chan zmq4.Socket, k)
	for w := range k {
		pool <- benchkit.Zmq4Dealer(b, routers[w%2], "raw-"+strconv.Itoa(w))
	}
	move := func(int) error {
		d := <-pool
		defer func() { pool <- d }()
		for _, f := range toTarget {
			if err := d.Send(zmq4.NewMsgFrom(f...)); err != nil {
				return err
			}
		}
		if _, err := d.Recv(); err != nil {
			return err
		}
		return d.Send(zmq4.NewMsgFrom(cutover...))
	}
	op := func() error {
		want.Store(cut.Load() + int64(n))
		if err := benchkit.RunConcurrent(n, k, move); err != nil {
			return err
		}
		select {
		case <-all:
			return nil
		case <-time.After(opTimeout):
			return fmt.Errorf("%d of %d cutovers arrived", cut.Load()-(want.Load()-int64(n)), n)
		}
	}
	if err := op(); err != nil { // connections up, buffers grown
		b.Fatal(err)
	}
	var bytes int64
	for _, fs := range append(toTarget, back, cutover) {
		for _, f := range fs {
			bytes += int64(len(f))
		}
	}
	b.SetBytes(bytes * int64(n))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "handoffs/s")
	b.ReportMetric(float64(bytes), "move-bytes")
	b.ReportMetric(float64(n), "objects")
	b.ReportMetric(float64(k), "max-concurrent")
}
