package authority

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestOpLoggerAddsAttributesOnlyWhenWriting(t *testing.T) {
	for _, tc := range []struct {
		name  string
		obj   Object
		level slog.Level
		write func(opLogger)
		want  string // "" = nothing written
	}{
		{"object", Object{ID: "a1", Kind: "actor"}, slog.LevelInfo,
			func(l opLogger) { l.Warn("lost", "attempt", 2) }, `level=WARN msg=lost op=commit object=a1 kind=actor attempt=2`},
		{"no object", Object{}, slog.LevelInfo,
			func(l opLogger) { l.Info("resolved") }, `level=INFO msg=resolved op=commit`},
		{"below the level", Object{ID: "a1"}, slog.LevelInfo,
			func(l opLogger) { l.Debug("torn") }, ""},
		{"debug enabled", Object{ID: "a1", Kind: "actor"}, slog.LevelDebug,
			func(l opLogger) { l.Debug("torn", "err", "x") }, `level=DEBUG msg=torn op=commit object=a1 kind=actor err=x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}})
			tc.write(opLogger{l: slog.New(h), op: Op("commit"), obj: tc.obj})
			if got := strings.TrimSpace(buf.String()); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
