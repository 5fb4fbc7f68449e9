package transport

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A peer run's inbound connection counts as being read until its reader
// has handed every record it will ever deliver to the Handler — after the
// peer closed, while the Handler still works through what was read. A
// caller that lets something overtake what an ended run sent waits for it
// (InboundReading; mesh/ended_run_reads.go).
func TestInboundReadingLastsUntilTheEndedRunsRecordsAreHandled(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var got atomic.Int32
	var held atomic.Bool
	bcfg := testConfig("b", 1)
	bcfg.Handler = func(_ context.Context, _ PeerInfo, _ *router.Record, _ func(*router.Record) error) {
		if held.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
		got.Add(1)
	}
	b := startNode(t, bcfg)
	acfg := testConfig("a", 3)
	a := startNode(t, acfg)
	connectAndWait(t, a, b)

	// a learns its admission (the admit record) a moment before b has
	// noted it on the connection.
	waitFor(t, 10*time.Second, "b to note a's connection admitted", func() bool { return b.InboundReading(a.RID(), 3) != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for seq := uint64(1); seq <= 2; seq++ {
		if err := a.Send(ctx, b.RID(), seqSend(b.RID(), seq, []byte("x"))); err != nil {
			t.Fatalf("send %d: %v", seq, err)
		}
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first record never reached the handler")
	}
	reading := b.InboundReading(a.RID(), 3)
	if reading == nil {
		t.Fatal("InboundReading = nil while the handler holds the peer's first record")
	}
	if other := b.InboundReading(a.RID(), 2); other != nil {
		t.Error("InboundReading of another run of the peer is not nil")
	}
	if other := b.InboundReading(RID("node-zz"), 3); other != nil {
		t.Error("InboundReading of an unknown peer is not nil")
	}

	// The peer run ends; its connection is not read to its end yet.
	closed := make(chan struct{})
	go func() { _ = a.Close(); close(closed) }()
	waitFor(t, 10*time.Second, "the peer to close", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
	select {
	case <-reading:
		t.Fatal("reported read to its end while the handler still held a record of it")
	default:
	}
	close(release)
	select {
	case <-reading:
	case <-time.After(10 * time.Second):
		t.Fatal("not reported read to its end once the handler let go")
	}
	if n := got.Load(); n != 2 {
		t.Errorf("handled %d records by the end of the connection, want 2 (both were sent before the peer closed)", n)
	}
	if again := b.InboundReading(a.RID(), 3); again != nil {
		select {
		case <-again:
		default:
			t.Error("InboundReading still reports a connection being read after its end")
		}
	}
}
