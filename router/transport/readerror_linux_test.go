package transport

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/router"
)

// breakProxy forwards a link's connections to target. Its first
// connection can be made to fail the way a path fails under a connection:
// it stops reading what the sender writes (the window closes, the
// sender's kernel holds what the peer did not acknowledge), then hands the
// sender's reader an error that is neither the peer's close or reset nor a
// deadline — a frame with reserved flag bits, a framing error (a kernel's
// ETIMEDOUT or EHOSTUNREACH takes the same way through session.read). Then
// it resets the sender's orphaned socket, which discards what the sender's
// kernel still held, and passes on to the peer exactly what its own kernel
// had acknowledged.
type breakProxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	conns  atomic.Int32 // connections accepted

	mu     sync.Mutex
	all    *proxyConns
	first  net.Conn      // the sender's side of the first connection
	paused chan struct{} // closed to stop reading the first connection's sender
	resume chan struct{} // closed to read it again (to its end)
	downMu sync.Mutex    // a frame towards the sender, or the bad one
	broken bool          // the bad frame was written: nothing goes to the sender
}

func newBreakProxy(t testing.TB, target string) *breakProxy {
	t.Helper()
	ln, all := listenProxy(t)
	addr, _ := splitEndpoint(target)
	p := &breakProxy{t: t, ln: ln, all: all, target: addr, paused: make(chan struct{}), resume: make(chan struct{})}
	go p.accept()
	return p
}

func (p *breakProxy) endpoint() string { return "tcp://" + p.ln.Addr().String() }

func (p *breakProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.all.track(in, out)
		if p.conns.Add(1) == 1 {
			// A small buffer: its window closes soon once paused.
			_ = in.(*net.TCPConn).SetReadBuffer(64 << 10)
			p.mu.Lock()
			p.first = in
			p.mu.Unlock()
			go p.up(in, out)
			go p.down(out, in)
			continue
		}
		go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
		go func() { _, _ = io.Copy(in, out); _ = in.(*net.TCPConn).CloseWrite() }()
	}
}

// up forwards the first connection's sender to the peer until paused, then,
// resumed, forwards what is left (what its kernel acknowledged before the
// sender's reset) and the end of the stream.
func (p *breakProxy) up(src, dst net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		select {
		case <-p.paused:
			<-p.resume
			_, _ = io.Copy(dst, src) // ends with the reset
			_ = dst.(*net.TCPConn).CloseWrite()
			return
		default:
		}
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			_ = dst.(*net.TCPConn).CloseWrite()
			return
		}
	}
}

