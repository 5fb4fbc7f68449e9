package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// A Creating record whose creator died (lease gone) does not block the Id
// forever: the next GetOrCreate aborts it, returning its capacity, and
// creates the object anew.
func TestGetOrCreateRecoversAbandonedCreation(t *testing.T) {
	c := newCluster(t, 2, nil)
	a, b := c.nodes[0], c.nodes[1]
	exec, err := authority.NewExecutor(c.f.loc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	obj := authority.Object{ID: "orphan", Kind: record.ObjectActor, StableType: testActorType}
	bNode := authority.Node{MeshName: "objects", RoutingID: b.run.rid, LifecycleGeneration: b.run.lifecycleGeneration}
	bOwner := authority.Owner{ID: b.run.ownerID, LeaseGeneration: b.leaseGen.Load()}
	if _, err := exec.Reserve(ctx, authority.ReserveRequest{Object: obj,
		Target:   authority.Target{Node: bNode, Owner: bOwner},
		Creation: record.PendingCreation{ReservationID: "r-orphan", RequestContentReference: "inline"}}); err != nil {
		t.Fatal(err)
	}
	b.crash() // dies mid-creation: the Reserved row stays, its lease will expire

	start := time.Now()
	res, err := a.Manager().GetOrCreateActor(ctx, "orphan", testActorType)
	if err != nil {
		t.Fatalf("GetOrCreate over an abandoned creation: %v", err)
	}
	if res.Outcome != Created || string(res.Ref.NodeRID) != string(a.run.rid) {
		t.Fatalf("result %+v, want Created on the surviving node", res)
	}
	t.Logf("recovered after %v (creator's lease TTL %v)", time.Since(start).Round(10*time.Millisecond), objConfig("x").Lease.TTL)
	// B's reserved actor slot went back with the abort.
	rows, err := authority.ReadCounters(ctx, c.f.loc, []authority.CounterID{{Node: bNode, Class: authority.SlotActors}})
	if err != nil || rows[0].Found {
		t.Fatalf("dead node's capacity counter still present (%+v, err %v)", rows, err)
	}
}
