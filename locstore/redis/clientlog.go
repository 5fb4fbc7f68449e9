package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// RouteClientLogs sends the go-redis client's own log lines (connection
// pool dial failures and the like, which it otherwise prints unstructured
// to stderr through the standard log package, in the middle of a node's
// JSON or text log) to l at debug level, as "redis client" records with
// the line as "detail". What a user must act on is already reported by the
// stores' errors and the node's own logs (a renew failure names the dial
// error); these lines are detail. The client's logger is process-wide:
// the last call wins, and a nil l changes nothing.
func RouteClientLogs(l *slog.Logger) {
	if l == nil {
		return
	}
	goredis.SetLogger(clientLog{l: l})
}

type clientLog struct{ l *slog.Logger }

func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !c.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	c.l.Log(ctx, slog.LevelDebug, "redis client", "detail", strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: "))
}
