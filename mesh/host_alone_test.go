package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// A host Relocate on a node with no other serving node in its mesh ends
// promptly: every move finds no target at once, so each object fails with
// that reason and stays served here (200 objects end in milliseconds).
func TestHostRelocateAloneFailsEachWithTheReason(t *testing.T) {
	c, ctx, mine := loneServer(t, "lone", 200)
	res, err := c.nodes[1].Relocate(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Progress
	if res.End != hostmove.Completed || p.Failed != len(mine) || p.Moved != 0 {
		t.Fatalf("relocate alone: %s %+v, want completed with %d failed", res.End, p, len(mine))
	}
	for _, r := range res.Objects {
		if !strings.Contains(r.Reason, `no Serving node of mesh "objects" other than this one`) {
			t.Fatalf("%s: reason %q", r.Object.ID, r.Reason)
		}
	}
	for _, ref := range mine[:5] {
		if _, err := c.m(0).RequestActor(ctx, ref, []byte("state")); err != nil {
			t.Fatalf("%s after the command: %v", ref.ActorID, err)
		}
	}
	t.Logf("took %s", res.Took)
}

// loneServer is a client (node 0) and one server (node 1) with want seqType
// Actors named prefix-<i> on the server.
func loneServer(t *testing.T, prefix string, want int) (*cluster, context.Context, []ActorRef) {
	t.Helper()
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	_, mine := createUntil(t, ctx, c, prefix, 1, want)
	return c, ctx, mine
}

// A drain with no other serving node moves nothing, and its Progress
// callback still gets one call carrying the end (a caller's progress
// display waits for it). Before, it got none.
func TestDrainAloneReportsItsEnd(t *testing.T) {
	c, ctx, mine := loneServer(t, "lonedrain", 5)
	var calls []HostProgress
	res, err := c.nodes[1].Drain(ctx, HostRelocateOptions{Progress: func(p HostProgress) { calls = append(calls, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].End != res.End || res.End == hostmove.Open || calls[0].NotStarted != len(mine) {
		t.Fatalf("%d progress calls %+v for a drain that ended %s with %d objects not started", len(calls), calls, res.End, len(mine))
	}
	// No move ran: the time it took went before the moves (it was 0).
	if res.Took <= 0 || res.BeforeMoves != res.Took || res.MovesTook != 0 {
		t.Fatalf("Took %v, BeforeMoves %v, MovesTook %v: want all of a drain that moved nothing before the moves", res.Took, res.BeforeMoves, res.MovesTook)
	}
}
