package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	relredis "github.com/meshnode/meshnode/relocstore/redis"
	goredis "github.com/redis/go-redis/v9"
)

// Review (hR1), not fixed: a cold activation that its first target refuses
// after it stored the activation record (here: the Reserve finds the node's
// Instance Spot type slot taken meanwhile, ErrCapacityExhausted → "not
// taken", errRouteStale) is retried by the sender on another node with the
// SAME operation id (runInstance keeps c.op). The reference is fixed by
// (SpotId, source run, OperationId) only, but the stored bytes name the
// target run — so the second target's Put is "other bytes under the
// reference" while the first target's Delete left a tombstone: Conflict,
// and the second target answers ErrInvalidOperation ("operation id
// reused"). The message is never activated anywhere although a node with
// room offers the type (§7.1: the sender excludes the node that did not
// take it and tries another; docs/INSTANCE-SPOTS.md step 1: "A refusal here
// changed nothing: the sender excludes that node and tries another").
func TestReviewActivationRetriedElsewhereAfterRefusalAfterStore(t *testing.T) {
	f := newFixture(t)
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Node.Limits.SpotTypes = map[string]int{testInstanceType: 1}
	})
	ctx := ctxT(t, 60*time.Second)
	const id = "refused-after-store"
	reached := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	for i, node := range []int{1, 2} {
		var once sync.Once
		r := reached[i]
		c.nodes[node].obj.hooks.Store(&testHooks{activationStep: func(got, step string) {
			if got == id && step == "stored" {
				first := false
				once.Do(func() { first = true; close(r) })
				if first {
					<-release
				}
			}
		}})
	}
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		b, err := c.m(0).RequestInstance(ctx, id, []byte("whoami"))
		done <- result{b, err}
	}()
	host := waitEither(t, reached[0], reached[1])
	n := c.nodes[host]
	c.nodes[3-host].obj.hooks.Store(nil)

	// The host's one slot of the type is taken meanwhile (another
	// activation's Reserve, made here directly): the activation's Reserve
	// is refused with ErrCapacityExhausted, after its record was stored.
	ownerID, leaseGen := n.Owner()
	content := []byte("filler")
	sum := sha256.Sum256(content)
	if _, err := n.obj.exec.Reserve(ctx, authority.ReserveRequest{
		Object: authority.Object{ID: "filler", Kind: record.ObjectInstanceSpot, StableType: testInstanceType},
		Target: authority.Target{Node: authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration},
			Owner: authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}, Limits: n.obj.instanceLimits(testInstanceType)},
		Creation: record.PendingCreation{ReservationID: "filler-rsv", RequestContentReference: "filler", RequestSHA256: sum, RequestEncodedSize: len(content)},
	}); err != nil {
		t.Fatal(err)
	}
	letGo()
	res := <-done
	if res.err != nil {
		t.Fatalf("request to %s (its first target %d refused it after storing its record; node %d has room): %v (InvalidOperation: %v)",
			id, host, 3-host, res.err, errors.Is(res.err, ErrInvalidOperation))
	}
	if string(res.body) != id {
		t.Fatalf("answered %q", res.body)
	}
}

// Review (hR1), not fixed: §10 "If the payload is permanently missing or
// the checksum differs, it's DataLost", docs/INSTANCE-SPOTS.md restart
// table: "payload missing after 3 re-reads or its checksum differs →
// DataLost". With the real Redis Relocation Store, bytes under the data
// key that do not match what was stored are not returned as Found: Read
// fails with a provider error (redis.ErrIntegrity, wrapped as
// relocstore.ErrUnavailable) — and the recovery (readPayload,
// mesh/instance_recover.go) treats any Read error as "unknown: change
// nothing". So the Spot is never recovered and never marked DataLost: every
// message to it fails with ErrUnavailable, for good. (The existing
// "corrupt payload: DataLost" subtest wraps the store to return Found with
// other bytes, which the Redis provider never does.)
func TestReviewCorruptPayloadInRedisRelocationStoreIsDataLost(t *testing.T) {
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
