package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	relredis "github.com/meshnode/meshnode/relocstore/redis"
	goredis "github.com/redis/go-redis/v9"
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

// §10 "If the payload is permanently missing or the checksum differs, it's
// DataLost", docs/INSTANCE-SPOTS.md restart table: "payload missing after 3
// re-reads or its checksum differs → DataLost". With the real Redis
// Relocation Store, bytes under the data key that do not match what was
// stored are not returned as Found: Read fails with a provider error whose
// cause is relocstore.ErrIntegrity. Until 2026-12-07 the recovery
// (readPayload) treated every Read error as "unknown: change nothing", so
// the Spot was never recovered and never marked DataLost: every message to
// it failed ErrUnavailable, for good. ErrIntegrity now reads as a corrupt
// payload: DataLost, and the Spot opens without its first message. (The
// "corrupt payload: DataLost" subtest of TestInstanceSpotRecoveryAfterCrash wraps the
// store to return Found with other bytes, which the Redis provider never
// does.) Found by a review (hR1).
func TestCorruptPayloadInRedisRelocationStoreIsDataLost(t *testing.T) {
	f := newFixture(t)
	c := newClusterOn(t, f, newRedisLocation(t), 3, clientRole0)
	ns := testredis.Namespace(t)
	rs, err := relredis.New(context.Background(), relredis.Options{Addrs: []string{testredis.Addr(t)}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	for _, n := range c.nodes {
		n.reloc = rs
	}
	ctx := ctxT(t, 60*time.Second)
	const id = "bent-in-redis"
	owner, a := c.midFirstMessage(t, ctx, id)
	ref := a.PendingCreation.RequestContentReference
	// The data key now holds other bytes (a store that corrupted them).
	rc := goredis.NewClient(&goredis.Options{Addr: testredis.Addr(t)})
	t.Cleanup(func() { _ = rc.Close() })
	sum := sha256.Sum256([]byte(ref))
	dataKey := "{" + ns + "}:rs1:d:" + hex.EncodeToString(sum[:])
	if err := rc.Set(ctx, dataKey, "not the activation", goredis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
	c.nodes[owner].crash()
	close(c.probe.gate(id))
	other := 3 - owner
	c.ownerLeaseEnded(t, other, a)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	got, err := c.m(0).RequestInstance(rctx, id, []byte("whoami"))
	cancel()
	if err != nil || string(got) != id {
		t.Fatalf("next message: %q, %v (want the Spot opened after DataLost; InstancesDataLost on node %d: %d)",
			got, err, other, c.nodes[other].ObjectStats().InstancesDataLost)
	}
	if n := c.nodes[other].ObjectStats().InstancesDataLost; n != 1 {
		t.Fatalf("%d DataLost, want 1", n)
	}
}
