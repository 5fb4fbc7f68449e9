package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// A barrier-held notice counts for the barrier it names (operation id and
// object) and for no other; it is never taken for an object message.
func TestBarrierHeldNoticeCountsForItsBarrier(t *testing.T) {
	o := &objects{}
	o.hooks.Store(&testHooks{})
	raw := NewOperationID()
	op := opIDOf(raw)
	b, unregister := o.held.add(op, "a")
	defer unregister()
	org := origin{rid: []byte{1}, gen: 1}
	notice := func(id string, op [16]byte) bool {
		m := inMessage{id: id, gen: 1, op: opIDOf(op), to: routeTo{ownerGen: 1, leaseGen: 1}}
		return o.noticeBarrierHeld(barrierHeldNotice(familyActor, m, org, "entry"))
	}
	for _, tc := range []struct {
		name string
		id   string
		op   [16]byte
		want uint64
	}{
		{"its barrier", "a", raw, 1},
		{"another object", "b", raw, 1},
		{"another barrier", "a", NewOperationID(), 1},
		{"its barrier again", "a", raw, 2},
	} {
		if !notice(tc.id, tc.op) {
			t.Fatalf("%s: not taken for a notice", tc.name)
		}
		if got := b.count.Load(); got != tc.want {
			t.Errorf("%s: count %d, want %d", tc.name, got, tc.want)
		}
	}
	rec := barrierHeldNotice(familyActor, inMessage{id: "a", gen: 1, op: op, to: routeTo{ownerGen: 1, leaseGen: 1}}, org, "entry")
	if o.noticeBarrierHeld(router.NewRecord(rec.Body, nil, rec.Payload)) {
		t.Error("a message without the control taken for a notice")
	}
	// Both families encode as the wire wants them (21, 24).
	for _, fam := range []opFamily{familyActor, familySpot} {
		m := inMessage{id: "a", gen: 1, op: op, to: routeTo{ownerGen: 1, leaseGen: 1}}
		if _, err := router.Encode(barrierHeldNotice(fam, m, org, entrySpotID(hostRun{rid: []byte{2}, lifecycleGeneration: 1}))); err != nil {
			t.Errorf("family %v: %v", fam, err)
		}
	}
}

// The link to a barrier's origin is down (reconnecting) when the hold
// begins: the notices start once it is admitted again. Before, the origin's
// capability was looked at once, a link not admitted at that moment read
// as "an older version", and the whole hold went without notices — the
// origin gave this node up after one barrier slice.
func TestBarrierHeldNoticesStartWhenTheLinkToTheOriginIsBack(t *testing.T) {
	f := newFixture(t)
	c := newClusterOn(t, f, nil, 2, nil)
	org, holder := c.nodes[0], c.nodes[1]
	holder.obj.barrierHeldEvery = 10 * time.Millisecond
	raw := NewOperationID()
	op := opIDOf(raw)
	b, unregister := org.obj.held.add(op, "held")
	defer unregister()
	from, ok := holder.Transport().Peer(org.RID())
	if !ok {
		t.Fatal("the holder has no link to the origin")
	}
	barrier := router.NewRecord(&router.ActorRequest{Operation: op, Correlation: 1, TargetActor: router.ActorRouteFence{
		Actor: router.ActorRef{ActorID: "held", ObjectGeneration: 1}, TargetNodeRID: holder.RID(), TargetNodeGeneration: holder.Transport().LifecycleGeneration(),
		ExpectedAuthorityOwnerGeneration: 1, ExpectedOwnerLeaseGeneration: 1}}, nil, nil)
	if err := holder.Transport().Disconnect(org.RID()); err != nil {
		t.Fatal(err)
	}
	stop := holder.obj.tellBarrierHeld(from, familyActor, barrier)
	defer stop()
	if err := holder.Transport().Connect(org.RID(), from.Endpoint); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a barrier-held notice at the origin", func() bool { return b.count.Load() > 0 })
}
