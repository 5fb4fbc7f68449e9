package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// A previous owner that passed an object's messages on along two moves
// (to two new owners) confirms them both before it refuses a request for
// the object (follow_expiry.go) — at the same time, not one after the
// other: each barrier may wait up to barrierWait (12 s) for an owner that
// does not answer, and k such owners made the request wait k × 12 s, past
// most callers' deadlines (review F's argued item of 2026-12-07). Staged as
// TestRefusalConfirmationsBetweenTwoPreviousOwnersDoNotWaitForEachOther is:
// the pass-ons are noted, the object never existed. The first
// confirmation is held at its start until the second has started too.
func TestRefusalConfirmsEveryNewOwnerAtOnce(t *testing.T) {
	c, ctx := seqCluster(t)
	a := c.nodes[1]
	const id = "two-new-owners"
	key := follow.Key{Kind: follow.KindActor, ID: id}
	t0 := msgTarget{fam: familyActor, id: id, gen: 1}
	a.obj.notePassedOn(t0, stagedMove(key, c.nodes[2], 1, 2))
	a.obj.notePassedOn(t0, stagedMove(key, c.nodes[0], 3, 4))

	var mu sync.Mutex
	started := 0
	both := make(chan struct{})
	overlapped := true
	a.obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got != id || step != stepRefusalConfirm {
			return
		}
		mu.Lock()
		started++
		n := started
		if n == 2 {
			close(both)
		}
		mu.Unlock()
		if n == 1 {
			select {
			case <-both:
			case <-time.After(10 * time.Second):
				mu.Lock()
				overlapped = false
				mu.Unlock()
			}
		}
	}})

	rctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	if _, err := c.nodes[0].obj.deliverRemote(rctx, t0, stagedRoute(key, a), []byte("q:n0:1"), true); err == nil {
		t.Fatal("request to a previous owner that no longer knows the object: answered; want refused")
	}
	mu.Lock()
	defer mu.Unlock()
	if started != 2 {
		t.Fatalf("%d confirmations started, want 2 (one per new owner)", started)
	}
	if !overlapped {
		t.Fatal("the second confirmation began only after the first ended: they run one after another")
	}
}

// stagedMove is a move of the ActorID of key (ObjectGeneration 1) from
// AuthorityOwnerGeneration prev to gen, to node n's run: what a previous
// owner's follow table would hold, for staging pass-ons (notePassedOn).
func stagedMove(key follow.Key, n *Node, prev, gen uint64) follow.Move {
	owner, lg := n.Owner()
	return follow.Move{Key: key, ObjectGeneration: 1, PreviousAuthorityOwnerGeneration: prev, AuthorityOwnerGeneration: gen,
		Owner: follow.Owner{ID: owner, LeaseGeneration: lg},
		Route: follow.Route{NodeRID: n.run.rid, NodeGeneration: n.run.lifecycleGeneration}}
}

// stagedRoute is a sender's route to the first stay (AuthorityOwnerGeneration
// 1) of key's object on node n.
func stagedRoute(key follow.Key, n *Node) follow.Ready {
	owner, lg := n.Owner()
	return follow.Ready{Key: key, ObjectGeneration: 1, AuthorityOwnerGeneration: 1, Owner: follow.Owner{ID: owner, LeaseGeneration: lg},
		Route: follow.Route{NodeRID: n.run.rid, NodeGeneration: n.run.lifecycleGeneration}}
}
