package transport

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A peer run that gave its connection up and linked again gets everything
// its old connection still carried, before anything of the new one: the
// old socket, closed gracefully, still holds records the receiver has not
// acknowledged (its reader was stuck), and the receiver reads the
// superseded connection to its end instead of cutting it. Cut (before),
// the receiver's kernel refused what the closed socket still sent, and
// the sender, which counts what a graceful close leaves in flight as
// delivered, lost it without a word.
//
// That is what a link does when it gives a silent connection up while its
// slow receiver still takes data with segments in flight (it logs "may or
// may not get"), and the receiver's reader then stalls past the live
// window: a directed end-to-end test of that lost 13,099 of 35,957
// accepted records over CURVE. But whether a give-up finds segments in
// flight depends on the kernels and the machine's load (that test got
// there in 11 of 17 runs at first and in none of 11 later ones, the
// machine quieter, streaming 60 s each time), so here the sender is a bare
// DEALER of the sender node's identity that fills its socket and closes
// it: the old socket reliably holds records when the new hello comes.
func TestSupersededConnectionIsReadToItsEnd(t *testing.T) {
	forEachLinkSecurity(t, testSupersededReadToItsEnd)
}

func testSupersededReadToItsEnd(t *testing.T, secure bool) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	defer open()
	var (
		mu  sync.Mutex
		got []uint64
	)
	bcfg, acfg := testConfig("receiver", 1), testConfig("sender", 1)
	if secure {
		ka, kb := mustKeyPair(t), mustKeyPair(t)
		bcfg = curveTestConfig("receiver", kb, ka.Public)
		acfg = curveTestConfig("sender", ka, kb.Public)
	}
	// Live window 200 ms: the new hello is admitted once the old
	// connection delivered nothing for that long (its handler is stuck).
	bcfg.PeerTimeout, bcfg.ProbeInterval = 5*time.Second, 100*time.Millisecond
	bcfg.Handler = echoHandler(func(_ PeerInfo, rec *router.Record) {
		<-gate
		mu.Lock()
		got = append(got, seqOf(rec))
		mu.Unlock()
	})
	b := startNode(t, bcfg)
	a := startNode(t, acfg) // never linked: the bare connections use its identity, keys and hello
	hello, err := encodeInfra(&router.Hello{Admission: a.currentAdmission()})
	if err != nil {
		t.Fatal(err)
	}
	dial := func() *zconn {
		zc, err := dialDealer(context.Background(), b.Endpoint(), b.RID(), a.cfg.linkParams())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = zc.close() })
		return zc
	}
	old := dial()
	if rec := sayHello(t, old, hello); rec.Command != router.CmdAdmit {
		t.Fatalf("first hello answered with %s", rec.Command)
	}

	// Write until the socket takes nothing more: the receiver's handler
	// is stuck on the first record, so both kernels' buffers fill.
	data := make([]byte, 100)
	var ends []int64 // where each record ends in the stream
	for len(ends) < 1_000_000 {
		_ = old.raw.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
		frames, err := router.Encode(seqSend(b.RID(), uint64(len(ends)+1), data))
		if err != nil {
			t.Fatal(err)
		}
		if err := old.write(frames); err != nil {
			break
		}
		ends = append(ends, old.g.written())
		if len(ends)%64 == 0 {
			if _, err := old.g.flush(); err != nil {
				break
			}
		}
	}
	whole := 0 // records the kernel took whole
	for whole < len(ends) && ends[whole] <= old.g.left() {
		whole++
	}
	acked, ok := old.ack.acked()
	if !ok {
		t.Skip("TCP_INFO cannot be read here")
	}
	unacked := 0
	for _, end := range ends[:whole] {
		if end > acked {
			unacked++
		}
	}
	if unacked == 0 {
		t.Fatalf("setup: the receiver acknowledged all %d records the socket took; nothing is left in it", whole)
	}
	// The sender gives the connection up: a graceful close, with what the
	// receiver has not acknowledged still in the socket.
	_ = old.close()

	// It links again; the receiver admits it once the old connection was
	// silent for the live window.
	var cur *zconn
	for end := time.Now().Add(10 * time.Second); cur == nil; {
		z := dial()
		rec := sayHello(t, z, hello)
		switch {
		case rec.Command == router.CmdAdmit:
			cur = z
		case time.Now().After(end):
			t.Fatalf("the reconnecting sender was never admitted (last answer %s)", rec.Command)
		default:
			_ = z.close()
			time.Sleep(20 * time.Millisecond)
		}
	}
	next := uint64(whole + 1)
	frames, err := router.Encode(seqSend(b.RID(), next, data))
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.write(frames); err != nil {
		t.Fatal(err)
	}
	if _, err := flushWithin(cur, 5*time.Second); err != nil {
		t.Fatal(err)
	}

	open()
	arrived := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), got...)
	}
	for end := time.Now().Add(20 * time.Second); uint64(len(arrived())) < next && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	g := arrived()
	lost, reordered := seqGaps(t, g, next)
	if lost != 0 || reordered != 0 || uint64(len(g)) != next {
		t.Fatalf("of the %d records the old connection carried (%d of them unacknowledged when it was given up) and the new one's, %d never arrived, %d arrived out of order or twice, %d arrived",
			whole, unacked, lost, reordered, len(g))
	}
	t.Logf("the old connection carried %d records, %d of them unacknowledged when it was closed", whole, unacked)
}

// A node closing does not wait for a superseded connection that is being
// read to its end: its peer, silent, would hold it for the idle bound
// (PeerTimeout, here a minute).
func TestCloseEndsAReadOutAtOnce(t *testing.T) {
	bcfg := testConfig("receiver", 1)
	bcfg.PeerTimeout, bcfg.ProbeInterval = time.Minute, 100*time.Millisecond
	b, err := New(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	hello, err := encodeInfra(&router.Hello{Admission: startNode(t, testConfig("sender", 1)).currentAdmission()})
	if err != nil {
		t.Fatal(err)
	}
	old := dialAs(t, b, RID("node-sender"))
	if rec := sayHello(t, old, hello); rec.Command != router.CmdAdmit {
		t.Fatalf("first hello answered with %s", rec.Command)
	}
	// The old connection stays open and silent; a new one of the same run
	// supersedes it once the live window (200 ms) has passed.
	for end := time.Now().Add(10 * time.Second); ; {
		z := dialAs(t, b, RID("node-sender"))
		rec := sayHello(t, z, hello)
		if rec.Command == router.CmdAdmit {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the new connection was never admitted (last answer %s)", rec.Command)
		}
		_ = z.close()
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "the old connection to be superseded", func() bool {
		b.rt.mu.Lock()
		defer b.rt.mu.Unlock()
		for ic := range b.rt.conns {
			if ic.pc.readingOut.Load() {
				return true
			}
		}
		return false
	})
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("Close took %s with a superseded connection being read to its end", took)
	}
}
