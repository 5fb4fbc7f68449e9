package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/router"
)

// Tests of issue 12 item 5: what a connection that was never admitted can
// cost (limits.go). Each reproduces a measured case of the issue in small.

// captureLog is a slog.Handler that keeps every record, to count log lines.
type captureLog struct {
	mu    *sync.Mutex
	recs  *[]slog.Record
	attrs []slog.Attr
}

func newCaptureLog() (*slog.Logger, *captureLog) {
	h := &captureLog{mu: new(sync.Mutex), recs: new([]slog.Record)}
	return slog.New(h), h
}

func (h *captureLog) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureLog) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	*h.recs = append(*h.recs, r)
	h.mu.Unlock()
	return nil
}

func (h *captureLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *captureLog) WithGroup(string) slog.Handler { return h }

// lines returns the records whose message is msg, rendered as
// "key=value ..." for substring checks.
func (h *captureLog) lines(msg string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range *h.recs {
		if r.Message != msg {
			continue
		}
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, "%s=%v ", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// recvWithin returns the next value from ch, failing the test if none
// arrives within d.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %s", what, d)
	}
	var zero T
	return zero
}

// rejectedWith starts a node from cfg, links it to target and waits for
// the first rejection of its hello, which must carry reason. The node's
// event log is returned for later waits.
func rejectedWith(t *testing.T, cfg Config, target *Node, reason router.RejectReason) (*Node, *eventLog) {
	t.Helper()
	ev := newEventLog()
	cfg.OnEvent = ev.on
	n := startNode(t, cfg)
	if err := n.Connect(target.RID(), target.Endpoint()); err != nil {
		t.Fatal(err)
	}
	e := ev.wait(t, EventRejected, 5*time.Second)
	var rej *RejectError
	if !errors.As(e.Err, &rej) || rej.Reason != reason {
		t.Fatalf("hello of %s (generation %d): %v, want %s", cfg.RID, cfg.LifecycleGeneration, e.Err, reason)
	}
	return n, ev
}

