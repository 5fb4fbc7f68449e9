package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/lease"
)

// A Redis account whose rule lacks a command the write script runs after
// its first write (here PEXPIREAT, which an expiring Put runs after the
// record's HSET): the acquire's write stops there, the lease record written
// but without its expiry. Acquire fails with ErrPermission and removes
// that record — until review O (2026-12-08) it found the record its own and
// adopted it: the node started with a lease whose every renewal was denied
// (docs/store-redis.md says the start fails at once), and the record, with
// no expiry, stayed in Redis for good.
func TestAcquireDeniedPartWayOnRedis(t *testing.T) {
	const user, password = "meshnode", "app-s3cret"
	ns := testredis.Namespace(t)
	var rule []string
	for _, arg := range testredis.StoreACL(user, password, ns) {
		if arg != "+pexpireat" {
			rule = append(rule, arg)
		}
	}
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: "default-s3cret", Users: [][]string{rule}})
	st, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{s.Addr}, Username: user, Password: password,
		Namespace: ns})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := lease.Acquire(ctx, lease.Config{Store: st, Timing: lease.DefaultTiming(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		defer m.Close()
		t.Fatalf("Acquire succeeded with an account that may not run PEXPIREAT: generation %d", m.Generation())
	}
	if !errors.Is(err, locstore.ErrPermission) {
		t.Fatalf("Acquire error = %v, want ErrPermission", err)
	}
	admin := goredis.NewClient(&goredis.Options{Addr: s.Addr, Password: "default-s3cret"})
	defer admin.Close()
	// Only the lease counter is left (durable, written before the denial).
	if keys, err := admin.Keys(ctx, "{"+ns+"}:k:*").Result(); err != nil || len(keys) != 1 {
		t.Fatalf("records left: %v (%v), want the lease counter alone", keys, err)
	}
}
