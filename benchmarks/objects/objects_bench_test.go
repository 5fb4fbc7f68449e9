package objects

// Objects benchmarks (the "Objects" issue: creates/s and request round
// trips/s through the framework vs the raw transport, same run). Every
// subject has a baseline measured in the same process and run:
//
//	subject                       baseline(s)
//	CreateActor[Parallel]         TransportCreateRoundTrip[Parallel]: one 49→20 round trip of
//	                              the same size answered at once by a bare transport handler
//	                              Store3KeyBatch: one conditional 3-key Write on the same store
//	                              (StoreRead: one Read, to price the reads a creation makes)
//	CreateActorRedis[Parallel]    the same, with locstore/redis (RedisStore3KeyBatch,
//	                              RedisStoreRead)
//	RequestActor[Parallel]        TransportActorRequest[Parallel]: a 25→20 round trip carrying
//	                              the same payload, answered at once by the handler
//	SendActor                     TransportActorSend: one-way 24 records counted by the handler
//
// The mesh is two nodes of one process on loopback TCP: node 0 is a
// client-role node (it creates and messages, hosts nothing), node 1 a
// server hosting the demo counter Actor, so every creation is remote
// (placement, Reserve batch, command 49, target Commit batch, command 20)
// and every message crosses the wire. The transport baselines use the same
// transport settings as the mesh nodes (config.Default().Transport).
//
// Besides ns/op each subject reports its rate and what it cost in store
// operations per op (store-reads/op, store-writes/op, store-conflicts/op:
// all nodes' Location Store calls, background lease renewals and discovery
// included — a few per 5 s, negligible against thousands of ops) and, for
// messaging, route-cache-misses/op (0 means the warm route cache answered).
// Performance is reported, never asserted.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/benchmarks/internal/benchkit"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

const (
	// benchParallelism × GOMAXPROCS goroutines run the parallel variants
	// (subject and baseline alike): enough callers in flight to show
	// contention without swamping a 2-core machine.
	benchParallelism = 4
	// storeValueBytes is the value size of the raw store baseline: about an
	// authority record's encoded size.
	storeValueBytes = 512
)

// --- the two-node mesh ------------------------------------------------------

// benchPair is a client node creating and messaging, and a server node
// hosting.
type benchPair struct {
	*benchkit.Cluster
	client, server *mesh.Node
}

