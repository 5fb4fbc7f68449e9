package stores

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/internal/testredis"
)

// A store opened for a one-shot tool (OneShot: the ctl commands) leaves out
// the notices meant for the start of a node's log — the durability WARN of
// a Redis without persistence and the replica_acks INFO — which a node's
// open still logs.
func TestOneShotOpenLeavesOutTheNodeNotices(t *testing.T) {
	srv := testredis.NewServer(t) // persistence off
	const (
		durability = "Location Store: Redis persistence is off"
		locAcks    = "Location Store: every write waits for Redis replicas"
		relAcks    = "Relocation Store: every write waits for Redis replicas"
	)
	tests := []struct {
		name    string
		ctx     context.Context
		oneShot bool
	}{
		{"node", context.Background(), false},
		{"one-shot tool", OneShot(context.Background()), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if IsOneShot(tc.ctx) != tc.oneShot {
				t.Fatalf("IsOneShot = %v", !tc.oneShot)
			}
			cfg := config.StoreConfig{Provider: "redis"}
			cfg.Redis.Addrs, cfg.Redis.Namespace = []string{srv.Addr}, testredis.Namespace(t)
			cfg.Redis.OperationTimeout, cfg.Redis.ReplicaAcks, cfg.Redis.ReplicaAckTimeout = 2*time.Second, 1, 100*time.Millisecond
			var logs syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			ls, err := OpenLocation(tc.ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			ls.Close()
			cfg.Redis.Namespace += "-reloc"
			rs, err := OpenRelocation(tc.ctx, cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			rs.Close()
			for _, line := range []string{durability, locAcks, relAcks} {
				if got := strings.Contains(logs.String(), line); got == tc.oneShot {
					t.Errorf("logged %q: %v, want %v\n%s", line, got, !tc.oneShot, logs.String())
				}
			}
		})
	}
}
