//go:build linux

package transport

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"

	"golang.org/x/sys/unix"
)

// deafen makes c's kernel drop every segment its peer sends from now on
// (a socket filter that accepts nothing), until the returned function
// undoes it: what the peer acknowledges meanwhile is, for this side, not
// processed yet — what a loaded machine does for a while to the
// acknowledgements of a receiver that just resumed reading.
func deafen(t *testing.T, c net.Conn) (undo func()) {
	t.Helper()
	dropAll := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
	prog := unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]}
	if !onFD(c, func(fd int) error { return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog) }) {
		t.Fatal("cannot attach the socket filter")
	}
	return func() {
		if !onFD(c, func(fd int) error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0) }) {
			t.Error("cannot detach the socket filter")
		}
	}
}

// A connection given up after a linger through which the peer's
// acknowledgements did not move, but with segments in flight into the
// window the peer last advertised open: the peer may have taken those
// segments already — a receiver that resumed at the end of the linger
// queued them, and this kernel had not processed its acknowledgements
// yet. The scene: this kernel stops processing what the peer sends
// (deafen), one-way messages leave and the peer's kernel takes every one
// of them, and the connection is given up.
//
// To a peer that does not number messages the connection must not be
// reset and its unacknowledged messages sent again: the peer reads each of
// them before the reset and then again (a run of
// TestStuckReceiverLongerThanTwoPeerTimeouts under load delivered 344
// records twice so); they count as delivered and the connection is held
// until the peer acknowledges them (session.hold). To a peer that drops
// what it delivered already (router.LinkSequence) it is reset and every
// message it did not acknowledge is kept to be sent again: the peer drops
// the copies (TestMessagesSentAgainAreDeliveredOnce), and nothing is left
// to a hold whose bound a partition outlasts (counted lost).
func TestGiveUpOfWhatAnOpenWindowMayHaveTaken(t *testing.T) {
	for _, tc := range []struct {
		name      string
		numbered  bool
		wantReset string
	}{
		{"a peer without numbers: held", false, ""},
		{"a peer that drops copies: reset and sent again", true, "the peer drops copies"},
	} {
		t.Run(tc.name, func(t *testing.T) { testGiveUpOfAnOpenWindow(t, tc.numbered, tc.wantReset) })
	}
}

func testGiveUpOfAnOpenWindow(t *testing.T, numbered bool, wantReset string) {
	d, r := zmtpPair(t)
	pc, send := keptSender(t, d)
	if numbered {
		pc.seq = &outSeq{top: new(atomic.Uint64), run: 1}
	}
	start := d.g.written()
	send(0, 100)
	waitFor(t, 5*time.Second, "the peer's kernel to acknowledge", func() bool {
		n, _ := d.ack.acked()
		return n == d.g.written()
	})
	undo := deafen(t, d.raw)
	send(100, 1000)
	waitFor(t, 5*time.Second, "the peer's kernel to take every message", func() bool {
		n, ok := unreadBytes(r.raw)
		return ok && int64(n) == d.g.written()-start
	})
	pc.drainClose(context.Background(), errors.New("given up"), time.Minute)
	pc.wait()
	if unsent := pc.takeUnsent(); len(unsent) != 0 {
		t.Fatalf("%d records not written, want all written", len(unsent))
	}
	// The scene is the one under test: nothing acknowledged since the
	// drain began, segments in flight, the peer's window open.
	var info *unix.TCPInfo
	onFD(d.raw, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	if acked, _ := d.ack.acked(); info == nil || acked != pc.drainAcked.Load() || info.Unacked == 0 || info.Snd_wnd == 0 {
		t.Fatalf("not the scene under test: acknowledged %d (at the drain %d), TCP_INFO %+v", acked, pc.drainAcked.Load(), info)
	}

	why, late := pc.abortIfUnaccepted()
	var ends []int64
	if why == "" {
		// Not reset: the session holds the connection until the peer's
		// kernel acknowledged what it counts delivered (session.hold).
		ends = pc.givenUpEnds()
	}
	undo()
	held := make(chan holdResult, 1)
	go func() {
		held <- holdUntilAcked(context.Background(), d.raw, d.ack.acked, ends, 10*time.Second, nil, nil)
	}()
	delivered := map[int]int{}
	_ = r.raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	var err error
	for {
		var frames [][]byte
		if frames, err = r.recv(); err != nil {
			break
		}
		if rec, derr := router.Decode(frames); derr == nil && rec.Command == router.CmdLinkSequence {
			continue // the numbers, not a message
		}
		delivered[itemNo(t, outItem{frames: frames})]++
	}
	t.Logf("give-up: reset %q, %d kept to be sent again, %d held; the peer read %d messages, then %v", why, len(late), len(ends), len(delivered), err)
	if why != wantReset {
		t.Fatalf("give-up reset %q, want %q", why, wantReset)
	}
	for i := range 1000 {
		if delivered[i] != 1 {
			t.Fatalf("message %d read %d times, want once", i, delivered[i])
		}
	}
	if wantReset != "" {
		// Every message the peer did not acknowledge goes again: the 900
		// in flight, which it read (its numbers drop the copies).
		if len(late) != 900 || len(ends) != 0 {
			t.Fatalf("%d kept to be sent again and %d held, want the 900 in flight kept", len(late), len(ends))
		}
		for i, it := range late {
			if no := itemNo(t, it); no != 100+i || it.seq != uint64(101+i) {
				t.Fatalf("kept message %d is message %d numbered %d, want %d numbered %d", i, no, it.seq, 100+i, 101+i)
			}
		}
		pc.release()
		return
	}
	for _, it := range late {
		if no := itemNo(t, it); delivered[no] > 0 {
			t.Fatalf("message %d reached the peer and was kept to be sent again (%d of 1,000 kept; reset: %s)", no, len(late), why)
		}
	}
	if len(ends) != 900 {
		t.Fatalf("%d messages held, want the 900 in flight", len(ends))
	}
	if h := <-held; h.pending != 0 {
		t.Fatalf("the hold ended with %d pending: %s", h.pending, h.why)
	}
	pc.release()
}
