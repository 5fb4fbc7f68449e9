package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// moveOnSetup starts the three-node failure cluster and an Actor of a
// PreserveState type that ran "a", owned by server src; dst is the other.
func moveOnSetup(t *testing.T, id string) (c *cluster, ctx context.Context, ref ActorRef, src, dst int) {
	t.Helper()
	f := newFixture(t)
	c, _ = failCluster(t, f, f.loc)
	ctx = ctxT(t, 60*time.Second)
	ref = recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst = movePair(t, c, record.ObjectActor, ref.ActorID)
	return c, ctx, ref, src, dst
}

// A caller that moved an object a moment ago and moves it on from its new
// owner must not be refused because the arrival has not opened it yet: the
// store already names the new owner (its owner CAS applied) while the
// target merges the queues. The demo met it as "actor is incoming". The
// second move waits for the arrival to open, bounded by its ctx, and then
// runs.
func TestRelocateOnWhileTheArrivalOpens(t *testing.T) {
	c, ctx, ref, src, dst := moveOnSetup(t, "move-on")

	reached, release := make(chan struct{}), make(chan struct{})
	var once, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == ref.ActorID && step == stepTargetOpen {
			once.Do(func() { close(reached); <-release })
		}
	}})
	defer c.nodes[dst].obj.hooks.Store(nil)

	first := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	waitClosed(t, reached, "the arrival to reach its open")
	if owner := ownerIndex(t, c, record.ObjectActor, ref.ActorID); owner != dst {
		t.Fatalf("the store names node %d before the open, want %d (the owner CAS applied)", owner, dst)
	}

	// A move on with a short deadline ends Unavailable, naming the wait.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err := c.m(dst).RelocateActor(short, ref, ToNode(c.nodes[src].RID()))
	cancel()
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("move on with a short deadline while opening: %v; want ErrUnavailable and the deadline", err)
	}

	second := relocateAsync(ctx, c, dst, src, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	select {
	case o := <-second:
		t.Fatalf("the move on returned before the arrival opened: %+v, %v", o.res, o.err)
	case <-time.After(200 * time.Millisecond):
	}
	free()
	if res := outcomeOf(t, first); res.Outcome != Moved {
		t.Fatalf("first move: %v (%s)", res.Outcome, res.Reason)
	}
	if res := outcomeOf(t, second); res.Outcome != Moved {
		t.Fatalf("move on: %v (%s)", res.Outcome, res.Reason)
	}
	checkOwners(t, c, record.ObjectActor, ref.ActorID, src, rowOf(t, c, record.ObjectActor, ref.ActorID).Record.AuthorityOwnerGeneration, src)
	wantRan(t, ctx, c, ref, "a")
}

// A move on from the new owner waits until the move that brought the
// object there has recorded its completion (the target erasing the move's
// progress from the record right after it opened the object): begun
// before, it would read a record that the completion is about to change.
// CI met it as "move on: notMoved (recordChanged)".
func TestRelocateOnWaitsForThePreviousMovesCompletion(t *testing.T) {
	c, ctx, ref, src, dst := moveOnSetup(t, "move-on-settling")

	completing := make(chan struct{})
	var completeOnce sync.Once
	complete := func() { completeOnce.Do(func() { close(completing) }) }
	defer complete()
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == ref.ActorID && step == stepTargetDone {
			<-completing
		}
	}})
	defer c.nodes[dst].obj.hooks.Store(nil)

	if res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)); res.Outcome != Moved {
		t.Fatalf("first move: %v (%s)", res.Outcome, res.Reason)
	}
	second := relocateAsync(ctx, c, dst, src, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	select {
	case o := <-second:
		t.Fatalf("the move on returned before the previous move recorded its completion: %+v, %v", o.res, o.err)
	case <-time.After(300 * time.Millisecond):
	}
	complete()
	if res := outcomeOf(t, second); res.Outcome != Moved {
		t.Fatalf("move on: %v (%s)", res.Outcome, res.Reason)
	}
	checkOwners(t, c, record.ObjectActor, ref.ActorID, src, rowOf(t, c, record.ObjectActor, ref.ActorID).Record.AuthorityOwnerGeneration, src)
	wantRan(t, ctx, c, ref, "a")
}

