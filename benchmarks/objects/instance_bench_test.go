package objects

// Instance Spot cold activation (issue 13, spec §7.1): the latency of a
// first message to a session that does not exist yet — store the activation
// in the Relocation Store and read it back, Reserve, factory, Commit, run
// the message, answer — beside, in the same run:
//
//	CreateActor[Redis]            a plain remote creation (no message)
//	RequestActor                  a request to an Actor that exists
//	TransportCreateRoundTrip      one bare request/reply on the transport
//	[Redis]Store3KeyBatch, [Redis]StoreRead
//	                              one conditional batch / one read of the Location Store
//	[Redis]RelocPutReadDelete     the Relocation Store part alone: Put, Read, Delete of a
//	                              payload of the same size
//
// The first-message latency is reported as ns/op (sequential) and its
// p50/p99 (first-msg-p50-us, first-msg-p99-us); the end of the recovery
// info (Preserve + payload delete, after the answer) is background work and
// shows in store-writes/op, not in the latency.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/benchmarks/internal/benchkit"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/spot"
)

// firstMessageBytes is the first message of the benchmark (a small request,
// as a session's hello would be).
const firstMessageBytes = 64

func registerAll(r *spot.Registry) error {
	if err := demoapp.Register(r); err != nil {
		return err
	}
	return demoapp.RegisterInstances(r)
}

func benchColdActivation(b *testing.B, be benchkit.Backend) {
	c := benchkit.StartCluster(b, be, []config.ObjectRole{config.RoleServer, config.RoleClient}, registerAll)
	client := c.Nodes[1].Manager()
	ctx := context.Background()
	body := make([]byte, firstMessageBytes)
	var seq atomic.Int64
	first := func() error {
		id := "s" + strconv.FormatInt(seq.Add(1), 10)
		got, err := client.RequestInstance(ctx, id, body, mesh.InstanceType(demoapp.SessionType))
		if err != nil {
			return err
		}
		// The session's first message (#1): a cold activation, not a
		// request to a session that already ran.
		if want := "session " + id + " #1 "; !strings.HasPrefix(string(got), want) {
			return fmt.Errorf("%s answered %q, want %q…", id, got, want)
		}
		return nil
	}
	warm := benchkit.WarmUp(b, first)
	lat := make([]time.Duration, 0, b.N)
	before := c.Counts()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := first(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "activations/s")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 50)), "first-msg-p50-us")
	b.ReportMetric(benchkit.Micros(benchkit.Percentile(lat, 99)), "first-msg-p99-us")
	c.ReportStore(b, before)
	warm.Report(b)
}

// BenchmarkColdActivation: first messages to new sessions, memory stores.
func BenchmarkColdActivation(b *testing.B) { benchColdActivation(b, benchkit.Memory) }

// BenchmarkColdActivationRedis: the same on Redis (both stores).
func BenchmarkColdActivationRedis(b *testing.B) { benchColdActivation(b, benchkit.Redis) }

// benchRelocPutReadDelete: one op = Put of a payload of an activation's size,
// Read, Delete — the Relocation Store work of one activation.
func benchRelocPutReadDelete(b *testing.B, be benchkit.Backend) {
	s := benchkit.OpenRelocation(b, be)
	ctx := context.Background()
	payload := make([]byte, 512+firstMessageBytes) // header + first message
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ref := "bench/activation/" + strconv.Itoa(i)
		if _, err := s.Put(ctx, ref, payload, time.Hour); err != nil {
			b.Fatal(err)
		}
		if rr, err := s.Read(ctx, ref); err != nil || !rr.Found {
			b.Fatalf("read back: %v", err)
		}
		if err := s.Delete(ctx, ref); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "payloads/s")
}

// BenchmarkRelocPutReadDelete: the memory Relocation Store's part.
func BenchmarkRelocPutReadDelete(b *testing.B) { benchRelocPutReadDelete(b, benchkit.Memory) }

// BenchmarkRedisRelocPutReadDelete: relocstore/redis's part.
func BenchmarkRedisRelocPutReadDelete(b *testing.B) { benchRelocPutReadDelete(b, benchkit.Redis) }
