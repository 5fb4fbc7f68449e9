package mesh

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/router"
)

// A closed Session tells the Actor's host to drop its binding (command 24
// with meshnode.control=unbind): over the wire, on the host itself, and by
// Message Follow when the Session's route is a move behind. The unbind
// never reaches the application. Before it existed, the binding of a
// Session closed on a live run moved with the Actor and got a 44 per move
// until that run ended.
func TestClosedSessionDropsItsBinding(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 3, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "unbound", seqType)
	if err != nil {
		t.Fatal(err)
	}
	remote, err := c.m(0).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Send(ctx, []byte("s:remote:1")); err != nil {
		t.Fatal(err)
	}
	home := c.indexOf(remote.Actor().NodeRID)
	other := 3 - home
	local, err := c.m(home).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Send(ctx, []byte("s:local:1")); err != nil {
		t.Fatal(err)
	}
	idle, err := c.m(0).BindSession(ctx, ref) // sends nothing: never bound, nothing to unbind
	if err != nil {
		t.Fatal(err)
	}
	bound := func(at int) map[string]uint64 { return c.nodes[at].obj.hostedSessions(actorKey(ref.ActorID)) }
	waitUntil(t, "both bindings on the host", func() bool { return len(bound(home)) == 2 })

	remote.Close()
	waitUntil(t, "the remote Session's binding dropped", func() bool {
		_, ok := bound(home)[string(remote.rid)]
		return !ok
	})
	local.Close()
	if _, ok := bound(home)[string(local.rid)]; ok {
		t.Fatal("the local Session's binding is still on the host after Close")
	}
	idle.Close()
	if n := c.nodes[home].ObjectStats().SessionBindingsUnbound; n != 2 {
		t.Fatalf("the host counts %d unbound bindings, want 2", n)
	}

	// A Session whose route is a move behind: its unbind reaches the
	// previous owner, which passes it on to the Actor.
	behind, err := c.m(0).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := behind.Send(ctx, []byte("s:behind:1")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the binding on the host", func() bool { return len(bound(home)) == 1 })
	behind.mu.Lock()
	old := behind.route
	behind.mu.Unlock()
	res, err := c.m(home).RelocateActor(ctx, ref, ToNode(c.nodes[other].RID()))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	if got := bound(other); len(got) != 1 {
		t.Fatalf("%d bindings moved with the Actor, want 1", len(got))
	}
	waitUntil(t, "the Session's route switched", func() bool { return bytes.Equal(behind.Actor().NodeRID, c.nodes[other].RID()) })
	behind.mu.Lock()
	behind.route = old // as if its 44 had not arrived yet
	behind.mu.Unlock()
	forwarded := c.nodes[home].ObjectStats().FollowForwarded
	behind.Close()
	waitUntil(t, "the followed unbind dropped the binding", func() bool { return len(bound(other)) == 0 })
	if n := c.nodes[home].ObjectStats().FollowForwarded; n != forwarded+1 {
		t.Fatalf("the previous owner passed on %d messages, want 1 (the unbind)", n-forwarded)
	}

	state := probeState(t, ctx, c.m(0), ref)
	// Three sends and this request: no unbind ran as a turn.
	if state.Turns != 4 || state.Duplicates != 0 || state.Gaps != 0 {
		t.Fatalf("state %+v: want 4 turns (3 sends and the state request), no unbind among them", state)
	}
}

