package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// The answer to a request that moved here reaches a requester this node
// has not discovered yet — one started less than a discovery round ago —
// on the link the requester holds to this node. It was sent only on this
// node's own link to the requester, failed with "unknown peer", and the
// requester's call ran to its timeout (an operator soak: four 10 s timeouts
// for a client started two seconds before a host relocation).
func TestMovedRequestAnswerReachesAnUndiscoveredRequester(t *testing.T) {
	f := newFixture(t)
	start := func(mesh string, every time.Duration) *Node {
		n, err := Start(context.Background(), Options{Config: fastConfig(mesh), Factories: f.reg, Location: f.loc,
			Relocation: f.reloc, DiscoveryInterval: every})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		return n
	}
	// The answering node discovers once, when its loop begins (right after
	// Start returns), and the requester starts only once that round is
	// over — on a loaded machine the round could otherwise run after the
	// requester published and find it; the requester's first round finds
	// the answering node and links to it.
	answering := start("movedreply", time.Hour)
	ctx := ctxT(t, 10*time.Second)
	for answering.listSeq.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the answering node's first discovery round did not end")
		}
		time.Sleep(time.Millisecond)
	}
	requester := start("movedreply", time.Hour)
	if err := requester.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if len(answering.tr.Peers()) != 0 {
		t.Fatal("the answering node has a link to the requester: the test would not show the case")
	}
	slot := requester.tr.ExpectReply() // a portable call: answered by whichever node ran it
	defer slot.Cancel()
	route := replyRoute{fam: familyActor, gen: requester.run.lifecycleGeneration, corr: slot.Correlation(), rid: requester.RID()}
	answering.obj.sendPortableReply(route, replyRecord(familyActor, slot.Correlation(), []byte("ran here"), nil))
	rec, err := slot.Wait(ctx)
	if err != nil {
		t.Fatalf("the requester never got the answer: %v", err)
	}
	if b, ok := rec.Body.(*router.Reply); !ok || b.Result != router.ResultOK || rec.Payload == nil || string(rec.Payload.Data) != "ran here" {
		t.Fatalf("answer %+v", rec)
	}
}
