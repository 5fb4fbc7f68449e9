package transport

// Reproductions of go-zeromq/zmq4 v0.17.0 defects that shaped this package
// (docs/TRANSPORT.md, "zmq4 problems"). Each test drives the STOCK zmq4
// ROUTER/DEALER and asserts that the defect is still there; the transport's
// own tests show the same scenario handled. If one of these tests fails
// after a zmq4 upgrade, the library fixed the defect: re-check the
// workaround and update the document.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// stuck reports whether ch stays silent for d. Used to show a hang; the
// positive side of every such check is asserted afterwards.
func stuck[T any](ch <-chan T, d time.Duration) bool {
	select {
	case <-ch:
		return false
	case <-time.After(d):
		return true
	}
}

// zmq4 #131: the stock accept loop runs the ZMTP handshake inline and
// without a deadline, so one TCP client that never sends its greeting
// blocks every later connection.
func TestZmq4Issue131SilentClientBlocksAccept(t *testing.T) {
	ctx := context.Background()
	r := zmq4.NewRouter(ctx, zmq4.WithLogger(discardLog()))
	defer r.Close()
	if err := r.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ep := "tcp://" + r.Addr().String()
	silent, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the accept loop take the silent one first
	d := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("late")), zmq4.WithLogger(discardLog()))
	defer d.Close()
	dialed := make(chan error, 1)
	go func() { dialed <- d.Dial(ep) }()
	if !stuck(dialed, time.Second) {
		t.Fatal("zmq4 #131 seems fixed: a DEALER connected while a silent client held the accept loop")
	}
	_ = silent.Close()
	select {
	case err := <-dialed:
		if err != nil {
			t.Fatalf("dial after the silent client left: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DEALER still blocked after the silent client left")
	}

	// Our ROUTER: the same silent client does not delay anyone.
	b := startNode(t, testConfig("b", 1))
	silent2, err := net.Dial("tcp", b.rt.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent2.Close()
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)
}

// One peer that stops reading freezes the stock ROUTER: routerMWriter.write
// holds the writer mutex across a blocking TCP write, so sends to every other
// peer wait, and so does accepting new peers (addConn needs the same mutex
// under the socket mutex; the conn reaper too). A peer host that dies
// without FIN blocks the same way until TCP gives up (minutes). This is the
// lock chain seen in the stacks of zmq4 #132.
func TestZmq4SlowPeerFreezesRouter(t *testing.T) {
	ctx := context.Background()
	r := zmq4.NewRouter(ctx, zmq4.WithTimeout(30*time.Second), zmq4.WithLogger(discardLog()))
	defer r.Close()
	if err := r.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ep := "tcp://" + r.Addr().String()
	recvd := make(chan string, 64)
	go func() {
		for {
			m, err := r.Recv()
			if err != nil {
				return
			}
			recvd <- string(m.Frames[0])
		}
	}()
	// The slow peer: ZMTP handshake as DEALER "slow", then never reads.
	raw, err := net.Dial("tcp", r.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	slow, err := zmq4.Open(raw, null.Security(), zmq4.Dealer, zmq4.SocketIdentity("slow"), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.SendMsg(zmq4.NewMsgString("hello")); err != nil {
		t.Fatal(err)
	}
	fast := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("fast")), zmq4.WithLogger(discardLog()))
	defer fast.Close()
	if err := fast.Dial(ep); err != nil {
		t.Fatal(err)
	}
	_ = fast.Send(zmq4.NewMsgString("hello"))
	for seen := 0; seen < 2; seen++ {
		if stuck(recvd, 5*time.Second) {
			t.Fatal("router did not register both peers")
		}
	}
	// Fill the slow peer's socket buffers until a Send blocks.
	var sent atomic.Int64
	big := make([]byte, 1<<20)
	go func() {
		for {
			if err := r.Send(zmq4.NewMsgFrom([]byte("slow"), big)); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	last := int64(-1)
	for i := 0; i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
		if n := sent.Load(); n == last {
			break
		} else {
			last = n
		}
	}
	toFast := make(chan error, 1)
	go func() { toFast <- r.Send(zmq4.NewMsgFrom([]byte("fast"), []byte("x"))) }()
	late := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("late")), zmq4.WithLogger(discardLog()))
	defer late.Close()
	if err := late.Dial(ep); err != nil {
		t.Fatal(err)
	}
	_ = late.Send(zmq4.NewMsgString("late"))
	if !stuck(toFast, time.Second) {
		t.Fatal("stock ROUTER sent to the fast peer while blocked on the slow one: defect fixed?")
	}
	if !stuck(recvd, 500*time.Millisecond) {
		t.Fatal("stock ROUTER received from a new peer while blocked on the slow one: defect fixed?")
	}
	// The slow peer goes away: everything moves again.
	_ = raw.Close()
	select {
	case <-toFast:
	case <-time.After(10 * time.Second):
		t.Fatal("send to the fast peer still blocked after the slow peer left")
	}
	if stuck(recvd, 10*time.Second) {
		t.Fatal("late peer's message never received")
	}
}

