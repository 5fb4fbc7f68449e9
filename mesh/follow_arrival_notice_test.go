package mesh

import (
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
)

// A message the previous owner passes on while the new owner's arrival is
// between its owner CAS and its open goes into the arrival's temporary
// queue (§9.2), merged in order at the open. Its sender's route is stale
// all the same, and the command 50 that says so was only sent for a
// message posted to a mailbox: the sender kept following through the
// previous owner until its cache entry aged out, and a route switch it
// made meanwhile waited for a settle that never came (CI met it as
// TestConcurrentSendersSettleOnlyTheLastQueued waiting for its command 50).
func TestMessageFollowedIntoTheArrivalQueueDropsTheSendersRoute(t *testing.T) {
	c, ctx := seqCluster(t)
	ref, err := c.m(0).CreateActor(ctx, "arrival-notice", seqType)
	if err != nil {
		t.Fatal(err)
	}
	// Node 0 caches the owner's route and uses it.
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("q:n0:1")); err != nil {
		t.Fatal(err)
	}
	src := ownerIndex(t, c, record.ObjectActor, ref.ActorID)
	dst := 3 - src

	// The arrival is held after its owner CAS, before its open.
	reached, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepTargetOpen {
			once.Do(func() { close(reached); <-release })
		}
	}})
	moved := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	waitClosed(t, reached, "the arrival to reach its open")
	eventually(t, 10*time.Second, "the previous owner to record the move for Message Follow", func() bool {
		return c.stats(src).FollowMoves > 0
	})

	// Sent on the stale route: passed on into the temporary queue.
	dropped := c.stats(0).FollowRoutesDropped
	forwarded := c.stats(src).FollowForwarded
	if err := c.m(0).SendActor(ctx, ref, []byte("s:x:1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the message to be passed on", func() bool {
		return c.stats(src).FollowForwarded > forwarded
	})
	free()
	if res := outcomeOf(t, moved); res.Outcome != Moved {
		t.Fatalf("move: %v (%s)", res.Outcome, res.Reason)
	}
	eventually(t, 10*time.Second, "the command 50 for the message in the temporary queue", func() bool {
		return c.stats(0).FollowRoutesDropped > dropped
	})
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}
	if r, ok := c.nodes[0].obj.cache.Get(key); ok && string(r.Route.NodeRID) == string(c.nodes[src].run.rid) {
		t.Fatal("node 0 still caches the previous owner's route")
	}
	if st := seqStateOf(t, ctx, c, ref); st.Last["x"] != 1 || st.Gaps != 0 || st.Duplicates != 0 {
		t.Fatalf("state after the move: %+v; want x:1 run once", st)
	}
}
