package mesh

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// A request the source relayed to its target is the source's to answer
// when the target fails after relay-ready: the source keeps it (relayEnvs)
// and, taking the object back, runs it there. The target commits on its
// grace, and its owner CAS finds the move's reservation released (the
// source's release at its deadline, or a stopping target's sweep): the
// target fails (conflict) and the source takes the object back with the
// relayed request. Before, the failing target answered the relayed
// request Unavailable ("the move failed") and the source then ran it: the
// caller was told a refusal for a request that ran (EMBEDDING: "a refused
// message was not delivered").
func TestRelayedRequestOfAFailedTargetIsAnsweredByTheSource(t *testing.T) {
	f := newFixture(t)
	c, ctl := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "relayed-answer"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	atHold, goOn := make(chan struct{}), make(chan struct{})
	atCAS, release := make(chan struct{}), make(chan struct{})
	var holdOnce, casOnce, goOnce, releaseOnce sync.Once
	proceed := func() { goOnce.Do(func() { close(goOn) }) }
	letCAS := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(proceed)
	t.Cleanup(letCAS)
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepSourceReady {
			holdOnce.Do(func() { close(atHold) })
			<-goOn
		}
	}})
	dstHooks := &testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepTargetCAS {
			casOnce.Do(func() { close(atCAS) })
			<-release
		}
	}}
	ends := watchArrivals(dstHooks)
	c.nodes[dst].obj.hooks.Store(dstHooks)
	key := spot.Key{ID: id}
	queued := func() int {
		o := c.nodes[src].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		if h := o.hosted[key]; h != nil && h.obj != nil {
			return h.obj.Queued()
		}
		return -1
	}
	request := func(body string) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := c.m(0).RequestActor(ctx, ref, []byte(body))
			ch <- err
		}()
		return ch
	}

	// r0 into the captured queue: queued behind a turn that runs while
	// the move begins, and captured once that turn ends.
	inX, letX := make(chan struct{}), make(chan struct{})
	var letOnce sync.Once
	t.Cleanup(func() { letOnce.Do(func() { close(letX) }) })
	ctl.mu.Lock()
	first := ctl.objs[id]
	ctl.mu.Unlock()
	first.mu.Lock()
	first.gate = func(body string) {
		if body == "x" {
			close(inX)
			<-letX
		}
	}
	first.mu.Unlock()
	if err := c.m(0).SendActor(ctx, ref, []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, inX, "the turn of x")
	r0 := request("r0")
	waitUntil(t, "r0 queued behind x", func() bool { return queued() == 1 })
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitUntil(t, "the move to hold the object", func() bool {
		o := c.nodes[src].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		h := o.hosted[key]
		return h != nil && h.obj != nil && h.obj.Held()
	})
	letOnce.Do(func() { close(letX) })
	waitClosed(t, atHold, "the source's move held at relay-ready")

	// r1 into the source's ingress hold.
	r1 := request("r1")
	waitUntil(t, "r1 in the source's ingress hold", func() bool { return queued() == 1 })
	// The target commits on its grace (no cutover yet) and stops at its CAS.
	waitClosed(t, atCAS, "the target at its owner CAS")
	proceed() // the source relays r1 to the target
	waitUntil(t, "r1 relayed to the target", func() bool {
		o := c.nodes[dst].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, a := range o.arrivals {
			a.mu.Lock()
			n := len(a.relay)
			a.mu.Unlock()
			if a.prep.Object.ObjectID == id && n == 1 {
				return true
			}
		}
		return false
	})
	// The reservation is released before the CAS applies — as the
	// source's release at its deadline does (or a stopping target's
	// sweep): the CAS is refused and the target fails after relay-ready.
	row := rowOf(t, c, record.ObjectActor, id)
	if row.Record.Relocation == nil {
		t.Fatal("no move progress on the record")
	}
	exec, err := authority.NewExecutor(f.loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.ReleaseCapacity(ctx, authority.CapacityRequest{ReservationID: row.Record.Relocation.ReservationID}); err != nil {
		t.Fatal(err)
	}
	letCAS()
	if e := waitEnd(t, ends, id); e.state != relocation.TgtFailed || e.failure != relocation.TgtFailConflict {
		t.Fatalf("the target attempt ended %s/%s, want failed/conflict", e.state, e.failure)
	}
	if res := outcomeOf(t, moving); res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() {
		t.Fatalf("the move ended %v (%s), want notMoved (targetLost)", res.Outcome, res.Reason)
	}
	for _, r := range []struct {
		name string
		ch   <-chan error
	}{{"r0 (captured)", r0}, {"r1 (relayed)", r1}} {
		select {
		case err := <-r.ch:
			if err != nil {
				t.Fatalf("%s answered %v; the source ran %q", r.name, err, strings.Join(ctl.ran(id), ","))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s not answered", r.name)
		}
	}
	wantRan(t, ctx, c, ref, "a,x,r0,r1")
}
