package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// tempLen is how many messages the arrival of key on node i holds in its
// temporary queue (-1: no arrival there).
func (c *cluster) tempLen(i int, key spot.Key) int {
	o := c.nodes[i].obj
	o.mu.Lock()
	h, ok := o.hosted[key]
	var a *arrival
	if ok && h.state == hostIncoming {
		a = h.arrival
	}
	o.mu.Unlock()
	if a == nil {
		return -1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.temp)
}

// Before relay-ready a target's temporary queue can only hold what a
// sender whose fence names the target at the generation the move would
// commit sent it — and no route this code hands out does that before the
// owner CAS: route caches take routes from the store, and command 50 is sent
// only by an owner serving the object. So when a move fails before
// relay-ready the target discards its temporary queue (docs/RELOCATION.md
// §5 "Removing a target object"), with nothing in it. One way a sender could
// still get such a fence is from an earlier attempt to the same target that
// failed after its cutover, whose source passed the sender's messages on
// into that target's temporary queue: the sender is not moved onto the
// target's route. A guard: if a change ever hands such routes out, the
// discard loses messages (a review's suspicion, 2026-12-07; a fix that gave
// the queue back to the source was written and set aside as code for a
// state nothing reaches).
func TestFailedAttemptLeavesNoRouteToItsTarget(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "no-early-route"
	ref := recorder(t, ctx, c, id, failPreserveType, "pre-1")
	src, dst := movePair(t, c, record.ObjectActor, id)
	g := uint64(rowOf(t, c, record.ObjectActor, id).Record.AuthorityOwnerGeneration)
	atConfirm, free := holdPastCutover(c, src, dst, id)
	defer free()
	defer c.nodes[src].obj.hooks.Store(nil)
	defer c.nodes[dst].obj.hooks.Store(nil)
	mctx, cancel := context.WithCancel(ctx)
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atConfirm, "the source's cutover")
	// Passed on by the source to the target's temporary queue.
	if err := c.m(0).SendActor(ctx, ref, []byte("during")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the message in the target's temporary queue", func() bool {
		return c.tempLen(dst, spot.Key{ID: id}) == 1
	})
	cancel()
	if res := outcomeOf(t, moving); res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() {
		t.Fatalf("move: %v (%s), want notMoved (targetLost)", res.Outcome, res.Reason)
	}
	free()
	for i := range c.nodes {
		r, ok := c.nodes[i].obj.cache.Get(follow.Key{Kind: follow.KindActor, ID: id})
		if ok && c.indexOf(r.Route.NodeRID) == dst && r.AuthorityOwnerGeneration == g+1 {
			t.Fatalf("node %d holds the failed attempt's route (node %d at g+1)", i, dst)
		}
	}
}

// holdPastCutover makes the move of id from node src to node dst stop with
// the source past its cutover and the target before its owner CAS: it
// closes atCutover then; letCAS (idempotent) lets the target go on.
func holdPastCutover(c *cluster, src, dst int, id string) (atCutover <-chan struct{}, letCAS func()) {
	confirmed := make(chan struct{})
	var co sync.Once
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepSourceConfirm {
			co.Do(func() { close(confirmed) })
		}
	}})
	casGo := make(chan struct{})
	var cg sync.Once
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepTargetCAS {
			<-casGo
		}
	}})
	return confirmed, func() { cg.Do(func() { close(casGo) }) }
}
