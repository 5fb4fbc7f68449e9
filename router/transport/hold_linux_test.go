//go:build linux

package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fillUntilBlocked writes 100-byte messages on c until its kernel takes no
// more (the peer is not reading) and returns the end offset of each,
// counted like ackCount.
func fillUntilBlocked(t *testing.T, c net.Conn) []int64 {
	t.Helper()
	msg := make([]byte, 100)
	var ends []int64
	var off int64
	for rest := msg; ; {
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Write(rest)
		off += int64(n)
		if rest = rest[n:]; len(rest) == 0 {
			ends, rest = append(ends, off), msg
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal(err)
		}
		if writable(c) {
			// The deadline passed while this goroutine did not run (a
			// loaded machine): a write that timed out is not yet a
			// kernel that takes no more.
			continue
		}
		_ = c.SetWriteDeadline(time.Time{})
		if len(rest) < len(msg) {
			ends = append(ends, off) // a partial message ends where the kernel took it
		}
		return ends
	}
}

// writable reports whether c's kernel has room for more now (poll
// POLLOUT, without waiting).
func writable(c net.Conn) bool {
	var w bool
	onFD(c, func(fd int) error {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		w = err == nil && n > 0 && fds[0].Revents&unix.POLLOUT != 0
		return err
	})
	return w
}

// A connection given up with messages in flight to a peer that is alive
// and reading: the peer answers something it reads there (a liveness ack
// owed to a probe behind the data) before reading the rest. Held open,
// every byte written arrives and the hold ends with nothing pending;
// closed instead (the control), this kernel answers the peer's bytes with
// a reset and discards what it had not sent — the loss the hold is for.
func TestHoldKeepsWhatAGivenUpConnectionStillSends(t *testing.T) {
	for _, hold := range []bool{true, false} {
		name := map[bool]string{true: "held", false: "closed (control)"}[hold]
		t.Run(name, func(t *testing.T) {
			sender, receiver := tcpPair(t)
			ack := newAckCount(sender)
			ends := fillUntilBlocked(t, sender)
			total := ends[len(ends)-1]
			if err := sender.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			done := make(chan holdResult, 1)
			if hold {
				go func() {
					done <- holdUntilAcked(context.Background(), sender, ack.acked, ends, 5*time.Second, nil, nil)
				}()
			} else {
				_ = sender.Close()
			}
			// The peer reads a little, answers, then reads on to the end.
			first := make([]byte, 1000)
			if _, err := io.ReadFull(receiver, first); err != nil {
				t.Fatal(err)
			}
			if _, err := receiver.Write([]byte("ack")); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the answer reaches the sender's kernel
			_ = receiver.SetReadDeadline(time.Now().Add(10 * time.Second))
			rest, _ := io.Copy(io.Discard, receiver)
			got := int64(len(first)) + rest
			if !hold {
				if got >= total {
					t.Fatalf("the control lost nothing (%d of %d bytes arrived): the test no longer shows the loss it guards", got, total)
				}
				t.Logf("closed: %d of %d bytes arrived", got, total)
				return
			}
			if got != total {
				t.Fatalf("%d of %d bytes arrived", got, total)
			}
			select {
			case r := <-done:
				if r.pending != 0 || r.why != "" {
					t.Fatalf("hold ended with %d pending (%s), want none", r.pending, r.why)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the hold did not end once everything was acknowledged")
			}
		})
	}
}

// A hold ends, with what is still pending and why, when the peer resets
// the connection, when it acknowledges nothing for the idle bound, and
// when ctx ends (the node closing).
func TestHoldEnds(t *testing.T) {
	cases := []struct {
		name string
		act  func(receiver net.Conn, cancel context.CancelFunc)
		idle time.Duration
		why  string
	}{
		{"peer reset", func(r net.Conn, _ context.CancelFunc) {
			_ = r.(*net.TCPConn).SetLinger(0)
			_ = r.Close()
		}, 10 * time.Second, "reset"},
		{"peer silent", func(net.Conn, context.CancelFunc) {}, 300 * time.Millisecond, "acknowledged nothing"},
		{"node closing", func(_ net.Conn, cancel context.CancelFunc) { cancel() }, 10 * time.Second, "closing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sender, receiver := tcpPair(t)
			ack := newAckCount(sender)
			ends := fillUntilBlocked(t, sender)
			acked, _ := ack.acked()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan holdResult, 1)
			go func() { done <- holdUntilAcked(ctx, sender, ack.acked, ends, c.idle, nil, nil) }()
			time.Sleep(100 * time.Millisecond)
			c.act(receiver, cancel)
			select {
			case r := <-done:
				if r.pending == 0 || r.pending > len(ends) || !strings.Contains(r.why, c.why) {
					t.Fatalf("hold ended with %d of %d pending (%d bytes acknowledged of %d), why %q; want some pending, why containing %q",
						r.pending, len(ends), acked, ends[len(ends)-1], r.why, c.why)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the hold did not end")
			}
		})
	}
}

