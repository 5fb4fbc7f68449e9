package mesh

import (
	"sync"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// A Session owned by the move's source node (local delivery) sends after
// the source retired the object (Message Follow recorded) and before the
// target's owner CAS. SendActor on the same node follows the object
// (deliverFollowing), and so does the Session now; before, it was refused
// locally, rebound to what the store still said (the source) and failed
// the Send ("not hosted here"). The Session then switches by command 44
// and every message arrives once, in order.
func TestSessionOnTheSourceFollowsAMovingActor(t *testing.T) {
	c, ctx, ref, s0, src, dst := sessionOnServer(t, "sess-local")
	s0.Close()
	s, err := c.m(src).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 1; i <= 3; i++ {
		if err := s.Send(ctx, []byte("s:l:"+string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepTargetCAS {
			once.Do(func() { close(entered); <-release })
		}
	}})
	moved := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	<-entered
	waitUntil(t, "the source retired the object", func() bool {
		_, ok := c.nodes[src].obj.hostedFor(actorKey(ref.ActorID))
		return !ok
	})
	if err := c.m(src).SendActor(ctx, ref, []byte("plain")); err != nil {
		t.Errorf("SendActor from the source in the same window: %v", err)
	}
	err = s.Send(ctx, []byte("s:l:4"))
	close(release)
	if res := outcomeOf(t, moved); res.Outcome != Moved {
		t.Fatalf("move: %+v", res)
	}
	if err != nil {
		t.Fatalf("Session.Send while the Actor moves: %v (rebinds %d)", err, c.nodes[src].ObjectStats().SessionRebinds)
	}
	// The commit switches the route (no 12 s wait for a command 50 that
	// a message sent along this node's own link never brings).
	waitUntil(t, "the route on the target", func() bool { return string(s.Actor().NodeRID) == string(c.nodes[dst].RID()) })
	if err := s.Send(ctx, []byte("s:l:5")); err != nil {
		t.Fatal(err)
	}
	st := sessionState(t, ctx, s)
	if st.Gaps != 0 || st.Duplicates != 0 || st.Last["l"] != 5 {
		t.Fatalf("state %+v", st)
	}
}
