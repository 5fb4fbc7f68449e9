package transport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// findPythonZMQ returns a python interpreter that can import zmq (pyzmq on
// the system libzmq): $MESHNODE_PYTHON, then /usr/bin/python3 (Debian's
// python3-zmq, which `make test` installs), then python3 on PATH.
func findPythonZMQ() (string, string) {
	var tried []string
	for _, p := range []string{os.Getenv("MESHNODE_PYTHON"), "/usr/bin/python3", "python3"} {
		if p == "" {
			continue
		}
		out, err := exec.Command(p, "-c", "import zmq; print(zmq.zmq_version())").CombinedOutput()
		if err == nil {
			return p, string(out)
		}
		tried = append(tried, p)
	}
	return "", fmt.Sprint(tried)
}

// TestLibzmqPeer: a DEALER on the system's libzmq connects to the node's
// ROUTER, is admitted, exchanges liveness and a request/reply, then sends
// malformed records; the node counts them and keeps serving (the python
// peer asserts it still gets an ack afterwards).
func TestLibzmqPeer(t *testing.T) {
	py := needPythonZMQ(t, false)
	cfg := testConfig("b", 1)
	cfg.Handler = echoHandler(nil)
	ev := newEventLog()
	cfg.OnEvent = ev.on
	b := startNode(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/libzmq_peer.py",
		b.Endpoint(), b.RID().String(), cfg.MeshName, cfg.SecurityIdentity).CombinedOutput()
	if err != nil {
		t.Fatalf("libzmq peer failed: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`malformed=(\d+)\nOK`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("libzmq peer output:\n%s", out)
	}
	want, _ := strconv.Atoi(string(m[1]))
	e := ev.wait(t, EventInboundAdmitted, 5*time.Second)
	if string(e.Peer.RID) != "pyzmq-peer" {
		t.Fatalf("admitted %q", e.Peer.RID)
	}
	st := b.Stats()
	if got := st.Peers[RID("pyzmq-peer").String()].ProtocolErrors; got != uint64(want) {
		t.Fatalf("protocol errors counted for the libzmq peer: %d, want %d (%+v)", got, want, st)
	}
	// The node still serves Go peers too.
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)
	if _, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), 1, nil)); err != nil {
		t.Fatal(err)
	}
}

// needPythonZMQ returns the pyzmq interpreter, failing the test (or
// skipping it with MESHNODE_SKIP_LIBZMQ=1, loudly) when there is none or,
// with curve, when its libzmq lacks CURVE.
func needPythonZMQ(t *testing.T, curve bool) string {
	t.Helper()
	py, version := findPythonZMQ()
	msg := ""
	if py == "" {
		msg = "python3 with zmq (pyzmq on libzmq) not found (tried " + version + "); install it with `apt-get install -y python3-zmq`"
	} else if out, err := exec.Command(py, "-c", "import zmq; assert zmq.has('curve')").CombinedOutput(); curve && err != nil {
		msg = "the system libzmq has no CURVE (libsodium): " + string(out)
	}
	if msg != "" {
		if os.Getenv("MESHNODE_SKIP_LIBZMQ") == "1" {
			fmt.Fprintln(os.Stderr, "WARNING: SKIPPING the real-libzmq interop test "+t.Name()+": "+msg)
			t.Skip("MESHNODE_SKIP_LIBZMQ=1: " + msg)
		}
		t.Fatal(msg + " (or set MESHNODE_SKIP_LIBZMQ=1 to skip this test)")
	}
	t.Logf("libzmq %s via %s", strings.TrimSpace(version), py)
	return py
}

// TestLibzmqCurveClient: a libzmq CURVE DEALER (libsodium's crypto, libzmq's
// framing, libzmq heartbeats inside the boxes) is admitted by our CURVE
// ROUTER and exchanges records with it; a libzmq DEALER whose key is not
// allowed gets no answer.
func TestLibzmqCurveClient(t *testing.T) {
	py := needPythonZMQ(t, true)
	server, client, stranger := mustKeyPair(t), mustKeyPair(t), mustKeyPair(t)
	cfg := curveTestConfig("b", server, server.Public, client.Public)
	cfg.Handler = echoHandler(nil)
	ev := newEventLog()
	cfg.OnEvent = ev.on
	b := startNode(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/libzmq_curve_peer.py", "client",
		b.Endpoint(), b.RID().String(), cfg.MeshName, cfg.SecurityIdentity,
		server.Public.String(), client.Secret.String()).CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "OK") {
		t.Fatalf("libzmq CURVE client: %v\n%s", err, out)
	}
	e := ev.wait(t, EventInboundAdmitted, 5*time.Second)
	if !e.Peer.RID.Equal(CurveRID(client.Public)) {
		t.Fatalf("admitted %s, want the RID of the client key", e.Peer.RID)
	}
	if st := b.Stats(); st.ProtocolErrors != 0 {
		t.Fatalf("protocol errors with a libzmq CURVE peer: %+v", st)
	}

	before := b.Stats().HandshakeFailures
	out, err = exec.CommandContext(ctx, py, "testdata/libzmq_curve_peer.py", "refused",
		b.Endpoint(), b.RID().String(), cfg.MeshName, cfg.SecurityIdentity,
		server.Public.String(), stranger.Secret.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "REFUSED") {
		t.Fatalf("libzmq client with an unknown key: %v\n%s", err, out)
	}
	waitFor(t, 5*time.Second, "the refused libzmq handshake counted", func() bool { return b.Stats().HandshakeFailures > before })
}

// TestLibzmqCurveServer: our CURVE DEALER connects to a libzmq CURVE ROUTER
// (whose ZAP handler allows our key), is admitted, and delivers a record.
func TestLibzmqCurveServer(t *testing.T) {
	py := needPythonZMQ(t, true)
	server, client := mustKeyPair(t), mustKeyPair(t)
	cfg := curveTestConfig("a", client, client.Public, server.Public)
	a := startNode(t, cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/libzmq_curve_peer.py", "server",
		cfg.MeshName, cfg.SecurityIdentity, server.Secret.String(), client.Public.String())
	var out bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		done <- cmd.Wait()
	}()
	var endpoint string
	select {
	case l := <-lines:
		endpoint, _ = strings.CutPrefix(l, "ENDPOINT ")
	case <-ctx.Done():
		t.Fatalf("libzmq server did not start: %s", out.String())
	}
	if err := a.Connect(CurveRID(server.Public), endpoint); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitAdmitted(ctx, CurveRID(server.Public)); err != nil {
		t.Fatalf("admission by the libzmq server: %v (%s)", err, out.String())
	}
	if err := a.Send(ctx, CurveRID(server.Public), seqSend(CurveRID(server.Public), 1, []byte("from go over curve"))); err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	if err := <-done; err != nil || len(got) == 0 || got[len(got)-1] != "OK" {
		t.Fatalf("libzmq server: %v\nstdout %q\nstderr %s", err, got, out.String())
	}
}
