package config

import (
	"io"
	"log/slog"
	"strings"
)

// parseLevel accepts the four level names, in any letter case (environment
// variables are often written in capitals).
func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case LogDebug:
		return slog.LevelDebug, true
	case LogInfo:
		return slog.LevelInfo, true
	case LogWarn:
		return slog.LevelWarn, true
	case LogError:
		return slog.LevelError, true
	}
	return slog.LevelInfo, false
}

// ValidLevel reports whether s names a log level: debug, info, warn or
// error, in any letter case (a command's own level flag checks it as a
// usage error).
func ValidLevel(s string) bool {
	_, ok := parseLevel(s)
	return ok
}

// NewLogger builds the slog.Logger every component logs through. An
// invalid format or level (which Validate reports) falls back to text/info
// so that the validation error itself can still be logged.
func NewLogger(l LogConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(l.Level)
	opts := &slog.HandlerOptions{Level: level}
	if strings.ToLower(l.Format) == LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Logger is NewLogger(c.Log, w).
func (c Config) Logger(w io.Writer) *slog.Logger { return NewLogger(c.Log, w) }
