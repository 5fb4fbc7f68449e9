package transport

import (
	"bytes"
	"context"
	"errors"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

func TestAdmissionSendRequest(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		evA, evB := newEventLog(), newEventLog()
		got := make(chan *router.Record, 16)
		cfgB := testConfig("b", 7)
		cfgB.Handler = echoHandler(func(_ PeerInfo, r *router.Record) { got <- r })
		cfgB.OnEvent = evB.on
		b := startNode(t, cfgB)
		cfgA := testConfig("a", 3)
		cfgA.OnEvent = evA.on
		a := startNode(t, cfgA)

		// Not usable before admission.
		if err := a.Send(context.Background(), b.RID(), seqSend(b.RID(), 1, nil)); !errors.Is(err, ErrUnknownPeer) {
			t.Fatalf("Send before Connect: %v, want ErrUnknownPeer", err)
		}
		info := connectAndWait(t, a, b)
		if info.LifecycleGeneration != 7 || info.MeshName != "mesh-test" || info.Endpoint != b.Endpoint() || !info.RID.Equal(b.RID()) {
			t.Fatalf("admit info = %+v", info)
		}
		if ev := evA.wait(t, EventAdmitted, 5*time.Second); ev.Peer.LifecycleGeneration != 7 {
			t.Fatalf("admitted event %+v", ev)
		}
		if ev := evB.wait(t, EventInboundAdmitted, 5*time.Second); !ev.Peer.RID.Equal(a.RID()) || ev.Peer.LifecycleGeneration != 3 {
			t.Fatalf("inbound admitted event %+v", ev)
		}

		if err := a.Send(context.Background(), b.RID(), seqSend(b.RID(), 42, []byte("hi"))); err != nil {
			t.Fatalf("Send: %v", err)
		}
		select {
		case r := <-got:
			if seqOf(r) != 42 || string(r.Payload.Data) != "hi" {
				t.Fatalf("received %+v", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("record not delivered")
		}

		for i := 0; i < 10; i++ {
			data := []byte{byte(i), 1, 2, 3}
			rep, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), uint64(i+1), data))
			if err != nil {
				t.Fatalf("Request %d: %v", i, err)
			}
			if rep.Command != router.CmdReply || !bytes.Equal(rep.Payload.Data, data) {
				t.Fatalf("reply %d = %+v", i, rep)
			}
		}
		// Infrastructure commands are the transport's own.
		if err := a.Send(context.Background(), b.RID(), router.NewRecord(&router.LivenessProbe{ProbeID: 1}, nil, nil)); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("Send(probe) = %v, want ErrInvalidRecord", err)
		}
		// A one-way record is not a request.
		if _, err := a.Request(context.Background(), b.RID(), seqSend(b.RID(), 1, nil)); !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("Request(spotSend) = %v, want ErrInvalidRecord", err)
		}
		st := b.Stats()
		if st.RecordsIn < 12 || st.ProtocolErrors != 0 || st.Peers[a.RID().String()].RecordsIn < 12 {
			t.Fatalf("stats of b: %+v", st)
		}
		// Bytes: at least the payloads, on both sides of the link; b's bytes
		// in from a match a's bytes out to b once nothing is in flight.
		if ps := st.Peers[a.RID().String()]; ps.BytesIn < 2+10*4 || st.BytesIn < ps.BytesIn {
			t.Fatalf("bytes of b: %+v / %+v", st, ps)
		}
		if sa := a.Stats(); sa.BytesOut == 0 || sa.Peers[b.RID().String()].BytesOut == 0 || sa.Peers[b.RID().String()].Queued != 0 {
			t.Fatalf("bytes of a: %+v", sa)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
		if err := a.Send(context.Background(), b.RID(), seqSend(b.RID(), 1, nil)); !errors.Is(err, ErrClosed) {
			t.Fatalf("Send after Close: %v", err)
		}
	}()
	checkNoLeak(t, before)
}