// The one-way messages a link kept when it gave a connection up (they had
// not left this node) wait for the next connection to the same peer run.
// While that connection is held (session.hold) and the peer acknowledges
// what it still carries, the peer run is alive and reading — and its
// ROUTER refuses the link's new hellos while the held connection delivers
// (heldElsewhere) — so the kept messages must not expire meanwhile: a
// slow receiver's hold lasts as long as it takes to read up to the
// socket buffers, far past KeepUnsent - PeerTimeout (seen: 1,177 kept
// messages dropped, counted unsent, 0.5 s into a 15 s hold).
//
// Their wait runs on the node's Clock, moved here by hand, so the test
// decides how much of KeepUnsent passes during the hold whatever the
// machine's load. On the system clock with a 300 ms KeepUnsent it failed
// every run with the cores busy: filling the socket buffers (~0.2 s on a
// quiet machine) took longer than KeepUnsent, and the message expired
// before the hold began.
func TestHoldKeepsKeptMessagesWhileThePeerTakesData(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	cfg := testConfig("sender", 1)
	cfg.Clock = clk
	// The hold gives a peer that acknowledges nothing max(PeerTimeout,
	// KeepUnsent) of real time: longer than this test waits for a restart
	// of the kept message's wait (10 s), so that a missing restart is
	// reported as such.
	cfg.PeerTimeout, cfg.KeepUnsent = 20*time.Second, 20*time.Second
	n := startNode(t, cfg)
	peer := RID("node-receiver")
	const gen = 7

	sender, receiver := tcpPair(t)
	// A fixed receive buffer: autotuned, it could take most of what is
	// written at the first read, and the hold would end before the clock
	// moved.
	if err := receiver.(*net.TCPConn).SetReadBuffer(128 << 10); err != nil {
		t.Fatal(err)
	}
	zc := &zconn{raw: sender, ack: newAckCount(sender)}
	ends := fillUntilBlocked(t, sender)
	if err := sender.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The give-up: what had not left is kept, what is in flight is held.
	kept := []outItem{{frames: [][]byte{[]byte("kept")}, size: 4, keep: true}}
	if k, _ := n.keepUnsent(peer, gen, kept); k != 1 {
		t.Fatalf("kept %d", k)
	}
	s := &session{
		l:    &link{n: n, rid: peer},
		pc:   &peerConn{zc: zc},
		info: PeerInfo{RID: peer, LifecycleGeneration: gen},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.hold(ends, func() {})
	}()
	held := func() bool {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	// keptDue is when the kept message's wait ends; ok is false once it
	// was dropped or taken.
	keptDue := func() (due time.Time, ok bool) {
		n.mu.Lock()
		defer n.mu.Unlock()
		k := n.kept[string(peer)]
		if k == nil {
			return time.Time{}, false
		}
		return k.timer.(*manualTimer).at, true
	}

	// The peer reads the connection in steps, each until this kernel saw
	// it acknowledge another 1/16 of what was written. After each, once
	// the hold has seen that and restarted the kept message's wait, the
	// clock moves on by 3/4 KeepUnsent: the message outlives several
	// KeepUnsent only if every acknowledgement restarts its wait.
	total := ends[len(ends)-1]
	step := cfg.KeepUnsent * 3 / 4
	var movedWhileHeld time.Duration
	buf := make([]byte, 16<<10)
	for got := int64(0); held(); {
		from, _ := zc.ack.acked()
		for a := from; held() && a < from+total/16; a, _ = zc.ack.acked() {
			m, err := receiver.Read(buf)
			got += int64(m)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("after %d of %d bytes: %v", got, total, err)
			}
		}
		rearmed := false
		for wait := time.Now().Add(10 * time.Second); held() && !rearmed && time.Now().Before(wait); time.Sleep(5 * time.Millisecond) {
			due, ok := keptDue()
			rearmed = !ok || !due.Before(clk.Now().Add(cfg.KeepUnsent))
		}
		if !held() {
			break // everything acknowledged, or the hold gave up: checked below
		}
		if !rearmed {
			to, _ := zc.ack.acked()
			t.Fatalf("the peer acknowledged %d more bytes during the hold, and the kept message's wait was not restarted within 10 s", to-from)
		}
		clk.Advance(step)
		movedWhileHeld += step
		if _, ok := keptDue(); !ok {
			t.Fatalf("the kept message was dropped %s into a hold whose peer read %d of %d bytes (%d counted unsent)",
				movedWhileHeld, got, total, n.Stats().Unsent)
		}
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hold did not end once the peer read everything")
	}
	st := n.Stats()
	if movedWhileHeld < 2*cfg.KeepUnsent {
		t.Fatalf("the hold ended %s into it: it did not outlast KeepUnsent (%s), the test tested nothing", movedWhileHeld, cfg.KeepUnsent)
	}
	if st.HeldLost != 0 {
		t.Fatalf("hold counted %d lost", st.HeldLost)
	}
	if got := n.takeKept(peer, gen); len(got) != 1 || st.Unsent != 0 {
		t.Fatalf("after a hold of %s (on the node's clock) while the peer took data, %d kept messages left, %d counted unsent; want 1 and 0",
			movedWhileHeld, len(got), st.Unsent)
	}
	t.Logf("the kept message outlived a hold of %s (KeepUnsent %s)", movedWhileHeld, cfg.KeepUnsent)
}

