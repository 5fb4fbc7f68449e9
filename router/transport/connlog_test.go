package transport

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// TestConnLinesBudgeted: the operator try-out's storm in small — fake peers
// that know the mesh name (NULL security) connect, are admitted, and
// leave or go silent. Each per-connection INFO line (admitted, closed,
// closing silent) is written connLogBurst times per connLogEvery, every
// line left out is counted once — in the summary written when its window
// is over, or by the next line of its kind when that comes first — and the
// events still report every connection. Before the budget each connection
// wrote its two or three lines.
func TestConnLinesBudgeted(t *testing.T) {
	const (
		admittedMsg = "transport: admitted inbound peer"
		closedMsg   = "transport: inbound connection closed"
		silentMsg   = "transport: closing silent inbound connection"
	)
	b, cfg, clk, logs, ev := connLogNode(t)
	if cfg.PeerTimeout < connLogEvery {
		t.Fatalf("the test needs PeerTimeout (%s) ≥ connLogEvery (%s): reaping must start a new window", cfg.PeerTimeout, connLogEvery)
	}

	const storm = 3 * connLogBurst
	hello := helloFrom(t, b, 1)
	conns := make([]*zconn, storm)
	for i := range conns {
		z := dialAs(t, b, RID(fmt.Sprintf("fake-%03d", i)))
		if rec := sayHello(t, z, hello); rec.Command != router.CmdAdmit {
			t.Fatalf("fake peer %d: %s, want admit", i, rec.Command)
		}
		conns[i] = z
	}
	waitFor(t, 10*time.Second, "every admission reported", func() bool { return ev.count(EventInboundAdmitted) == storm })
	lines := func(msg string) []string { return logs.lines(msg) }
	if got := lines(admittedMsg); len(got) != connLogBurst {
		t.Fatalf("%d admitted lines for %d admissions, want %d", len(got), storm, connLogBurst)
	}

	// Half leave at once: their closes share one window.
	leave := storm / 2
	for _, z := range conns[:leave] {
		_ = z.close()
	}
	waitFor(t, 10*time.Second, "the closes reported", func() bool { return ev.count(EventInboundClosed) == leave })
	if got := lines(closedMsg); len(got) != connLogBurst {
		t.Fatalf("%d closed lines for %d closes, want %d", len(got), leave, connLogBurst)
	}

	// The rest stay silent and are reaped after PeerTimeout, in a new
	// window of the closed lines.
	clk.Advance(cfg.PeerTimeout)
	waitFor(t, 10*time.Second, "the silent ones closed", func() bool { return ev.count(EventInboundClosed) == storm })
	silent := storm - leave
	if got := lines(silentMsg); len(got) != connLogBurst {
		t.Fatalf("%d silent lines for %d silent connections, want %d", len(got), silent, connLogBurst)
	}
	closed := lines(closedMsg)
	if len(closed) != 2*connLogBurst {
		t.Fatalf("%d closed lines for %d closes in two windows, want %d", len(closed), storm, 2*connLogBurst)
	}

	// A peer arriving in a new window is logged.
	z := dialAs(t, b, RID("late-peer"))
	if rec := sayHello(t, z, hello); rec.Command != router.CmdAdmit {
		t.Fatalf("late peer: %s, want admit", rec.Command)
	}
	waitFor(t, 10*time.Second, "the late admission reported", func() bool { return ev.count(EventInboundAdmitted) == storm+1 })
	got := lines(admittedMsg)
	if len(got) != connLogBurst+1 || !strings.Contains(got[connLogBurst], RID("late-peer").String()) {
		t.Fatalf("admitted lines after the late peer: %q, want %d, the last naming it", got, connLogBurst+1)
	}

	// Once every window is over, each line left out was reported once.
	// (The late peer, silent too, may be reaped meanwhile: its lines open
	// new windows and leave nothing out; a close line is written by the
	// connection's reader, after the count it carries was taken.)
	clk.Advance(connLogEvery)
	for _, tc := range []struct {
		msg      string
		leftOut  int
		lineKind string
	}{
		{admittedMsg, storm - connLogBurst, "admitted"},
		{closedMsg, storm - 2*connLogBurst, "closed"},
		{silentMsg, silent - connLogBurst, "silent"},
	} {
		reported := func() int { return suppressedSum(t, lines(tc.msg)) + suppressedSum(t, summaries(logs, tc.msg)) }
		waitFor(t, 10*time.Second, tc.lineKind+" lines left out all reported", func() bool { return reported() >= tc.leftOut })
		if got := reported(); got != tc.leftOut {
			t.Errorf("%s lines: %d reported left out, want %d", tc.lineKind, got, tc.leftOut)
		}
	}
}

// summaries are the connLogSummary lines about the per-connection line msg.
func summaries(logs *captureLog, msg string) []string {
	var out []string
	for _, l := range logs.lines(connLogSummary) {
		if strings.Contains(l, "line="+msg+" ") {
			out = append(out, l)
		}
	}
	return out
}

// TestConnLinesLeftOutAreSummarized: a mesh of more peers than the budget
// starting at once — the admissions left out are reported when their window
// is over, though no later admission comes to carry the count. Before, the
// count waited for the next admission line, which a mesh that then runs
// steadily never writes: the operator saw connLogBurst admissions and no
// sign of the others.
func TestConnLinesLeftOutAreSummarized(t *testing.T) {
	b, _, clk, logs, ev := connLogNode(t)
	const peers = connLogBurst + 4
	hello := helloFrom(t, b, 1)
	for i := 0; i < peers; i++ {
		z := dialAs(t, b, RID(fmt.Sprintf("peer-%02d", i)))
		if rec := sayHello(t, z, hello); rec.Command != router.CmdAdmit {
			t.Fatalf("peer %d: %s, want admit", i, rec.Command)
		}
	}
	waitFor(t, 10*time.Second, "every admission reported", func() bool { return ev.count(EventInboundAdmitted) == peers })
	if got := logs.lines(connLineAdmitted); len(got) != connLogBurst {
		t.Fatalf("%d admitted lines for %d admissions, want %d", len(got), peers, connLogBurst)
	}
	if got := summaries(logs, connLineAdmitted); len(got) != 0 {
		t.Fatalf("a summary before the window is over: %q", got)
	}
	clk.Advance(connLogEvery)
	got := summaries(logs, connLineAdmitted)
	if len(got) != 1 || suppressedSum(t, got) != peers-connLogBurst {
		t.Fatalf("summaries once the window is over: %q, want one saying suppressed=%d", got, peers-connLogBurst)
	}
}

// connLogNode starts a node on a manual clock whose log lines and events
// the test reads.
func connLogNode(t *testing.T) (*Node, Config, *ManualClock, *captureLog, *eventLog) {
	t.Helper()
	logger, logs := newCaptureLog()
	clk := NewManualClock(time.Unix(1, 0))
	ev := newEventLog()
	cfg := testConfig("b", 1)
	cfg.Logger = logger
	cfg.Clock = clk
	cfg.OnEvent = ev.on
	return startNode(t, cfg), cfg, clk, logs, ev
}

// suppressedSum adds up the suppressed=N counts of lines.
func suppressedSum(t *testing.T, lines []string) int {
	t.Helper()
	sum := 0
	for _, l := range lines {
		var n int
		i := strings.Index(l, "suppressed=")
		if i < 0 {
			t.Fatalf("line without a suppressed count: %q", l)
		}
		if _, err := fmt.Sscanf(l[i:], "suppressed=%d", &n); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		sum += n
	}
	return sum
}
