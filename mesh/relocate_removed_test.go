package mesh

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// An object's authority record removed while its move waits for the
// target's commit (an operator's ctl reclaim, the reclaim sweep after the
// source's lease ended) leaves an object no node owns. The move must say
// so — NotMoved (removed) — and neither side may serve it: the source must
// not take it back (no record names it), the target must not open it (its
// CAS, conditioned on the row it first read, cannot apply). Before, the
// source read the row gone as the target's commit and reported Moved
// (operator try-out).
func TestMoveOfAnObjectRemovedWhileItAwaitsTheCommit(t *testing.T) {
	c, ctx, ref, src, dst := moveOnSetup(t, "removed-mid-move")
	atCAS, free := holdTargetCAS(t, c, ref.ActorID, dst)
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	select {
	case <-atCAS:
	case <-time.After(20 * time.Second):
		t.Fatal("the target never reached its owner CAS")
	}
	if err := removeRecord(c, ref.ActorID); err != nil {
		t.Fatal(err)
	}
	// The source ends the move on its own once it reads the row gone; the
	// target's CAS is let go only after, so that it cannot be what ends it.
	res := outcomeOf(t, moving)
	free()
	if res.Outcome == Moved || res.Reason != relocation.ReasonRemoved.String() {
		t.Fatalf("move of an object whose record was removed during it: %v (%s), want notMoved (removed)", res.Outcome, res.Reason)
	}
	servedByNobody(t, ctx, c, ref)
}

// The same removal while the source still holds the object before
// relay-ready (the target's Restore blocked): the move is cancelled and
// its reservation release succeeds, so the target can no longer commit —
// but the source must not reopen the object either, since no record names
// it any more. It ends NotMoved (removed), the held instance is closed and
// the request queued in its hold is answered with an error, not run.
// Before, the release path reopened the object without reading the record:
// it served on the source with no record naming it.
func TestMoveCancelledBeforeRelayReadyOfAnObjectRemovedMeanwhile(t *testing.T) {
	c, ctx, ref, _, res := cancelHeldMove(t, "removed-while-held", func(c *cluster, id string, _ int) error { return removeRecord(c, id) })
	if res.Outcome == Moved || res.Reason != relocation.ReasonRemoved.String() {
		t.Fatalf("cancelled move of an object whose record was removed while held: %v (%s), want notMoved (removed)", res.Outcome, res.Reason)
	}
	servedByNobody(t, ctx, c, ref)
}

// cancelHeldMove creates a failPreserveType Actor id, moves it with its
// target's Restore blocked, so that the source holds it before
// relay-ready, queues a request in the source's hold, applies change to
// the store (dst is the target's index), then cancels the move and
// returns its result once the queued request was answered — with an
// error: it must not run on an object whose move was cancelled for a
// record that no longer names the source. The target's Restore is let go
// before it returns.
func cancelHeldMove(t *testing.T, id string, change func(c *cluster, id string, dst int) error) (c *cluster, ctx context.Context, ref ActorRef, src int, res RelocationResult) {
	t.Helper()
	f := newFixture(t)
	c, ctl := failCluster(t, f, f.loc)
	ctx = ctxT(t, 60*time.Second)
	ref = recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, ref.ActorID)
	b := ctl.block(ref.ActorID, nil)
	defer close(b.release)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	waitClosed(t, b.started, "the target's Restore to start")
	queued := make(chan error, 1)
	go func() {
		_, err := c.m(0).RequestActor(ctx, ref, []byte("queued"))
		queued <- err
	}()
	eventually(t, 20*time.Second, "the request queued in the source's hold", func() bool {
		o := c.nodes[src].obj
		o.mu.Lock()
		h := o.hosted[spot.Key{ID: ref.ActorID}]
		o.mu.Unlock()
		return h != nil && h.obj.Queued() > 0
	})
	if err := change(c, ref.ActorID, dst); err != nil {
		t.Fatal(err)
	}
	cancel()
	res = outcomeOf(t, moving)
	select {
	case err := <-queued:
		if err == nil {
			t.Fatalf("the request queued in the hold ran on the source (move %v, %s)", res.Outcome, res.Reason)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request queued in the hold was never answered")
	}
	return c, ctx, ref, src, res
}

