package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
)

// Found by review (2026-12-07, night). The at-once refusal of a request
// from a node the running confirmation waits on (confirmPassOns,
// TestRefusalConfirmationsBetweenTwoPreviousOwnersDoNotWaitForEachOther)
// skipped the whole confirmation, also its barriers to other new owners.
// Previous owner A passed an object's messages on to B once, and later to
// C, its owner now. B's own message 2, sent on B's old route to A, was
// passed on to C and is still on its way there when A's follow record
// expires; a request of another node, refused at A, starts A's
// confirmation (barriers to B and to C, the latter behind message 2). B's
// request 3, refused at A meanwhile, was refused at once — B is among the
// nodes the confirmation waits on — so B's retry went straight to C and
// ran there before message 2: B's messages out of order. Only what A
// passed on to B itself is covered by the reasoning (B's own requests came
// behind it); what A passed on to C is not.
func TestRefusalAtOnceForAConfirmedNodeDoesNotOvertakeAPassOnElsewhere(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 4, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	const ia, ib, ic = 1, 3, 2
	a, b, cc := c.nodes[ia], c.nodes[ib], c.nodes[ic]
	ref, err := c.m(0).CreateActor(ctx, "confirm-elsewhere", seqType)
	if err != nil {
		t.Fatal(err)
	}
	if src := ownerIndex(t, c, record.ObjectActor, ref.ActorID); src != ia {
		if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(a.RID())); err != nil || res.Outcome != Moved {
			t.Fatalf("move to A: %+v, %v", res, err)
		}
	}
	// B's route to the object is A's.
	if _, err := c.m(ib).RequestActor(ctx, ref, []byte("q:n3:1")); err != nil {
		t.Fatal(err)
	}
	clock, window := expiringFollow(t, a)
	if res, err := c.m(ia).RelocateActor(ctx, ref, ToNode(cc.RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move A → C: %+v, %v", res, err)
	}
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}
	t0 := msgTarget{fam: familyActor, id: ref.ActorID, gen: 1}
	// A passed the object's messages on to B too (an earlier stay there).
	a.obj.notePassedOn(t0, stagedMove(key, b, 100, 101))

	// C holds the first message passed on to it at its arrival.
	arrived, rel := holdFirstArrival(cc, ref.ActorID)
	defer rel()
	if err := c.m(ib).SendActor(ctx, ref, []byte("s:n3:2")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("message 2 was never passed on")
	}
	clock.ahead.Store(int64(window)) // A's follow record expires now

	// Another node's request, refused at A, starts A's confirmation.
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		c.nodes[0].obj.deliverRemote(rctx, t0, stagedRoute(key, a), []byte("q:n0:1"), true)
	}()
	waitUntil(t, "A's confirmation running", func() bool {
		cf := &a.obj.passed.confirms
		cf.mu.Lock()
		defer cf.mu.Unlock()
		e := cf.m[key]
		return e != nil && e.confirming != nil
	})

	requestAfterHeldPassOn(t, ctx, c, ref, ib, rel, "B's retry overtook its message A passed on to C")
}
