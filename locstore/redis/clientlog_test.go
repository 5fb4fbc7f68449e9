package redis

import (
	"context"
	"encoding/json"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A client that cannot dial logs through the node's logger, as structured
// debug records, not as a bare line on stderr.
func TestRouteClientLogs(t *testing.T) {
	var buf syncbuf.Buffer
	RouteClientLogs(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { RouteClientLogs(slog.New(slog.DiscardHandler)) })
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("ping to a closed port succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "failed to dial") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	line, _, _ := strings.Cut(buf.String(), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("client log %q is not one JSON record: %v", buf.String(), err)
	}
	if rec["msg"] != "redis client" || rec["level"] != "DEBUG" || !strings.Contains(rec["detail"].(string), "failed to dial") {
		t.Fatalf("client log record %v, want a DEBUG \"redis client\" record with the dial failure", rec)
	}
}
