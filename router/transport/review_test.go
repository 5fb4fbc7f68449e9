package transport

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// TestReviewAnUndecodableNumberedMessageShiftsTheCount shows (review of
// "Delivered once") that the receiver's count of a connection's numbered
// messages goes out of step with the sender's when one of them cannot be
// decoded: onInboundFrames drops a record that fails router.Decode as a
// protocol error before inConn.duplicate counts it, but the sender
// numbered it (peerConn.number numbers every kept 21/24 it writes). Each
// later message of the connection is then recorded one number too low, so
// the run's record (inSeq.high) stays below what was delivered, and a
// message the sender gives up on and sends again on its next connection
// — the case the numbers exist for — is delivered a second time.
//
// Here a bare DEALER plays the sender: marker next=1, #1, a 21 whose body
// has a trailing byte (its head still says command 21), #3; then, on a new
// connection, marker next=3 and #3 again (its give-up misjudged), #4.
// Want: #3 delivered once, one copy dropped. Got on main: #3 twice,
// Stats.Duplicates 0.
func TestReviewAnUndecodableNumberedMessageShiftsTheCount(t *testing.T) {
	sink, a, b := sinkPair(t) // a is never linked: the bare connections use its identity and hello
	hello, err := encodeInfra(&router.Hello{Admission: a.currentAdmission()})
	if err != nil {
		t.Fatal(err)
	}
	const run = 7
	dial := func() *zconn {
		zc, err := dialDealer(context.Background(), b.Endpoint(), b.RID(), a.cfg.linkParams())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = zc.close() })
		if rec := sayHello(t, zc, hello); rec.Command != router.CmdAdmit {
			t.Fatalf("hello answered with %s", rec.Command)
		}
		return zc
	}
	write := func(zc *zconn, frames [][]byte) {
		t.Helper()
		if err := zc.write(frames); err != nil {
			t.Fatal(err)
		}
	}
	marker := func(zc *zconn, next uint64) {
		t.Helper()
		frames, err := encodeInfra(&router.LinkSequence{Next: next, Run: run})
		if err != nil {
			t.Fatal(err)
		}
		write(zc, frames)
	}
	message := func(zc *zconn, seq uint64) {
		t.Helper()
		frames, err := router.Encode(seqSend(b.RID(), seq, []byte("x")))
		if err != nil {
			t.Fatal(err)
		}
		write(zc, frames)
	}
	flush := func(zc *zconn) {
		t.Helper()
		if _, err := flushWithin(zc, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	c1 := dial()
	marker(c1, 1)
	message(c1, 1)
	bad, err := router.Encode(seqSend(b.RID(), 2, []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	bad[0] = append(slices.Clone(bad[0]), 0) // trailing byte: Decode refuses it, its head says 21
	write(c1, bad)
	message(c1, 3)
	flush(c1)
	sink.waitDistinct(t, 2, 10*time.Second) // #1 and #3
	if pe := b.Stats().ProtocolErrors; pe != 1 {
		t.Fatalf("setup: %d protocol errors, want 1 (the undecodable #2)", pe)
	}
	_ = c1.close()
	waitFor(t, 10*time.Second, "the first connection to end", func() bool { return b.rt.current(string(a.RID())) == nil })

	c2 := dial()
	marker(c2, 3)
	message(c2, 3) // sent again: #3 was delivered on c1
	message(c2, 4)
	flush(c2)
	sink.waitDistinct(t, 3, 10*time.Second) // #1, #3, #4: a copy of #3 came before #4
	sink.mu.Lock()
	got := slices.Clone(sink.got)
	sink.mu.Unlock()
	threes := 0
	for _, v := range got {
		if v == 3 {
			threes++
		}
	}
	if d := b.Stats().Duplicates; threes != 1 || d != 1 {
		t.Fatalf("delivered %v: #3 %d times, %d copies dropped; want #3 once and 1 copy dropped", got, threes, d)
	}
}