// helloFrom encodes a hello with n's admission but another lifecycle
// generation: what a forger (or a restarted run) of n would send.
func helloFrom(t *testing.T, n *Node, gen uint64) [][]byte {
	t.Helper()
	adm := n.currentAdmission()
	rm := *adm.RouteMesh
	rm.LifecycleGeneration = gen
	adm.RouteMesh = &rm
	frames, err := encodeInfra(&router.Hello{Admission: adm})
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// dialAs opens a DEALER to n's ROUTER with identity id (any RID, as a
// forger may choose), completing the ZMTP handshake.
func dialAs(t *testing.T, n *Node, id RID) *zconn {
	t.Helper()
	c, err := net.Dial("tcp", n.rt.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	z, err := openZMTP(c, zmq4.Dealer, id, false, frameLimits{1 << 20, 1 << 20, 16, 1 << 16}, 4096, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.close() })
	return z
}

// sayHello sends hello on z and returns the answer (admit or reject).
func sayHello(t *testing.T, z *zconn, hello [][]byte) *router.Record {
	t.Helper()
	if err := z.write(hello); err != nil {
		t.Fatal(err)
	}
	if _, err := flushWithin(z, time.Second); err != nil {
		t.Fatal(err)
	}
	_ = z.raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	frames, err := z.recv()
	if err != nil {
		t.Fatalf("no answer to hello: %v", err)
	}
	rec, err := router.Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// closedByPeer waits until the server closes c (a read returns an error
// other than a timeout) within d.
func closedByPeer(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// TestPreHelloFrameLimit: before admission a connection may send nothing
// larger than the largest hello. The case — 16 connections that
// never said hello, each declaring frames of up to 128 MiB — now closes each
// connection at the frame header and allocates nothing near the frame
// size; a hello-sized message is still read (and dropped as a record
// before hello), and once admitted the normal limit applies again.
func TestPreHelloFrameLimit(t *testing.T) {
	logger, logs := newCaptureLog()
	cfgB := testConfig("b", 1)
	cfgB.Logger = logger
	big := make(chan int, 1)
	cfgB.Handler = echoHandler(func(_ PeerInfo, r *router.Record) {
		if r.Payload != nil {
			big <- len(r.Payload.Data)
		}
	})
	b := startNode(t, cfgB)
	addr := b.rt.ln.Addr().String()

	tests := []struct {
		name   string
		frame  uint64 // declared frame size
		send   int    // body bytes actually sent
		closed bool
	}{
		// Below the admitted frame limit (64 MiB + 64 KiB): zmq4 would
		// allocate it at the header, before any body byte arrives.
		{name: "64 MiB frame", frame: 64 << 20, send: 1 << 20, closed: true},
		{name: "128 MiB frame", frame: 128 << 20, send: 1 << 20, closed: true},
		{name: "one byte over the largest hello", frame: router.HelloMaxFrameBytes + 1, send: 1 << 10, closed: true},
		{name: "largest hello size", frame: router.HelloMaxFrameBytes, send: router.HelloMaxFrameBytes, closed: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const conns = 16
			body := make([]byte, tc.send)
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			errsBefore := b.Stats().ProtocolErrors
			cs := make([]net.Conn, conns)
			for i := range cs {
				cs[i] = rawDealer(t, addr, fmt.Sprintf("stranger-%d", i))
				hdr := make([]byte, 9)
				hdr[0] = flagLong
				binary.BigEndian.PutUint64(hdr[1:], tc.frame)
				// Errors are expected once the node closes the connection.
				_, _ = cs[i].Write(hdr)
				_, _ = cs[i].Write(body)
			}
			if !tc.closed {
				// Read whole and dropped as a malformed record.
				waitFor(t, 10*time.Second, "frames read", func() bool { return b.Stats().ProtocolErrors-errsBefore >= conns })
			}
			for i, c := range cs {
				if tc.closed && !closedByPeer(c, 5*time.Second) {
					t.Fatalf("connection %d still open after a %d-byte frame before hello", i, tc.frame)
				}
				if !tc.closed && closedByPeer(c, 20*time.Millisecond) {
					t.Fatalf("connection %d closed after a hello-sized frame", i)
				}
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			// TotalAlloc counts every allocation, freed or not: the
			// 128 MiB buffers the issue saw would show here even if the
			// collector had reclaimed them already.
			alloc := after.TotalAlloc - before.TotalAlloc
			limit := uint64(conns)*router.HelloMaxFrameBytes*2 + 16<<20
			if tc.closed {
				limit = 16 << 20
			}
			t.Logf("%d connections declaring %d-byte frames: %d bytes allocated in the process", conns, tc.frame, alloc)
			if alloc > limit {
				t.Fatalf("allocated %d bytes, want at most %d", alloc, limit)
			}
			for _, c := range cs {
				_ = c.Close()
			}
		})
	}
	lines := logs.lines("transport: inbound connection failed")
	if len(lines) == 0 || !strings.Contains(lines[0], ErrUnadmittedLimit.Error()) || !strings.Contains(lines[0], "limit 1048581") {
		t.Fatalf("close not logged with the typed cause: %q", lines)
	}

	// Admitted, the normal frame limit applies: a 4 MiB payload goes
	// through.
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)
	if err := a.Send(context.Background(), b.RID(), seqSend(b.RID(), 1, make([]byte, 4<<20))); err != nil {
		t.Fatal(err)
	}
	if n := recvWithin(t, big, 10*time.Second, "4 MiB record from the admitted peer"); n != 4<<20 {
		t.Fatalf("payload of %d bytes", n)
	}
}

// TestUnadmittedCap: connections that never say hello are bounded by
// MaxUnadmitted (more are closed at accept) and by the hello deadline
// (HandshakeTimeout); an admitted peer is served throughout, and a new
// peer gets in once the squatters are gone.
func TestUnadmittedCap(t *testing.T) {
	cfgB := testConfig("b", 1)
	cfgB.Handler = echoHandler(nil)
	cfgB.MaxUnadmitted = 4
	cfgB.HandshakeTimeout = time.Second
	b := startNode(t, cfgB)
	addr := b.rt.ln.Addr().String()
	cfgA := testConfig("a", 1)
	cfgA.HandshakeTimeout = 5 * time.Second
	a := startNode(t, cfgA)
	connectAndWait(t, a, b)

	unadm := func() int {
		b.rt.mu.Lock()
		defer b.rt.mu.Unlock()
		return b.rt.unadm
	}
	var squatters []net.Conn
	for i := 0; i < 4; i++ {
		squatters = append(squatters, rawDealer(t, addr, fmt.Sprintf("squatter-%d", i)))
		waitFor(t, 5*time.Second, "squatter accepted", func() bool { return unadm() == i+1 })
	}
	const extra = 20
	for i := 0; i < extra; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if !closedByPeer(c, 5*time.Second) {
			t.Fatalf("connection %d over the unadmitted cap not closed", i)
		}
		_ = c.Close()
	}
	if got := b.Stats().RefusedUnadmitted; got != extra {
		t.Fatalf("RefusedUnadmitted = %d, want %d", got, extra)
	}
	// The admitted peer does not count against the cap and is served.
	for i := 0; i < 20; i++ {
		if _, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), uint64(i+1), []byte("x"))); err != nil {
			t.Fatalf("admitted peer's request %d while the cap is full: %v", i, err)
		}
	}
	// The squatters miss the hello deadline and are closed.
	for i, c := range squatters {
		if !closedByPeer(c, 10*time.Second) {
			t.Fatalf("squatter %d not closed after the hello deadline", i)
		}
	}
	waitFor(t, 5*time.Second, "unadmitted slots released", func() bool { return unadm() == 0 })
	if hf := b.Stats().HandshakeFailures; hf < 4 {
		t.Fatalf("HandshakeFailures = %d, want the 4 hello timeouts counted", hf)
	}
	c := startNode(t, testConfig("c", 1))
	connectAndWait(t, c, b)
}

