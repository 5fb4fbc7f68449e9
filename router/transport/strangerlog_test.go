package transport

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// eachStranger opens n connections to addr, 16 at a time; connection i
// writes what(i), shuts its write side and reads until the node closes it.
func eachStranger(t *testing.T, addr string, n int, what func(i int) []byte) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if _, err := c.Write(what(i)); err != nil {
				return // refused at a cap: closed before it read
			}
			_ = c.(*net.TCPConn).CloseWrite()
			_, _ = io.Copy(io.Discard, c) // until the node closes it
		}()
	}
	wg.Wait()
}

// TestStrangersRecordsShareTheLogBudget: connections that never said hello
// and send one malformed or misrouted record each must not write a WARN
// line each. The "dropped record" line had only a per-connection budget (one
// per second), and every new connection brings a new one: 200 strangers
// wrote 200 lines, where their handshake failures or records before hello
// write at most handshakeLogBurst per window. Every record is still counted.
func TestStrangersRecordsShareTheLogBudget(t *testing.T) {
	logger, logs := newCaptureLog()
	clk := NewManualClock(time.Unix(1, 0))
	cfgB := testConfig("b", 1)
	cfgB.Logger = logger
	cfgB.Clock = clk
	b := startNode(t, cfgB)

	bad := [][][]byte{
		{[]byte("\x13\x37garbage that is not a record")},
		mustEncode(&router.LivenessAck{ProbeID: 5}), // wrong direction
	}
	const strangers = 200
	eachStranger(t, b.rt.ln.Addr().String(), strangers, func(i int) []byte {
		out := append(zmtpGreeting(), zmtpReady([2]string{"Socket-Type", "DEALER"}, [2]string{"Identity", "stranger"})...)
		rec := bad[i%len(bad)]
		for j, f := range rec {
			out = append(out, rawFrame(j < len(rec)-1, f)...)
		}
		return out
	})
	waitFor(t, 20*time.Second, "every record counted", func() bool {
		s := b.Stats()
		return s.ProtocolErrors+s.RefusedUnadmitted == strangers
	})
	if got := len(logs.lines("transport: dropped record")); got > handshakeLogBurst {
		t.Fatalf("%d WARN lines for %d strangers' records (%d refused at the cap), want at most %d per %s",
			got, strangers, b.Stats().RefusedUnadmitted, handshakeLogBurst, handshakeLogEvery)
	}
}

// TestInboundConnCapIsLogged: a connection closed at accept because
// MaxInboundConns are open was counted (Stats.RefusedInbound) but logged
// nowhere, unlike one closed at MaxUnadmitted: an operator whose peers
// could not connect found no line saying why.
func TestInboundConnCapIsLogged(t *testing.T) {
	logger, logs := newCaptureLog()
	cfgB := testConfig("b", 1)
	cfgB.Logger = logger
	cfgB.MaxInboundConns = 2
	b := startNode(t, cfgB)
	addr := b.rt.ln.Addr().String()
	for i := 0; i < 2; i++ {
		rawDealer(t, addr, "held")
	}
	waitFor(t, 5*time.Second, "two connections held", func() bool {
		b.rt.mu.Lock()
		defer b.rt.mu.Unlock()
		return b.rt.n == 2
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedByPeer(c, 5*time.Second) {
		t.Fatal("connection over MaxInboundConns not closed")
	}
	if got := b.Stats().RefusedInbound; got != 1 {
		t.Fatalf("RefusedInbound = %d, want 1", got)
	}
	// The line may follow the close (written after it): waited for.
	waitFor(t, 10*time.Second, "the refusal's line", func() bool {
		return len(logs.lines("transport: inbound connection refused")) > 0
	})
	lines := logs.lines("transport: inbound connection refused")
	if len(lines) != 1 || !strings.Contains(lines[0], "MaxInboundConns") {
		t.Fatalf("refusal lines %q, want one naming the limit", lines)
	}
}

// TestMalformedCommandFrameIsAFramingViolation: after the handshake a ZMTP
// command frame whose body is empty or whose name runs past its end made
// zmq4's RecvMsg fail with an error of its own: the connection was closed
// with no line and no counter (neither ProtocolErrors nor
// HandshakeFailures), unlike every other framing violation. The guard
// refuses such a frame at its header as ErrFraming.
func TestMalformedCommandFrameIsAFramingViolation(t *testing.T) {
	logger, logs := newCaptureLog()
	cfgB := testConfig("b", 1)
	cfgB.Logger = logger
	b := startNode(t, cfgB)
	addr := b.rt.ln.Addr().String()
	cases := map[string][]byte{
		"empty command":             {flagCommand, 0},
		"name longer than the body": {flagCommand, 2, 5, 'P'},
	}
	n := 0
	for name, frame := range cases {
		c := rawDealer(t, addr, "cmd")
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if !closedByPeer(c, 5*time.Second) {
			t.Fatalf("%s: connection not closed", name)
		}
		n++
		waitFor(t, 5*time.Second, name+" counted as a protocol error", func() bool {
			return b.Stats().ProtocolErrors == uint64(n)
		})
	}
	// A line may follow its connection's close and count: waited for.
	waitFor(t, 10*time.Second, "a line for each frame", func() bool {
		return len(logs.lines("transport: inbound connection failed")) >= len(cases)
	})
	if got := len(logs.lines("transport: inbound connection failed")); got != len(cases) {
		t.Fatalf("%d lines for %d malformed command frames", got, len(cases))
	}
}
