package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport/curve"
)

func mustKeyPair(t testing.TB) curve.KeyPair {
	t.Helper()
	kp, err := curve.GenerateKeyPair(nil)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// curveTestConfig is testConfig with CURVE: the RID is derived from kp.
func curveTestConfig(name string, kp curve.KeyPair, allowed ...curve.Key) Config {
	cfg := testConfig(name, 1)
	cfg.RID = nil
	cfg.Curve = &CurveConfig{KeyPair: kp, AllowedKeys: allowed}
	return cfg
}

// recordingProxy forwards one TCP connection to target and keeps every byte
// it saw in either direction.
type recordingProxy struct {
	ln  net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func newRecordingProxy(t *testing.T, target string) *recordingProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	addr, _ := splitEndpoint(target)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				return
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			go io.Copy(io.MultiWriter(s, p), c)
			go io.Copy(io.MultiWriter(c, p), s)
		}
	}()
	return p
}

func (p *recordingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *recordingProxy) seen() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]byte(nil), p.buf.Bytes()...)
}

// TestCurveNodes: two CURVE nodes admit each other in both directions and
// exchange requests of several sizes; on the wire (through a recording
// proxy) neither the payload nor the mesh name appears in clear.
func TestCurveNodes(t *testing.T) {
	ka, kb := mustKeyPair(t), mustKeyPair(t)
	allowed := []curve.Key{ka.Public, kb.Public}
	cfgB := curveTestConfig("b", kb, allowed...)
	cfgB.Handler = echoHandler(nil)
	b := startNode(t, cfgB)
	cfgA := curveTestConfig("a", ka, allowed...)
	cfgA.Handler = echoHandler(nil)
	a := startNode(t, cfgA)
	if !a.RID().Equal(CurveRID(ka.Public)) || !b.RID().Equal(CurveRID(kb.Public)) {
		t.Fatalf("RIDs %s %s not derived from the keys", a.RID(), b.RID())
	}
	proxy := newRecordingProxy(t, b.Endpoint())
	if err := a.Connect(b.RID(), "tcp://"+proxy.ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.WaitAdmitted(ctx, b.RID()); err != nil {
		t.Fatal(err)
	}
	secret := []byte("attack at dawn, the secret payload")
	for _, size := range []int{0, 200, 70 << 10} {
		data := bytes.Repeat(secret, size/len(secret)+1)[:size]
		rep, err := a.Request(ctx, b.RID(), spotRequest(b.RID(), uint64(size+1), data))
		if err != nil {
			t.Fatalf("request of %d bytes: %v", size, err)
		}
		if rep.Payload == nil && size > 0 || rep.Payload != nil && !bytes.Equal(rep.Payload.Data, data) {
			t.Fatalf("echo of %d bytes differs", size)
		}
	}
	connectAndWait(t, b, a) // the other direction, direct
	if _, err := b.Request(ctx, a.RID(), spotRequest(a.RID(), 1, secret)); err != nil {
		t.Fatal(err)
	}
	wire := proxy.seen()
	if len(wire) < 70<<10 {
		t.Fatalf("proxy saw only %d bytes", len(wire))
	}
	for _, clear := range [][]byte{secret[:16], []byte("mesh-test"), []byte("sec-test")} {
		if bytes.Contains(wire, clear) {
			t.Fatalf("%q travels in clear", clear)
		}
	}
	if !bytes.Contains(wire, []byte("\x05HELLO")) || !bytes.Contains(wire, []byte("\x07MESSAGE")) {
		t.Fatal("no CURVE commands on the wire")
	}
}

// TestCurveRefusals: a plain node and a CURVE node cannot talk either way;
// a key missing from the allow-list is refused by the server and not even
// dialled by the client.
func TestCurveRefusals(t *testing.T) {
	ka, kb, kx := mustKeyPair(t), mustKeyPair(t), mustKeyPair(t)
	b := startNode(t, curveTestConfig("b", kb, ka.Public, kb.Public))

	t.Run("plain to curve", func(t *testing.T) {
		plain := startNode(t, testConfig("plain", 1))
		if err := plain.Connect(b.RID(), b.Endpoint()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := plain.WaitAdmitted(ctx, b.RID())
		if err == nil {
			t.Fatal("a NULL node was admitted by a CURVE node")
		}
		// The operator is told why: the mechanisms differ.
		if want := "the peer uses the CURVE security mechanism, this node NULL"; !strings.Contains(err.Error(), want) {
			t.Fatalf("plain node's link error %q does not say %q", err, want)
		}
	})
	t.Run("curve to plain", func(t *testing.T) {
		plain := startNode(t, testConfig("plain2", 1))
		a := startNode(t, curveTestConfig("a", ka, ka.Public))
		// The plain node's RID is not a CURVE RID: refused before dialling.
		if err := a.Connect(plain.RID(), plain.Endpoint()); !errors.Is(err, ErrUntrustedPeer) {
			t.Fatalf("Connect to a plain RID: %v", err)
		}
	})
	t.Run("unknown client key", func(t *testing.T) {
		before := b.Stats().HandshakeFailures
		x := startNode(t, curveTestConfig("x", kx, kx.Public, kb.Public)) // x trusts b, b does not trust x
		if err := x.Connect(b.RID(), b.Endpoint()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := x.WaitAdmitted(ctx, b.RID())
		if err == nil {
			t.Fatal("a node with an unknown key was admitted")
		}
		if want := "refused this node's public key"; !strings.Contains(err.Error(), want) {
			t.Fatalf("refused node's link error %q does not say %q", err, want)
		}
		waitFor(t, 5*time.Second, "the refused handshake counted", func() bool { return b.Stats().HandshakeFailures > before })
	})
	t.Run("untrusted server key", func(t *testing.T) {
		a := startNode(t, curveTestConfig("a2", ka, ka.Public)) // does not trust b
		if err := a.Connect(b.RID(), b.Endpoint()); !errors.Is(err, ErrUntrustedPeer) {
			t.Fatalf("Connect to an untrusted key: %v", err)
		}
	})
}

// dialCurve opens a raw CURVE DEALER connection to b with key kp and ZMTP
// identity id (ours to choose, unlike a Node's).
func dialCurve(t *testing.T, b *Node, kp curve.KeyPair, id RID) (*zconn, net.Conn) {
	t.Helper()
	addr, _ := splitEndpoint(b.Endpoint())
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	server, _ := KeyFromRID(b.RID())
	mech := curve.NewMechanism(curve.Config{KeyPair: kp, ServerKey: server})
	zc, err := openZMTP(raw, zmq4.Dealer, id, false, frameLimits{1 << 20, 1 << 20, 16, 1 << 16}, 4096, 5*time.Second, mech)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zc.close() })
	return zc, raw
}

// TestCurveForgedIdentity: a client holding an allowed key but announcing
// another node's RID as its ZMTP identity (to send a hello in that node's
// name) is refused: identity and key are bound.
func TestCurveForgedIdentity(t *testing.T) {
	ka, kb, kvictim := mustKeyPair(t), mustKeyPair(t), mustKeyPair(t)
	allowed := []curve.Key{ka.Public, kb.Public, kvictim.Public}
	ev := newEventLog()
	cfgB := curveTestConfig("b", kb, allowed...)
	cfgB.OnEvent = ev.on
	b := startNode(t, cfgB)
	before := b.Stats().HandshakeFailures
	// The handshake itself succeeds: the key is allowed.
	zc, raw := dialCurve(t, b, ka, CurveRID(kvictim.Public))
	frames, _ := encodeInfra(&router.Hello{Admission: b.currentAdmission()})
	_ = zc.write(frames)
	_, _ = flushWithin(zc, time.Second)
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := zc.recv(); err == nil {
		t.Fatal("the forged connection got an answer")
	}
	waitFor(t, 5*time.Second, "the forged identity counted as a failed handshake", func() bool { return b.Stats().HandshakeFailures > before })
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.evs {
		if e.Kind == EventInboundAdmitted {
			t.Fatalf("admitted %s", e.Peer.RID)
		}
	}
}

// TestCurveTamperedStream: a MESSAGE altered in flight closes the
// connection as a protocol error (never a panic, never a delivered record).
func TestCurveTamperedStream(t *testing.T) {
	ka, kb := mustKeyPair(t), mustKeyPair(t)
	allowed := []curve.Key{ka.Public, kb.Public}
	b := startNode(t, curveTestConfig("b", kb, allowed...))
	zc, raw := dialCurve(t, b, ka, CurveRID(ka.Public))
	before := b.Stats().ProtocolErrors
	sealed, err := zc.sess.Seal(nil, 0, []byte("hello?"))
	if err != nil {
		t.Fatal(err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := raw.Write(append([]byte{0, byte(len(sealed))}, sealed...)); err != nil {
		t.Fatal(err)
	}
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := zc.recv(); err == nil {
		t.Fatal("connection survived a tampered MESSAGE")
	}
	waitFor(t, 5*time.Second, "the tampered MESSAGE counted as a protocol error", func() bool { return b.Stats().ProtocolErrors > before })
}

func TestCurveConfigErrors(t *testing.T) {
	ka, kb := mustKeyPair(t), mustKeyPair(t)
	for name, cfg := range map[string]Config{
		"empty allow-list": curveTestConfig("a", ka),
		"foreign public key": func() Config {
			c := curveTestConfig("a", curve.KeyPair{Public: kb.Public, Secret: ka.Secret}, ka.Public)
			return c
		}(),
		"explicit RID": func() Config {
			c := curveTestConfig("a", ka, ka.Public)
			c.RID = RID("node-a")
			return c
		}(),
	} {
		if _, err := New(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The derived RID itself is accepted explicitly.
	c := curveTestConfig("a", ka, ka.Public)
	c.RID = CurveRID(ka.Public)
	startNode(t, c)
}

// TestOpenPortWarning: a NULL node bound beyond loopback warns loudly; on
// loopback, or with CURVE, it does not.
func TestOpenPortWarning(t *testing.T) {
	for _, tc := range []struct {
		ep   string
		loop bool
	}{
		{"tcp://127.0.0.1:0", true}, {"tcp://localhost:0", true}, {"tcp://[::1]:0", true},
		{"tcp://*:0", false}, {"tcp://0.0.0.0:0", false}, {"tcp://10.1.2.3:0", false}, {"tcp://node.example:0", false},
	} {
		if got := isLoopbackEndpoint(tc.ep); got != tc.loop {
			t.Errorf("isLoopbackEndpoint(%s) = %v", tc.ep, got)
		}
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	cfg := testConfig("open", 1)
	cfg.Endpoint = "tcp://0.0.0.0:0"
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	startNode(t, cfg)
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "WITHOUT CURVE") {
		t.Fatalf("no warning for an open port:\n%s", out)
	}
	logs.Reset()
	kp := mustKeyPair(t)
	cfg = curveTestConfig("closed", kp, kp.Public)
	cfg.Endpoint = "tcp://0.0.0.0:0"
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	startNode(t, cfg)
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(logs.String(), "WITHOUT CURVE") {
		t.Fatalf("warning with CURVE on:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
