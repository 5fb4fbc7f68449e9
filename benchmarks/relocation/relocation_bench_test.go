package relocation

// Relocation benchmarks (issue #10: one live Actor moved between two
// servers). Every subject has a baseline measured in the same process and
// run:
//
//	subject                            baseline(s)
//	RelocateActor[UnderRequests]       RelocateBaselineRoundTrips: the wire a move needs at
//	                                   least — a Restore request (40) with one chunk (52) of the
//	                                   same payload size, its relay-ready (53), and the one-way
//	                                   cutover (54) — on the bare transport, answered at once
//	                                   RelocateBaselineStore: 1 read + 3 sequential conditional
//	                                   writes of an authority-sized row on the same store
//	RelocateActorRedis[UnderRequests]  the same, with RelocateBaselineRedisStore on locstore/redis
//	RestoreStream64MiB                 RawZmq4Stream64MiB: stock zmq4 DEALER→ROUTER carrying
//	                                   64 MiB in 1 MiB messages and a final ack
//	                                   TransportStream64MiB: the bare transport carrying the same
//	                                   40 + 65 chunks + 53 + 54 as the move
//
// The mesh is three nodes of one process on loopback TCP: node 0 a client
// (it creates the Actor and, in the UnderRequests variants, sends it
// requests), nodes 1 and 2 servers between which the Actor moves back and
// forth with mesh.ToNode. The Actor is PreserveStateWith: its state is an
// opaque byte string of random (incompressible) bytes, handed to and taken
// from the framework without a copy, so the figures price the framework,
// not the application's snapshot.
//
// One op is one RelocateActor call (Moved and Confirmed, or the benchmark
// fails) and the wait until the store shows the move Completed (the target
// erases the move's progress after it opened, off the caller's path), so
// that each move starts from a settled object; that wait is µs
// (completed-p50-us). Subjects and baselines first run until the Go heap
// stops growing (benchkit.WarmUp). Besides ns/op each subject reports the
// percentiles of RelocationResult.Timings.Total and the medians of its
// stages (µs), and the Location Store calls per move (all nodes, the few
// background lease renewals and discovery reads included). The
// UnderRequests variants also report what a sender sees (see
// reportPause). Performance is reported, never asserted.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/benchmarks/internal/benchkit"
	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// streamChunk is the size of one Restore chunk the nodes use: the
// relocation.chunk_size default, which the benchmarks' nodes keep.
var streamChunk = config.Default().Relocation.ChunkSize

const (
	blobID = "blob-1"
	// smallState is the state of the one-object move benchmarks.
	smallState = 1 << 10
	// largeState is the state of the Restore stream benchmarks.
	largeState = 64 << 20
	// opTimeout bounds one move, one settle or one request.
	opTimeout = 60 * time.Second
)

// --- moves ---------------------------------------------------------------------

// moveBench is a client and two servers, one blob on one of them, and what
// its moves measured.
type moveBench struct {
	*benchkit.Cluster
	client  *mesh.Node
	servers [2]*mesh.Node
	owner   int // index into servers
	ref     mesh.ActorRef
	crc     string // of the state as created

	results []mesh.RelocationResult
	windows []benchkit.Window // of each move: call to settled
	lags    []time.Duration   // of each move: return to settled
}

