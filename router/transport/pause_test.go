package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// freezer is a TCP proxy that can stand in for a process that stopped
// running (SIGSTOP, a VM freeze): while frozen it reads nothing and writes
// nothing, so what the other side sends waits in the kernel's buffers, as
// it would for the stopped process; thawed, it forwards both ways again.
// Its connection to the dialling side is the "stopped process's" socket:
// a reset from that side discards what it had not read yet, exactly as the
// kernel does for a real process.
type freezer struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thaw   chan struct{} // closed when frozen ends
	resets atomic.Int64  // reads from the dialling side that ended in a reset
	conns  []net.Conn
}

func newFreezer(t testing.TB, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{t: t, ln: ln, target: target, thaw: make(chan struct{})}
	close(f.thaw)
	go f.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
	})
	return f
}

func (f *freezer) endpoint() string { return "tcp://" + f.ln.Addr().String() }

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.frozen, f.thaw = true, make(chan struct{})
	}
}

func (f *freezer) unfreeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.frozen = false
		close(f.thaw)
	}
}

// gate blocks while frozen.
func (f *freezer) gate() {
	f.mu.Lock()
	ch := f.thaw
	f.mu.Unlock()
	<-ch
}

func (f *freezer) accept() {
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return
		}
		addr, _ := splitEndpoint(f.target)
		out, err := net.Dial("tcp", addr)
		if err != nil {
			_ = in.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, in, out)
		f.mu.Unlock()
		go f.pump(in, out, true)
		go f.pump(out, in, false)
	}
}

// pump copies src to dst in small pieces, waiting at the gate before every
// read and every write; fromDialler marks the stopped process's own socket.
func (f *freezer) pump(src, dst net.Conn, fromDialler bool) {
	buf := make([]byte, 4096)
	for {
		f.gate()
		n, err := src.Read(buf)
		if fromDialler {
			// A resumed process reads its socket at its own pace, not at
			// once: what it answers meanwhile goes out before it has read
			// everything.
			time.Sleep(100 * time.Microsecond)
		}
		if n > 0 {
			f.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				_ = src.Close()
				return
			}
		}
		if err != nil {
			if fromDialler && !errors.Is(err, io.EOF) {
				f.resets.Add(1)
			}
			if tc, ok := dst.(*net.TCPConn); ok && errors.Is(err, io.EOF) {
				_ = tc.CloseWrite() // pass the half-close on
			} else {
				_ = dst.Close()
			}
			return
		}
	}
}

// A peer that stops running long enough for the link's liveness to give up
// on it must still get, once it runs again, every record that had left the
// sender's process: those wait in the kernel's socket buffers, and the
// sender's giving up must not throw them away. Before, the link closed its
// socket outright; the resumed peer's first liveness ack then met a closed
// socket, the sender's kernel answered with a reset, and the peer's kernel
// discarded everything the peer had not read yet — tens of thousands of
// one-way messages, lost without a word (seen with three meshnode servers,
// one SIGSTOPped for 20 s under load). Now the records counted as unsent are
// the only ones that may be missing, and the rest arrive in order.
func TestPausedPeerGetsWhatLeftTheSender(t *testing.T) {
	var (
		mu  sync.Mutex
		got []uint64
	)
	bcfg := testConfig("b", 1)
	bcfg.PeerTimeout = time.Minute // the stopped process judges nobody
	bcfg.Handler = echoHandler(func(_ PeerInfo, rec *router.Record) {
		mu.Lock()
		got = append(got, seqOf(rec))
		mu.Unlock()
	})
	b := startNode(t, bcfg)
	fz := newFreezer(t, b.Endpoint())

	acfg := testConfig("a", 1)
	acfg.PeerTimeout = 1200 * time.Millisecond
	acfg.ProbeInterval = 150 * time.Millisecond
	acfg.IOBufferBytes = 4096
	events := newEventLog()
	acfg.OnEvent = events.on
	a := startNode(t, acfg)
	if err := a.Connect(b.RID(), fz.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.WaitAdmitted(ctx, b.RID()); err != nil {
		t.Fatal(err)
	}

	// Stream until the link gives up on the frozen peer: slowly at first,
	// so that liveness probes go out between the records the frozen peer
	// has not read (its ack to them is what it writes first once it runs
	// again), then as fast as the link takes them, to fill the buffers.
	data := make([]byte, 200)
	var accepted uint64
	const frozeAt = 2000
	var slowUntil time.Time
	for {
		if accepted == frozeAt && slowUntil.IsZero() {
			fz.freeze()
			slowUntil = time.Now().Add(4 * acfg.ProbeInterval)
		}
		if time.Now().Before(slowUntil) {
			time.Sleep(time.Millisecond)
		}
		err := a.Send(ctx, b.RID(), seqSend(b.RID(), accepted+1, data))
		if err == nil {
			accepted++
			continue
		}
		if errors.Is(err, ErrBackpressure) {
			time.Sleep(time.Millisecond)
			continue
		}
		if events.count(EventDown) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the link never gave up on the frozen peer: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	unsent := a.Stats().Unsent
	if accepted <= frozeAt || unsent >= accepted-frozeAt {
		t.Fatalf("the test did not fill the socket buffers: %d accepted, %d unsent, froze at %d", accepted, unsent, frozeAt)
	}
	if d, err := time.ParseDuration(os.Getenv("PAUSE_EXTRA")); err == nil {
		time.Sleep(d)
	}
	fz.unfreeze()

	// Every record not counted unsent arrives, in order, with no gap; then
	// the link comes back, and what it carries arrives after all of them.
	want := accepted - unsent
	arrived := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), got...)
	}
	waitFor(t, 10*time.Second, "the records written before the timeout to arrive", func() bool {
		return uint64(len(arrived())) >= want
	})
	if _, err := a.WaitAdmitted(ctx, b.RID()); err != nil {
		t.Fatal(err)
	}
	const after = 500
	for i := uint64(1); i <= after; i++ {
		if err := a.SendWait(ctx, b.RID(), seqSend(b.RID(), accepted+i, data)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the records sent after the link came back", func() bool {
		g := arrived()
		return len(g) > 0 && g[len(g)-1] == accepted+after
	})
	g := arrived()
	old := 0
	for old < len(g) && g[old] <= accepted {
		if g[old] != uint64(old+1) {
			t.Fatalf("record %d carries seq %d (accepted %d, unsent %d, arrived %d)", old+1, g[old], accepted, unsent, len(g))
		}
		old++
	}
	if uint64(old) < want {
		t.Fatalf("%d of the records written before the timeout arrived, want at least %d (accepted %d, unsent %d)", old, want, accepted, unsent)
	}
	for i, seq := range g[old:] {
		if seq != accepted+uint64(i+1) {
			t.Fatalf("after the %d old records, record %d carries seq %d, want %d (an old record after a new one, or a gap)", old, i+1, seq, accepted+uint64(i+1))
		}
	}
	if r := fz.resets.Load(); r != 0 {
		t.Errorf("the sender reset the connection %d times", r)
	}
	t.Logf("accepted %d, unsent %d, arrived %d of them", accepted, unsent, old)
}
