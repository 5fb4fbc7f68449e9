//go:build linux

package transport

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// fillUntilBlocked writes 100-byte messages on c until its kernel takes no
// more for a moment (the peer is not reading) and returns the end offset
// of each, counted like ackCount.
func fillUntilBlocked(t *testing.T, c net.Conn) []int64 {
	t.Helper()
	msg := make([]byte, 100)
	var ends []int64
	var off int64
	for {
		_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Write(msg)
		off += int64(n)
		if n == len(msg) {
			ends = append(ends, off)
		}
		if err != nil {
			if n > 0 && n < len(msg) {
				ends = append(ends, off) // a partial message ends where the kernel took it
			}
			_ = c.SetWriteDeadline(time.Time{})
			return ends
		}
	}
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
					done <- holdUntilAcked(context.Background(), sender, ack.acked, ends, 5*time.Second)
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
			go func() { done <- holdUntilAcked(ctx, sender, ack.acked, ends, c.idle) }()
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