// startMoves starts the mesh and creates the blob with a state of size
// bytes from the client; placement picks one of the servers.
func startMoves(b *testing.B, be benchkit.Backend, size int) *moveBench {
	b.Helper()
	c := benchkit.StartCluster(b, be, []config.ObjectRole{config.RoleClient, config.RoleServer, config.RoleServer},
		benchkit.RegisterBlob(size, nil))
	m := &moveBench{Cluster: c, client: c.Nodes[0], servers: [2]*mesh.Node{c.Nodes[1], c.Nodes[2]}}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	for {
		m.ref, err = m.client.Manager().CreateActor(ctx, blobID, benchkit.BlobType)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("creation: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, s := range m.servers {
		if string(s.RID()) == string(m.ref.NodeRID) {
			m.owner = i
		}
	}
	m.crc = m.request(b, "crc") // warms the client's route
	return m
}

func (m *moveBench) request(b *testing.B, body string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	got, err := m.client.Manager().RequestActor(ctx, m.ref, []byte(body))
	if err != nil {
		b.Fatalf("request %q: %v", body, err)
	}
	return string(got)
}

// move moves the blob to the other server, then waits until the move is
// settled. The clock keeps running: stopping it reads the memory
// statistics, which stops the world — ms under load on 2 cores, which
// would pause the sender too. Settling takes µs (completed-p50-us).
func (m *moveBench) move(b *testing.B) {
	b.Helper()
	src, dst := m.servers[m.owner], m.servers[1-m.owner]
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	start := time.Now()
	res, err := src.Manager().RelocateActor(ctx, m.ref, mesh.ToNode(dst.RID()))
	returned := time.Now()
	if err != nil {
		b.Fatalf("move %d: %v", len(m.results)+1, err)
	}
	if res.Outcome != mesh.Moved || !res.Confirmed {
		b.Fatalf("move %d: %s (%s), confirmed %v", len(m.results)+1, res.Outcome, res.Reason, res.Confirmed)
	}
	m.owner = 1 - m.owner
	m.settle(ctx, b, dst.RID(), res.AuthorityOwnerGeneration)
	m.results = append(m.results, res)
	settled := time.Now()
	m.windows = append(m.windows, benchkit.Window{Start: start, End: settled})
	m.lags = append(m.lags, settled.Sub(returned))
}

// settle waits until the store names dst at owner generation gen with no
// move in progress: the target opened and recorded Completed, so the next
// move starts from a Ready object. It reads the store underneath the
// counters, so that the store calls per op are the move's own.
func (m *moveBench) settle(ctx context.Context, b *testing.B, dst []byte, gen uint64) {
	b.Helper()
	for {
		ok, g, err := benchkit.ActorSettled(ctx, m.Stores[0].Store, blobID, dst)
		if ok && g == gen {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("move %d never settled: %v", len(m.results)+1, err)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// warmUp moves until the heap stopped growing (benchkit.WarmUp) and
// forgets those moves: the first moves of a process fault fresh pages in
// (a 64 MiB move: ~2 s, then ~0.1 s once the heap is grown).
func (m *moveBench) warmUp(b *testing.B) benchkit.Warm {
	b.Helper()
	w := benchkit.WarmUp(b, func() error { m.move(b); return nil })
	m.results, m.windows, m.lags = nil, nil, nil
	return w
}

// check fails the benchmark unless the state survived every move.
func (m *moveBench) check(b *testing.B) {
	b.Helper()
	if got := m.request(b, "crc"); got != m.crc {
		b.Fatalf("state CRC %s after %d moves, %s before", got, len(m.results), m.crc)
	}
}

// report adds the move's percentiles, stage medians and store calls.
func (m *moveBench) report(b *testing.B, before benchkit.Counts) {
	var total, secure, capture, rec, restore, cutover, rest []time.Duration
	var relayed int
	var bytes []int
	for _, r := range m.results {
		t := r.Timings
		total, secure, capture = append(total, t.Total), append(secure, t.Secure), append(capture, t.Capture)
		rec, restore, cutover = append(rec, t.Record), append(restore, t.Restore), append(cutover, t.Cutover)
		// What no stage covers: the first checks and target choice, and
		// the confirming read of the new owner.
		rest = append(rest, t.Total-t.Secure-t.Capture-t.Record-t.Restore-t.Cutover)
		relayed, bytes = relayed+r.Relayed, append(bytes, r.PayloadBytes)
	}
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(total, 50)), "total-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(total, 99)), "total-p99-us")
	// Off the caller's path: from the call's return until the store shows
	// the move Completed (the target opened, then erased the progress).
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(m.lags, 50)), "completed-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(m.lags, 99)), "completed-p99-us")
	for _, s := range []struct {
		name string
		d    []time.Duration
	}{{"secure", secure}, {"capture", capture}, {"record", rec}, {"restore", restore}, {"cutover", cutover}, {"rest", rest}} {
		b.ReportMetric(benchkit.Micros(benchkit.Percentile(s.d, 50)), s.name+"-p50-us")
	}
	// The median: a move that captured a queued request carries it too.
	slices.Sort(bytes)
	b.ReportMetric(float64(bytes[len(bytes)/2]), "payload-bytes")
	b.ReportMetric(float64(relayed)/float64(len(m.results)), "relayed/op")
	m.ReportStore(b, before)
}

// tryTimeout bounds one request try: some 30× the longest pause seen here
// (a few ms), so that a lost request stalls the sender briefly. A try that
// was only slow would be answered late: late-replies tells them apart.
const tryTimeout = 250 * time.Millisecond

// quietRequests is how many requests the sender makes before the first
// move: moves follow each other back to back, so these are its latency
// outside moves (req-p50-us).
const quietRequests = 1000

// startSender starts a client sender requesting "ping" from the blob (see
// benchkit.Sender).
func (m *moveBench) startSender() *benchkit.Sender {
	return benchkit.StartSender(m.client, []mesh.ActorRef{m.ref}, quietRequests, tryTimeout, opTimeout)
}

// halt stops the sender and fails the benchmark if it failed.
func halt(b *testing.B, s *benchkit.Sender) {
	b.Helper()
	s.Halt(b)
	if len(s.Lost) > 0 {
		// Every Request gets one answer (spec §12): this is a framework
		// defect, reported loudly but not failed, so that the run's
		// figures are kept (see benchmarks/README.md).
		b.Logf("!!! %d request(s) never answered within %v during %d moves", len(s.Lost), tryTimeout, b.N)
	}
}

// reportPause reports what the sender saw. A move's pause is the longest
// answered request that overlapped the move (call to settled);
// pause-p50/p99-us are over the moves. A move that no answered request
// overlapped, or that overlapped a lost try (the sender was stuck, not
// paused by the move), is left out and counted in unobserved-moves.
// req-p50-us is the median request that overlapped no move: the sender's
// latency outside moves.
func (m *moveBench) reportPause(b *testing.B, s *benchkit.Sender) {
	var outside, pauses []time.Duration
	for _, sp := range s.Spans {
		in := false
		for _, w := range m.windows {
			in = in || w.Overlaps(sp.Start, sp.End)
		}
		if !in {
			outside = append(outside, sp.Len())
		}
	}
	unobserved := 0
	for _, w := range m.windows {
		var longest time.Duration
		for _, sp := range s.Spans {
			if w.Overlaps(sp.Start, sp.End) {
				longest = max(longest, sp.Len())
			}
		}
		for _, l := range s.Lost {
			if w.Overlaps(l.Start, l.End) {
				longest = 0
			}
		}
		if longest == 0 {
			unobserved++
			continue
		}
		pauses = append(pauses, longest)
	}
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(pauses, 50)), "pause-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(pauses, 99)), "pause-p99-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(outside, 50)), "req-p50-us")
	b.ReportMetric(float64(s.Retries)/float64(len(m.windows)), "req-retries/op")
	b.ReportMetric(float64(len(s.Lost)), "req-unanswered")
	b.ReportMetric(float64(s.LateReplies()), "late-replies")
	b.ReportMetric(float64(unobserved), "unobserved-moves")
}

