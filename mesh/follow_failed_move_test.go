package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// Node 0 holds the route of the object's first stay on A (A, g1). The
// object goes A→B→A (A keeps its record A→B, so a g1 message is passed
// A→B→A). Then a move A→B fails after the cutover and A takes the object
// back (recoverLocal): only that move's departure is forgotten, the record
// A→B stays for the g1 route, and a one-way message node 0 sends on its
// (still valid) cached route arrives. Before, recoverLocal removed every
// record of the object and the message was dropped at A.
func TestFailedMoveKeepsTheOlderFollowChain(t *testing.T) {
	for _, failMove := range []bool{false, true} {
		name := "control: A→B→A only"
		if failMove {
			name = "A→B→A then a failed A→B"
		}
		t.Run(name, func(t *testing.T) { failedMoveChain(t, failMove) })
	}
}

func failedMoveChain(t *testing.T, failMove bool) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		// Production lease timing (the cached route lives to the owner's
		// admission deadline, ~TTL − margin after a renewal).
		cfg.Lease.TTL = 15 * time.Second
		cfg.Lease.FencingMargin = 5 * time.Second
	})
	ctx := ctxT(t, 60*time.Second)
	const id = "failed-chain"
	ref, err := c.m(0).CreateActor(ctx, id, seqType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("q:n0:1")); err != nil {
		t.Fatal(err)
	}
	key := follow.Key{Kind: follow.KindActor, ID: id}
	g1, ok := c.nodes[0].obj.cache.Get(key)
	if !ok {
		t.Fatal("node 0 has no cached route")
	}
	a := ownerIndex(t, c, record.ObjectActor, id)
	b := 3 - a
	start := time.Now()
	if res := outcomeOf(t, relocateAsync(ctx, c, a, b, record.ObjectActor, id, ref.ObjectGeneration)); res.Outcome != Moved {
		t.Fatalf("A→B: %v (%s)", res.Outcome, res.Reason)
	}
	if res := outcomeOf(t, relocateAsync(ctx, c, b, a, record.ObjectActor, id, ref.ObjectGeneration)); res.Outcome != Moved {
		t.Fatalf("B→A: %v (%s)", res.Outcome, res.Reason)
	}
	if failMove {
		// A→B again; B is held before its owner CAS, the caller gives up
		// (cancels) after the cutover: A releases the reservation and
		// takes the object back (targetLost).
		atConfirm, free := holdPastCutover(c, a, b, id)
		defer free()
		mctx, cancel := context.WithCancel(ctx)
		moving := relocateAsync(mctx, c, a, b, record.ObjectActor, id, ref.ObjectGeneration)
		waitClosed(t, atConfirm, "A's cutover")
		cancel()
		res := outcomeOf(t, moving)
		if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() {
			t.Fatalf("failed move: %v (%s), want notMoved (targetLost)", res.Outcome, res.Reason)
		}
		free()
		c.nodes[a].obj.hooks.Store(nil)
		c.nodes[b].obj.hooks.Store(nil)
		waitUntil(t, "A to serve the object again", func() bool {
			st, ok := c.nodes[a].obj.stateOf(spot.Key{ID: id})
			return ok && st == hostServing
		})
	}
	// Precondition: node 0 still holds the first-stay route, validly.
	r, ok := c.nodes[0].obj.cache.Get(key)
	if !ok || !follow.FenceOf(r).Matches(g1) {
		t.Fatalf("node 0's cached route changed or expired (%v, %+v) after %v", ok, r, time.Since(start))
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatalf("send: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	st := seqStateOf(t, ctx, c, ref)
	if st.Last["n0"] != 2 || st.Gaps != 0 {
		t.Fatalf("accepted one-way message lost: object saw last %d for n0 (want 2), gaps %d", st.Last["n0"], st.Gaps)
	}
}