// servedByNobody checks that no node hosts the removed Actor ref, that its
// record stays gone and that a request to it finds nothing.
func servedByNobody(t *testing.T, ctx context.Context, c *cluster, ref ActorRef) {
	t.Helper()
	eventually(t, 20*time.Second, "no node hosts the removed object", func() bool {
		for i, n := range c.nodes {
			if n == nil {
				continue
			}
			n.obj.mu.Lock()
			_, hosted := n.obj.hosted[spot.Key{ID: ref.ActorID}]
			n.obj.mu.Unlock()
			if hosted {
				t.Logf("node %d still hosts it", i)
				return false
			}
		}
		return true
	})
	if row := rowOf(t, c, record.ObjectActor, ref.ActorID); row.Found {
		t.Fatalf("the removed object's record is back: %+v", row.Record)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("after")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("request to the removed object: %v, want ErrNotFound", err)
	}
}

// A host command counts an object whose record was removed during its move
// as Gone (it is on no node), not Failed (which says it stays working here,
// and which a drain's shutdown counts among what it removes), and ends once.
func TestHostRelocateCountsAnObjectRemovedDuringItsMoveGone(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "hostremoved", 1, 2)
	victim := mine[0]
	atCAS, free := holdTargetCAS(t, c, victim.ActorID, 0, 2, 3)
	go func() {
		select {
		case <-atCAS:
		case <-ctx.Done():
			return
		}
		if err := removeRecord(c, victim.ActorID); err != nil {
			t.Error(err)
		}
	}()
	var ends int
	var mu sync.Mutex
	res, err := c.nodes[1].Relocate(ctx, HostRelocateOptions{MaxConcurrent: 2, Progress: func(p HostProgress) {
		if p.End != hostmove.Open {
			mu.Lock()
			ends++
			mu.Unlock()
		}
	}})
	free()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ends != 1 || res.End != hostmove.Completed {
		t.Fatalf("end %s reported %d times, want Completed once", res.End, ends)
	}
	onlyGone(t, res, victim.ActorID, relocation.ReasonRemoved)
}

// onlyGone checks a host command's result: the object victim Gone with a
// reason beginning with why, every other object Moved, nothing left here.
func onlyGone(t *testing.T, res HostRelocationResult, victim string, why relocation.Reason) {
	t.Helper()
	for _, o := range res.Objects {
		switch {
		case o.Object.ID == victim:
			if o.Outcome != hostmove.Gone || !strings.HasPrefix(o.Reason, why.String()) {
				t.Fatalf("%s: %s (%s), want gone (%s…)", o.Object.ID, o.Outcome, o.Reason, why)
			}
		case o.Outcome != hostmove.Moved:
			t.Errorf("%s: %s (%s), want moved", o.Object.ID, o.Outcome, o.Reason)
		}
	}
	if p := res.Progress; p.Gone != 1 || p.Failed != 0 || len(res.NotMoved()) != 0 {
		t.Fatalf("progress %+v, not moved %v: want %s counted gone, nothing left here", p, res.NotMoved(), victim)
	}
}

// holdTargetCAS holds the move of id at its target's owner CAS on each of
// the nodes: atCAS closes when one reaches it, free lets it go (also at
// the test's end).
func holdTargetCAS(t *testing.T, c *cluster, id string, nodes ...int) (atCAS <-chan struct{}, free func()) {
	reached, release := make(chan struct{}), make(chan struct{})
	var once, freed sync.Once
	free = func() { freed.Do(func() { close(release) }) }
	for _, i := range nodes {
		o := c.nodes[i].obj
		o.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
			if oid == id && step == stepTargetCAS {
				once.Do(func() { close(reached) })
				<-release
			}
		}})
		t.Cleanup(func() { o.hooks.Store(nil) })
	}
	t.Cleanup(free)
	return reached, free
}

// removeRecord deletes the Actor id's authority row, as ctl reclaim or the
// reclaim sweep would (without their checks).
func removeRecord(c *cluster, id string) error {
	key, err := authority.Object{ID: id, Kind: record.ObjectActor}.Key()
	if err != nil {
		return err
	}
	_, err = c.f.loc.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}})
	return err
}
