package transport

import (
	"log/slog"
	"net"
	"testing"
	"time"
)

// A link that keeps failing (a peer that refuses this node's key, a wrong
// endpoint) logs its WARN again once a minute, not only on the first
// failure: after that it was DEBUG only, and once the first line had
// rotated out of the log nothing said why the node stayed alone (an
// operator try-out: a CURVE node missing from its peers' allow-lists).
func TestFailingLinkWarnsAgainEveryMinute(t *testing.T) {
	logger, logs := newCaptureLog()
	clk := NewManualClock(time.Unix(1, 0))
	cfg := testConfig("a", 1)
	cfg.Logger, cfg.Clock = logger, clk
	a := startNode(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close() // nothing listens there: every attempt fails
	if err := a.Connect(RID("node-gone"), "tcp://"+closed); err != nil {
		t.Fatal(err)
	}
	attempts := func(level slog.Level) int {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		n := 0
		for _, r := range *logs.recs {
			if r.Message == "transport: link attempt failed" && r.Level == level {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: %d WARN, %d DEBUG link failure lines", what, attempts(slog.LevelWarn), attempts(slog.LevelDebug))
			}
		}
	}
	waitFor("a few failed attempts", func() bool { return attempts(slog.LevelDebug) >= 3 })
	if w := attempts(slog.LevelWarn); w != 1 {
		t.Fatalf("%d WARN lines within the first minute, want 1", w)
	}
	clk.Advance(61 * time.Second)
	waitFor("the WARN again a minute later", func() bool { return attempts(slog.LevelWarn) == 2 })
}