// A host that did not list the unbind capability at admission (a node of
// an older version, which would queue the empty message for the
// application) is sent no unbind: its binding stays, as before unbinds
// existed, and no extra turn runs.
func TestClosedSessionSendsNoUnbindToAnOlderHost(t *testing.T) {
	const old = 2
	f := newFixture(t)
	registerSeqType(t, f)
	kept := protocolCapabilities
	t.Cleanup(func() { protocolCapabilities = kept })
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		protocolCapabilities = kept // Start reads it: node old starts without
		if i == old {
			protocolCapabilities = nil
		}
	})
	protocolCapabilities = kept
	for _, cp := range []string{router.CapabilitySessionUnbind, router.CapabilityBarrierHeld} {
		if c.nodes[0].obj.peerHas(c.nodes[old].RID(), cp) || !c.nodes[old].obj.peerHas(c.nodes[0].RID(), cp) {
			t.Fatalf("%s: the older node's admission lists it, or a current one's does not", cp)
		}
	}
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "unbound-old", seqType)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.m(0).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, []byte("s:old:1")); err != nil { // binds it: a move sends it a 44
		t.Fatal(err)
	}
	if home := c.indexOf(s.Actor().NodeRID); home != old {
		waitUntil(t, "the binding on the host", func() bool { return len(c.nodes[home].obj.hostedSessions(actorKey(ref.ActorID))) == 1 })
		if res, err := c.m(home).RelocateActor(ctx, ref, ToNode(c.nodes[old].RID())); err != nil || res.Outcome != Moved {
			t.Fatalf("move to the older node: %+v, %v", res, err)
		}
		waitUntil(t, "the Session's route on the older node", func() bool { return bytes.Equal(s.Actor().NodeRID, c.nodes[old].RID()) })
	}
	bound := func() map[string]uint64 { return c.nodes[old].obj.hostedSessions(actorKey(ref.ActorID)) }
	waitUntil(t, "the binding on the older node", func() bool { return len(bound()) == 1 })
	s.Close()
	// The state request travels behind anything Close sent on the link.
	if state := probeState(t, ctx, c.m(0), ref); state.Turns != 2 {
		t.Fatalf("state %+v: want 2 turns (the send and the state request)", state)
	}
	if _, ok := bound()[string(s.rid)]; !ok {
		t.Fatal("an unbind reached a host that does not list the capability")
	}
	if n := c.nodes[old].ObjectStats().SessionBindingsUnbound; n != 0 {
		t.Fatalf("the older host counts %d unbinds", n)
	}
}

// A Session closed while another goroutine's message has its sequence but
// is not on the link yet: the unbind must travel behind it. Before, Close
// sent the unbind at once; it reached the host first, and the message
// after it recorded the binding again — for good (it moved with the Actor
// and got a 44 per move until the Session's node run ended), which is what
// the unbind is there to end. A one-way Send and a Request.
func TestClosedSessionUnbindsBehindItsMessagesInFlight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		request bool
	}{{"send", false}, {"request", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, ctx, ref, s, src, _ := sessionOnServer(t, "unbind-inflight")
			if err := s.Send(ctx, []byte("s:a:1")); err != nil {
				t.Fatal(err)
			}
			bound := func() bool {
				_, ok := c.nodes[src].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)]
				return ok
			}
			waitUntil(t, "the binding on the host", bound)
			entered, release := make(chan struct{}), make(chan struct{})
			var held atomic.Bool
			c.nodes[0].obj.hooks.Store(&testHooks{beforeRemoteSend: func(id string) error {
				if id == ref.ActorID && held.CompareAndSwap(false, true) {
					close(entered) // the second message, between its sequence and the link
					<-release
				}
				return nil
			}})
			sent := make(chan error, 1)
			go func() {
				var err error
				if tc.request {
					_, err = s.Request(ctx, []byte("s:a:2"))
				} else {
					err = s.Send(ctx, []byte("s:a:2"))
				}
				sent <- err
			}()
			<-entered
			s.Close()
			close(release)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			// The probe's request travels behind everything node 0 sent
			// the host on that link: the message and the unbind.
			if state := probeState(t, ctx, c.m(0), ref); state.Last["a"] != 2 || state.Gaps != 0 {
				t.Fatalf("state %+v: want both messages of a", state)
			}
			if bound() {
				t.Fatal("the closed Session's binding is back on the host: its unbind overtook its last message")
			}
			if n := c.nodes[src].ObjectStats().SessionBindingsUnbound; n != 1 {
				t.Fatalf("the host counts %d unbound bindings, want 1", n)
			}
		})
	}
}

// A Session on the Actor's own node is closed after the Actor left that
// node but before the target's command 44 switched its route: the unbind
// follows the Actor along the recorded move (as the Session's messages
// would). Before, Close looked for the Actor here only, found nothing and
// sent nothing: the binding stayed on the new owner for good.
func TestClosedLocalSessionUnbindFollowsTheActorThatJustLeft(t *testing.T) {
	c, ctx, ref, _, home, other := sessionOnServer(t, "unbind-left")
	s, err := c.m(home).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(ctx, []byte("s:local:1")); err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{}, 1)
	c.nodes[other].obj.hooks.Store(&testHooks{holdSessionRoute: func(id string, _ *router.SessionRelocationRoute) bool {
		if id != ref.ActorID {
			return false
		}
		held <- struct{}{}
		return true // the Session's route stays on home
	}})
	if res, err := c.m(home).RelocateActor(ctx, ref, ToNode(c.nodes[other].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	<-held
	bound := func() bool {
		_, ok := c.nodes[other].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)]
		return ok
	}
	if !bound() {
		t.Fatal("the binding did not move with the Actor")
	}
	s.Close()
	// From home to the new owner, on the link the unbind took.
	if state := probeState(t, ctx, c.m(home), ref); state.Last["local"] != 1 {
		t.Fatalf("state %+v", state)
	}
	if bound() {
		t.Fatal("the closed Session's binding is still on the Actor's new owner")
	}
}

