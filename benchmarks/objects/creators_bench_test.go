package objects

// Creation throughput by concurrency (issue 15): C creators (1, 8, 32)
// each making remote creations one after another on Redis, beside the
// same-run store ceiling — the store calls one uncontended creation makes
// (reads, conditional batches and the rows they put, as measured on the
// subject with one creator) replayed as raw locstore/redis calls by C
// goroutines on rows of their own (no decoding, no planning, no shared
// counters, so no conflicts: what the store allows C creators if nothing
// contended).
//
//	BenchmarkCreateActorRedisCreators/creators-C   creates/s, store calls per
//	                                               creation, CPU per creation
//	BenchmarkCreateStoreCeilingRedis/creators-C    creations/s the store calls
//	                                               alone allow at C
//
// The ceiling needs the subject's counts: run both in one invocation
// (make bench does); alone, the ceiling uses the last measured counts
// (6 reads, 2 batches, 6 rows).

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/meshnode/meshnode/benchmarks/internal/benchkit"
	"github.com/meshnode/meshnode/mesh/demoapp"
)

var creatorCounts = []int{1, 8, 32}

// createOps is the store calls per creation the subject measured with one
// creator (ok false until it ran).
var (
	createOps   benchkit.StoreOps
	createOpsOK bool
)

func BenchmarkCreateActorRedisCreators(b *testing.B) {
	for _, c := range creatorCounts {
		b.Run(fmt.Sprintf("creators-%d", c), func(b *testing.B) {
			p := startPair(b, benchkit.Redis)
			m := p.client.Manager()
			ctx := context.Background()
			var seq atomic.Int64
			before := p.Counts()
			cpu := benchkit.NewCPUMeter(b, benchkit.Redis)
			cpu0 := cpu.Read(b)
			b.ResetTimer()
			err := benchkit.RunConcurrent(b.N, c, func(int) error {
				id := "k" + strconv.FormatInt(seq.Add(1), 10)
				_, err := m.CreateActor(ctx, id, demoapp.CounterType)
				return err
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if c == 1 {
				createOps, createOpsOK = p.Counts().Sub(before).Ops(b.N), true
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
			p.ReportStore(b, before)
			cpu.Report(b, cpu.Read(b).Sub(cpu0), float64(b.N), "create")
		})
	}
}

// defaultCreateOps is what a creation cost when last measured (README).
var defaultCreateOps = benchkit.StoreOps{Reads: 2, Writes: 2, Rows: 7, ReadKeys: 8, CondKeys: 2}

func BenchmarkCreateStoreCeilingRedis(b *testing.B) {
	for _, c := range creatorCounts {
		b.Run(fmt.Sprintf("creators-%d", c), func(b *testing.B) {
			ops := createOps
			if !createOpsOK {
				ops = defaultCreateOps
			}
			ops = benchkit.Shaped(b, ops)
			s := benchkit.OpenLocation(b, benchkit.Redis)()
			ctx := context.Background()
			value := make([]byte, benchkit.StoreValueBytes)
			for g := range c {
				if err := ops.Seed(ctx, s, "ceiling/"+strconv.Itoa(g), value); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			errs := make(chan error, c)
			b.ResetTimer()
			// Each goroutine works on its own rows, as one creator does on
			// its own object.
			for g := range c {
				go func() {
					prefix := "ceiling/" + strconv.Itoa(g)
					for next.Add(1) <= int64(b.N) {
						if err := ops.Run(ctx, s, prefix, value); err != nil {
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
			b.ReportMetric(float64(ops.Reads), "store-reads/op")
			b.ReportMetric(float64(ops.Writes), "store-writes/op")
			ops.ReportShape(b)
		})
	}
}
