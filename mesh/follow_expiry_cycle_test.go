package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
)

// Found by review (2026-12-07, known open until that night: confirmPassOns
// refuses at once a request from a node its running confirmation waits on).
// Two previous owners of one object, each of which passed its messages on
// to the other within MessageFollowDuration (the object went A → B → A and
// then on, or was destroyed at A), and neither of which hosts it or keeps a
// follow record of it any more. A request refused at A waits for A's
// confirmation barrier to B (follow_expiry.go); B, refusing that barrier
// likewise, first sends a confirmation barrier of its own to A; at A that
// one finds A's confirmation running for the object and waits for it
// (confirmPassOns: e.confirming) — which waited for B's answer. Neither
// moved until A's barrier gave up at barrierWait (12 s): the request was
// answered only then, and A logged "the new owner did not confirm in time"
// (routeBarriersTimedOut) although both nodes are up and answering.
//
// Staged: the object never existed; the pass-ons are noted as a Message
// Follow send would note them (passedOn.note).
func TestRefusalConfirmationsBetweenTwoPreviousOwnersDoNotWaitForEachOther(t *testing.T) {
	twoPreviousOwnersConfirm(t, "ping-pong-ghost", false)
}

// As above, with A having passed the object's messages on to a third node
// as well, which answers A's barrier at once: B's barrier at A waits for
// that barrier only, and once it is answered is refused — until review L
// (2026-12-07, night) fixed it, it was admitted again at once, over and
// over (a closed channel to wait on), until A's barrier to B gave up.
func TestRefusalConfirmationsBetweenTwoPreviousOwnersWithAThirdNewOwner(t *testing.T) {
	twoPreviousOwnersConfirm(t, "ping-pong-third", true)
}

func twoPreviousOwnersConfirm(t *testing.T, id string, third bool) {
	c, ctx := seqCluster(t)
	a, b := c.nodes[1], c.nodes[2]
	key := follow.Key{Kind: follow.KindActor, ID: id}
	t0 := msgTarget{fam: familyActor, id: id, gen: 1}
	a.obj.notePassedOn(t0, stagedMove(key, b, 1, 2)) // A → B, A passed messages on to B
	b.obj.notePassedOn(t0, stagedMove(key, a, 2, 3)) // B → A, B passed messages on to A
	if third {
		a.obj.notePassedOn(t0, stagedMove(key, c.nodes[0], 3, 4)) // A → node 0
	}

	// A request of node 0 on a route to A's first stay: not hosted there,
	// no follow record.
	r := stagedRoute(key, a)
	rctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	_, err := c.nodes[0].obj.deliverRemote(rctx, t0, r, []byte("q:n0:1"), true)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrDeadlineExceeded) {
		t.Fatalf("request to a previous owner that no longer knows the object: %v; want refused", err)
	}
	if n := a.obj.stats.routeBarriersTimedOut.Load() + b.obj.stats.routeBarriersTimedOut.Load(); n != 0 {
		t.Errorf("%d confirmation barriers between the two previous owners timed out (both up and answering): they waited for each other; err %v", n, err)
	}
}