// A Session closed while a move holds its Actor (its last message in the
// source's ingress hold; the binding went with the payload, or is about
// to). The unbind waits for the move to let go: when the Actor moves, it
// follows behind the relay and the binding is dropped on the target; when
// the move fails, it is taken on the source. Before, the source dropped its
// own copy of the binding at once — the payload had already carried it,
// and the relayed message recorded it again on the target — and the
// binding stayed there for good. A Session of another node and one of the
// source itself.
func TestClosedSessionUnbindFollowsTheActorItsMoveHolds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool // the Session is on the source node
		fail  bool // the move fails (the target refuses the Restore): the Actor stays
	}{{"remote", false, false}, {"on the source", true, false}, {"remote, the move fails", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, ctx, ref, s, src, dst := sessionOnServer(t, "unbind-held")
			_, others := createUntil(t, ctx, c, "unbind-held-probe", src, 1) // read behind the unbind on node 0's link to src
			if tc.local {
				var err error
				if s, err = c.m(src).BindSession(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Send(ctx, []byte("s:a:1")); err != nil {
				t.Fatal(err)
			}
			bound := func(at int) bool {
				_, ok := c.nodes[at].obj.hostedSessions(actorKey(ref.ActorID))[string(s.rid)]
				return ok
			}
			waitUntil(t, "the binding on the source", func() bool { return bound(src) })
			holdAt, hooks := stepSourceReady, &testHooks{}
			if tc.fail {
				holdAt = stepSourceRecord // before the Restore, which the target refuses
				hooks.restoreChunk = func(id string, _ chunk.Binding, _ int, data []byte) []byte {
					if id != ref.ActorID {
						return data
					}
					bad := append([]byte(nil), data...)
					bad[0] ^= 0xff
					return bad
				}
			}
			atHold, release := make(chan struct{}), make(chan struct{})
			var releaseOnce sync.Once
			letGo := func() { releaseOnce.Do(func() { close(release) }) }
			defer letGo()
			hooks.relocationStep = func(id, step string) {
				if id == ref.ActorID && step == holdAt {
					close(atHold)
					<-release
				}
			}
			c.nodes[src].obj.hooks.Store(hooks)
			moved := make(chan RelocationResult, 1)
			go func() {
				res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
				if err != nil {
					res.Reason = err.Error()
				}
				moved <- res
			}()
			<-atHold
			if err := s.Send(ctx, []byte("s:a:2")); err != nil { // into the source's hold
				t.Fatal(err)
			}
			s.Close()
			if !tc.local {
				if _, err := c.m(0).RequestActor(ctx, others[0], []byte("state")); err != nil {
					t.Fatal(err)
				}
			}
			letGo()
			res := <-moved
			host := dst
			if tc.fail {
				host = src
			}
			if got := res.Outcome == Moved; got == tc.fail {
				t.Fatalf("move: %+v", res)
			}
			waitUntil(t, "the closed Session's binding gone from the Actor's host", func() bool { return !bound(host) })
			if state := probeState(t, ctx, c.m(0), ref); state.Last["a"] != 2 || state.Turns != 3 {
				t.Fatalf("state %+v: want both messages of a and the state request, no unbind among them", state)
			}
		})
	}
}

// probeState binds a fresh Session of m to ref and asks the seqType Actor
// what it saw: its request travels behind everything m's node sent before
// on its link to the Actor's host. The probe is closed (and unbinds) when
// the test ends, not before the counters are read.
func probeState(t *testing.T, ctx context.Context, m *Manager, ref ActorRef) seqState {
	t.Helper()
	probe, err := m.BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(probe.Close)
	return sessionState(t, ctx, probe)
}
