package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

// Found in a try-out (three nodes in one process, 2026-12-08): a route
// switch's barrier waited 24 s (two barrier slices) and was given up with
// "the previous owner did not answer the barrier in time", though that
// previous owner was up and answering. The object had gone P → R → P (R's
// drain brought it back); the sender's last route named P's first stay. Its
// barrier reached P right as R's drain closed R: P passed it on along its
// follow record to R on a link whose session was still up at P — queued,
// not read — and R's transport closed. A request passed on is answered by
// the node that admits it, so nobody answered: the barrier was lost, and
// its sender, which watches only its own link to P (the barrier itself
// moving it for the first slice), gave up after the second.
//
// Staged here deterministically: R reads the barrier but is held in its
// pass-on (stepFollowPassOn) until its transport is closed, so it can
// neither pass the barrier on nor answer it — what R does with a record it
// never read. A barrier P passed on into a session that ends before the
// record is known handled there must be handled again at P (the link is
// down now: the chain is cut at an ended run, and P, hosting the object
// again, admits it: readmit), not left unanswered.
func TestBarrierPassedOnIntoAClosingRunIsAnswered(t *testing.T) {
	c, ctx := seqCluster(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	const id = "barrier-into-closing"
	ref, err := c.m(0).CreateActor(ctx, id, seqType)
	if err != nil {
		t.Fatal(err)
	}
	p := ownerIndex(t, c, record.ObjectActor, id)
	r := 3 - p
	prev, rn := c.nodes[p], c.nodes[r]
	o := fobj{key: follow.Key{Kind: follow.KindActor, ID: id}, gen: ref.ObjectGeneration}
	c.moved(t, p, o, 1, 2, r) // P → R
	c.moved(t, r, o, 2, 3, p) // R → P (R's drain)
	c.arrived(t, p, o, 3)     // hosted on P again

	// R is held in its pass-on of the barrier until its transport closed.
	read := make(chan struct{})
	var once sync.Once
	rn.obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid != id || step != stepFollowPassOn {
			return
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(read)
		for ctx.Err() == nil {
			if _, ok := rn.tr.Peer(transport.RID(prev.RID())); !ok {
				return // R's transport closed
			}
			time.Sleep(5 * time.Millisecond)
		}
	}})

	owner, lg := prev.Owner()
	route := func(ownerGen uint64) follow.Ready {
		return follow.Ready{Key: o.key, ObjectGeneration: o.gen, AuthorityOwnerGeneration: ownerGen,
			Owner: follow.Owner{ID: owner, LeaseGeneration: lg},
			Route: follow.Route{NodeRID: prev.run.rid, NodeGeneration: prev.run.lifecycleGeneration}}
	}
	// Node 0 switches from P's first stay (its last route) to P's current
	// stay: its barrier goes to the first stay.
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.nodes[0].obj.barrier(ctx, msgTarget{fam: familyActor, id: id, gen: o.gen}, route(1), route(3))
	}()
	waitClosedCtx(t, ctx, read, "R to read the barrier P passed on")
	if err := rn.Close(ctx); err != nil {
		t.Fatalf("close R: %v", err)
	}
	waitClosedCtx(t, ctx, done, "the barrier to end")
	if n := c.nodes[0].obj.stats.routeBarriersTimedOut.Load(); n != 0 {
		t.Fatalf("the barrier was given up (%d timed out): P passed it on into R's closing session and nobody answered it", n)
	}
}
