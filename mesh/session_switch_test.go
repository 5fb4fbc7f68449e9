package mesh

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// sessionOnServer creates a seqType Actor from the client node of a
// three-node cluster and binds a Session to it; src is the server hosting
// it, dst the other one.
func sessionOnServer(t *testing.T, id string) (c *cluster, ctx context.Context, ref ActorRef, s *Session, src, dst int) {
	t.Helper()
	f := newFixture(t)
	registerSeqType(t, f)
	c = newClusterOn(t, f, nil, 3, clientRole0)
	ctx = ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, id, seqType)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = c.m(0).BindSession(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	src = c.indexOf(s.Actor().NodeRID)
	return c, ctx, ref, s, src, 3 - src
}

// A Session keeps sending on its old route while its switch is pending
// (command 44 commit below the last sequence sent). Its route may switch
// only when the last message it sent on the old route reached the new
// owner: the previous owner passes them on in order, but a message sent
// straight to the new owner overtakes any still on that way. Here the
// previous owner is slow to pass each one on, so several are on that way
// when the first notice (command 50) comes back.
func TestSessionSwitchWaitsForTheLastOldRouteMessage(t *testing.T) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-slow-follow")
	// Paced (one Send every ~50 µs), so that what is on its way when the
	// Actor moves stays small: an unpaced flood queues thousands of
	// messages behind the slowed pass-on.
	st := &sessionStream{name: "sess", s: s, period: 1 << 40, pace: 50 * time.Microsecond, done: make(chan error, 1)}
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepFollowPassOn {
			time.Sleep(300 * time.Microsecond)
		}
	}})
	stop := make(chan struct{})
	go st.run(ctx, stop)
	waitStreaming(t, "messages before the move", []*sessionStream{st}, func() bool { return st.sent.Load() >= 50 })
	res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	waitStreaming(t, "the route on the target", []*sessionStream{st}, func() bool {
		return string(s.Actor().NodeRID) == string(c.nodes[dst].RID())
	})
	from := st.sent.Load()
	waitStreaming(t, "messages after the switch", []*sessionStream{st}, func() bool { return st.sent.Load() >= from+100 })
	close(stop)
	if err := <-st.done; err != nil {
		t.Fatal(err)
	}
	state := sessionState(t, ctx, s)
	if state.Duplicates != 0 || state.Gaps != 0 || state.Last["sess"] != int(st.sent.Load()) {
		t.Fatalf("state %+v, sent %d (want every message once, in order)", state, st.sent.Load())
	}
	t.Logf("sent %d; %d passed on by the previous owner", st.sent.Load(), c.nodes[src].ObjectStats().FollowForwarded)
}

// A Session whose first message reaches its Actor only after a move (the
// target knew no binding at its owner change, so no command 44 came) learns
// the new route from command 50: its messages were passed on by the
// previous owner, and once the last one sent there arrived, the Session
// switches — it does not keep sending through the previous owner until the
// follow record expires. Every message arrives once and in order.
func TestSessionSwitchesOnFollowWithoutCommit(t *testing.T) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-late")
	res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	if c.nodes[0].ObjectStats().SessionRouteSwitches != 0 {
		t.Fatal("a command 44 reached a Session the source never saw a message of")
	}
	const n = 50
	for i := 1; i <= n; i++ {
		if err := s.Send(ctx, []byte(fmt.Sprintf("s:sess:%d", i))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	waitUntil(t, "the Session's route on the target", func() bool {
		return string(s.Actor().NodeRID) == string(c.nodes[dst].RID())
	})
	forwarded := c.nodes[src].ObjectStats().FollowForwarded
	for i := n + 1; i <= 2*n; i++ {
		if err := s.Send(ctx, []byte(fmt.Sprintf("s:sess:%d", i))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	state := sessionState(t, ctx, s)
	if state.Duplicates != 0 || state.Gaps != 0 || state.Last["sess"] != 2*n {
		t.Fatalf("state %+v (want %d messages once, in order)", state, 2*n)
	}
	if after := c.nodes[src].ObjectStats().FollowForwarded; after != forwarded {
		t.Fatalf("%d messages still passed on by the previous owner after the switch", after-forwarded)
	}
	if st := c.nodes[0].ObjectStats(); st.SessionRouteSwitches != 1 || st.SessionRebinds != 0 {
		t.Fatalf("%d switches, %d rebinds; want 1 switch from the notice and no store read", st.SessionRouteSwitches, st.SessionRebinds)
	}
}
