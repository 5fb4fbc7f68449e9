package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/mesh/stores"
)

// The ctl commands that open the Location Store are one-shot tools: they
// do not print the Redis durability WARN a node logs at its start (here a
// server without persistence). Before, every such command printed
// "Location Store: Redis persistence is off …" to stderr on every run, in
// front of its answer.
func TestCtlStoreCommandsDoNotPrintTheDurabilityWarning(t *testing.T) {
	ctx := context.Background()
	srv := testredis.NewServer(t) // its own server: persistence is off for sure
	ns := testredis.Namespace(t)
	cfg := config.Default()
	cfg.LocationStore.Provider = config.ProviderRedis
	cfg.LocationStore.Redis.Addrs, cfg.LocationStore.Redis.Namespace = []string{srv.Addr}, ns

	// What a node opening this store logs: the WARN the commands must not print.
	var nodeLog syncbuf.Buffer
	st, err := stores.OpenLocation(ctx, cfg.LocationStore, slog.New(slog.NewTextHandler(&nodeLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	const warning = "Redis persistence is off"
	if !strings.Contains(nodeLog.String(), warning) {
		t.Fatalf("a node's open of the store does not warn %q; the test needs a server without persistence:\n%s", warning, nodeLog.String())
	}

	flags := []string{"--location_store.provider", "redis", "--location_store.redis.addrs", srv.Addr,
		"--location_store.redis.namespace", ns, "--log.level", "debug"}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"topology", []string{"topology"}, ExitOK},
		{"record", []string{"record", "owner-lease:00"}, ExitError}, // missing: still a store read
		{"locate", []string{"locate", "actor", "nobody"}, ExitError},
		{"list", []string{"list", "--kind", "actor"}, ExitOK},
		{"reclaim", []string{"reclaim", "--all", "--dry-run"}, ExitOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(ctx, append(append([]string{"ctl"}, tc.args...), flags...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, out.String(), errb.String())
			}
			if strings.Contains(errb.String(), warning) || strings.Contains(errb.String(), "Location Store: Redis") {
				t.Fatalf("a one-shot ctl command printed the node's durability warning:\n%s", errb.String())
			}
		})
	}
}
