package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
)

func TestZZOOMDrainTryout(t *testing.T) {
	srv := testredis.NewServer(t)
	r := startRollMeshOn(t, srv.Addr, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	createCounters(t, ctx, r.client.Manager(), "d-", 20)
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	raw.ConfigSet(ctx, "maxmemory", "1")
	start := time.Now()
	err := r.procs[0].stop(t, syscall.SIGTERM)
	t.Logf("stopped in %v: %v", time.Since(start), err)
	r.procs[0].mu.Lock()
	for _, l := range r.procs[0].stdout {
		t.Log("stdout:", l)
	}
	for _, m := range r.procs[0].logs {
		if m["level"] != "INFO" && m["level"] != "DEBUG" {
			t.Logf("%v", m)
		}
	}
	r.procs[0].mu.Unlock()
	raw.ConfigSet(ctx, "maxmemory", "0")
}
