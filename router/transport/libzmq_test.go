package transport

import (
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
	py, version := findPythonZMQ()
	if py == "" {
		msg := "python3 with zmq (pyzmq on libzmq) not found (tried " + version + "); install it with `apt-get install -y python3-zmq`"
		if os.Getenv("MESHNODE_SKIP_LIBZMQ") == "1" {
			fmt.Fprintln(os.Stderr, "WARNING: SKIPPING the real-libzmq interop test: "+msg)
			t.Skip("MESHNODE_SKIP_LIBZMQ=1: " + msg)
		}
		t.Fatal(msg + " (or set MESHNODE_SKIP_LIBZMQ=1 to skip this test)")
	}
	t.Logf("libzmq %s via %s", strings.TrimSpace(version), py)
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
