//go:build linux

package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"golang.org/x/sys/unix"
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

// A cut socket keeps, readable, every byte its kernel acknowledged before
// the cut, and acknowledges nothing the peer sends after it: what the
// peer counts as delivered is exactly what this side can still read (the
// sweep of silent inbound connections cuts them; closing them threw away
// records their senders had seen acknowledged).
func TestCutSocketKeepsWhatItAcknowledged(t *testing.T) {
	dialled, served := tcpPair(t)
	ack := newAckCount(dialled)
	before := make([]byte, 3000)
	for i := range before {
		before[i] = byte(i)
	}
	if _, err := dialled.Write(before); err != nil {
		t.Fatal(err)
	}
	waitAcked := func(want int64) int64 {
		var n int64
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if n, _ = ack.acked(); n >= want {
				break
			}
		}
		return n
	}
	if n := waitAcked(3000); n != 3000 {
		t.Fatalf("acknowledged %d of 3000 bytes before the cut", n)
	}
	if !cutSocket(served) {
		t.Fatal("cutSocket failed on a TCP connection")
	}
	// The peer goes on writing (it has not seen the FIN yet): refused.
	_, _ = dialled.Write(make([]byte, 500))
	time.Sleep(50 * time.Millisecond)
	_, _ = dialled.Write(make([]byte, 500)) // after the reset: fails or is dropped
	time.Sleep(50 * time.Millisecond)
	if n, _ := ack.acked(); n != 3000 {
		t.Fatalf("acknowledged %d bytes after the cut, want the 3000 from before it", n)
	}
	_ = served.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(served)
	if err != nil && !peerClosed(err) {
		t.Fatalf("reading after the cut: %v", err)
	}
	if len(got) != 3000 || string(got) != string(before) {
		t.Fatalf("read %d bytes after the cut, want the 3000 acknowledged before it", len(got))
	}
}

// zmtpPair is a ZMTP connection over loopback TCP: our DEALER end (the
// sender) and the ROUTER end (its peer), closed with the test.
func zmtpPair(t *testing.T) (dealer, router *zconn) {
	t.Helper()
	dialled, served := tcpPair(t)
	lim := frameLimits{1 << 20, 1 << 20, 16, 1 << 16}
	type res struct {
		zc  *zconn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		zc, err := openZMTP(served, zmq4.Router, []byte("peer"), true, lim, 4096, 5*time.Second, nil)
		ch <- res{zc, err}
	}()
	d, err := openZMTP(dialled, zmq4.Dealer, []byte("sender"), false, lim, 4096, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return d, r.zc
}

// A session ended after its peer reset the connection still learns which
// one-way messages the peer never acknowledged: drainClose no longer
// closes the socket when its shutdown is refused (the connection is
// already reset), so undelivered can still read the acknowledgements.
// Closed at once, every message written since the peer's last
// acknowledgement counted as delivered.
func TestDrainCloseOfAResetConnectionKeepsWhatWasNotAcknowledged(t *testing.T) {
	d, r := zmtpPair(t)
	pc := newPeerConn(d, 1000, 0, time.Second)
	pc.start()
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if err := pc.enqueue(outItem{frames: item(i).frames, size: 1, keep: true}); err != nil {
				t.Fatalf("enqueue %d: %v", i, err)
			}
		}
		waitFor(t, 5*time.Second, "the writer to flush", pc.flushed)
	}
	send(0, 100)
	waitFor(t, 5*time.Second, "the peer's kernel to acknowledge", func() bool {
		n, _ := d.ack.acked()
		return n == d.g.written()
	})
	if !cutSocket(r.raw) { // the peer ends the connection: what follows is refused
		t.Fatal("cut failed")
	}
	// One record (one flush): a second write after the reset would fail,
	// and the writer's own failure path (failWrite) would take over.
	send(100, 101)
	waitFor(t, 5*time.Second, "the peer's reset", func() bool {
		var info *unix.TCPInfo
		onFD(d.raw, func(fd int) (err error) {
			info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
			return err
		})
		return info != nil && info.State == unix.BPF_TCP_CLOSE
	})
	pc.drainClose(context.Background(), errors.New("peer closed"), time.Second)
	pc.wait()
	if unsent := pc.takeUnsent(); len(unsent) != 0 {
		t.Fatalf("%d records not written, want all written", len(unsent))
	}
	got := pc.undelivered()
	if len(got) != 1 || itemNo(t, got[0]) != 100 {
		t.Fatalf("undelivered %d records, want the one written after the peer's cut", len(got))
	}
	pc.release()
}
