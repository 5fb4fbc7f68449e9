//go:build linux

package transport

import (
	"io"
	"net"
	"testing"
	"time"
)

// What the peer acknowledged counts data bytes only, on the side that
// dialled as on the side that accepted: Linux's tcpi_bytes_acked also
// counts the dialler's SYN, and taken as is it made a record whose last
// byte was not acknowledged look delivered.
func TestAckCountCountsDataOnly(t *testing.T) {
	dialled, served := tcpPair(t)
	for _, c := range []struct {
		name     string
		from, to net.Conn
	}{{"dialled", dialled, served}, {"accepted", served, dialled}} {
		t.Run(c.name, func(t *testing.T) {
			ack := newAckCount(c.from)
			go func() { _, _ = io.CopyN(io.Discard, c.to, 1000) }()
			if _, err := c.from.Write(make([]byte, 1000)); err != nil {
				t.Fatal(err)
			}
			var n int64
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				var ok bool
				if n, ok = ack.acked(); !ok {
					t.Fatal("TCP_INFO unreadable")
				}
				if n >= 1000 {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			if n, _ = ack.acked(); n != 1000 {
				t.Fatalf("acknowledged %d bytes of 1000 written", n)
			}
		})
	}
}

// unreadBytes sees what the kernel holds that the process has not read:
// the sweep leaves such a connection open (its reader is behind).
func TestUnreadBytes(t *testing.T) {
	dialled, served := tcpPair(t)
	if n, ok := unreadBytes(served); !ok || n != 0 {
		t.Fatalf("before anything was sent: %d, %v", n, ok)
	}
	if _, err := dialled.Write(make([]byte, 300)); err != nil {
		t.Fatal(err)
	}
	var n int
	for end := time.Now().Add(5 * time.Second); n < 300 && time.Now().Before(end); time.Sleep(time.Millisecond) {
		n, _ = unreadBytes(served)
	}
	if n != 300 {
		t.Fatalf("unread %d bytes, want the 300 sent", n)
	}
	if _, err := io.ReadFull(served, make([]byte, 300)); err != nil {
		t.Fatal(err)
	}
	if n, _ := unreadBytes(served); n != 0 {
		t.Fatalf("unread %d bytes after reading them all", n)
	}
}

// tcpPair is a loopback TCP connection: the dialling and the accepting end,
// closed with the test.
func tcpPair(t *testing.T) (dialled, accepted net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			ch <- c
		}
		close(ch)
	}()
	dialled, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, ok := <-ch
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = dialled.Close(); _ = accepted.Close() })
	return dialled, accepted
}