// zmq4 #115 ("router node restart recv block"): after the ROUTER restarts,
// the stock DEALER (default options) keeps "sending" — Send returns nil —
// but nothing reaches the new ROUTER: the dead connection was reaped and the
// writer has no connection left, which write() treats as success.
func TestZmq4Issue115DealerLosesMessagesAfterRouterRestart(t *testing.T) {
	ctx := context.Background()
	r1 := zmq4.NewRouter(ctx, zmq4.WithLogger(discardLog()))
	if err := r1.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	addr := r1.Addr().String()
	d := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("d")), zmq4.WithTimeout(2*time.Second), zmq4.WithLogger(discardLog()))
	defer d.Close()
	if err := d.Dial("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(zmq4.NewMsgString("before")); err != nil {
		t.Fatal(err)
	}
	if m, err := r1.Recv(); err != nil || string(m.Frames[1]) != "before" {
		t.Fatalf("first router: %v %v", m, err)
	}
	_ = r1.Close()
	r2 := zmq4.NewRouter(ctx, zmq4.WithLogger(discardLog()))
	defer r2.Close()
	if err := r2.Listen("tcp://" + addr); err != nil {
		t.Fatal(err)
	}
	// Until the DEALER has noticed the old connection died, a send may fail
	// (broken pipe); after that every send "succeeds".
	ok := 0
	for deadline := time.Now().Add(10 * time.Second); ok < 5; {
		if time.Now().After(deadline) {
			t.Fatalf("sends after the restart keep failing (%d succeeded): defect changed?", ok)
		}
		if err := d.Send(zmq4.NewMsgString("after")); err != nil {
			ok = 0
			time.Sleep(20 * time.Millisecond)
			continue
		}
		ok++
	}
	got := make(chan zmq4.Msg, 1)
	go func() {
		if m, err := r2.Recv(); err == nil {
			got <- m
		}
	}()
	if !stuck(got, time.Second) {
		t.Fatal("zmq4 #115 seems fixed: the restarted ROUTER received the DEALER's message")
	}
}

// Stock ROUTER Close leaks one goroutine per connection that had more than
// the reader channel's 10 unread messages: routerQReader.listen blocks on an
// unconditional channel send that nothing will ever drain.
func TestZmq4RouterCloseLeaksReaders(t *testing.T) {
	ctx := context.Background()
	r := zmq4.NewRouter(ctx, zmq4.WithLogger(discardLog()))
	if err := r.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	d := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity("d")), zmq4.WithLogger(discardLog()))
	if err := d.Dial("tcp://" + r.Addr().String()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		_ = d.Send(zmq4.NewMsgString("unread"))
	}
	waitFor(t, 10*time.Second, "the stock reader to block on its full channel", func() bool {
		return listenBlocked(allStacks())
	})
	_ = r.Close()
	_ = d.Close()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if !listenBlocked(allStacks()) {
			t.Fatal("stock ROUTER reader goroutine exited after Close: leak fixed?")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// listenBlocked reports a stock routerQReader.listen goroutine parked on a
// channel send.
func listenBlocked(stacks []byte) bool {
	for _, g := range bytes.Split(stacks, []byte("\n\n")) {
		if bytes.Contains(g, []byte("[chan send")) && bytes.Contains(g, []byte("routerQReader).listen")) {
			return true
		}
	}
	return false
}

func allStacks() []byte {
	buf := make([]byte, 1<<20)
	return buf[:runtime.Stack(buf, true)]
}

// Peer input that panics inside the stock ROUTER's own goroutines, which
// kills the whole process: a READY announcing an unknown Socket-Type
// (SocketType.IsCompatible panics) and a frame header declaring more than
// the runtime's maximum allocation (zmq4 PR #161, open). Each runs against
// a child process hosting a stock ROUTER.
func TestZmq4PeerInputCrashesProcess(t *testing.T) {
	tests := []struct {
		name  string
		bytes func() []byte
		panic string
	}{
		{"unknown socket type", func() []byte {
			return append(zmtpGreeting(), zmtpReady([2]string{"Socket-Type", "FOO"}, [2]string{"Identity", "x"})...)
		}, "unknown socket-type"},
		{"frame of 2^50 bytes", func() []byte {
			b := append(zmtpGreeting(), zmtpReady([2]string{"Socket-Type", "DEALER"}, [2]string{"Identity", "x"})...)
			h := []byte{flagLong, 0, 0, 0, 0, 0, 0, 0, 0}
			binary.BigEndian.PutUint64(h[1:], 1<<50)
			return append(b, h...)
		}, "makeslice: len out of range"},
		{"truncated metadata property", func() []byte {
			return append(zmtpGreeting(), truncatedReady()...)
		}, "slice bounds out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildEnv+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("child: %v (%s)", err, stderr.String())
			}
			c, err := net.Dial("tcp", strings.TrimSpace(line))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _ = c.Write(tt.bytes())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(stderr.String(), tt.panic) {
					t.Fatalf("child exit %v, stderr %q; want a crash with %q", err, stderr.String(), tt.panic)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("stock ROUTER survived %s: defect fixed?", tt.name)
			}
		})
	}
}

const crashChildEnv = "MESHNODE_ZMQ4_CRASH_CHILD"

// runCrashChild hosts a stock ROUTER for TestZmq4PeerInputCrashesProcess and
// prints its address; it never returns normally.
func runCrashChild() {
	r := zmq4.NewRouter(context.Background(), zmq4.WithLogger(discardLog()))
	if err := r.Listen("tcp://127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Println(r.Addr().String())
	for {
		if _, err := r.Recv(); err != nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
}
