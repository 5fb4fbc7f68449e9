package transport

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// senderChildEnv makes the test binary a sending node (runSenderChild):
// its value is the receiver's endpoint.
const senderChildEnv = "MESHNODE_TRANSPORT_SENDER_CHILD"

// runSenderChild links to the receiver named by senderChildEnv and streams
// sequence-numbered one-way records to it until its stdin closes, then
// prints "accepted <n> unsent <u>" and exits.
func runSenderChild() {
	cfg := testConfig("sender", 1)
	cfg.PeerTimeout = time.Second
	cfg.ProbeInterval = 150 * time.Millisecond
	a, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	peer := RID("node-receiver")
	if err := a.Connect(peer, os.Getenv(senderChildEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	go func() { _, _ = bufio.NewReader(os.Stdin).ReadString('\n'); close(stop) }()
	fmt.Println("ready")
	data := make([]byte, 100)
	var accepted uint64
	for {
		select {
		case <-stop:
			time.Sleep(2 * time.Second) // kept records go out once the link is back
			fmt.Printf("accepted %d unsent %d resent %d\n", accepted, a.Stats().Unsent, a.Stats().Resent)
			_ = a.Close()
			os.Exit(0)
		default:
		}
		if sendSeq(ctx, a, peer, accepted+1, data) {
			accepted++
		}
	}
}

// A sender that stops running (SIGSTOP) while it streams finds, once it
// runs again, that its peer closed its silent connection meanwhile. What
// its writer put on that connection before its reader saw the close met a
// closed socket — the peer's kernel answered with a reset — so those
// records never arrived although this node's kernel took them: ~40 per
// pause here, 144 in a try-out with three servers. Now the connection
// remembers the one-way messages its peer has not acknowledged (TCP_INFO),
// and once the peer closed or reset it, those are kept with the queued
// ones for the link's return: every accepted record arrives once, in
// order.
func TestPausedSenderLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process for a few seconds")
	}
	var (
		mu  sync.Mutex
		got []uint64
	)
	bcfg := testConfig("receiver", 1)
	bcfg.PeerTimeout = time.Second
	bcfg.ProbeInterval = 150 * time.Millisecond
	bcfg.Handler = echoHandler(func(_ PeerInfo, rec *router.Record) {
		mu.Lock()
		got = append(got, seqOf(rec))
		mu.Unlock()
	})
	b := startNode(t, bcfg)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), senderChildEnv+"="+b.Endpoint())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("child: %q %v (%s)", line, err, stderr.String())
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	waitFor(t, 10*time.Second, "the stream to start", func() bool { return count() > 1000 })
	const pauses = 2
	for range pauses {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // past the receiver's PeerTimeout: it closes the connection
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	_, _ = stdin.Write([]byte("stop\n"))
	line, err := out.ReadString('\n')
	if err != nil {
		werr := cmd.Wait() // its stderr is complete only once it was waited for
		t.Fatalf("child: %v, exit %v (%s)", err, werr, stderr.String())
	}
	f := strings.Fields(line)
	if len(f) != 6 {
		t.Fatalf("child said %q", line)
	}
	accepted, _ := strconv.ParseUint(f[1], 10, 64)
	unsent, _ := strconv.ParseUint(f[3], 10, 64)
	resent, _ := strconv.ParseUint(f[5], 10, 64)
	for end := time.Now().Add(5 * time.Second); uint64(count()) < accepted && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	next := uint64(1)
	for _, seq := range got {
		if seq < next {
			t.Fatalf("seq %d after %d: duplicated or reordered", seq, next-1)
		}
		if seq > next && lost < 1000 {
			t.Logf("gap: %d..%d (%d records)", next, seq-1, seq-next) // where a loss happened, for whoever debugs it
		}
		lost += int(seq - next)
		next = seq + 1
	}
	lost += int(accepted + 1 - next)
	t.Logf("child: %s; %d arrived, %d lost", strings.TrimSpace(line), len(got), lost)
	if lost != 0 || unsent != 0 {
		_ = cmd.Wait()
		t.Logf("child's log (MESHNODE_TEST_LOG=1 to see it):\n%s", stderr.String())
		t.Fatalf("%d of %d accepted records lost, %d counted unsent (resent %d)", lost, accepted, unsent, resent)
	}
}
