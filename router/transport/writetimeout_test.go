package transport

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A link whose writer's deadline passes while its peer is not reading
// (here: a peer whose handler is stuck; in the wild, this process stopped
// past the deadline) and whose peer then cuts the connection loses none of
// the one-way messages it accepted: the connection drains instead of
// closing, its reader reads the peer's end, the messages the peer's kernel
// never acknowledged are kept and go first on the next connection. Closed
// at the deadline (before), everything still in this kernel's send buffer
// counted as delivered, and the peer's cut refused it.
func TestWriteDeadlineThenPeerCutLosesNothing(t *testing.T) {
	for _, size := range []int{4096, 100} {
		t.Run(fmt.Sprintf("%dB", size), func(t *testing.T) { writeDeadlineThenPeerCut(t, size) })
	}
}

func writeDeadlineThenPeerCut(t *testing.T, size int) {
	f := newFakePeer(t, "receiver", 1) // its reader stops once len(f.recs) records wait
	cfg := testConfig("sender", 1)
	cfg.WriteTimeout = 300 * time.Millisecond
	ev := newEventLog()
	cfg.OnEvent = ev.on
	a := startNode(t, cfg)
	if err := a.Connect(f.rid, f.endpoint()); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, EventAdmitted, 5*time.Second)

	// Stream until the writer's deadline ends the session: the fake peer's
	// reader blocks once its channel is full, then both kernels' buffers
	// fill, then the writer waits on the socket past WriteTimeout.
	data := make([]byte, size)
	ctx := context.Background()
	var accepted uint64
	for end := time.Now().Add(10 * time.Second); ev.count(EventDown) == 0; {
		if time.Now().After(end) {
			t.Fatalf("the writer's deadline did not end the session (%d accepted)", accepted)
		}
		if sendSeq(ctx, a, f.rid, accepted+1, data) {
			accepted++
		}
	}
	// The peer ends the connection it stopped reading (as a node's sweep
	// does with a connection it finds silent), then reads on.
	first := f.next(router.CmdSpotSend, 5*time.Second)
	first.ic.pc.cut(fmt.Errorf("%w: test cut", ErrPeerDown))
	var (
		mu  sync.Mutex
		got = []uint64{seqOf(first.rec)}
	)
	go func() {
		for r := range f.recs {
			if r.rec.Command == router.CmdSpotSend {
				mu.Lock()
				got = append(got, seqOf(r.rec))
				mu.Unlock()
			}
		}
	}()
	count := func() uint64 { mu.Lock(); defer mu.Unlock(); return uint64(len(got)) }
	for end := time.Now().Add(10 * time.Second); count() < accepted && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	lost, reordered := seqGaps(t, got, accepted)
	st := a.Stats()
	t.Logf("accepted %d, arrived %d, resent %d", accepted, len(got), st.Resent)
	if lost != 0 || reordered != 0 {
		t.Fatalf("%d of %d accepted records lost (resent %d, unsent %d), %d duplicated or out of order",
			lost, accepted, st.Resent, st.Unsent, reordered)
	}
}

// A connection drained after its writer's deadline (its reader waiting, up
// to PeerTimeout, to learn how the silent peer ends it) does not hold up
// the node's Close: closing the node closes it at once.
func TestCloseDuringWriteDeadlineDrainIsPrompt(t *testing.T) {
	f := newFakePeer(t, "receiver", 1)
	cfg := testConfig("sender", 1)
	cfg.WriteTimeout = 300 * time.Millisecond
	cfg.PeerTimeout = 30 * time.Second // the drain's linger: far longer than Close may take
	ev := newEventLog()
	cfg.OnEvent = ev.on
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	if err := a.Connect(f.rid, f.endpoint()); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, EventAdmitted, 5*time.Second)
	data := make([]byte, 4096)
	for seq, end := uint64(1), time.Now().Add(10*time.Second); ev.count(EventDown) == 0; {
		if time.Now().After(end) {
			t.Fatal("the writer's deadline did not end the session")
		}
		if err := a.Send(context.Background(), f.rid, seqSend(f.rid, seq, data)); err == nil {
			seq++
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	// The peer's handler stays stuck until the end of the test; its
	// readers must be let go for its own close.
	t.Cleanup(func() {
		go func() {
			for range f.recs {
			}
		}()
	})
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %s with a drained connection lingering", took)
	}
}
