package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
)

// An object whose move is under way while its node loses its owner lease
// and reacquires it — Redis stopped in the middle of a drain, past the
// lease TTL — is passed over by the re-adoption (it re-adopts only the
// objects the node serves, not ones it is moving away). When the move then
// fails and the object serves on the source again, the source re-adopts it
// too: its record names the node's new lease generation, senders reach it
// with its state, and it can be moved again. Before, the record kept the
// dead generation: every sender was refused (its owner "is gone"), a move
// was refused as "owned by … relocate it on its owner's node" although this
// was that node, and the reclaim sweep removed it after the grace, its
// state lost while the node still held it (operator try-out, 2026-12-06).
func TestObjectHeldByAMoveAcrossALeaseLossIsReadoptedWhenItStays(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	src := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	dst := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	mine := createOnNode(t, ctx, client, src, "held", 1)
	x := mine[0]
	if err := client.Manager().SendActor(ctx, x, []byte("one")); err != nil {
		t.Fatal(err)
	}
	atSecure, release := make(chan struct{}), make(chan struct{})
	src.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == x.ActorID && step == stepSourceSecure {
			select {
			case <-atSecure:
			default:
				close(atSecure)
			}
			<-release
		}
	}})
	moved := startMoveUntil(t, ctx, src, x, dst, atSecure)
	_, before := src.Owner()
	blocker.loseLeaseOf(t, src)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the source to reacquire its lease and re-adopt what it serves", func() bool {
		_, lg := src.Owner()
		return lg != before && src.lease.Gate().Admit() == nil
	})
	// The target refuses the move (a host command runs there): x stays.
	dst.obj.hostMove.Store(true)
	close(release)
	o := <-moved
	dst.obj.hostMove.Store(false)
	if o.err != nil || o.res.Outcome != NotMoved {
		t.Fatalf("the move: %v %s, %v; want NotMoved", o.res.Outcome, o.res.Reason, o.err)
	}
	_, now := src.Owner()
	row, _, err := src.obj.readAuthorityAt(ctx, record.ObjectActor, x.ActorID)
	if err != nil || !row.Found {
		t.Fatalf("read %s: found %v, %v", x.ActorID, row.Found, err)
	}
	if got := uint64(row.Record.OwnerLeaseGeneration); got != now {
		t.Fatalf("%s stayed on the source, but its record names lease generation %d (the one before the loss: %d), not the node's %d: "+
			"nothing can reach it until the reclaim sweep removes it", x.ActorID, got, before, now)
	}
	ref, err := client.Manager().FindActor(ctx, x.ActorID)
	if err != nil {
		t.Fatalf("find %s after it stayed: %v", x.ActorID, err)
	}
	if got, err := client.Manager().RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:1" {
		t.Fatalf("request to %s: %q, %v; want its state, count:1", x.ActorID, got, err)
	}
	if res, err := src.Manager().RelocateActor(ctx, ref, ToNode(dst.RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("moving %s again: %v %s, %v", x.ActorID, res.Outcome, res.Reason, err)
	}
}

// startMoveUntil starts src's move of x to dst on ctx, again while src's
// discovery does not list dst yet (the move is then refused before it
// begins), until reached is closed — a hook the move passes; it returns
// the move's outcome to come.
func startMoveUntil(t *testing.T, ctx context.Context, src *Node, x ActorRef, dst *Node, reached <-chan struct{}) <-chan relocateOutcome {
	t.Helper()
	moved := make(chan relocateOutcome, 1)
	for {
		go func() {
			var o relocateOutcome
			o.res, o.err = src.Manager().RelocateActor(ctx, x, ToNode(dst.RID()))
			moved <- o
		}()
		select {
		case <-reached:
			return moved
		case o := <-moved:
			if !errors.Is(o.err, ErrUnavailable) {
				t.Fatalf("the move: %v %s, %v", o.res.Outcome, o.res.Reason, o.err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
