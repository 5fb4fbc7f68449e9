//go:build linux

package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
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
	return zmtpPairOn(t, func(c net.Conn) net.Conn { return c })
}

// keptSender starts a peerConn writing to d and returns it with a send
// that enqueues one-way messages from..to-1 (kept on a give-up) and waits
// for the writer to flush them.
func keptSender(t *testing.T, d *zconn) (*peerConn, func(from, to int)) {
	t.Helper()
	pc := newPeerConn(d, 1000, 0, time.Second)
	pc.start()
	return pc, func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := pc.enqueue(outItem{frames: item(i).frames, size: 1, keep: true}); err != nil {
				t.Fatalf("enqueue %d: %v", i, err)
			}
		}
		waitFor(t, 5*time.Second, "the writer to flush", pc.flushed)
	}
}

// zmtpPairOn is zmtpPair with the dialled socket wrapped by wrap.
func zmtpPairOn(t *testing.T, wrap func(net.Conn) net.Conn) (dealer, router *zconn) {
	t.Helper()
	dialled, served := tcpPair(t)
	dialled = wrap(dialled)
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
	pc, send := keptSender(t, d)
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

// stallConn is a TCP connection whose writes can be made to fail as a
// write deadline would, without writing: what a writer whose deadline
// passed while its process was stopped (SIGSTOP) meets once it runs again.
type stallConn struct {
	*net.TCPConn
	stalled atomic.Bool
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.stalled.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	return c.TCPConn.Write(p)
}

// A writer whose write deadline passes after some one-way messages left
// (its process was stopped past the deadline, and a write or two slipped
// out before Go's runtime saw the deadline) does not close the socket: the
// peer may have cut the connection meanwhile, and only the reader can
// learn that (it reads the end of the stream, or a reset) and ask which
// messages the peer never acknowledged. Closed at once, those counted as
// delivered: TestPausedSenderLosesNothing once lost 71 records — one
// 16 KiB write buffer of them — this way in a whole-suite run.
func TestWriteTimeoutKeepsWhatThePeerNeverAcknowledged(t *testing.T) {
	var sc *stallConn
	d, r := zmtpPairOn(t, func(c net.Conn) net.Conn {
		sc = &stallConn{TCPConn: c.(*net.TCPConn)}
		return sc
	})
	pc := newPeerConn(d, 1000, 0, time.Second)
	pc.lingerOnTimeout(context.Background(), time.Second)
	pc.start()
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if err := pc.enqueue(outItem{frames: item(i).frames, size: 1, keep: true}); err != nil {
				t.Fatalf("enqueue %d: %v", i, err)
			}
		}
	}
	send(0, 100)
	waitFor(t, 5*time.Second, "the writer to flush", pc.flushed)
	waitFor(t, 5*time.Second, "the peer's kernel to acknowledge", func() bool {
		n, _ := d.ack.acked()
		return n == d.g.written()
	})
	if !cutSocket(r.raw) { // the peer ends the connection: what follows is refused
		t.Fatal("cut failed")
	}
	send(100, 101) // leaves this process; the peer's kernel answers with a reset
	waitFor(t, 5*time.Second, "the writer to flush", pc.flushed)
	sc.stalled.Store(true)
	send(101, 102) // the deadline: not written
	pc.wait()
	unsent := pc.takeUnsent()
	if len(unsent) != 1 || itemNo(t, unsent[0]) != 101 {
		t.Fatalf("unsent %d records, want the one the deadline stopped", len(unsent))
	}
	// The session's reader: it reads to the end the peer made.
	var err error
	for err == nil {
		_, err = d.recv()
	}
	if !peerClosed(err) {
		t.Fatalf("the reader ended with %v, want the peer's close or reset", err)
	}
	got := pc.undelivered()
	if len(got) != 1 || itemNo(t, got[0]) != 100 {
		t.Fatalf("undelivered %d records, want the one written after the peer's cut", len(got))
	}
	pc.release()
}

// The ROUTER side of a link whose writer fails because the peer reset the
// connection still delivers what its kernel acknowledged before the reset:
// the peer counts that delivered. failWrite closed the socket, which
// discarded it (a paused node that ran again lost the last ~8,000 one-way
// messages of a client that had given up on it, its first liveness ack
// failing before its reader got to them).
func TestInboundWriteFailureKeepsWhatWasAcknowledged(t *testing.T) {
	d, r := zmtpPair(t)
	rp := newPeerConn(r, 1000, 0, time.Second)
	rp.inbound = true
	rp.start()
	const n = 50
	for i := range n {
		if err := d.write(item(i).frames); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.g.flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the records to be acknowledged", func() bool {
		a, _ := d.ack.acked()
		return a == d.g.written()
	})
	// The peer gives the connection up with a reset.
	if err := d.raw.(*net.TCPConn).SetLinger(0); err != nil {
		t.Fatal(err)
	}
	_ = d.raw.Close()
	time.Sleep(20 * time.Millisecond)
	// This side's writer meets the reset (a write may pass before it does).
	for i := 0; i < 100 && !rp.isClosed(); i++ {
		_ = rp.enqueue(outItem{frames: item(1000 + i).frames, size: 1})
		time.Sleep(5 * time.Millisecond)
	}
	if !rp.isClosed() {
		t.Fatal("the writer never met the reset")
	}
	rp.wait()
	got := 0
	for {
		frames, err := r.recv()
		if err != nil {
			break
		}
		if itemNo(t, outItem{frames: frames}) != got {
			t.Fatalf("record %d read as %v", got, frames)
		}
		got++
	}
	if got != n {
		t.Fatalf("read %d of the %d records the kernel acknowledged", got, n)
	}
	rp.release()
}

