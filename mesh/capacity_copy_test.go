package mesh

import (
	"context"
	"fmt"
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