// TestMaxPeers: a hello from one RID more than MaxPeers is rejected with
// resourceLimit; the admitted peers keep working; the refused one gets in
// (its link retries) once a slot frees.
func TestMaxPeers(t *testing.T) {
	cfgB := testConfig("b", 1)
	cfgB.Handler = echoHandler(nil)
	cfgB.MaxPeers = 2
	b := startNode(t, cfgB)
	p1 := startNode(t, testConfig("p1", 1))
	p2 := startNode(t, testConfig("p2", 1))
	connectAndWait(t, p1, b)
	connectAndWait(t, p2, b)

	p3, _ := rejectedWith(t, testConfig("p3", 1), b, router.RejectResourceLimit)
	for _, p := range []*Node{p1, p2} {
		if _, err := p.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, []byte("x"))); err != nil {
			t.Fatalf("admitted peer %s: %v", p.RID(), err)
		}
	}
	// Once p1 leaves, its slot frees and p3's retrying link gets in.
	_ = p1.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p3.WaitAdmitted(ctx, b.RID()); err != nil {
		t.Fatalf("third peer after a slot freed: %v", err)
	}
	if _, err := p3.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, []byte("x"))); err != nil {
		t.Fatal(err)
	}
}

// TestHandshakeLogRateLimited: the 5,000 half-open connections
// gave 4,094 WARN lines. Here 200 failed handshakes give handshakeLogBurst
// lines and, when the window ends (manual clock), one summary line with the
// count of the others; every failure is still counted.
func TestHandshakeLogRateLimited(t *testing.T) {
	logger, logs := newCaptureLog()
	clk := NewManualClock(time.Unix(1, 0))
	cfgB := testConfig("b", 1)
	cfgB.Logger = logger
	cfgB.Clock = clk
	b, err := New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.rt.ln.Addr().String()
	const failures = 200
	junk := make([]byte, zmtpGreetingLen) // not a ZMTP signature: fails at once
	eachStranger(t, addr, failures, func(int) []byte { return junk })
	waitFor(t, 10*time.Second, "failures counted", func() bool {
		return b.Stats().HandshakeFailures+b.Stats().RefusedUnadmitted == failures
	})
	const msg = "transport: inbound connection failed"
	const summary = "transport: suppressed similar log lines"
	refused := b.Stats().RefusedUnadmitted
	if got := len(logs.lines(msg)) + len(logs.lines("transport: inbound connection refused")); got != handshakeLogBurst {
		t.Fatalf("%d WARN lines for %d failures, want %d", got, failures, handshakeLogBurst)
	}
	if got := logs.lines(summary); len(got) != 0 {
		t.Fatalf("summary before the window ended: %q", got)
	}
	clk.Advance(handshakeLogEvery)
	sum := logs.lines(summary)
	want := fmt.Sprintf("suppressed=%d ", failures-handshakeLogBurst)
	if len(sum) != 1 || !strings.Contains(sum[0], want) {
		t.Fatalf("summary lines %q, want one with %s (refused at the cap: %d)", sum, want, refused)
	}
	// A new window logs again.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write(junk)
	_, _ = io.Copy(io.Discard, c)
	_ = c.Close()
	waitFor(t, 5*time.Second, "a line in the new window", func() bool {
		return len(logs.lines(msg))+len(logs.lines("transport: inbound connection refused")) > handshakeLogBurst
	})
	_ = b.Close()
	if p := clk.Pending(); p != 0 {
		t.Fatalf("%d timers left after Close", p)
	}
}