// benchMove: one op = one move of a 1 KiB blob to the other server;
// traffic adds a sender.
func benchMove(b *testing.B, be benchkit.Backend, traffic bool) {
	m := startMoves(b, be, smallState)
	warm := m.warmUp(b)
	var s *benchkit.Sender
	if traffic {
		s = m.startSender()
		s.WaitQuiet(b)
	}
	before := m.Counts()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.move(b)
	}
	b.StopTimer()
	warm.Report(b)
	if s != nil {
		halt(b, s)
		m.reportPause(b, s)
	}
	// Store calls per op include the sender's route re-reads after a move.
	m.report(b, before)
	m.check(b)
}

// BenchmarkRelocateActor: a 1 KiB PreserveStateWith Actor moved back and
// forth between two servers, memory store, no traffic.
func BenchmarkRelocateActor(b *testing.B) { benchMove(b, benchkit.Memory, false) }

// BenchmarkRelocateActorUnderRequests: the same while a client sends the
// Actor requests one after another.
func BenchmarkRelocateActorUnderRequests(b *testing.B) { benchMove(b, benchkit.Memory, true) }

// BenchmarkRelocateActorRedis: BenchmarkRelocateActor on locstore/redis.
func BenchmarkRelocateActorRedis(b *testing.B) { benchMove(b, benchkit.Redis, false) }

// BenchmarkRelocateActorRedisUnderRequests: BenchmarkRelocateActorUnderRequests
// on locstore/redis.
func BenchmarkRelocateActorRedisUnderRequests(b *testing.B) { benchMove(b, benchkit.Redis, true) }

// BenchmarkRestoreStream64MiB: one op = one move of a blob whose state is
// 64 MiB (MB/s over the state). restore-MB/s is the state over the Restore
// stage alone (encode, CRC, chunks on the wire, the target's record read,
// assembly, CRC, decode, restore, relay-ready).
func BenchmarkRestoreStream64MiB(b *testing.B) {
	m := startMoves(b, benchkit.Memory, largeState)
	warm := m.warmUp(b)
	before := m.Counts()
	b.SetBytes(largeState)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.move(b)
	}
	b.StopTimer()
	warm.Report(b)
	m.check(b)
	m.report(b, before)
	var restore []time.Duration
	for _, r := range m.results {
		restore = append(restore, r.Timings.Restore)
	}
	b.ReportMetric(float64(largeState)/1e6/benchkit.Percentile(restore, 50).Seconds(), "restore-MB/s")
}

// --- wire baselines -------------------------------------------------------------