func TestAdmissionRejected(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   router.RejectReason
	}{
		{"other mesh", func(c *Config) { c.MeshName = "other-mesh" }, router.RejectTopologyMismatch},
		{"other security identity", func(c *Config) { c.SecurityIdentity = "intruder" }, router.RejectSecurityIdentityMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgB := testConfig("b", 1)
			cfgB.Handler = echoHandler(nil)
			b := startNode(t, cfgB)
			ev := newEventLog()
			cfgA := testConfig("a", 1)
			cfgA.OnEvent = ev.on
			tt.mutate(&cfgA)
			a := startNode(t, cfgA)
			if err := a.Connect(b.RID(), b.Endpoint()); err != nil {
				t.Fatal(err)
			}
			e := ev.wait(t, EventRejected, 5*time.Second)
			var rej *RejectError
			if !errors.As(e.Err, &rej) || rej.Reason != tt.want || rej.Local || !errors.Is(e.Err, ErrRejected) {
				t.Fatalf("rejected event err = %v, want reason %s from peer", e.Err, tt.want)
			}
			if err := a.Send(context.Background(), b.RID(), seqSend(b.RID(), 1, nil)); !errors.Is(err, ErrNotAdmitted) || !errors.Is(err, ErrRejected) {
				t.Fatalf("Send after reject = %v, want ErrNotAdmitted wrapping the rejection", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			if _, err := a.WaitAdmitted(ctx, b.RID()); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrRejected) {
				t.Fatalf("WaitAdmitted = %v", err)
			}
			if st := b.Stats(); st.Rejected == 0 {
				t.Fatalf("rejection not counted: %+v", st)
			}
		})
	}
}

