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
// closing silent) is written connLogBurst times per connLogEvery, the first
// line of the next window says how many were left out, and the events
// still report every connection. Before the budget each connection wrote
// its two or three lines.
func TestConnLinesBudgeted(t *testing.T) {
	const (
		admittedMsg = "transport: admitted inbound peer"
		closedMsg   = "transport: inbound connection closed"
		silentMsg   = "transport: closing silent inbound connection"
	)
	logger, logs := newCaptureLog()
	clk := NewManualClock(time.Unix(1, 0))
	ev := newEventLog()
	cfg := testConfig("b", 1)
	cfg.Logger = logger
	cfg.Clock = clk
	cfg.OnEvent = ev.on
	b := startNode(t, cfg)
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
	// The closes of a window run concurrently, so the line that carries
	// the count is not necessarily the first one written.
	if got, want := suppressedSum(t, closed[connLogBurst:]), leave-connLogBurst; got != want {
		t.Fatalf("closed lines of the new window report %d left out, want %d: %q", got, want, closed[connLogBurst:])
	}

	// A peer arriving in a new window is logged, with the count of the
	// admissions left out before it.
	z := dialAs(t, b, RID("late-peer"))
	if rec := sayHello(t, z, hello); rec.Command != router.CmdAdmit {
		t.Fatalf("late peer: %s, want admit", rec.Command)
	}
	waitFor(t, 10*time.Second, "the late admission reported", func() bool { return ev.count(EventInboundAdmitted) == storm+1 })
	got := lines(admittedMsg)
	if len(got) != connLogBurst+1 {
		t.Fatalf("%d admitted lines after the late peer, want %d", len(got), connLogBurst+1)
	}
	if want := fmt.Sprintf("suppressed=%d ", storm-connLogBurst); !strings.Contains(got[connLogBurst], want) || !strings.Contains(got[connLogBurst], RID("late-peer").String()) {
		t.Fatalf("late peer's line %q, want its RID and %s", got[connLogBurst], want)
	}
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
