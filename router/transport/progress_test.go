package transport

import (
	"context"
	"sync"
	"testing"
	"time"
)

// PeerProgress stands still while the peer's reader takes nothing of what
// this node sent (its handler is held: the kernel buffers fill, the queue
// stays), and moves once it reads again — what a route switch's barrier
// tells a slow peer from a stuck one by.
func TestPeerProgressMovesAsTheReaderReads(t *testing.T) {
	gate := make(chan struct{})
	var openGate sync.Once
	defer openGate.Do(func() { close(gate) })
	p := newSeqPair(t, false, 30*time.Second, time.Second, 30*time.Second, func() { <-gate }, nil)
	a, b := p.a, p.b
	if _, ok := a.PeerProgress(RID("nobody")); ok {
		t.Fatal("progress of a peer without a link")
	}
	data := make([]byte, 1000)
	ctx := context.Background()
	// Until the link pushes back for a while: the receiver's kernel and
	// this node's queue are full.
	refused := 0
	for seq := uint64(1); refused < 200; {
		if sendSeq(ctx, a, b.RID(), seq, data) {
			seq, refused = seq+1, 0
		} else {
			refused++
		}
	}
	look := func() Progress {
		pr, ok := a.PeerProgress(b.RID())
		if !ok {
			t.Fatal("no progress for an admitted peer")
		}
		return pr
	}
	last := look()
	for end := time.Now().Add(10 * time.Second); ; {
		time.Sleep(100 * time.Millisecond)
		cur := look()
		if cur == last {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("progress never stood still with the reader held: %+v then %+v", last, cur)
		}
		last = cur
	}
	if last.RecordsOut == 0 {
		t.Fatalf("progress %+v: no record counted out", last)
	}
	openGate.Do(func() { close(gate) })
	for end := time.Now().Add(10 * time.Second); look() == last; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("progress did not move once the reader read again: %+v", last)
		}
	}
}
