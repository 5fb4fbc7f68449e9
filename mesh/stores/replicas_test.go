package stores

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// replica_acks reaches both providers: on a master without a replica
// every change fails as not replicated, with one it goes through.
func TestOpenWithReplicaAcks(t *testing.T) {
	if config.MaxRedisReplicaAcks != redisconn.MaxReplicaAcks {
		t.Fatalf("config bounds replica_acks at %d, the providers at %d", config.MaxRedisReplicaAcks, redisconn.MaxReplicaAcks)
	}
	ctx := context.Background()
	lonely := testredis.NewServer(t)
	master := testredis.NewServer(t)
	testredis.NewReplica(t, master)
	for _, tc := range []struct {
		name   string
		addr   string
		refuse bool
	}{{"no replica", lonely.Addr, true}, {"one replica", master.Addr, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.StoreConfig{Provider: "redis"}
			cfg.Redis.Addrs, cfg.Redis.Namespace = []string{tc.addr}, testredis.Namespace(t)
			cfg.Redis.OperationTimeout, cfg.Redis.ReplicaAcks, cfg.Redis.ReplicaAckTimeout = 2*time.Second, 1, 100*time.Millisecond
			ls, err := OpenLocation(ctx, cfg, slog.Default())
			if err != nil {
				t.Fatal(err)
			}
			defer ls.Close()
			_, err = ls.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
			if got := errors.Is(err, redisconn.ErrNotReplicated); got != tc.refuse {
				t.Fatalf("location write: %v, want not replicated %v", err, tc.refuse)
			}
			cfg.Redis.Namespace += "-reloc"
			rs, err := OpenRelocation(ctx, cfg, slog.Default())
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Close()
			_, err = rs.Put(ctx, "ref", []byte("payload"), 0)
			if got := errors.Is(err, redisconn.ErrNotReplicated); got != tc.refuse {
				t.Fatalf("relocation put: %v, want not replicated %v", err, tc.refuse)
			}
		})
	}
}