func TestStaleLifecycleGenerationRejected(t *testing.T) {
	b := startNode(t, testConfig("b", 1))
	a1 := startNode(t, testConfig("a", 5))
	connectAndWait(t, a1, b)
	_ = a1.Close()
	// Once b has seen that connection end (until then any hello for the
	// RID is a duplicate of a live connection, whatever its generation: a
	// CI run met that), the same RID's older run must not be admitted
	// after the newer one was.
	waitFor(t, 10*time.Second, "b to see a's connection end", func() bool {
		cur := b.rt.current(string(a1.RID()))
		return cur == nil || cur.pc.isClosed()
	})
	rejectedWith(t, testConfig("a", 4), b, router.RejectLifecycleGenerationStale)
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"no mesh", func(c *Config) { c.MeshName = "" }},
		{"no security identity", func(c *Config) { c.SecurityIdentity = "" }},
		{"zero generation", func(c *Config) { c.LifecycleGeneration = 0 }},
		{"zero revision", func(c *Config) { c.DescriptorRevision = 0 }},
		{"generation too large", func(c *Config) { c.LifecycleGeneration = 1 << 63 }},
		{"bad endpoint", func(c *Config) { c.Endpoint = "ipc:///tmp/x" }},
		{"rid too long", func(c *Config) { c.RID = make(RID, 256) }},
		{"rid with zero byte first", func(c *Config) { c.RID = RID{0, 1} }},
		{"timeout below interval", func(c *Config) { c.PeerTimeout = time.Millisecond }},
		{"bad admission extension", func(c *Config) {
			c.Admission = &router.RouteMeshAdmission{} // no protocol capability, zero capacity limit
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig("x", 1)
			tt.mutate(&cfg)
			n, err := New(cfg)
			if err == nil {
				_ = n.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

// A node whose endpoint is taken fails to start saying which endpoint and
// why, once (net's own text repeats the address), and the cause stays
// matchable.
func TestListenFailureNamesTheEndpoint(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := testConfig("x", 1)
	cfg.Endpoint = "tcp://" + taken.Addr().String()
	n, err := New(cfg)
	if err == nil {
		_ = n.Close()
		t.Fatal("New succeeded on a taken port")
	}
	want := "transport: cannot listen on " + cfg.Endpoint + ": bind: address already in use"
	if err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("err = %v, want it to match EADDRINUSE", err)
	}
}

func TestRequestDeadline(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	cfgB := testConfig("b", 1)
	cfgB.Handler = func(context.Context, PeerInfo, *router.Record, func(*router.Record) error) {} // never replies
	b := startNode(t, cfgB)
	cfgA := testConfig("a", 1)
	cfgA.Clock = clk
	cfgA.RequestTimeout = 3 * time.Second
	cfgA.ProbeInterval = time.Hour // keep liveness out of the way
	cfgA.PeerTimeout = 2 * time.Hour
	a := startNode(t, cfgA)
	connectAndWait(t, a, b)

	t.Run("default deadline on the injected clock", func(t *testing.T) {
		errc := make(chan error, 1)
		go func() {
			_, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, nil))
			errc <- err
		}()
		// Wait until the request's timer is scheduled, then step past it.
		waitFor(t, 5*time.Second, "request timer", func() bool { return clk.Pending() >= 4 })
		clk.Advance(2 * time.Second)
		select {
		case err := <-errc:
			t.Fatalf("request ended before its deadline: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		clk.Advance(time.Second)
		select {
		case err := <-errc:
			if !errIs(err, ErrDeadlineExceeded, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrDeadlineExceeded and context.DeadlineExceeded", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("request did not end at its deadline")
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := a.Request(ctx, b.RID(), spotRequest(b.RID(), 2, nil))
		if !errIs(err, ErrDeadlineExceeded, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("context cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		_, err := a.Request(ctx, b.RID(), spotRequest(b.RID(), 3, nil))
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
	if st := a.Stats(); st.LateReplies != 0 {
		t.Fatalf("unexpected late replies: %+v", st)
	}
}

func TestDisconnectFailsPendingRequests(t *testing.T) {
	cfgB := testConfig("b", 1)
	received := make(chan struct{}, 1)
	cfgB.Handler = func(context.Context, PeerInfo, *router.Record, func(*router.Record) error) { received <- struct{}{} }
	b := startNode(t, cfgB)
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)
	errc := make(chan error, 1)
	go func() {
		_, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, nil))
		errc <- err
	}()
	<-received
	if err := a.Disconnect(b.RID()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrPeerDown) {
		t.Fatalf("pending request err = %v, want ErrPeerDown", err)
	}
	if err := a.Send(context.Background(), b.RID(), seqSend(b.RID(), 1, nil)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("Send after Disconnect = %v", err)
	}
}

// TestCloseStopsEverything: Close ends every goroutine, timer and socket —
// with links in both directions, inbound connections, a pending request
// and a peer that hangs (never answers).
func TestCloseStopsEverything(t *testing.T) {
	before := runtime.NumGoroutine()
	clk := NewManualClock(time.Unix(1, 0))
	func() {
		cfgB := testConfig("b", 1)
		cfgB.Clock = clk
		inHandler := make(chan struct{}, 1)
		cfgB.Handler = func(ctx context.Context, _ PeerInfo, _ *router.Record, _ func(*router.Record) error) {
			inHandler <- struct{}{}
			<-ctx.Done() // returns only when the node closes
		}
		b, err := New(cfgB)
		if err != nil {
			t.Fatal(err)
		}
		cfgA := testConfig("a", 1)
		cfgA.Clock = clk
		a, err := New(cfgA)
		if err != nil {
			t.Fatal(err)
		}
		connectAndWait(t, a, b)
		connectAndWait(t, b, a)
		fake := newFakePeer(t, "mute", 1)
		fake.autoAdmit = false // the link to it hangs in admission
		if err := a.Connect(fake.rid, fake.endpoint()); err != nil {
			t.Fatal(err)
		}
		fake.next(router.CmdHello, 5*time.Second)
		errc := make(chan error, 1)
		go func() {
			_, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, nil))
			errc <- err
		}()
		<-inHandler
		clk.Advance(time.Second)
		if clk.Pending() == 0 {
			t.Fatal("expected live timers before Close")
		}
		done := make(chan struct{})
		go func() { _ = a.Close(); _ = b.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Close hung")
		}
		if err := <-errc; !errors.Is(err, ErrPeerDown) || !errors.Is(err, ErrClosed) {
			t.Fatalf("pending request after Close: %v", err)
		}
		if p := clk.Pending(); p != 0 {
			t.Fatalf("%d timers still scheduled after Close", p)
		}
		fake.rt.close()
	}()
	checkNoLeak(t, before)
}
