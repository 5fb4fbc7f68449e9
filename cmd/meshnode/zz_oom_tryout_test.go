package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/mesh/demoapp"
)

func TestZZOOMTryout(t *testing.T) {
	srv := testredis.NewServer(t)
	r := startRollMeshOn(t, srv.Addr, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	used, _ := rc.Info(ctx, "memory").Result()
	t.Logf("%.300s", used)
	m := r.client.Manager()
	first, err := m.CreateActor(ctx, "first", demoapp.CounterType)
	if err != nil {
		t.Fatal(err)
	}
	one := &incSender{m: m, refused: map[string]int{}, sample: map[string]error{}}
	mem, _ := rc.MemoryUsage(ctx, "x").Result()
	_ = mem
	// set maxmemory slightly above the used memory
	info, _ := rc.Do(ctx, "MEMORY", "STATS").Result()
	_ = info
	usedMem, _ := rc.Do(ctx, "INFO", "memory").Text()
	var um int64
	fmt.Sscanf(usedMem[indexOf(usedMem, "used_memory:")+len("used_memory:"):], "%d", &um)
	t.Logf("used_memory %d", um)
	rc.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	rc.ConfigSet(ctx, "maxmemory", fmt.Sprint(um+300_000))
	var created int
	var firstErr error
	start := time.Now()
	for i := 0; i < 5000; i++ {
		cctx, c := context.WithTimeout(ctx, 5*time.Second)
		_, err := m.CreateActor(cctx, fmt.Sprintf("oom-%d", i), demoapp.CounterType)
		c()
		if err != nil {
			firstErr = err
			break
		}
		created++
	}
	t.Logf("created %d then: %v (after %v)", created, firstErr, time.Since(start))
	// existing objects still work?
	for i := int64(1); i <= 3; i++ {
		if err := one.send(ctx, first, i); err != nil {
			t.Logf("increment existing: %v", err)
		}
	}
	time.Sleep(4 * time.Second) // past lease TTL 2s
	for _, p := range r.all {
		p.dump(t)
	}
	rc.ConfigSet(ctx, "maxmemory", "0")
	time.Sleep(3 * time.Second)
	_, err = m.CreateActor(ctx, "after", demoapp.CounterType)
	t.Logf("create after raising maxmemory: %v", err)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
