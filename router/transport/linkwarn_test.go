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
	a, _, clk, logs := linkWarnNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close() // nothing listens there: every attempt fails
	if err := a.Connect(RID("node-gone"), "tcp://"+closed); err != nil {
		t.Fatal(err)
	}
	attempts := func(level slog.Level) int { return linkFailureLines(logs, level) }
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

// A peer that goes away (it stopped in order, or restarts: every step of a
// rolling restart) refuses the link's redials until it is back or
// discovery drops the link. Those failures stay DEBUG for PeerTimeout after
// the session ended — the "peer down" line already said it — and only a
// peer still unreachable after that gets the WARN. Before, every peer
// logged one WARN per peer per restart step (an operator try-out).
func TestPeerThatJustLeftIsNotWarnedAbout(t *testing.T) {
	a, cfg, clk, logs := linkWarnNode(t)
	b, err := New(testConfig("b", 1))
	if err != nil {
		t.Fatal(err)
	}
	connectAndWait(t, a, b)
	_ = b.Close()
	lines := func(level slog.Level) int { return linkFailureLines(logs, level) }
	waitFor(t, 10*time.Second, "a few failed redials", func() bool { return lines(slog.LevelDebug) >= 3 })
	if w := lines(slog.LevelWarn); w != 0 {
		t.Fatalf("%d WARN link failure lines right after the peer left, want 0 within PeerTimeout", w)
	}
	clk.Advance(cfg.PeerTimeout + time.Second)
	waitFor(t, 10*time.Second, "the WARN once the peer stayed away past PeerTimeout", func() bool { return lines(slog.LevelWarn) == 1 })
}

// linkFailureLines counts the captured "link attempt failed" lines at level.
func linkFailureLines(logs *captureLog, level slog.Level) int {
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

// linkWarnNode starts node a on a manual clock with its log captured.
func linkWarnNode(t *testing.T) (*Node, Config, *ManualClock, *captureLog) {
	logger, logs := newCaptureLog()
	clk := NewManualClock(time.Unix(1, 0))
	cfg := testConfig("a", 1)
	cfg.Logger, cfg.Clock = logger, clk
	return startNode(t, cfg), cfg, clk, logs
}
