package mesh

import (
	"testing"

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
