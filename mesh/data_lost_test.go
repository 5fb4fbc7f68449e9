package mesh

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/marker"
	"github.com/meshnode/meshnode/mesh/record"
)

// Store data loss (issue 12 "Detect store data loss"): when the namespace
// is emptied under running nodes (FLUSHALL), every node stops new work for
// good — it reports "store data lost", publishes nothing more and issues no
// generation — instead of starting the store's generations again from 1.
func TestStoreDataLostStopsNodes(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "before-the-flush", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	// FLUSHALL: every key of the namespace goes.
	page, err := c.f.loc.Scan(ctx, locstore.ScanRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var muts []locstore.Mutation
	for _, it := range page.Items {
		muts = append(muts, locstore.Delete(it.Key))
	}
	if len(muts) == 0 {
		t.Fatal("nothing to flush")
	}
	if _, err := c.f.loc.Write(ctx, locstore.WriteRequest{Mutations: muts}); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.nodes {
		eventually(t, 10*time.Second, "the node to stop on the data loss", func() bool {
			return n.State() == record.StateError
		})
		if err := n.lease.Gate().Admit(); !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("node %d admits new work after the loss: %v", i, err)
		}
		if err := n.LeaseLost(); !errors.Is(err, locstore.ErrDataLost) {
			t.Errorf("node %d stopped for %v, want store data lost", i, err)
		}
		// /readyz says what only a restart fixes, not just "node is error".
		if err := n.Ready(); !errors.Is(err, locstore.ErrDataLost) || !strings.Contains(err.Error(), "restart this process") {
			t.Errorf("node %d readiness after the loss: %v", i, err)
		}
	}
	if _, err := c.m(0).CreateActor(ctx, "after-the-flush", testActorType); err == nil {
		t.Fatal("a creation succeeded on a node that saw its store's data lost")
	}
	if _, err := c.m(0).FindActor(ctx, ref.ActorID); err == nil {
		t.Fatal("the lost record was found")
	}
	// Nothing was written back: no lease, no counter restarted at 1.
	if rr, err := c.f.loc.Read(context.Background(), marker.Key); err != nil || rr.Found {
		t.Errorf("marker after the loss: found %v, %v (nobody should have rewritten it)", rr.Found, err)
	}
}

// Only the marker vanished (the leases were renewed meanwhile, as after a
// flush followed by fast renewals): the marker check alone stops the nodes.
func TestStoreDataLostByMarker(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.f.loc.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(marker.Key)}}); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.nodes {
		eventually(t, 10*time.Second, "the node to stop on the lost marker", func() bool {
			return n.State() == record.StateError
		})
		if err := n.LeaseLost(); !errors.Is(err, locstore.ErrDataLost) {
			t.Errorf("node %d stopped for %v, want store data lost", i, err)
		}
	}
}
