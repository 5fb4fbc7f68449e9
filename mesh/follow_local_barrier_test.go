package mesh

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
)

// A sender on the source A whose cached route is still A's own (read from
// the store after the cutover, before the target's CAS) sends through
// Message Follow to N; the object then moves N→M. When the sender's route
// becomes M, it first sends a route switch barrier along the route its
// messages took (via N), so its next message cannot overtake one N is
// still passing on to M. Before, sentRoutes recorded only the local route
// and a switch away from a local route sent no barrier.
func TestLocalSenderFollowingAMoveSendsItsBarrier(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 4, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	const id = "local-follow"
	ref, err := c.m(0).CreateActor(ctx, id, seqType)
	if err != nil {
		t.Fatal(err)
	}
	a := ownerIndex(t, c, record.ObjectActor, id)
	n, m := 1+a%3, 1+(a+1)%3
	send := func(body string) error { return c.m(a).SendActor(ctx, ref, []byte(body)) }
	if _, err := c.m(a).RequestActor(ctx, ref, []byte("q:nA:1")); err != nil {
		t.Fatal(err)
	}
	key := follow.Key{Kind: follow.KindActor, ID: id}

	// Move A→N, N held before its owner CAS; A past its cutover.
	atConfirm, letCAS := holdPastCutover(c, a, n, id)
	defer letCAS()
	first := relocateAsync(ctx, c, a, n, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atConfirm, "A's cutover")
	// Message 2: the store still names A; A caches its own route and
	// follows the object to N.
	if err := send("s:nA:2"); err != nil {
		t.Fatal(err)
	}
	if r, ok := c.nodes[a].obj.cache.Get(key); !ok || !c.nodes[a].obj.isLocal(r) {
		t.Fatalf("A's cached route is not its own: %v %+v", ok, r)
	}
	letCAS()
	if res := outcomeOf(t, first); res.Outcome != Moved {
		t.Fatalf("A→N: %v (%s)", res.Outcome, res.Reason)
	}
	c.nodes[a].obj.hooks.Store(nil)
	c.nodes[n].obj.hooks.Store(nil)
	if res := outcomeOf(t, relocateAsync(ctx, c, n, m, record.ObjectActor, id, ref.ObjectGeneration)); res.Outcome != Moved {
		t.Fatalf("N→M: %v (%s)", res.Outcome, res.Reason)
	}

	// N holds the first message it passes on.
	held, release := make(chan struct{}), make(chan struct{})
	var ho, ro sync.Once
	free := func() { ro.Do(func() { close(release) }) }
	defer free()
	c.nodes[n].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepFollowPassOn {
			first := false
			ho.Do(func() { first = true; close(held) })
			if first {
				<-release
			}
		}
	}})
	// Message 3: A's cached own route → follow route to N → N passes it on (held).
	if err := send("s:nA:3"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, held, "N passing message 3 on")
	// A's cached route ages out (as in TestRouteSwitchKeepsSenderOrder);
	// message 4 resolves M.
	c.nodes[a].obj.cache.Drop(key)
	done := make(chan error, 1)
	go func() { done <- send("s:nA:4") }()
	var sendErr error
	select {
	case sendErr = <-done:
		t.Logf("message 4 sent while message 3 is still held at N (err %v); barriers %d", sendErr, c.stats(a).RouteBarriers)
		time.Sleep(200 * time.Millisecond)
		free()
	case <-time.After(500 * time.Millisecond):
		t.Logf("message 4 waits (barrier %d)", c.stats(a).RouteBarriers)
		free()
		sendErr = <-done
	}
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	time.Sleep(200 * time.Millisecond)
	st := seqStateOf(t, ctx, c, ref)
	if st.Last["nA"] != 4 || st.Gaps != 0 || st.Duplicates != 0 {
		t.Fatalf("out of order: last %d, gaps %d, duplicates %d, seen %v", st.Last["nA"], st.Gaps, st.Duplicates, st.Seen)
	}
}
