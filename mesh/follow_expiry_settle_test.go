package mesh

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// aheadClock is a follow.Clock the test moves ahead of the node's own.
type aheadClock struct {
	base  interface{ Now() time.Duration }
	ahead atomic.Int64
}

func (c *aheadClock) Now() time.Duration { return c.base.Now() + time.Duration(c.ahead.Load()) }

// A previous owner whose follow record expires between two messages of one
// sender passes the first on and refuses the second (not hosted here, no
// follow record). The sender takes the refusal, which came back on the
// ordered connection behind the first, as "everything before it was
// handled" (sentRoutes.settle) and sends its retry straight to the new
// owner — but handled at the previous owner is not admitted at the new one:
// the first may still be on the previous owner's connection to the new
// owner. Until 2026-12-07 (evening) the retry ran before it (docs/RELOCATION.md §9,
// "Argued by the reviews of 2026-12-07 … Senders"). Now the previous owner
// answers the refusal only once a barrier of its own behind what it passed
// on is answered by the new owner (follow_expiry.go).
//
// Staged: the previous owner's follow table reads a clock the test moves
// past MessageFollowDuration (its expiry boundary) right after it passed
// the first message on; the new owner's reader of that connection is held
// at the first message's arrival until the retry has run or 5 s passed.
func TestRefusalAtFollowExpiryDoesNotOvertakeWhatWasPassedOn(t *testing.T) {
	c, ctx := seqCluster(t)
	ref, _ := c.m(0).CreateActor(ctx, "expiry-settle", seqType)
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("q:n0:1")); err != nil {
		t.Fatal(err)
	}
	src := c.indexOf(mustCached(t, c, ref).Route.NodeRID)
	dst := 3 - src
	clock, window := expiringFollow(t, c.nodes[src]) // before the move records anything
	if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}

	// The new owner holds the first passed-on message at its arrival.
	arrived, rel := holdFirstArrival(c.nodes[dst], ref.ActorID)
	defer rel()

	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("message 2 was never passed on")
	}
	clock.ahead.Store(int64(window)) // the follow record expires now

	requestAfterHeldPassOn(t, ctx, c, ref, 0, rel, "the retry overtook the message passed on before it")
}

// holdFirstArrival makes n hold the first message passed on to it for
// the Actor id at its arrival until release is called; held closes when
// it does.
func holdFirstArrival(n *Node, id string) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	n.obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got == id && step == stepFollowArrive && first.CompareAndSwap(false, true) {
			close(h)
			<-r
		}
	}})
	return h, sync.OnceFunc(func() { close(r) })
}

// requestAfterHeldPassOn sends request 3 of node from (whose message 2 is
// held at its new owner's arrival), releases message 2 once the request
// was answered or 5 s passed, and checks that the object saw from's
// messages in order; why says what a gap means.
func requestAfterHeldPassOn(t *testing.T, ctx context.Context, c *cluster, ref ActorRef, from int, rel func(), why string) {
	t.Helper()
	sender := fmt.Sprintf("n%d", from)
	done := make(chan error, 1)
	go func() {
		_, err := c.m(from).RequestActor(ctx, ref, []byte("q:"+sender+":3"))
		done <- err
	}()
	answeredWithin(done, 5*time.Second)
	rel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "message 2 to run", func() bool {
		st := seqStateOf(t, ctx, c, ref)
		return st.Last[sender] == 3 && (st.Gaps == 0 || st.Duplicates > 0)
	})
	if st := seqStateOf(t, ctx, c, ref); st.Gaps != 0 || st.Duplicates != 0 {
		t.Errorf("object saw %d gaps, %d duplicates (%v); want 0, 0: %s", st.Gaps, st.Duplicates, st.Seen, why)
	}
}

// mustCached is node 0's cached route to ref.
func mustCached(t *testing.T, c *cluster, ref ActorRef) follow.Ready {
	t.Helper()
	r, ok := c.nodes[0].obj.cache.Get(follow.Key{Kind: follow.KindActor, ID: ref.ActorID})
	if !ok {
		t.Fatal("node 0 caches no route")
	}
	return r
}

// answeredWithin waits at most d for an answer on done and leaves it there
// (bounded only to choose when something held is let go).
func answeredWithin(done chan error, d time.Duration) {
	select {
	case err := <-done:
		done <- err
	case <-time.After(d):
	}
}

// expiringFollow gives n a follow table on a clock the test moves ahead of
// n's own (past window: n's follow records expire at once); set it before
// a move records anything in n's table.
func expiringFollow(t *testing.T, n *Node) (clock *aheadClock, window time.Duration) {
	t.Helper()
	clock = &aheadClock{base: n.clock}
	window = n.cfg.Routing.MessageFollowDuration
	tab, err := follow.NewTable(clock, window)
	if err != nil {
		t.Fatal(err)
	}
	n.obj.follow = tab
	return clock, window
}
