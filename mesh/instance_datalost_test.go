package mesh

import (
	"context"
	"testing"
	"time"
)

// §10 DataLost with a factory that fails on the rebuild: the recovering
// node recorded DataLost and then could not build the Spot, so it removes
// the record (fenced on the version its DataLost write left; a removal the
// store refuses is retried on a fresh read, settle.go). Without the
// removal the record would stay Ready naming a live node that hosts
// nothing, and every message to the id would fail for good; with it, once
// the factory works again, the next message activates the Spot afresh.
func TestInstanceDataLostRebuildFailureRemovesTheRecord(t *testing.T) {
	for _, redis := range []bool{false, true} {
		name := map[bool]string{false: "memory", true: "redis"}[redis]
		t.Run(name, func(t *testing.T) {
			c := instanceCluster(t, redis, 3)
			ctx := ctxT(t, 60*time.Second)
			const id = "lost-rebuild"
			owner, a := c.midFirstMessage(t, ctx, id)
			if err := c.f.reloc.Delete(ctx, a.PendingCreation.RequestContentReference); err != nil {
				t.Fatal(err)
			}
			c.nodes[owner].crash()
			close(c.probe.gate(id))
			other := 3 - owner
			c.ownerLeaseEnded(t, other, a)
			c.probe.fail(id, true)
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.m(0).RequestInstance(rctx, id, []byte("whoami"))
			cancel()
			if err == nil {
				t.Fatal("the message was answered although every factory run fails")
			}
			if n := c.nodes[other].ObjectStats().InstancesDataLost; n != 1 {
				t.Fatalf("%d DataLost on node %d, want 1", n, other)
			}
			eventually(t, 10*time.Second, "no record naming a node that hosts nothing", func() bool {
				a, found := c.instanceRecord(t, id)
				if !found {
					return true
				}
				host := c.instanceHost(id)
				return host >= 0 && c.nodes[host].run.ownerID == a.OwnerID
			})
			c.probe.fail(id, false)
			got, err := c.m(0).RequestInstance(ctx, id, []byte("whoami"))
			if err != nil || string(got) != id {
				t.Fatalf("message after the factory works again: %q, %v", got, err)
			}
		})
	}
}
