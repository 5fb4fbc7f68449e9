package mesh

import (
	"context"
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
	barrierSent, onStep := stepSignal(ref.ActorID, stepSenderBarrier)
	aDone, aGo := sendHeld(t, ctx, c, ref, "s:n0:2", onStep)
	defer aGo()

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
	rel := passOnHeld(t, ctx, c.nodes[src], ref, aDone, aGo)
	defer rel()

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
	seqSentInOrder(t, ctx, c, ref)
}

// sendHeld sends body from node 0 to ref on a goroutine, holding the send
// after the route check and before the transport takes it (the first send
// to ref from then on): done has its result once release is called. step,
// when not nil, is node 0's relocationStep hook.
func sendHeld(t *testing.T, ctx context.Context, c *cluster, ref ActorRef, body string, step func(id, step string)) (done <-chan error, release func()) {
	t.Helper()
	held, release := holdFirstRemoteSend(c.nodes[0], ref.ActorID, step)
	ch := make(chan error, 1)
	go func() { ch <- c.m(0).SendActor(ctx, ref, []byte(body)) }()
	select {
	case <-held:
	case <-ctx.Done():
		release()
		t.Fatal("the send never reached the transport")
	}
	return ch, release
}

// stepSignal is a relocationStep hook that signals (without blocking) on
// the returned channel each time object id reaches step.
func stepSignal(id, step string) (<-chan struct{}, func(id, step string)) {
	ch := make(chan struct{}, 1)
	return ch, func(got, s string) {
		if got == id && s == step {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// passOnHeld releases the send sendHeld holds and waits for it, and for
// prev to hold it while passing it on; the returned func releases that.
func passOnHeld(t *testing.T, ctx context.Context, prev *Node, ref ActorRef, done <-chan error, release func()) func() {
	t.Helper()
	held, rel := holdFirstPassOn(prev, ref.ActorID)
	release()
	if err := <-done; err != nil {
		rel()
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		rel()
		t.Fatal("the previous owner never passed the message on")
	}
	return rel
}

// holdFirstRemoteSend makes n hold its first send to object id, after the
// route check and before the transport takes it, until release is called;
// held closes when it does. step, when not nil, is the hooks'
// relocationStep.
func holdFirstRemoteSend(n *Node, id string, step func(id, step string)) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var sends atomic.Int32
	n.obj.hooks.Store(&testHooks{relocationStep: step, beforeRemoteSend: func(got string) error {
		if got == id && sends.Add(1) == 1 {
			close(h)
			<-r
		}
		return nil
	}})
	return h, sync.OnceFunc(func() { close(r) })
}

// seqSentInOrder waits for the seqType Actor ref to have run n0:3 and x:1,
// and n0:2 (in order, or late), and fails unless n0's messages ran in
// order.
func seqSentInOrder(t *testing.T, ctx context.Context, c *cluster, ref ActorRef) {
	t.Helper()
	eventually(t, 10*time.Second, "every message to run", func() bool {
		st := seqStateOf(t, ctx, c, ref)
		return st.Last["x"] == 1 && st.Last["n0"] == 3 && (st.Gaps == 0 || st.Duplicates > 0)
	})
	if st := seqStateOf(t, ctx, c, ref); st.Gaps != 0 || st.Duplicates != 0 {
		t.Errorf("object saw %d gaps, %d duplicates (%v); want 0, 0: one goroutine's sends out of order", st.Gaps, st.Duplicates, st.Seen)
	}
}