// TestForgedHelloKeepsLiveRID: a hello claiming the RID of a live peer —
// from a connection that is not the peer's, with a far-future (2^63-1),
// higher, lower or equal lifecycle generation — is rejected
// (duplicateConnection) and changes nothing kept for that RID: the two real
// nodes stay connected and keep exchanging. Both holders count: A's ROUTER
// connection from B (against every generation), and A's own link to B
// (against other generations; a hello of the generation the link talks to
// is how B's own DEALER reaches A, and is admitted).
func TestForgedHelloKeepsLiveRID(t *testing.T) {
	topologies := []struct {
		name string
		both bool // B also links to A (A's ROUTER holds B's connection)
	}{
		{"both directions", true},
		{"A's link only", false},
	}
	gens := []struct {
		name string
		gen  func(real uint64) uint64
	}{
		{"2^63-1", func(uint64) uint64 { return router.MaxGeneration }},
		{"next", func(g uint64) uint64 { return g + 1 }},
		{"lower", func(g uint64) uint64 { return g - 1 }},
		{"equal", func(g uint64) uint64 { return g }},
	}
	for _, top := range topologies {
		t.Run(top.name, func(t *testing.T) {
			evA := newEventLog()
			cfgA := testConfig("a", 1)
			// A wide liveness window (2 s): the test is about the rule,
			// not about a starved CI machine missing probes.
			cfgA.ProbeInterval = time.Second
			cfgA.OnEvent = evA.on
			cfgA.Handler = echoHandler(nil)
			a := startNode(t, cfgA)
			cfgB := testConfig("b", 7)
			cfgB.ProbeInterval = time.Second
			cfgB.Handler = echoHandler(nil)
			b := startNode(t, cfgB)
			connectAndWait(t, a, b)
			if top.both {
				connectAndWait(t, b, a)
			}
			a.mu.Lock()
			seenBefore := a.seen[string(b.RID())]
			seenBefore.others = slices.Clone(seenBefore.others)
			a.mu.Unlock()
			holder := a.rt.current(string(b.RID()))
			sess, _ := a.session(b.RID(), anyRun)

			for _, g := range gens {
				rec := sayHello(t, dialAs(t, a, b.RID()), helloFrom(t, b, g.gen(7)))
				if !top.both && g.name == "equal" {
					// Indistinguishable from B's own DEALER: admitted,
					// and the link to B is untouched (checked below).
					if rec.Command != router.CmdAdmit {
						t.Fatalf("same-generation hello with only A's link live: %s %+v, want admit", rec.Command, rec.Body)
					}
				} else {
					rej, ok := rec.Body.(*router.Reject)
					if !ok || rej.Reason != router.RejectDuplicateConnection {
						t.Fatalf("forged hello (generation %s): answered %s %+v, want reject duplicateConnection", g.name, rec.Command, rec.Body)
					}
					// Nothing kept for B's RID changed.
					a.mu.Lock()
					seen := a.seen[string(b.RID())]
					seen.others = slices.Clone(seen.others) // the live row's, edited under a.mu
					a.mu.Unlock()
					if seen.gen != seenBefore.gen || seen.rev != seenBefore.rev || seen.in != seenBefore.in ||
						seen.at != seenBefore.at || !slices.Equal(seen.others, seenBefore.others) {
						t.Fatalf("forged hello (%s) changed the admitted generation: %+v → %+v", g.name, seenBefore, seen)
					}
					if cur := a.rt.current(string(b.RID())); cur != holder || (cur != nil && cur.superseed.Load()) {
						t.Fatalf("forged hello (%s) replaced B's inbound connection", g.name)
					}
				}
				if s, err := a.session(b.RID(), anyRun); err != nil || s != sess {
					t.Fatalf("forged hello (%s) ended A's session to B: %v", g.name, err)
				}
				// And the real nodes keep exchanging both ways.
				if _, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, []byte("a→b"))); err != nil {
					t.Fatalf("A→B after forged hello (%s): %v", g.name, err)
				}
				if top.both {
					if _, err := b.Request(context.Background(), a.RID(), spotRequest(a.RID(), 1, []byte("b→a"))); err != nil {
						t.Fatalf("B→A after forged hello (%s): %v", g.name, err)
					}
				}
			}
			evA.mu.Lock()
			defer evA.mu.Unlock()
			for _, e := range evA.evs {
				if e.Kind == EventDown || e.Kind == EventInboundClosed {
					t.Fatalf("A saw %s for %s: %v", e.Kind, e.Peer.RID, e.Err)
				}
			}
		})
	}
}
