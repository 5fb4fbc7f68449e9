package benchkit

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
)

// CPUMeter reads the CPU time (user + system) this process and, on the
// Redis backend, the redis-server have used, so a benchmark can say what
// one unit of work costs in CPU and hence what bounds its rate on a machine
// whose cores the benchmark, the nodes and Redis share.
type CPUMeter struct {
	rdb *redis.Client // nil: no Redis to measure
}

// CPU is a reading of a CPUMeter.
type CPU struct {
	Self, Redis time.Duration
	// Calls is redis-server's calls per command (INFO commandstats,
	// commands a script runs included), read only when EnvRedisCommands is
	// set.
	Calls map[string]float64
}

// EnvRedisCommands, when set, makes a CPUMeter also read redis-server's
// command counts and Report log them per unit: what a subject and its
// ceiling ask of Redis inside their script calls, to compare.
const EnvRedisCommands = "MESHNODE_BENCH_REDIS_COMMANDS"

// Sub is the CPU used between o and c.
func (c CPU) Sub(o CPU) CPU {
	d := CPU{Self: c.Self - o.Self, Redis: c.Redis - o.Redis}
	if c.Calls != nil {
		d.Calls = make(map[string]float64, len(c.Calls))
		for k, v := range c.Calls {
			if n := v - o.Calls[k]; n != 0 {
				d.Calls[k] = n
			}
		}
	}
	return d
}

// NewCPUMeter measures this process and, for Redis, the test's redis-server.
func NewCPUMeter(b testing.TB, be Backend) *CPUMeter {
	b.Helper()
	m := &CPUMeter{}
	if be == Redis {
		m.rdb = redis.NewClient(&redis.Options{Addr: testredis.Addr(b)})
		b.Cleanup(func() { _ = m.rdb.Close() })
	}
	return m
}

// Read returns the CPU used so far.
func (m *CPUMeter) Read(b testing.TB) CPU {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	c := CPU{Self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	if m.rdb != nil {
		info, err := m.rdb.Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatalf("redis INFO cpu: %v", err)
		}
		c.Redis = redisCPU(info)
		if os.Getenv(EnvRedisCommands) != "" {
			stats, err := m.rdb.Info(context.Background(), "commandstats").Result()
			if err != nil {
				b.Fatalf("redis INFO commandstats: %v", err)
			}
			c.Calls = redisCalls(stats)
		}
	}
	return c
}

// redisCPU sums used_cpu_user and used_cpu_sys (seconds) of an INFO cpu
// answer.
func redisCPU(info string) time.Duration {
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_user" && k != "used_cpu_sys") {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// Add is c and o together.
func (c CPU) Add(o CPU) CPU {
	s := CPU{Self: c.Self + o.Self, Redis: c.Redis + o.Redis}
	if c.Calls != nil || o.Calls != nil {
		s.Calls = make(map[string]float64, len(o.Calls))
		for k, v := range c.Calls {
			s.Calls[k] += v
		}
		for k, v := range o.Calls {
			s.Calls[k] += v
		}
	}
	return s
}

// redisCalls is the calls per command of an INFO commandstats answer
// ("cmdstat_hset:calls=12,usec=...").
func redisCalls(info string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		if f, err := strconv.ParseFloat(calls, 64); err == nil {
			out[strings.TrimPrefix(k, "cmdstat_")] = f
		}
	}
	return out
}

// Report adds per-unit CPU figures (µs per unit) named cpu-self-us/<unit>
// and, when Redis was measured, cpu-redis-us/<unit>.
func (m *CPUMeter) Report(b *testing.B, used CPU, units float64, unit string) {
	if units <= 0 {
		return
	}
	b.ReportMetric(Micros(used.Self)/units, "cpu-self-us/"+unit)
	if m.rdb != nil {
		b.ReportMetric(Micros(used.Redis)/units, "cpu-redis-us/"+unit)
	}
	if used.Calls != nil {
		names := make([]string, 0, len(used.Calls))
		for k := range used.Calls {
			names = append(names, k)
		}
		sort.Strings(names)
		var sb strings.Builder
		for _, k := range names {
			fmt.Fprintf(&sb, " %s=%.2f", k, used.Calls[k]/units)
		}
		b.Logf("redis commands per %s:%s", unit, sb.String())
	}
}
