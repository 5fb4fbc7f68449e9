package mesh

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
)

// The Actor moves A→B and straight back B→A. Each move's target sends its
// command 44 commit one-way, B's on B's link and A's on A's, so they can
// arrive in either order; here B's (the first move's) is held back until
// A's (the second's) was applied. The Session must end on A at the second
// move's owner generation: the late commit of the first move is stale and
// ignored. Before, the Session ignored the second commit (its previous
// owner generation was not the route's) and then applied the first: it
// pointed at B, a move behind, and reached the Actor only while B's Message
// Follow record lasted — after message_follow_duration a one-way message
// sent there was refused by B and lost without the Session knowing.
func TestSessionIgnoresTheLateCommitOfAnEarlierMove(t *testing.T) {
	c, ctx, ref, s, a, b := sessionOnServer(t, "sess-late-commit")
	for i := 1; i <= 3; i++ {
		if err := s.Send(ctx, []byte(fmt.Sprintf("s:sess:%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the binding on A", func() bool {
		return c.nodes[a].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)] == 3
	})
	held := make(chan *router.SessionRelocationRoute, 1)
	c.nodes[b].obj.hooks.Store(&testHooks{holdSessionRoute: func(id string, body *router.SessionRelocationRoute) bool {
		if id != ref.ActorID {
			return false
		}
		held <- body
		return true
	}})
	if res, err := c.m(a).RelocateActor(ctx, ref, ToNode(c.nodes[b].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move A→B: %+v, %v", res, err)
	}
	first := <-held
	c.nodes[b].obj.hooks.Store(&testHooks{})
	seen := func() uint64 {
		st := c.nodes[0].ObjectStats()
		return st.SessionRouteSwitches + st.SessionRoutesIgnored
	}
	before := seen()
	if res, err := c.m(b).RelocateActor(ctx, ref, ToNode(c.nodes[a].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move B→A: %+v, %v", res, err)
	}
	waitUntil(t, "the second move's commit at the session's owner", func() bool { return seen() == before+1 })
	if err := c.nodes[b].Transport().SendWait(ctx, c.nodes[0].RID(), router.NewRecord(first, nil, nil)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first move's commit at the session's owner", func() bool { return seen() == before+2 })

	c.nodes[a].obj.mu.Lock()
	ownerGen := c.nodes[a].obj.hosted[actorKey(ref.ActorID)].ownerGeneration
	c.nodes[a].obj.mu.Unlock()
	s.mu.Lock()
	route, pending := s.route, s.pending
	s.mu.Unlock()
	if !bytes.Equal(route.nodeRID, c.nodes[a].RID()) || route.ownerGen != ownerGen || pending != nil {
		t.Errorf("the session's route is node %d at AuthorityOwnerGeneration %d (pending switch: %v); the Actor is on node %d at %d",
			c.indexOf(route.nodeRID), route.ownerGen, pending != nil, a, ownerGen)
	}

	// B's Message Follow record ends message_follow_duration after the
	// move (forgotten here rather than waited for): a Session still
	// pointing at B loses its next one-way message there.
	c.nodes[b].obj.follow.Remove(followKey(record.ObjectActor, ref.ActorID))
	if err := s.Send(ctx, []byte("s:sess:4")); err != nil {
		t.Fatal(err)
	}
	st := sessionState(t, ctx, s)
	if st.Gaps != 0 || st.Duplicates != 0 || st.Last["sess"] != 4 {
		t.Fatalf("state %+v: want messages 1..4 once, in order (session rebinds %d)", st, c.nodes[0].ObjectStats().SessionRebinds)
	}
}

// A switch is pending to B (the commit of the move A→B came while the last
// message sent to A was still being passed on), and before that message
// reaches B the Actor moves on, back to A; B passes the message on and A's
// command 50 about it names A's newer owner generation. The commit of the
// second move is lost (44 is one-way; a target that cannot send it within
// sessionRouteWait logs it and goes on). The notice alone shows that the
// last message sent on the old route reached the Actor's latest owner, and
// everything sent before it went the same way ahead of it: the Session
// switches to A at once. Before, a notice naming any owner but the pending
// switch's was ignored, and the Session sent nothing for a barrier slice
// (12 s), then switched to B, a move behind.
func TestSessionSwitchesOnANoticeFromALaterOwner(t *testing.T) {
	c, ctx, ref, s, a, b := sessionOnServer(t, "sess-later-notice")
	for i := 1; i <= 3; i++ {
		if err := s.Send(ctx, []byte(fmt.Sprintf("s:sess:%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the binding on A", func() bool {
		return c.nodes[a].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)] == 3
	})
	held := make(chan *router.SessionRelocationRoute, 2)
	hold := func(id string, body *router.SessionRelocationRoute) bool {
		if id != ref.ActorID {
			return false
		}
		held <- body
		return true
	}
	c.nodes[b].obj.hooks.Store(&testHooks{holdSessionRoute: hold})
	if res, err := c.m(a).RelocateActor(ctx, ref, ToNode(c.nodes[b].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move A→B: %+v, %v", res, err)
	}
	first := <-held
	c.nodes[b].obj.hooks.Store(&testHooks{})

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.nodes[a].obj.hooks.Store(&testHooks{holdSessionRoute: hold, relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepFollowPassOn {
			once.Do(func() { close(entered); <-release })
		}
	}})
	if err := s.Send(ctx, []byte("s:sess:4")); err != nil { // to A, which passes it on to B
		t.Fatal(err)
	}
	<-entered
	if err := c.nodes[b].Transport().SendWait(ctx, c.nodes[0].RID(), router.NewRecord(first, nil, nil)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the switch to B pending", s.pendingSwitch)
	if res, err := c.m(b).RelocateActor(ctx, ref, ToNode(c.nodes[a].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move B→A: %+v, %v", res, err)
	}
	<-held // the second move's commit: lost
	close(release)

	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.Send(sctx, []byte("s:sess:5")); err != nil {
		t.Fatalf("the Send after the notice: %v (pending switch: %v)", err, s.pendingSwitch())
	}
	if got := c.indexOf(s.Actor().NodeRID); got != a {
		t.Errorf("the route is on node %d, the Actor on %d", got, a)
	}
	st := sessionState(t, ctx, s)
	if st.Gaps != 0 || st.Duplicates != 0 || st.Last["sess"] != 5 {
		t.Fatalf("state %+v: want messages 1..5 once, in order", st)
	}
}
