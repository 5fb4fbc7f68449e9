package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// A route switch's barrier waits for a one-way message of another goroutine
// that passed beforeSend on the previous route and is not queued yet.
// Goroutine A passes beforeSend on the previous owner's route (n0:2) and is
// delayed before the transport takes it; goroutine B, its cache entry gone,
// switches. Before 2026-12-07 B's barrier went out on the previous route
// ahead of A's message and was answered, and the node's route became the
// new owner's; A's message then left on the previous route and was passed
// on, and A's next message (n0:3), finding the route already switched,
// went straight to the new owner and ran before n0:2 — one goroutine's two
// sends out of order. Now B's switch waits for A's message to be queued
// (sentRoute.oneWay), and its barrier goes out behind it.
func TestSwitchBarrierWaitsForSendsClaimedOnThePreviousRoute(t *testing.T) {
	c, ctx := seqCluster(t)
	ref, src, _ := movedAfterOne(t, ctx, c, "switch-pending")
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}
	sender := c.nodes[0]

	waiting, onStep := stepSignal(ref.ActorID, stepSwitchQueued)
	aDone, aGo := sendHeld(t, ctx, c, ref, "s:n0:2", onStep)
	defer aGo()

	// B's route switch (its cache entry aged out): barrier, then the new
	// owner directly. It waits for A's message to be queued (without the
	// fix it is done at once).
	sender.obj.cache.Drop(key)
	bDone := make(chan error, 1)
	go func() { bDone <- c.m(0).SendActor(ctx, ref, []byte("s:x:1")) }()
	select {
	case <-waiting:
	case err := <-bDone:
		bDone <- err
	case <-ctx.Done():
		t.Fatal("B's send neither waited nor returned")
	}

	// A's message leaves on the previous route; the previous owner holds
	// it while passing it on.
	rel := passOnHeld(t, ctx, c.nodes[src], ref, aDone, aGo)
	defer rel()
	done := make(chan error, 1)
	go func() { done <- c.m(0).SendActor(ctx, ref, []byte("s:n0:3")) }()
	select {
	case err := <-done:
		done <- err
		eventually(t, 10*time.Second, "n0:3 to run", func() bool {
			return seqStateOf(t, ctx, c, ref).Last["n0"] == 3
		})
	case <-time.After(5 * time.Second):
	}
	rel()
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := c.stats(0); s.RouteBarriers != 1 {
		t.Errorf("route barriers %d, want 1 (B's switch)", s.RouteBarriers)
	}
	seqSentInOrder(t, ctx, c, ref)
}

// A switch made from a turn of an Instance Spot's activation queue does not
// wait for the one-way messages to the Spot still being queued: a local one
// waits behind that very queue (deliverLocal), so the turn and the message
// would wait for each other until barrierMaxWait.
func TestSwitchInAnActivationTurnDoesNotWaitForQueuedSends(t *testing.T) {
	c, ctx := seqCluster(t)
	o := c.nodes[0].obj
	tgt := msgTarget{fam: familySpot, id: "in-turn", gen: 1, op: opIDOf(NewOperationID())}
	key := tgt.cacheKey()
	prev := follow.Ready{Key: key, ObjectGeneration: 1, AuthorityOwnerGeneration: 1, Owner: follow.Owner{ID: "gone", LeaseGeneration: 1},
		Route: follow.Route{NodeRID: []byte{0xee}, NodeGeneration: 1}}
	next := prev
	next.AuthorityOwnerGeneration, next.Route = 2, follow.Route{NodeRID: []byte{0xef}, NodeGeneration: 1}
	// A one-way message claimed on prev, not queued yet.
	o.sent.mu.Lock()
	o.sent.sweep(o.n.clock.Now(), o.n.cfg.Routing.MessageFollowDuration)
	o.sent.m[key] = &sentRoute{r: prev, at: o.n.clock.Now(), lastOp: opIDOf(NewOperationID()), sending: 1, oneWay: 1}
	o.sent.mu.Unlock()
	waited := make(chan struct{})
	var once sync.Once
	o.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == tgt.id && step == stepSwitchQueued {
			once.Do(func() { close(waited) })
		}
	}})
	done := make(chan error, 1)
	go func() { done <- o.beforeSend(context.WithValue(ctx, activationTurn{}, tgt.id), tgt, next, false) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		o.sent.sent(key, false)
	case <-waited:
		o.sent.sent(key, false) // the claimed message "queued": the switch goes on
		<-done
		t.Fatal("the switch in the Spot's activation turn waited for a one-way message queued behind that turn")
	}
	o.sent.sent(key, false)
}
