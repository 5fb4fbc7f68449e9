package mesh

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// A move refused because the target's capacity could not be secured (the
// target filled up between placement and the Reserve: §1.3 step 2) ends:
// the object serves on, and it can be moved again and closed. It used to
// stay marked moving for good — every later move answered ErrMoving (a
// drain's retry elsewhere met it) and Destroy/Close did too.
func TestCapacityRefusalEndsTheMove(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Node.Limits.Actors = 5
	})
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "cap-refused", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, ref.ActorID)
	target := candidate{node: authority.Node{MeshName: c.nodes[dst].cfg.Node.MeshName, RoutingID: c.nodes[dst].RID(),
		LifecycleGeneration: c.nodes[dst].run.lifecycleGeneration}}

	// Fill the target's Actor counter after placement, before the source
	// secures capacity there.
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepSourceSecure {
			fillActors(t, c.f.loc, target, 5)
		}
	}})
	res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	c.nodes[src].obj.hooks.Store(nil)
	if err != nil || res.Outcome != NotMoved || res.Reason != "capacity" {
		t.Fatalf("move to a full target: %+v, %v; want NotMoved for capacity", res, err)
	}
	// The detail says why (a target whose lease is gone read "capacity"
	// alone, as if it were full).
	if !strings.Contains(res.Detail, "exhausted") {
		t.Fatalf("detail %q does not say the target is full", res.Detail)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("ping")); err != nil {
		t.Fatalf("the actor does not serve after the refused move: %v", err)
	}

	// Room again: the object moves.
	fillActors(t, c.f.loc, target, 0)
	res, err = c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	if errors.Is(err, ErrMoving) {
		t.Fatalf("the refused move never ended: %v", err)
	}
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move once the target has room: %+v, %v", res, err)
	}
}
