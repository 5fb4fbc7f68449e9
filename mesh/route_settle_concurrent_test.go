package mesh

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// Two goroutines of one node send to one object on the route of its
// previous owner. The route switch barrier (route_barrier.go) is skipped
// when the message last sent on that route is known to be handled past
// the previous owner (sentRoutes.settle: its command 50 came). "Last sent"
// was the last to pass beforeSend, not the last to leave: goroutine A
// (message n0:2) passed beforeSend first, goroutine B (message x:1) second
// but was queued first. B's command 50 then marked the route settled while
// A's message, queued after it, was still being passed on by the previous
// owner; A's next message (n0:3) went straight to the new owner without a
// barrier and ran before n0:2 — one goroutine's two sends out of order.
func TestConcurrentSendersSettleOnlyTheLastQueued(t *testing.T) {
	c, ctx := seqCluster(t)
	ref, src, _ := movedAfterOne(t, ctx, c, "settle-concurrent")
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}
	sender := c.nodes[0]

	// A's send is held after beforeSend, before the transport takes it.
	aHeld, aGo := make(chan struct{}), make(chan struct{})
	var sends atomic.Int32
	barrierSent := make(chan struct{}, 1)
	sender.obj.hooks.Store(&testHooks{
		beforeRemoteSend: func(id string) error {
			if id == ref.ActorID && sends.Add(1) == 1 {
				close(aHeld)
				<-aGo
			}
			return nil
		},
		relocationStep: func(id, step string) {
			if id == ref.ActorID && step == stepSenderBarrier {
				select {
				case barrierSent <- struct{}{}:
				default:
				}
			}
		},
	})
	aDone := make(chan error, 1)
	go func() { aDone <- c.m(0).SendActor(ctx, ref, []byte("s:n0:2")) }()
	select {
	case <-aHeld:
	case <-ctx.Done():
		t.Fatal("A's send never reached the transport")
	}

	// B sends on the same (stale) route, after A's beforeSend: the
	// previous owner passes it on, the new owner runs it and sends the
	// command 50 that names B's message.
	dropped := c.stats(0).FollowRoutesDropped
	if err := c.m(0).SendActor(ctx, ref, []byte("s:x:1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "command 50 for B's message", func() bool {
		return c.stats(0).FollowRoutesDropped > dropped
	})
	if _, ok := sender.obj.cache.Get(key); ok {
		t.Fatal("the sender still caches the previous owner's route")
	}

	// Now A's message leaves, after B's, and the previous owner holds it
	// while passing it on.
	held, release := holdFirstPassOn(c.nodes[src], ref.ActorID)
	var releaseOnce sync.Once
	rel := func() { releaseOnce.Do(release) }
	defer rel()
	close(aGo)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the previous owner never passed A's message on")
	}

	// A's next message: it must not run before n0:2.
	done := make(chan error, 1)
	go func() { done <- c.m(0).SendActor(ctx, ref, []byte("s:n0:3")) }()
	var sent error
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		done <- nil
		// Sent without waiting for n0:2: it has reached the new owner
		// (or is on its way) while n0:2 is held.
		eventually(t, 10*time.Second, "n0:3 to run", func() bool {
			return seqStateOf(t, ctx, c, ref).Last["n0"] == 3
		})
	case <-barrierSent:
	case <-time.After(5 * time.Second):
	}
	rel()
	if sent = <-done; sent != nil {
		t.Fatal(sent)
	}
	// n0:2 has run once n0 is at 3 with no gap, or once it came late.
	eventually(t, 10*time.Second, "every message to run", func() bool {
		st := seqStateOf(t, ctx, c, ref)
		return st.Last["x"] == 1 && st.Last["n0"] == 3 && (st.Gaps == 0 || st.Duplicates > 0)
	})
	st := seqStateOf(t, ctx, c, ref)
	if st.Last["n0"] != 3 || st.Gaps != 0 || st.Duplicates != 0 {
		t.Errorf("object saw n0 last %d, %d gaps, %d duplicates (%v); want 3, 0, 0: one goroutine's sends out of order",
			st.Last["n0"], st.Gaps, st.Duplicates, st.Seen)
	}
}