// The previous move's completion may still land between a move on's first
// read and its SecureCapacity (the move on read the record just before the
// completion was written and checked the object just after): the record's
// version moved on while it still names this node's run at the same
// generations. The move on begins again on the new version instead of
// ending NotMoved.
func TestRelocateOnWhileThePreviousMoveCompletes(t *testing.T) {
	c, ctx, ref, src, dst := moveOnSetup(t, "move-on-completing")

	completing := make(chan struct{})
	var completeOnce sync.Once
	complete := func() { completeOnce.Do(func() { close(completing) }) }
	defer complete()
	changed := make(chan string, 1)
	var readOnce sync.Once
	var secures atomic.Int32
	key := spot.Key{ID: ref.ActorID}
	settled := func() bool {
		o := c.nodes[dst].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		h := o.hosted[key]
		return h != nil && h.state == hostServing && h.settling == nil
	}
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid != ref.ActorID {
			return
		}
		switch step {
		case stepTargetDone:
			<-completing
		case stepSourceSecure:
			secures.Add(1)
		case stepSourceRead:
			// The move on has read the record; let the completion land
			// now and end, before the move on checks the object.
			readOnce.Do(func() {
				before, err := c.nodes[0].obj.readAuthority(ctx, record.ObjectActor, oid)
				complete()
				for err == nil && ctx.Err() == nil {
					var now authority.AuthorityRow
					if now, err = c.nodes[0].obj.readAuthority(ctx, record.ObjectActor, oid); err == nil && now.Version != before.Version && settled() {
						break
					}
					time.Sleep(time.Millisecond)
				}
				changed <- fmt.Sprint(err)
			})
		}
	}})
	defer c.nodes[dst].obj.hooks.Store(nil)

	if res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)); res.Outcome != Moved {
		t.Fatalf("first move: %v (%s)", res.Outcome, res.Reason)
	}
	res := outcomeOf(t, relocateAsync(ctx, c, dst, src, record.ObjectActor, ref.ActorID, ref.ObjectGeneration))
	select {
	case e := <-changed:
		if e != "<nil>" {
			t.Fatalf("waiting for the completion: %s", e)
		}
	default:
		t.Fatal("the move on never read the record")
	}
	if res.Outcome != Moved {
		t.Fatalf("move on: %v (%s)", res.Outcome, res.Reason)
	}
	if n := secures.Load(); n < 2 {
		t.Fatalf("SecureCapacity ran %d times; want a refused first attempt on the old version and one on the new", n)
	}
	checkOwners(t, c, record.ObjectActor, ref.ActorID, src, rowOf(t, c, record.ObjectActor, ref.ActorID).Record.AuthorityOwnerGeneration, src)
	wantRan(t, ctx, c, ref, "a")
}

// The new owner may end the object before the source has looked for the
// commit (a Destroy right after the move): a record gone can only follow
// the target's owner CAS, so the move is Moved and the source lets the
// object go. The source used to read it as "the target never committed",
// wait for the move's whole deadline and take the object back — an
// instance of a deleted object serving again on the source (try-out: User
// Spots closed right after their creation while a host relocation ran; one
// move waited the host command's 5 min).
func TestSourceLetsGoOfAnObjectEndedRightAfterItsMove(t *testing.T) {
	c, ctx, ref, src, dst := moveOnSetup(t, "ended-after-move")
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the move's deadline, were it waited for
	defer cancel()
	ended := make(chan struct{})
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == ref.ActorID && step == stepSourceConfirm {
			<-ended
		}
	}})
	defer c.nodes[src].obj.hooks.Store(nil)
	moved := relocateAsync(mctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	eventually(t, 10*time.Second, "the target named owner", func() bool {
		row := rowOf(t, c, record.ObjectActor, ref.ActorID)
		return row.Found && string(row.Record.Allocation.Descriptor.RoutingID) == string(c.nodes[dst].RID())
	})
	eventually(t, 10*time.Second, "the object Destroyed on its new owner", func() bool {
		closed, err := c.m(dst).Destroy(ctx, ref)
		return err == nil && closed
	})
	close(ended)
	start := time.Now()
	res := outcomeOf(t, moved)
	if res.Outcome != Moved {
		t.Fatalf("move of an object its new owner ended: %v (%s)", res.Outcome, res.Reason)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the source took %v to let go (waited for the move's deadline)", d)
	}
	o := c.nodes[src].obj
	o.mu.Lock()
	_, hosted := o.hosted[spot.Key{ID: ref.ActorID}]
	o.mu.Unlock()
	if hosted {
		t.Fatal("the source hosts the deleted object again")
	}
}
