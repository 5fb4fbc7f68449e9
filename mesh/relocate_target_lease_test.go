package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
)

// A source waiting for its target's owner CAS stops waiting once the
// target's owner lease generation the move is bound to has ended (here:
// the target lost its lease and reacquired it under a new generation while
// its CAS was about to run; that CAS can then never apply): it releases
// the reservation, takes the object back (NotMoved) and serves it, instead
// of holding it until the move's deadline. Before, it held it for the
// whole deadline — 2 minutes of a host command's 5 in an operator try-out
// (Redis paused 8 s), long enough for the reclaim sweep to remove the
// records of the ten objects so held, which the moves then reported Moved:
// the objects were lost.
func TestSourceStopsWaitingForATargetThatCanNoLongerCommit(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	src := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	dst := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	x := createOnNode(t, ctx, client, src, "bound", 1)[0]
	if err := client.Manager().SendActor(ctx, x, []byte("one")); err != nil {
		t.Fatal(err)
	}
	atCAS, release := make(chan struct{}), make(chan struct{})
	dst.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == x.ActorID && step == stepTargetCAS {
			select {
			case <-atCAS:
				return
			default:
				close(atCAS)
			}
			<-release
		}
	}})
	// The move's own deadline is far beyond the test's: only the target's
	// lease ending can end its wait in time.
	mctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	moved := startMoveUntil(t, mctx, src, x, dst, atCAS)
	_, before := dst.Owner()
	blocker.loseLeaseOf(t, dst)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the target to reacquire its lease", func() bool {
		_, lg := dst.Owner()
		return lg != before && dst.lease.Gate().Admit() == nil
	})
	close(release)
	var o relocateOutcome
	select {
	case o = <-moved:
	case <-ctx.Done():
		t.Fatal("the source still waits for the commit of a target whose bound lease generation ended")
	}
	if o.err != nil || o.res.Outcome != NotMoved {
		t.Fatalf("the move: %v %s, %v; want NotMoved", o.res.Outcome, o.res.Reason, o.err)
	}
	ref, err := client.Manager().FindActor(ctx, x.ActorID)
	if err != nil {
		t.Fatalf("find %s after the move failed: %v", x.ActorID, err)
	}
	if string(ref.NodeRID) != string(src.RID()) {
		t.Fatalf("%s is on %x, want the source %x", x.ActorID, ref.NodeRID, src.RID())
	}
	if got, err := client.Manager().RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:1" {
		t.Fatalf("request to %s: %q, %v; want its state, count:1", x.ActorID, got, err)
	}
}
