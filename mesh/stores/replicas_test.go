package stores

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// replica_acks reaches both providers: on a master without a replica the
// first change waits the timeout, with one it does not.
func TestOpenWithReplicaAcks(t *testing.T) {
	if config.MaxRedisReplicaAcks != redisconn.MaxReplicaAcks {
		t.Fatalf("config bounds replica_acks at %d, the providers at %d", config.MaxRedisReplicaAcks, redisconn.MaxReplicaAcks)
	}
	ctx := context.Background()
	lonely := testredis.NewServer(t)
	master := testredis.NewServer(t)
	testredis.NewReplica(t, master)
	const timeout = 400 * time.Millisecond
	for _, tc := range []struct {
		name string
		addr string
		wait bool
	}{{"no replica", lonely.Addr, true}, {"one replica", master.Addr, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.StoreConfig{Provider: "redis"}
			cfg.Redis.Addrs, cfg.Redis.Namespace = []string{tc.addr}, testredis.Namespace(t)
			cfg.Redis.OperationTimeout, cfg.Redis.ReplicaAcks, cfg.Redis.ReplicaAckTimeout = 2*time.Second, 1, timeout
			var logs syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			ls, err := OpenLocation(ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Close()
			if !strings.Contains(logs.String(), `Location Store: every write waits for Redis replicas (replica_acks)" replica_acks=1`) {
				t.Errorf("no line at open saying the writes wait: %s", logs.String())
			}
			t0 := time.Now()
			if _, err := ls.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}}); err != nil {
				t.Fatal(err)
			}
			checkWaited(t, "Location Store", logs.String(), time.Since(t0), timeout, tc.wait)
			cfg.Redis.Namespace += "-reloc"
			rs, err := OpenRelocation(ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			if !strings.Contains(logs.String(), "Relocation Store: every write waits for Redis replicas (replica_acks)") {
				t.Errorf("no line at open saying the relocation writes wait: %s", logs.String())
			}
			t0 = time.Now()
			if _, err := rs.Put(ctx, "ref", []byte("payload"), 0); err != nil {
				t.Fatal(err)
			}
			checkWaited(t, "Relocation Store", logs.String(), time.Since(t0), timeout, tc.wait)
		})
	}
}

// checkWaited checks one write of store: when it should have waited for
// replicas that are not there, it took the whole timeout and the store
// said its writes go on without them; otherwise the store said nothing of
// the kind. (Not "it took less than the timeout": a process starved on a
// loaded machine can take that long for any write.)
func checkWaited(t *testing.T, store, logs string, took, timeout time.Duration, wait bool) {
	t.Helper()
	behind := strings.Contains(logs, store+": writes are not acknowledged by enough Redis replicas")
	switch {
	case wait && took < timeout:
		t.Fatalf("%s: the write took %v, want the whole replica_ack_timeout %v (no replica)", store, took, timeout)
	case wait != behind:
		t.Fatalf("%s: said its writes go on without the replicas: %v, want %v (took %v)\n%s", store, behind, wait, took, logs)
	}
}

// Sentinels with a password of their own, through the configuration: a
// refusal names the keys to check, and sentinel_password opens the store.
func TestOpenThroughALockedSentinel(t *testing.T) {
	master := testredis.NewServer(t)
	sentinel := testredis.NewSentinel(t, master, "sentinel-secret")
	cfg := config.StoreConfig{Provider: "redis"}
	cfg.Redis.Addrs, cfg.Redis.MasterName, cfg.Redis.Namespace = []string{sentinel}, "meshmaster", testredis.Namespace(t)
	cfg.Redis.OperationTimeout = 3 * time.Second
	_, err := OpenLocation(context.Background(), cfg, slog.Default())
	if !errors.Is(err, redisconn.ErrAuth) || !strings.Contains(err.Error(), "location_store.redis.sentinel_password") {
		t.Fatalf("open without the Sentinel password: %v", err)
	}
	cfg.Redis.SentinelPassword = "sentinel-secret"
	ls, err := OpenLocation(context.Background(), cfg, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	if _, err := ls.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}}); err != nil {
		t.Fatal(err)
	}
	cfg.Redis.Namespace += "-reloc"
	rs, err := OpenRelocation(context.Background(), cfg, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if _, err := rs.Put(context.Background(), "ref", []byte("payload"), 0); err != nil {
		t.Fatal(err)
	}
}