// down forwards the peer's side of the first connection to the sender
// whole ZMTP frames at a time, so that the bad frame lands between two.
func (p *breakProxy) down(src, dst net.Conn) {
	r := bufio.NewReader(src)
	var greeting [64]byte
	if _, err := io.ReadFull(r, greeting[:]); err != nil {
		return
	}
	if _, err := dst.Write(greeting[:]); err != nil {
		return
	}
	for {
		flag, err := r.ReadByte()
		if err != nil {
			return
		}
		frame := []byte{flag}
		var size uint64
		if flag&flagLong != 0 {
			var b [8]byte
			if _, err := io.ReadFull(r, b[:]); err != nil {
				return
			}
			frame = append(frame, b[:]...)
			size = binary.BigEndian.Uint64(b[:])
		} else {
			b, err := r.ReadByte()
			if err != nil {
				return
			}
			frame = append(frame, b)
			size = uint64(b)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		p.downMu.Lock()
		if !p.broken {
			_, err = dst.Write(append(frame, body...))
		}
		p.downMu.Unlock()
		if err != nil {
			return
		}
	}
}

// pause stops reading what the sender writes on the first connection.
func (p *breakProxy) pause() { close(p.paused) }

// breakRead writes the sender a frame with reserved flag bits on the first
// connection, between two of the peer's frames, and nothing after it.
func (p *breakProxy) breakRead() {
	p.downMu.Lock()
	defer p.downMu.Unlock()
	p.broken = true
	p.mu.Lock()
	c := p.first
	p.mu.Unlock()
	if _, err := c.Write([]byte{flagReserve, 0}); err != nil {
		p.t.Errorf("writing the bad frame: %v", err)
	}
}

// resetSender writes to the first connection's sender until its kernel
// answers with a reset: once the sender closed its socket (its session
// ended), data meeting it makes its kernel discard what it still held for
// the peer. Then the proxy reads on what its own kernel acknowledged and
// passes it and the end of the stream on to the peer.
func (p *breakProxy) resetSender(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	c := p.first
	p.mu.Unlock()
	waitFor(t, 15*time.Second, "the sender's socket to be reset", func() bool {
		_, err := c.Write([]byte{0})
		if err == nil {
			time.Sleep(5 * time.Millisecond)
		}
		return err != nil
	})
	close(p.resume)
}

// A link's connection whose read fails for a reason that is neither the
// peer's close or reset nor a deadline — the kernel giving the connection
// up (ETIMEDOUT, EHOSTUNREACH), a framing error — loses no one-way message
// the peer had not acknowledged: to a peer that drops copies they are kept
// and sent again on the link's next connection, and delivered once. Here a
// proxy stands for the path: it stops taking the sender's data (what is in
// flight stays unacknowledged), hands the sender's reader a framing error,
// then resets the sender's socket once it was closed, discarding what the
// kernel still held. Before, that case fell through session.read's switch:
// what the peer never acknowledged counted as delivered, and thousands of
// accepted messages never arrived.
func TestReadErrorKeepsWhatThePeerDidNotAcknowledge(t *testing.T) {
	sink := new(seqSink)
	cfgB := testConfig("b", 5)
	cfgB.Handler = sink.handler()
	b := startNode(t, cfgB)
	cfgA := testConfig("a", 1)
	cfgA.SendQueueRecords = 256
	var logs syncbuf.Buffer
	cfgA.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a := startNode(t, cfgA)
	proxy := newBreakProxy(t, b.Endpoint())
	if err := a.Connect(b.RID(), proxy.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := a.WaitAdmitted(ctx, b.RID())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Has(router.CapabilityLinkSequence) {
		t.Fatalf("the peer's admission does not list %s", router.CapabilityLinkSequence)
	}

	accepted := streamThenBreak(t, ctx, a, b.RID(), proxy, func() { sink.waitDistinct(t, 1000, 10*time.Second) })
	proxy.resetSender(t)
	if proxy.conns.Load() < 2 {
		// The link redials once its session was read to its end, which
		// closes the socket first (the reset above needs it closed).
		waitFor(t, 15*time.Second, "the link to redial", func() bool { return proxy.conns.Load() >= 2 })
	}

	// Everything accepted arrives, or the sender has nothing left to send
	// and the rest was lost.
	var got []uint64
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		sink.mu.Lock()
		got = append(got[:0], sink.got...)
		sink.mu.Unlock()
		if uint64(len(got)) >= accepted {
			break
		}
	}
	st := a.Stats()
	t.Logf("accepted %d, %d arrived (%d copies dropped); resent %d, unsent %d, in-flight lost %d",
		accepted, len(got), b.Stats().Duplicates, st.Resent, st.Unsent, st.InFlightLost)
	checkOnceInOrder(t, got, int(accepted))
	if st.InFlightLost != 0 {
		t.Fatalf("%d one-way messages counted lost to a peer that drops copies", st.InFlightLost)
	}
	// Said as what it is, not as the peer's close.
	if !strings.Contains(logs.String(), `level=WARN msg="transport: the connection failed before the peer acknowledged one-way messages; they are kept and sent again on the next connection (the peer drops copies)"`) ||
		strings.Contains(logs.String(), "the peer closed the connection") {
		t.Fatalf("want the failed connection's WARN, not the peer's close, in:\n%s", logs.String())
	}
}

// To a peer that does not drop copies (no router.LinkSequence: an older
// version) the same break is not answered by sending again — what it had
// not acknowledged may have reached it, and would arrive twice — but the
// loss is no longer silent: counted (Stats.InFlightLost) and named in one
// WARN.
func TestReadErrorCountsWhatAnOlderPeerDidNotAcknowledge(t *testing.T) {
	f := newFakePeer(t, "old", 7)
	f.stopReading()
	var logs syncbuf.Buffer
	cfgA := testConfig("a", 1)
	cfgA.SendQueueRecords = 256
	cfgA.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a := startNode(t, cfgA)
	proxy := newBreakProxy(t, f.endpoint())
	if err := a.Connect(f.rid, proxy.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := a.WaitAdmitted(ctx, f.rid)
	if err != nil {
		t.Fatal(err)
	}
	if info.Has(router.CapabilityLinkSequence) {
		t.Fatalf("the fake peer lists %s", router.CapabilityLinkSequence)
	}
	streamThenBreak(t, ctx, a, f.rid, proxy, func() {})
	waitFor(t, 15*time.Second, "the loss to be counted", func() bool { return a.Stats().InFlightLost > 0 })
	lost := a.Stats().InFlightLost
	warn := fmt.Sprintf("level=WARN msg=\"transport: the connection failed with one-way messages the peer never acknowledged; the peer does not drop copies, so they are not sent again and may be lost\" rid=%s mesh=mesh-test gen=1 peer=%s peer_gen=7 count=%d cause=", a.RID(), f.rid, lost)
	if n := strings.Count(logs.String(), "count="+fmt.Sprint(lost)); !strings.Contains(logs.String(), warn) || n != 1 {
		t.Fatalf("want one WARN naming the %d messages, got:\n%s", lost, logs.String())
	}
}

// streamThenBreak sends one-way messages from a to peer, linked through
// proxy, 1,000 first (then warm), then until the proxy's paused window
// left 64 KiB of them unacknowledged in a's kernel and a's queue full;
// then it breaks the read of a's connection (breakRead). It returns how
// many a accepted.
func streamThenBreak(t *testing.T, ctx context.Context, a *Node, peer RID, proxy *breakProxy, warm func()) uint64 {
	t.Helper()
	data := make([]byte, 1000)
	var accepted uint64
	send := func(until func() bool) {
		for !until() {
			if sendSeq(ctx, a, peer, accepted+1, data) {
				accepted++
			}
		}
	}
	send(func() bool { return accepted == 1000 })
	warm()

	// The path stops taking data: the sender's kernel holds what the peer
	// did not acknowledge (64 KiB at least), its queue fills behind it.
	proxy.pause()
	sess, err := a.session(peer, anyRun)
	if err != nil {
		t.Fatal(err)
	}
	acked := func() int64 {
		acked, ok := sess.pc.zc.ack.acked()
		if !ok {
			t.Fatal("this kernel does not tell what the peer acknowledged")
		}
		return acked
	}
	bp := a.Stats().Backpressure
	last, since := acked(), time.Now()
	send(func() bool {
		if n := acked(); n != last {
			last, since = n, time.Now()
		}
		return a.Stats().Backpressure > bp && sess.pc.dataEnd.Load()-last >= 64<<10 && time.Since(since) >= 100*time.Millisecond
	})
	t.Logf("%d bytes of one-way messages unacknowledged at the break", sess.pc.dataEnd.Load()-acked())

	proxy.breakRead()
	return accepted
}
