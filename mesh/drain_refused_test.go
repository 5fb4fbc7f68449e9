package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// Every server of a mesh stopped at once (an operator try-out: SIGTERM to
// all three): each drain read its list before the others published
// draining, and offered each object to the peers that had refused the
// previous ones as draining — 90 INFO lines for 31 objects. Here node 1
// drains while its list shows nodes 2 and 3 serving, both of them
// draining already (their state is set without a publish, so no
// discovery round tells node 1). The first refusal of each shows that
// peer draining in node 1's list: no later object is offered to it, and
// with no target left the moves fail at once — they do not wait
// noTargetPatience for a peer the list would otherwise still show serving.
func TestDrainOffersNoMoreObjectsToAPeerThatRefusedAsDraining(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c, logs, mine := threeServers(t, ctx, "refused", 6)
	leaving := c.nodes[1]
	for _, i := range []int{2, 3} {
		c.nodes[i].setState(record.StateDraining)
	}
	start := time.Now()
	res, err := leaving.Drain(ctx, HostRelocateOptions{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if res.Progress.Moved != 0 || len(res.NotMoved()) != len(mine) {
		t.Fatalf("moved %d, not moved %d; want 0 and %d (both peers are draining)", res.Progress.Moved, len(res.NotMoved()), len(mine))
	}
	refused := grepLines(logs.String(), "relocation: target failed the Restore")
	if len(refused) > 2 {
		t.Fatalf("%d moves were offered to a peer that had refused one as draining (want at most one per peer): %q",
			len(refused), refused)
	}
	if waited := grepLines(logs.String(), "no node can take it now"); len(waited) > 0 || took >= leaving.noTargetPatience()/2 {
		t.Fatalf("the drain took %v and its moves waited for a target (%q): its peers had refused as draining", took, waited)
	}
	for _, o := range res.NotMoved() {
		if o.Reason == "" {
			t.Fatalf("object %s stays without a reason", o.Object.ID)
		}
	}
}

// A refusal as draining marks that node run only: the peer's next run,
// serving, takes moves again, also when a refusal of the earlier run
// arrives after this node's list shows the new one.
func TestAPeerServingAgainInANewRunIsUsedAfterItsEarlierRunRefused(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	f, c, obj := oneObjectOnNode1(t, ctx, "again")
	n1, old := c.nodes[1], c.nodes[2]
	oldGen := old.LifecycleGeneration()
	servingPeers := func() int {
		serving, _, err := n1.peersNow(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return serving
	}
	if servingPeers() != 1 {
		t.Fatal("node 1 does not list node 2 serving")
	}
	old.setState(record.StateDraining)
	res, err := n1.obj.relocate(ctx, record.ObjectActor, obj.ActorID, obj.ObjectGeneration, nil)
	if err != nil || res.Outcome != NotMoved || !strings.Contains(res.Detail, "node is draining") {
		t.Fatalf("move to a draining peer: %+v, %v; want NotMoved, refused as draining", res, err)
	}
	if n := servingPeers(); n != 0 {
		t.Fatalf("after node 2 refused as draining, node 1 still counts %d serving peer(s) (a discovery round read it serving)", n)
	}

	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := old.cfg
	cfg.Node.Endpoint = "tcp://127.0.0.1:0" // a new port
	next := f.start(cfg)
	if next.LifecycleGeneration() == oldGen {
		t.Fatal("the restart kept the lifecycle generation")
	}
	eventually(t, 15*time.Second, "node 1 to list node 2's new run serving, its link admitted", func() bool {
		p, ok := n1.tr.Peer(next.run.rid)
		return servingPeers() == 1 && ok && p.LifecycleGeneration == next.LifecycleGeneration()
	})
	// A refusal of the earlier run, late: it must not mark the new run.
	n1.noteRefusedLeaving(next.RID(), oldGen, record.StateDraining)
	if n := servingPeers(); n != 1 {
		t.Fatalf("a late refusal of node 2's earlier run took its new run out of node 1's list (%d serving)", n)
	}
	res, err = n1.obj.relocate(context.Background(), record.ObjectActor, obj.ActorID, obj.ObjectGeneration, nil)
	if err != nil || res.Outcome != Moved || string(res.TargetNodeRID) != string(next.RID()) {
		t.Fatalf("move to node 2's new run: %+v, %v; want Moved there", res, err)
	}
}

// A drain takes the host-command flag before its draining publish lands:
// a move reaching it in between was refused as "host relocation", which
// marks nothing (a plain host Relocate is temporary), so the source kept
// offering it objects until its list said draining. A drain's refusal
// says draining, and the source's view marks that run leaving at once.
func TestARefusalInADrainsFirstMomentsSaysDraining(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	_, c, obj := oneObjectOnNode1(t, ctx, "early")
	n1, target := c.nodes[1], c.nodes[2]
	if err := target.beginHostMove(cmdDrain); err != nil { // the flag, before any publish
		t.Fatal(err)
	}
	defer target.endHostMove()
	if target.State() != record.StateServing {
		t.Fatalf("target state %s, want serving (no publish yet)", target.State())
	}
	res, err := n1.obj.relocate(ctx, record.ObjectActor, obj.ActorID, obj.ObjectGeneration, nil)
	if err != nil || res.Outcome != NotMoved || !strings.Contains(res.Detail, "node is draining") {
		t.Fatalf("move to a node whose drain began: %+v, %v; want NotMoved, refused as draining", res, err)
	}
	if serving, _, err := n1.peersNow(ctx); err != nil || serving != 0 {
		t.Fatalf("node 1 still counts %d serving peer(s) (%v) after the draining node refused", serving, err)
	}
}

// oneObjectOnNode1 starts a client (node 0) and two servers and creates
// one object on server node 1.
func oneObjectOnNode1(t *testing.T, ctx context.Context, prefix string) (*fixture, *cluster, ActorRef) {
	t.Helper()
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 3, clientRole0)
	_, mine := createUntil(t, ctx, c, prefix, 1, 1)
	return f, c, mine[0]
}
