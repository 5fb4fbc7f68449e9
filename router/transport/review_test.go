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

// TestReviewRestartedSendersSupersededMarkerReadBeforeTheCurrentOnes shows
// a third order of the markers of a restarted sender (same RID and
// lifecycle generation, a new run) that takeSequence does not join: the
// new process's first connection c2 reads its marker after its second
// connection c3 was admitted (c2 is no longer current) but before c3 read
// its own. c2's reader can be that late: a request it read before its
// first one-way message waits for the earlier process's connection to be
// read to its end (inConn.after), which is what made c2 silent long enough
// for c3 to supersede it, and c3's marker comes a round trip after its
// admit. takeSequence then gives c2 a record of its own, not installed
// (c2 is not current; linkseq.go, the fresh record at the end), and c3's
// marker, finding the earlier process's record still in the seen table,
// installs another fresh one: what c2 delivered is not in it, and the
// messages the sender gives up on c2 and sends again on c3 are delivered
// twice. Want: 21..25 (read on c2, sent again on c3) dropped. Got on main:
// none dropped.
func TestReviewRestartedSendersSupersededMarkerReadBeforeTheCurrentOnes(t *testing.T) {
	const (
		ident  = "a-restarted-review"
		gen    = 3
		p1, p2 = 11, 22 // the processes' runs
	)
	b := startNode(t, testConfig("b", 5))
	t.Cleanup(func() {
		b.rt.mu.Lock()
		delete(b.rt.byID, ident)
		b.rt.mu.Unlock()
	})
	admit := func() *inConn { return admitSeqConn(b, ident, gen) }
	deliver := func(ic *inConn, first, last uint64, next uint64, run uint64) (dropped int) {
		b.takeSequence(ic, &router.LinkSequence{Next: next, Run: run})
		for range last - first + 1 {
			if ic.duplicate(router.CmdSpotSend) {
				dropped++
			}
		}
		return dropped
	}
	c1 := admit() // p1
	if d := deliver(c1, 1, 50, 1, p1); d != 0 {
		t.Fatalf("%d of p1's messages dropped", d)
	}
	c2 := admit() // p2's first connection; its reader is held up before its marker
	c3 := admit() // p2 gave c2 up (it kept 21..30, unacknowledged); c3 supersedes c2
	// c2's marker is read now, before c3's: c2's kernel had taken 1..25.
	if d := deliver(c2, 1, 25, 1, p2); d != 0 {
		t.Fatalf("%d of p2's messages dropped on c2", d)
	}
	if d := deliver(c3, 21, 40, 21, p2); d != 5 {
		t.Fatalf("p2's 21..30 sent again on c3, 21..25 delivered on c2: %d dropped, want 5 (the rest delivered twice)", d)
	}
}

// admitSeqConn mirrors admitInbound for a hello of ident on b: the new
// connection is the RID's current one and takes the seen table's record.
func admitSeqConn(b *Node, ident string, gen uint64) *inConn {
	ic := &inConn{ident: ident}
	ic.admitted, ic.info.LifecycleGeneration = true, gen
	b.mu.Lock()
	b.rt.mu.Lock()
	b.rt.byID[ident] = ic
	b.rt.mu.Unlock()
	ic.seqIn = b.seqForLocked(ident, gen)
	b.seen[ident] = genRev{gen: gen, rev: 1, in: ic.seqIn}
	b.mu.Unlock()
	return ic
}