// resetIf resets the connection in the same pass as it reads what the
// peer acknowledged, not at the close that follows: the peer reads every
// byte acknowledged by then and then the reset, while the descriptor is
// still open here. With reset false it leaves the connection alone.
func TestResetIfResetsAtOnce(t *testing.T) {
	dialled, served := tcpPair(t)
	ack := newAckCount(dialled)
	send := func(n int) {
		if _, err := dialled.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	acknowledged := func(want int64) func() bool {
		return func() bool { n, _ := ack.acked(); return n == want }
	}
	send(1000)
	waitFor(t, 5*time.Second, "1,000 bytes acknowledged", acknowledged(1000))
	if _, reset, ok := resetIf(dialled, func(int64, bool, bool) bool { return false }); !ok || reset {
		t.Fatalf("resetIf told not to reset: reset %v, ok %v", reset, ok)
	}
	send(2000)
	waitFor(t, 5*time.Second, "3,000 bytes acknowledged", acknowledged(3000))
	var asked struct {
		acked    int64
		inFlight bool
	}
	raw, reset, ok := resetIf(dialled, func(acked int64, inFlight, _ bool) bool {
		asked.acked, asked.inFlight = acked, inFlight
		return true
	})
	if !ok || !reset {
		t.Fatalf("resetIf told to reset: reset %v, ok %v", reset, ok)
	}
	if raw != asked.acked || raw-ack.base != 3000 || asked.inFlight {
		t.Fatalf("resetIf read %d acknowledged (asked with %d, in flight %v), want 3,000 data bytes and nothing in flight",
			raw-ack.base, asked.acked-ack.base, asked.inFlight)
	}
	_ = served.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(served)
	if !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("the peer read %d bytes and then %v, want the reset while this side's descriptor is open", len(got), err)
	}
	if len(got) != 3000 {
		t.Fatalf("the peer read %d bytes before the reset, want the 3,000 it acknowledged", len(got))
	}
}

// A superseded connection read to its end (readOut) is cut when a read has
// waited for the peer, with nothing arriving, for the idle bound — not
// when the reader was away longer than that (a handler slow or stuck): the
// bound is armed again at each read. Until then, and after the cut, what
// the peer's kernel counts as acknowledged is what is read.
func TestReadOutBoundsIdlenessNotSlowness(t *testing.T) {
	d, r := zmtpPair(t)
	rp := newPeerConn(r, 1000, 0, time.Second)
	rp.inbound = true
	rp.start()
	write := func(i int) {
		t.Helper()
		if err := d.write(item(i).frames); err != nil {
			t.Fatal(err)
		}
		if _, err := flushWithin(d, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (int, error) {
		frames, err := r.recv()
		if err != nil {
			return -1, err
		}
		return itemNo(t, outItem{frames: frames}), nil
	}
	const idle = 200 * time.Millisecond
	write(0)
	rp.readOut(errors.New("superseded"), idle)
	rp.wait() // its writer has stopped
	if n, err := read(); err != nil || n != 0 {
		t.Fatalf("first read: record %d, %v", n, err)
	}
	time.Sleep(3 * idle) // the reader is away (its handler slow): not idleness
	write(1)
	if n, err := read(); err != nil || n != 1 {
		t.Fatalf("read after the reader was away %s: record %d, %v; want record 1", 3*idle, n, err)
	}
	// The peer goes silent with the connection open: cut after idle.
	if n, err := read(); !errors.Is(err, io.EOF) {
		t.Fatalf("read from a silent peer: record %d, %v; want the end of the stream after the idle bound", n, err)
	}
	acked, _ := d.ack.acked()
	if acked != d.g.written() {
		t.Fatalf("before the cut the peer's kernel acknowledged %d of %d bytes", acked, d.g.written())
	}
	_ = d.write(item(2).frames) // refused: the connection was cut
	_, _ = flushWithin(d, time.Second)
	time.Sleep(50 * time.Millisecond)
	if after, _ := d.ack.acked(); after != acked {
		t.Fatalf("the cut connection acknowledged %d bytes more", after-acked)
	}
	rp.release()
}
