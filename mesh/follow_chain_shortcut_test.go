package mesh

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// A→B→A, then A→M. Node 0 still sends on the first-stay route (A, g1).
// Message 2 arrives at A while A serves at g3: passed A→B→A (held at B).
// A then moves the object to M. Message 3 (same route, sent later) must
// take the same links as message 2 (A keeps one follow record per
// departure and follows a message along the departure of the stay it was
// addressed to), so it cannot overtake it. Before, the record A→M replaced
// A→B: message 3 went A→M directly and overtook message 2.
func TestFollowChainKeepsOneSendersOrderAcrossDepartures(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 4, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	const id = "chain-shortcut"
	ref, err := c.m(0).CreateActor(ctx, id, seqType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("q:n0:1")); err != nil {
		t.Fatal(err)
	}
	a := ownerIndex(t, c, record.ObjectActor, id)
	b, m := 1+a%3, 1+(a+1)%3
	for _, mv := range [][2]int{{a, b}, {b, a}} {
		if res := outcomeOf(t, relocateAsync(ctx, c, mv[0], mv[1], record.ObjectActor, id, ref.ObjectGeneration)); res.Outcome != Moved {
			t.Fatalf("move %v: %v (%s)", mv, res.Outcome, res.Reason)
		}
	}
	held, release := make(chan struct{}), make(chan struct{})
	var ho, ro sync.Once
	free := func() { ro.Do(func() { close(release) }) }
	defer free()
	c.nodes[b].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepFollowPassOn {
			first := false
			ho.Do(func() { first = true; close(held) })
			if first {
				<-release
			}
		}
	}})
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, held, "B passing message 2 back to A")
	if res := outcomeOf(t, relocateAsync(ctx, c, a, m, record.ObjectActor, id, ref.ObjectGeneration)); res.Outcome != Moved {
		t.Fatalf("A→M: %v (%s)", res.Outcome, res.Reason)
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:3")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	free()
	time.Sleep(300 * time.Millisecond)
	st := seqStateOf(t, ctx, c, ref)
	if st.Last["n0"] != 3 || st.Gaps != 0 || st.Duplicates != 0 {
		t.Fatalf("out of order: last %d, gaps %d, duplicates %d, seen %v", st.Last["n0"], st.Gaps, st.Duplicates, st.Seen)
	}
}
