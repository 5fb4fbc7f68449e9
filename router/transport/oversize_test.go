package transport

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A one-way record larger than MaxFrameBytes — the limit the peer enforces
// on input (a mesh runs one configuration) — is refused at Send with
// ErrInvalidRecord, and the link carries the records around it. Before,
// Send accepted it; the peer's guard closed the connection at its header,
// the record was kept as not delivered and sent first on every next
// connection, closed again: the link went down and up for good, every
// other record to that peer stuck behind it.
func TestOversizeRecordIsRefusedAtSend(t *testing.T) {
	const maxFrame = 1 << 20
	var mu sync.Mutex
	var got []uint64
	cfgB := testConfig("b", 1)
	cfgB.MaxFrameBytes = maxFrame
	cfgB.Handler = echoHandler(func(_ PeerInfo, r *router.Record) {
		mu.Lock()
		got = append(got, seqOf(r))
		mu.Unlock()
	})
	b := startNode(t, cfgB)
	ev := newEventLog()
	cfgA := testConfig("a", 1)
	cfgA.MaxFrameBytes = maxFrame
	cfgA.OnEvent = ev.on
	a := startNode(t, cfgA)
	connectAndWait(t, a, b)
	ctx := context.Background()

	if err := a.Send(ctx, b.RID(), seqSend(b.RID(), 1, []byte("x"))); err != nil {
		t.Fatal(err)
	}
	errBig := a.Send(ctx, b.RID(), seqSend(b.RID(), 2, make([]byte, maxFrame+maxFrame/2)))
	for seq := uint64(3); seq <= 10; seq++ {
		_ = a.Send(ctx, b.RID(), seqSend(b.RID(), seq, []byte("y")))
	}
	if !errors.Is(errBig, ErrInvalidRecord) {
		t.Fatalf("Send of a %d-byte record (MaxFrameBytes %d on both nodes) = %v, want ErrInvalidRecord", maxFrame+maxFrame/2, maxFrame, errBig)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 9 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the peer got %d of the 9 other records", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if downs, perr := ev.count(EventDown), b.Stats().ProtocolErrors; downs != 0 || perr != 0 {
		t.Fatalf("the link went down %d times (peer protocol errors %d)", downs, perr)
	}
}