// wireMove is the bare transport doing a move's wire part: the sender
// starts a Restore request (40) declaring the payload, sends its chunks
// (52) one-way on the same connection, waits for the relay-ready (53) the
// handler answers once it has every chunk, then sends the one-way cutover
// (54); the op ends when the handler has the cutover. The payload and its
// CRC are prepared once: this is the wire alone.
func wireMove(b *testing.B, payload []byte) {
	tr, err := chunk.Split(payload, streamChunk)
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu      sync.Mutex
		pending func(*router.Record) error // the 40's reply
		prep    *router.RelocationPrepare
		got     uint32
	)
	cutover := make(chan struct{}, 1)
	handler := func(_ context.Context, _ transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		mu.Lock()
		defer mu.Unlock()
		switch r := rec.Body.(type) {
		case *router.RelocationPrepare:
			pending, prep, got = reply, r, 0
		case *router.RelocationState:
			if got++; got == prep.ChunkCount {
				_ = pending(benchkit.MoveReady(prep))
			}
		case *router.RelocationCutover:
			cutover <- struct{}{}
		}
	}
	a, t := benchkit.TransportPair(b, handler)
	bind := benchkit.MoveBinding(a.RID())
	ctx := context.Background()
	op := func() error {
		call, err := a.Start(ctx, t.RID(), benchkit.MovePrepare(bind, t.RID(), blobID, tr))
		if err != nil {
			return err
		}
		defer call.Cancel()
		for i, c := range tr.Chunks {
			if err := a.SendWait(ctx, t.RID(), benchkit.MoveChunk(bind, i, c)); err != nil {
				return err
			}
		}
		resp, err := call.Wait(ctx)
		if err != nil {
			return err
		}
		if r, ok := resp.Body.(*router.RelocationReady); !ok || r.Outcome != router.RelocationRelayReady {
			return fmt.Errorf("restore answered %s", resp.Command)
		}
		if err := a.SendWait(ctx, t.RID(), benchkit.MoveCutover(bind)); err != nil {
			return err
		}
		<-cutover
		return nil
	}
	timeOps(b, int64(len(payload)), op)
	b.ReportMetric(float64(len(payload)), "payload-bytes")
}

// timeOps warms up like the subjects, then times b.N runs of op, each
// carrying bytes.
func timeOps(b *testing.B, bytes int64, op func() error) {
	warm := benchkit.WarmUp(b, op)
	b.SetBytes(bytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	warm.Report(b)
}

// BenchmarkRelocateBaselineRoundTrips: the wire part of a 1 KiB move on
// the bare transport (40 + one 52 of the same payload, 53, 54).
func BenchmarkRelocateBaselineRoundTrips(b *testing.B) {
	wireMove(b, benchkit.BlobPayload(b, blobID, smallState))
}

// BenchmarkTransportStream64MiB: the wire part of a 64 MiB move on the
// bare transport (40 + 65 chunks of 1 MiB, 53, 54).
func BenchmarkTransportStream64MiB(b *testing.B) {
	wireMove(b, benchkit.BlobPayload(b, blobID, largeState))
}

// BenchmarkRawZmq4Stream64MiB: stock zmq4, DEALER → ROUTER, 64 MiB in
// 1 MiB messages, then the ROUTER acks; one op = 64 MiB acked.
func BenchmarkRawZmq4Stream64MiB(b *testing.B) {
	r := benchkit.Zmq4Router(b)
	d := benchkit.Zmq4Dealer(b, r, "raw-dealer")
	data := benchkit.RandomState(largeState)
	chunks := largeState / streamChunk
	go func() {
		for n := 1; ; n++ {
			m, err := r.Recv()
			if err != nil {
				return
			}
			if n%chunks == 0 {
				if err := r.Send(zmq4.NewMsgFrom(m.Frames[0], []byte("ack"))); err != nil {
					return
				}
			}
		}
	}()
	op := func() error {
		for c := 0; c < chunks; c++ {
			if err := d.Send(zmq4.NewMsg(data[c*streamChunk : (c+1)*streamChunk])); err != nil {
				return err
			}
		}
		_, err := d.Recv()
		return err
	}
	timeOps(b, largeState, op)
}

// --- store baselines -------------------------------------------------------------

// benchStoreMove: one op = the store round trips a move makes at least,
// sequentially on one authority-sized row: one Read, then three writes
// each conditional on the version the previous one left (secure, Captured,
// owner CAS).
func benchStoreMove(b *testing.B, be benchkit.Backend) {
	s := benchkit.OpenLocation(b, be)()
	ctx := context.Background()
	value := make([]byte, benchkit.StoreValueBytes)
	ops := benchkit.StoreOps{Reads: 1, ReadKeys: 1, Writes: 3, Rows: 3}
	rows, err := benchkit.Seed(ctx, s, "bench/move", 1, value)
	if err != nil {
		b.Fatalf("setup write: %v", err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rows.Run(ctx, s, ops, value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRelocateBaselineStore: the memory store's 1 read + 3 CAS.
func BenchmarkRelocateBaselineStore(b *testing.B) { benchStoreMove(b, benchkit.Memory) }

// BenchmarkRelocateBaselineRedisStore: locstore/redis's 1 read + 3 CAS.
func BenchmarkRelocateBaselineRedisStore(b *testing.B) { benchStoreMove(b, benchkit.Redis) }