// startPair starts the server, then the client, and waits until the
// client's descriptor list offers the server for placement and one
// creation and one request went through (connections and route cache warm).
func startPair(b *testing.B, be benchkit.Backend) *benchPair {
	b.Helper()
	c := benchkit.StartCluster(b, be, []config.ObjectRole{config.RoleServer, config.RoleClient}, demoapp.Register)
	p := &benchPair{Cluster: c, server: c.Nodes[0], client: c.Nodes[1]}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ref mesh.ActorRef
	var err error
	for {
		ref, err = p.client.Manager().CreateActor(ctx, "warm-up", demoapp.CounterType)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("warm-up creation: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := p.client.Manager().RequestActor(ctx, ref, []byte("get")); err != nil {
		b.Fatalf("warm-up request: %v", err)
	}
	return p
}

// --- CreateActor ------------------------------------------------------------

// benchCreate: one op = one remote CreateActor of a new demo counter.
func benchCreate(b *testing.B, be benchkit.Backend, parallel bool) {
	p := startPair(b, be)
	m := p.client.Manager()
	ctx := context.Background()
	var seq atomic.Int64
	create := func() error {
		id := "c" + strconv.FormatInt(seq.Add(1), 10)
		ref, err := m.CreateActor(ctx, id, demoapp.CounterType)
		if err != nil {
			return err
		}
		if string(ref.NodeRID) != string(p.server.RID()) {
			return fmt.Errorf("%s placed on %x, not the server", id, ref.NodeRID)
		}
		return nil
	}
	before := p.Counts()
	cpu := benchkit.NewCPUMeter(b, be)
	cpu0 := cpu.Read(b)
	b.ResetTimer()
	if parallel {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := create(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			if err := create(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
	p.ReportStore(b, before)
	// CPU per creation (this process: both nodes; and redis-server): on 2
	// shared cores it bounds concurrent creations long before the store does.
	cpu.Report(b, cpu.Read(b).Sub(cpu0), float64(b.N), "create")
}

// BenchmarkCreateActor: sequential remote creations, memory store.
func BenchmarkCreateActor(b *testing.B) { benchCreate(b, benchkit.Memory, false) }

// BenchmarkCreateActorParallel: concurrent remote creations, memory store.
func BenchmarkCreateActorParallel(b *testing.B) { benchCreate(b, benchkit.Memory, true) }

// BenchmarkCreateActorRedis: sequential remote creations, Redis store.
func BenchmarkCreateActorRedis(b *testing.B) { benchCreate(b, benchkit.Redis, false) }

// BenchmarkCreateActorRedisParallel: concurrent remote creations, Redis store.
func BenchmarkCreateActorRedisParallel(b *testing.B) { benchCreate(b, benchkit.Redis, true) }

// --- raw transport baselines -------------------------------------------------

// createRecord is a command 49 shaped like the mesh's: real-length ids,
// a 32-hex reservation id, a UUID owner id.
func createRecord(src, target transport.RID, i uint64) *router.Record {
	return router.NewRecord(&router.ActorCreate{
		Operation:     router.OperationID{High: 0x0123456789abcdef, Low: i + 1},
		SourceNodeRID: src, SourceNodeGeneration: 7,
		ActorID: "c" + strconv.FormatUint(i+1, 10), StableType: demoapp.CounterType,
		Reservation: router.ObjectReservationFence{
			ReservationID: "0123456789abcdef0123456789abcdef", ExpectedStoreVersion: "123456",
			ObjectGeneration: 1, AuthorityOwnerGeneration: 1, TargetNodeRID: target, TargetNodeGeneration: 8,
			TargetOwnerID: "6f1c2b8e-3d4a-4c5b-9e6f-7a8b9c0d1e2f", TargetOwnerLeaseGeneration: 8,
			PendingCapacityDelta: 1,
		},
		DeadlineUnixMs: uint64(time.Now().Add(time.Minute).UnixMilli()),
	}, nil, nil)
}

// createAnswerHandler answers a 49 at once with the Created reply the
// target sends (command 20 with the actor tail).
func createAnswerHandler(_ context.Context, _ transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
	c, ok := rec.Body.(*router.ActorCreate)
	if !ok {
		return
	}
	_ = reply(router.NewRecord(&router.Reply{Correlation: c.Correlation, Result: router.ResultOK,
		Tail: &router.ActorCreateTail{Result: router.CreateCreated,
			Actor: &router.ActorRef{ActorID: c.ActorID, ObjectGeneration: c.Reservation.ObjectGeneration}}}, nil, nil))
}

func benchTransportCreate(b *testing.B, parallel bool) {
	a, t := benchkit.TransportPair(b, createAnswerHandler)
	ctx := context.Background()
	var seq atomic.Uint64
	round := func() error {
		resp, err := a.Request(ctx, t.RID(), createRecord(a.RID(), t.RID(), seq.Add(1)))
		if err != nil {
			return err
		}
		if rep, ok := resp.Body.(*router.Reply); !ok || rep.Result != router.ResultOK {
			return fmt.Errorf("unexpected answer %s", resp.Command)
		}
		return resp.ResolveReplyTail(router.OpActorCreate)
	}
	b.ResetTimer()
	runRounds(b, parallel, round)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "round-trips/s")
}

// runRounds runs round b.N times, sequentially or from
// benchParallelism×GOMAXPROCS goroutines.
func runRounds(b *testing.B, parallel bool, round func() error) {
	if !parallel {
		for i := 0; i < b.N; i++ {
			if err := round(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(benchParallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := round(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTransportCreateRoundTrip: the wire part of one remote creation —
// a 49 request and its Created 20 — on the bare transport.
func BenchmarkTransportCreateRoundTrip(b *testing.B) { benchTransportCreate(b, false) }

// BenchmarkTransportCreateRoundTripParallel: the same from concurrent callers.
func BenchmarkTransportCreateRoundTripParallel(b *testing.B) { benchTransportCreate(b, true) }

// --- raw store baselines -----------------------------------------------------

// benchStoreBatch: one op = one Write of IfMissing on three fresh keys and
// a Put of each (a Reserve-shaped batch: authority row, generation
// counter, capacity counter), the least a creation writes.
func benchStoreBatch(b *testing.B, be benchkit.Backend) {
	s := benchkit.OpenLocation(b, be)()
	ctx := context.Background()
	value := make([]byte, storeValueBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := locstore.WriteRequest{Conditions: make([]locstore.Condition, 3), Mutations: make([]locstore.Mutation, 3)}
		for k := range 3 {
			key := "bench/" + strconv.Itoa(i) + "/" + strconv.Itoa(k)
			req.Conditions[k] = locstore.IfMissing(key)
			req.Mutations[k] = locstore.Put(key, value)
		}
		res, err := s.Write(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if !res.Applied {
			b.Fatalf("batch %d not applied", i)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
}

// benchStoreRead: one op = one Read of a present authority-sized key; a
// creation makes ten (see the README).
func benchStoreRead(b *testing.B, be benchkit.Backend) {
	s := benchkit.OpenLocation(b, be)()
	ctx := context.Background()
	if res, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.Put("bench/read", make([]byte, storeValueBytes))}}); err != nil || !res.Applied {
		b.Fatalf("setup write: %v", err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rr, err := s.Read(ctx, "bench/read")
		if err != nil {
			b.Fatal(err)
		}
		if !rr.Found {
			b.Fatal("key missing")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkStoreRead: the memory store's Read.
func BenchmarkStoreRead(b *testing.B) { benchStoreRead(b, benchkit.Memory) }

// BenchmarkRedisStoreRead: locstore/redis's Read.
func BenchmarkRedisStoreRead(b *testing.B) { benchStoreRead(b, benchkit.Redis) }

// BenchmarkStore3KeyBatch: the memory store's 3-key conditional Write.
func BenchmarkStore3KeyBatch(b *testing.B) { benchStoreBatch(b, benchkit.Memory) }

// BenchmarkRedisStore3KeyBatch: locstore/redis's 3-key conditional Write.
func BenchmarkRedisStore3KeyBatch(b *testing.B) { benchStoreBatch(b, benchkit.Redis) }

// --- RequestActor / SendActor ------------------------------------------------

// actorPool creates n counters on the server.
func actorPool(b *testing.B, p *benchPair, n int) []mesh.ActorRef {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	refs := make([]mesh.ActorRef, n)
	for i := range refs {
		ref, err := p.client.Manager().CreateActor(ctx, "counter-"+strconv.Itoa(i), demoapp.CounterType)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.client.Manager().RequestActor(ctx, ref, []byte("get")); err != nil { // warms the route
			b.Fatal(err)
		}
		refs[i] = ref
	}
	return refs
}

func reportCache(b *testing.B, n *mesh.Node, before mesh.ObjectStats) {
	after := n.ObjectStats()
	b.ReportMetric(float64(after.RouteCacheMisses-before.RouteCacheMisses)/float64(b.N), "route-cache-misses/op")
}

// benchRequest: one op = RequestActor "get" to a counter on the server
// and its reply (the decimal value).
func benchRequest(b *testing.B, parallel bool) {
	p := startPair(b, benchkit.Memory)
	m := p.client.Manager()
	// One counter per caller: callers do not queue behind each other's
	// turns, as in the transport baseline.
	callers := 1
	if parallel {
		callers = benchParallelism * runtime.GOMAXPROCS(0) // RunParallel's goroutine count
	}
	refs := actorPool(b, p, callers)
	ctx := context.Background()
	var next atomic.Int64
	// The counter's answer, as the transport baseline checks its "0".
	get := func(ref mesh.ActorRef) error {
		got, err := m.RequestActor(ctx, ref, []byte("get"))
		if err == nil && string(got) != "0" {
			err = fmt.Errorf("%s answered %q to get, want 0", ref.ActorID, got)
		}
		return err
	}
	beforeStore, beforeStats := p.Counts(), p.client.ObjectStats()
	b.ResetTimer()
	if parallel {
		b.SetParallelism(benchParallelism)
		b.RunParallel(func(pb *testing.PB) {
			ref := refs[int(next.Add(1)-1)%len(refs)]
			for pb.Next() {
				if err := get(ref); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for i := 0; i < b.N; i++ {
			if err := get(refs[0]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "round-trips/s")
	reportCache(b, p.client, beforeStats)
	p.ReportStore(b, beforeStore)
}

// BenchmarkRequestActor: sequential requests, warm route cache.
func BenchmarkRequestActor(b *testing.B) { benchRequest(b, false) }

// BenchmarkRequestActorParallel: concurrent requests, one counter per caller.
func BenchmarkRequestActorParallel(b *testing.B) { benchRequest(b, true) }

// actorFence is a route fence shaped like the mesh's.
func actorFence(target transport.RID) router.ActorRouteFence {
	return router.ActorRouteFence{Actor: router.ActorRef{ActorID: "counter-0", ObjectGeneration: 1},
		TargetNodeRID: target, TargetNodeGeneration: 8, ExpectedAuthorityOwnerGeneration: 1, ExpectedOwnerLeaseGeneration: 8}
}

func messagePayload(body string) *router.Payload {
	return &router.Payload{PacketName: mesh.PacketName, ContentType: mesh.ContentType, Data: []byte(body)}
}

// requestAnswerHandler answers a 25 at once with the reply a fresh counter
// gives to "get" ("0"), and counts one-way 24s.
func requestAnswerHandler(sends *atomic.Int64, done chan<- struct{}, want *atomic.Int64) transport.Handler {
	return func(_ context.Context, _ transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		switch r := rec.Body.(type) {
		case *router.ActorRequest:
			_ = reply(router.NewRecord(&router.Reply{Correlation: r.Correlation, Result: router.ResultOK}, nil, messagePayload("0")))
		case *router.ActorSend:
			if sends != nil && sends.Add(1) == want.Load() {
				done <- struct{}{}
			}
		}
	}
}

func benchTransportRequest(b *testing.B, parallel bool) {
	a, t := benchkit.TransportPair(b, requestAnswerHandler(nil, nil, nil))
	ctx := context.Background()
	var seq atomic.Uint64
	round := func() error {
		resp, err := a.Request(ctx, t.RID(), router.NewRecord(&router.ActorRequest{
			Operation: router.OperationID{High: 0x0123456789abcdef, Low: seq.Add(1)}, TargetActor: actorFence(t.RID())},
			nil, messagePayload("get")))
		if err != nil {
			return err
		}
		if resp.Payload == nil || string(resp.Payload.Data) != "0" {
			return errors.New("unexpected reply")
		}
		return nil
	}
	b.ResetTimer()
	runRounds(b, parallel, round)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "round-trips/s")
}

// BenchmarkTransportActorRequest: a 25 with the "get" payload and its 20,
// bare transport.
func BenchmarkTransportActorRequest(b *testing.B) { benchTransportRequest(b, false) }

// BenchmarkTransportActorRequestParallel: the same from concurrent callers.
func BenchmarkTransportActorRequestParallel(b *testing.B) { benchTransportRequest(b, true) }

// BenchmarkSendActor: one op = one SendActor "inc" delivered to the
// counter's turn. The clock stops when a "get" sent after the last send
// (same connection, same mailbox: it runs after every inc) returns b.N —
// so a one-way message dropped anywhere fails the benchmark rather than
// flattering it.
func BenchmarkSendActor(b *testing.B) {
	p := startPair(b, benchkit.Memory)
	m := p.client.Manager()
	ref := actorPool(b, p, 1)[0]
	ctx := context.Background()
	inc := []byte("inc")
	var backpressured int
	beforeStore, beforeStats := p.Counts(), p.client.ObjectStats()
	b.ResetTimer()
	for i := 0; i < b.N; {
		err := m.SendActor(ctx, ref, inc)
		if err == nil {
			i++
			continue
		}
		if !errors.Is(err, transport.ErrBackpressure) {
			b.Fatal(err)
		}
		backpressured++
		time.Sleep(20 * time.Microsecond)
	}
	got, err := m.RequestActor(ctx, ref, []byte("get"))
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if string(got) != strconv.Itoa(b.N) {
		b.Fatalf("counter is %s after %d sends: one-way messages were lost (target FenceRefused %d)",
			got, b.N, p.server.ObjectStats().FenceRefused)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(backpressured)/float64(b.N), "backpressured/op")
	reportCache(b, p.client, beforeStats)
	p.ReportStore(b, beforeStore)
}

// BenchmarkTransportActorSend: one op = one 24 with the "inc" payload
// delivered to the bare handler.
func BenchmarkTransportActorSend(b *testing.B) {
	var sends, want atomic.Int64
	done := make(chan struct{}, 1)
	want.Store(-1)
	a, t := benchkit.TransportPair(b, requestAnswerHandler(&sends, done, &want))
	ctx := context.Background()
	rec := func() *router.Record {
		return router.NewRecord(&router.ActorSend{TargetActor: actorFence(t.RID())}, nil, messagePayload("inc"))
	}
	want.Store(int64(b.N))
	b.ResetTimer()
	for i := 0; i < b.N; {
		err := a.Send(ctx, t.RID(), rec())
		if err == nil {
			i++
			continue
		}
		if !errors.Is(err, transport.ErrBackpressure) {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Microsecond)
	}
	<-done
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
