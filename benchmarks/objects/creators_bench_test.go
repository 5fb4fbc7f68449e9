package objects

// Creation throughput by concurrency (issue 15): C creators (1, 8, 32)
// each making remote creations one after another on Redis, beside the
// same-run store ceiling — the store calls one uncontended creation makes
// (reads, conditional batches and the rows they make, update, delete and
// only condition, as measured on the subject with one creator;
// benchkit.Replay) replayed as raw locstore/redis calls by C
// goroutines on rows of their own (no decoding, no planning, no shared
// counters, so no conflicts: what the store allows C creators if nothing
// contended).
//
//	BenchmarkCreateActorRedisCreators/creators-C   two nodes: the creators on a
//	                                               client node, every object on
//	                                               one server (the worst case:
//	                                               one target's counters)
//	BenchmarkCreateActorRedisMesh/creators-C       three nodes, as issue 15
//	                                               asks: the creators on a client
//	                                               node, the objects placed by
//	                                               weight on two servers
//	BenchmarkCreateActorRedisClients/creators-C    the three-node mesh with
//	                                               the creators spread over
//	                                               four client nodes (round
//	                                               robin), as when sessions
//	                                               or devices are created from
//	                                               many processes: every
//	                                               Reserve of every process
//	                                               conditions the one
//	                                               store-wide ObjectGeneration
//	                                               counter, which no lane
//	                                               settles across processes
//	BenchmarkCreateStoreCeilingRedis[Mesh]/creators-C
//	                                               creations/s the store calls
//	                                               of that subject allow at C
//
// Each subject reports creates/s, store calls per creation and CPU per
// creation. A ceiling needs its subject's counts: run both in one
// invocation (make bench does); alone, it uses the counts last measured
// (defaultCreateOps) and reports counts-from-subject 0.

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/benchmarks/internal/benchkit"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
)

var creatorCounts = []int{1, 8, 32}

// creatorMesh is a topology of the creators benchmarks and the store calls
// one uncontended creation made on it (ok false until its subject ran with
// one creator).
type creatorMesh struct {
	servers, clients int // the clients' nodes come last and create
	counts           []int
	ops              benchkit.Replay
	ok               bool
}

func (cm *creatorMesh) roles() []config.ObjectRole {
	roles := make([]config.ObjectRole, 0, cm.servers+cm.clients)
	for range cm.servers {
		roles = append(roles, config.RoleServer)
	}
	for range cm.clients {
		roles = append(roles, config.RoleClient)
	}
	return roles
}

// defaultCreateOps is what a creation cost when last measured (README,
// 2026-12-05): two reads of eight rows, one absent; Reserve and Commit,
// which make the authority row, the stored request and the final result
// (both expiring) and delete the stored request.
var defaultCreateOps = benchkit.Fixed(benchkit.StoreOps{Reads: 2, ReadKeys: 8, Missing: 1, Writes: 2, Rows: 8, CondKeys: 2,
	New: 1, NewExpiring: 2, Deletes: 1})

var (
	pairMesh    = &creatorMesh{servers: 1, clients: 1, counts: creatorCounts}
	threeMesh   = &creatorMesh{servers: 2, clients: 1, counts: creatorCounts}
	clientsMesh = &creatorMesh{servers: 2, clients: 4, counts: []int{8, 32}}
)

func BenchmarkCreateActorRedisCreators(b *testing.B) { benchCreators(b, pairMesh) }

func BenchmarkCreateActorRedisMesh(b *testing.B) { benchCreators(b, threeMesh) }

func BenchmarkCreateActorRedisClients(b *testing.B) { benchCreators(b, clientsMesh) }

func BenchmarkCreateStoreCeilingRedis(b *testing.B) { benchCreateCeiling(b, pairMesh) }

func BenchmarkCreateStoreCeilingRedisMesh(b *testing.B) { benchCreateCeiling(b, threeMesh) }