// A hold counts the peer refusing our hellos as duplicates as a sign of
// life (alive): while it refuses, the hold outlasts its idle bound with
// nothing acknowledged (the peer reads an earlier connection of ours
// first); once it stops, the bound runs out as before.
func TestHoldCountsRefusalsAsSignsOfLife(t *testing.T) {
	sender, _ := tcpPair(t) // the peer reads nothing here
	ack := newAckCount(sender)
	ends := fillUntilBlocked(t, sender)
	var mu sync.Mutex
	refusing, stopped := true, time.Time{}
	alive := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if refusing {
			return time.Now() // refused just now, whenever the hold asks
		}
		return stopped
	}
	const idle = 300 * time.Millisecond
	done := make(chan holdResult, 1)
	go func() { done <- holdUntilAcked(context.Background(), sender, ack.acked, ends, idle, nil, alive) }()
	select {
	case r := <-done:
		t.Fatalf("the hold ended while the peer refused our hellos: %d pending, %s", r.pending, r.why)
	case <-time.After(4 * idle):
	}
	mu.Lock()
	refusing, stopped = false, time.Now()
	mu.Unlock()
	select {
	case r := <-done:
		if r.pending == 0 || !strings.Contains(r.why, "acknowledged nothing") {
			t.Fatalf("hold ended with %d pending, why %q; want some pending, the peer silent", r.pending, r.why)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hold did not end once the refusals stopped")
	}
}
