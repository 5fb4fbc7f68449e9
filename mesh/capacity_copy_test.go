package mesh

import (
	"context"
	"fmt"
	"github.com/meshnode/meshnode/config"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/directory"
)

// The descriptor's capacity is an operator copy of the store counters (§4):
// after creations and a destroy it converges to what the counters say.
func TestDescriptorCapacityCopyFollowsCounters(t *testing.T) {
	c := newCluster(t, 1, nil)
	n, m := c.nodes[0], c.m(0)
	ctx := ctxT(t, 20*time.Second)
	var last ActorRef
	for i := 0; i < 3; i++ {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("cap-%d", i), testActorType)
		if err != nil {
			t.Fatal(err)
		}
		last = ref
	}
	if _, err := m.Destroy(ctx, last); err != nil {
		t.Fatal(err)
	}
	activeActors := func() int {
		snap, err := directory.List(context.Background(), c.f.loc, "objects", 100)
		if err != nil || len(snap.Entries) != 1 {
			t.Fatalf("list: %v (%d entries)", err, len(snap.Entries))
		}
		return snap.Entries[0].Descriptor.Capacity.Actors.Active
	}
	n.RefreshCapacityCopy(ctx)
	if got := activeActors(); got != 2 {
		t.Fatalf("descriptor copy shows %d active actors, want 2", got)
	}
	rev := n.pub.Revision()
	n.RefreshCapacityCopy(ctx) // unchanged counters: no new revision
	if n.pub.Revision() != rev {
		t.Fatalf("an unchanged copy was republished (revision %d -> %d)", rev, n.pub.Revision())
	}
}

// The discovery loop's refresh does not republish on every round while
// objects come and go (each publish makes every node re-list): it waits
// capacityCopyRounds rounds, unless a limited class became full.
func TestCapacityCopyThrottled(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *config.Config) { cfg.Node.Limits.Actors = 3 })
	n, m := c.nodes[0], c.m(0)
	ctx := ctxT(t, 20*time.Second)
	n.RefreshCapacityCopy(ctx) // baseline, and the throttle's clock starts
	rev := n.pub.Revision()
	if _, err := m.CreateActor(ctx, "thr-1", testActorType); err != nil {
		t.Fatal(err)
	}
	n.refreshCapacityCopy(ctx, false)
	if n.pub.Revision() != rev {
		t.Fatal("a change below any limit was republished before capacityCopyRounds rounds")
	}
	for _, id := range []string{"thr-2", "thr-3"} {
		if _, err := m.CreateActor(ctx, id, testActorType); err != nil {
			t.Fatal(err)
		}
	}
	n.refreshCapacityCopy(ctx, false)
	if n.pub.Revision() == rev {
		t.Fatal("the Actor class became full and the copy was not republished")
	}
}

// The copy's lag grows with the mesh so that the whole mesh republishes
// about capacityCopyMeshRate copies per round, whatever its size.
func TestCapacityCopyIntervalScalesWithTheMesh(t *testing.T) {
	for _, c := range []struct{ listed, rounds int }{
		{0, 12}, {3, 12}, {24, 12}, {25, 13}, {100, 50}, {1000, 500}, {5001, 2501},
	} {
		if got := capacityCopyInterval(c.listed); got != c.rounds {
			t.Errorf("capacityCopyInterval(%d) = %d, want %d", c.listed, got, c.rounds)
		}
	}
}