// benchCreators: one op = one remote CreateActor from a creators' node
// (round robin over them), C creators at once.
func benchCreators(b *testing.B, cm *creatorMesh) {
	for _, c := range cm.counts {
		b.Run(fmt.Sprintf("creators-%d", c), func(b *testing.B) {
			cl := startCreatorMesh(b, cm)
			ms := make([]*mesh.Manager, cm.clients)
			for i := range ms {
				ms[i] = cl.Nodes[cm.servers+i].Manager()
			}
			ctx := context.Background()
			var seq atomic.Int64
			placed := make([]atomic.Int64, len(cl.Nodes))
			before := cl.Counts()
			cpu := benchkit.NewCPUMeter(b, benchkit.Redis)
			cpu0 := cpu.Read(b)
			b.ResetTimer()
			err := benchkit.RunConcurrent(b.N, c, func(int) error {
				n := seq.Add(1)
				id := "k" + strconv.FormatInt(n, 10)
				ref, err := ms[n%int64(len(ms))].CreateActor(ctx, id, demoapp.CounterType)
				if err != nil {
					return err
				}
				for i, n := range cl.Nodes {
					if string(ref.NodeRID) == string(n.RID()) {
						placed[i].Add(1)
					}
				}
				return nil
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if c == 1 && cm.clients == 1 {
				cm.ops, cm.ok = cl.Counts().Sub(before).Replay(b.N), true
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
			cl.ReportStore(b, before)
			cpu.Report(b, cpu.Read(b).Sub(cpu0), float64(b.N), "create")
			// How placement spread the objects: the share of the server
			// that took the most (0.5 is an even split over two).
			most := int64(0)
			for i := range placed {
				most = max(most, placed[i].Load())
			}
			b.ReportMetric(float64(most)/float64(b.N), "busiest-server-share")
		})
	}
}

// startCreatorMesh starts the nodes of cm on Redis and waits until one
// creation from every client on every server went through (connections
// warm).
func startCreatorMesh(b *testing.B, cm *creatorMesh) *benchkit.Cluster {
	b.Helper()
	cl := benchkit.StartCluster(b, benchkit.Redis, cm.roles(), demoapp.Register)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for k := range cm.clients {
		m := cl.Nodes[cm.servers+k].Manager()
		warm := map[string]bool{}
		for i := 0; len(warm) < cm.servers; i++ {
			ref, err := m.CreateActor(ctx, fmt.Sprintf("warm-up-%d-%d", k, i), demoapp.CounterType)
			if err != nil {
				if ctx.Err() != nil {
					b.Fatalf("warm-up creation: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
				continue
			}
			warm[string(ref.NodeRID)] = true
		}
	}
	return cl
}

// benchCreateCeiling: the store calls of one creation on cm, replayed raw
// by C goroutines.
func benchCreateCeiling(b *testing.B, cm *creatorMesh) {
	for _, c := range cm.counts {
		b.Run(fmt.Sprintf("creators-%d", c), func(b *testing.B) {
			ops := cm.ops
			if !cm.ok {
				ops = defaultCreateOps
			}
			ops = benchkit.Shaped(b, ops)
			s := benchkit.OpenLocation(b, benchkit.Redis)()
			ctx := context.Background()
			value := make([]byte, benchkit.StoreValueBytes)
			rows := make([]*benchkit.Rows, c)
			for g := range c {
				var err error
				if rows[g], err = benchkit.Seed(ctx, s, "ceiling/"+strconv.Itoa(g), ops.Need(), value); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			errs := make(chan error, c)
			b.ResetTimer()
			// Each goroutine works on its own rows, as one creator does on
			// its own object; creation i replays its share of the subject's
			// calls.
			for g := range c {
				go func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							break
						}
						if err := rows[g].Run(ctx, s, ops.Op(int(i)), value); err != nil {
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			for range c {
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
			ops.Report(b)
			// 0: the subject did not run first in this process, and the
			// ceiling replayed defaultCreateOps, not this run's counts.
			fs := 0.0
			if cm.ok {
				fs = 1
			}
			b.ReportMetric(fs, "counts-from-subject")
		})
	}
}
