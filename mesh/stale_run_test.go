package mesh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Helpers for the tests of a node run that ended while its node's RID is
// admitted again under a new run (a rolling restart), and tests of the
// paths other than a direct send (route_restarted_run_test.go) that send
// a message toward a named node run (messaging.go, endedRun).

// restartableConfig is a server node config of mesh "m" whose routing id
// and endpoint stay the same when it is started again.
func restartableConfig(t *testing.T, rid string) config.Config {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig("m")
	cfg.Node.RoutingID = rid
	cfg.Node.Endpoint = "tcp://" + l.Addr().String()
	l.Close()
	return cfg
}

// createOnceDiscovered creates the testMoverType actor id from the client
// a, once a's discovery has read the server's registration (a has admitted
// the server's run before its discovery may list it).
func createOnceDiscovered(t *testing.T, ctx context.Context, a *Node, id string) ActorRef {
	t.Helper()
	var ref ActorRef
	var err error
	eventually(t, 10*time.Second, "the client to create the actor", func() bool {
		ref, err = a.Manager().CreateActor(ctx, id, testMoverType)
		return !errors.Is(err, ErrUnavailable)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// startClient starts a client node of mesh "m" on f's stores.
func startClient(t *testing.T, ctx context.Context, f *fixture) *Node {
	t.Helper()
	cfg := fastConfig("m")
	cfg.Node.ObjectRole = config.RoleClient
	a, err := Start(ctx, Options{Config: cfg, Factories: spot.NewRegistry(), Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

// awaitAdmitted waits until each of on has admitted n's run on its link.
func awaitAdmitted(t *testing.T, n *Node, on ...*Node) {
	t.Helper()
	rid, gen := transport.RID(n.RID()), n.LifecycleGeneration()
	for _, o := range on {
		eventually(t, 10*time.Second, "a peer to admit the node's run", func() bool {
			p, ok := o.tr.Peer(rid)
			return ok && p.LifecycleGeneration == gen
		})
	}
}

// awaitListed waits until each of on lists n's run serving with a valid
// lease: a move's placement reads that list, and a run admitted on the
// link may not be in it yet (under -race a move to n once found none,
// "1 ruled out: … not the node asked for").
func awaitListed(t *testing.T, n *Node, on ...*Node) {
	t.Helper()
	rid, gen := string(n.RID()), n.LifecycleGeneration()
	for _, o := range on {
		eventually(t, 10*time.Second, "a peer to list the node's run serving", func() bool {
			snap, ok := o.LastSnapshot()
			if !ok {
				return false
			}
			for _, e := range snap.Entries {
				if string(e.Descriptor.RoutingID) == rid && uint64(e.Descriptor.LifecycleGeneration) == gen && o.servingPeer(e) {
					return true
				}
			}
			return false
		})
	}
}

// restartNode stops n (its shutdown removes what it hosts: no drain) and
// starts it again under cfg — the same RID, a new run — and waits until
// each of on has admitted the new run.
func restartNode(t *testing.T, ctx context.Context, f *fixture, n *Node, cfg config.Config, on ...*Node) *Node {
	t.Helper()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	n2 := f.start(cfg)
	awaitAdmitted(t, n2, on...)
	return n2
}

// clientAndRestartable starts, on a new fixture, a client node a and a
// server node b under bCfg (restartableConfig with routing id rid), once a
// has admitted b; ctx ends with the test (30 s at most).
func clientAndRestartable(t *testing.T, rid string) (f *fixture, ctx context.Context, a, b *Node, bCfg config.Config) {
	t.Helper()
	f = newFixture(t)
	registerTestFactories(t, f.reg, newProbe())
	ctx = ctxT(t, 30*time.Second)
	a = startClient(t, ctx, f)
	bCfg = restartableConfig(t, rid)
	b = f.start(bCfg)
	awaitAdmitted(t, b, a)
	return f, ctx, a, b, bCfg
}

// A one-way first message to an Instance Spot whose cold activation goes to
// a node run that ended — the sender handed the id's activation there a
// moment ago (sentActivations), then the node restarted — is not sent to
// the new run, which refused it as addressed to another run (a WARN there,
// InstanceRefused) after the sender's Send had returned nil: the message
// never ran. Now the candidate is not taken, and the activation goes to a
// node running now.
func TestColdActivationToAnEndedRunGoesToARunningNode(t *testing.T) {
	f, ctx, a, b, bCfg := clientAndRestartable(t, "0b0c")
	placeOn := func(n *Node) func() (candidate, error) {
		return func() (candidate, error) {
			return a.obj.place(ctx, placeRequest{kind: record.ObjectInstanceSpot, stableType: testInstanceType, mesh: "m", only: n.RID()})
		}
	}
	var stale candidate
	eventually(t, 10*time.Second, "the client to place on b", func() bool {
		c, err := placeOn(b)()
		stale = c
		return err == nil
	})
	b2 := restartNode(t, ctx, f, b, bCfg, a)
	eventually(t, 10*time.Second, "the client's list to show b's new run", func() bool {
		c, err := placeOn(b2)()
		return err == nil && c.node.LifecycleGeneration == b2.LifecycleGeneration()
	})
	const id = "after-restart"
	a.obj.sentActivations.sent(id, testInstanceType, "m", stale)
	if err := a.Manager().SendInstance(ctx, id, []byte("hello"), InstanceType(testInstanceType)); err != nil {
		t.Fatalf("SendInstance: %v", err)
	}
	eventually(t, 10*time.Second, "the first message to be activated or refused", func() bool {
		return b2.HostsInstance(id) || b2.ObjectStats().InstanceRefused > 0
	})
	if st := b2.ObjectStats(); st.InstanceRefused != 0 {
		t.Fatalf("the new run refused %d activations addressed to the ended run (the one-way first message was lost)", st.InstanceRefused)
	}
	got, err := a.Manager().RequestInstance(ctx, id, []byte("count"), InstanceType(testInstanceType))
	if err != nil || string(got) != "count:1" {
		t.Fatalf("next message: %q, %v; want count:1 (the accepted first message ran)", got, err)
	}
}

// A message a previous owner passes on (Message Follow) along a recorded
// move to a node run that ended — the new owner stopped and started again —
// is not sent to the new run, which refused it as addressed to another run
// and dropped a one-way message (counted there, as a stale route, by a node
// that never had the object). The previous owner does not read the store
// (§7.3): when the object is gone it counts the drop itself, where why is
// known; when the object is hosted here again (the stopped run's drain
// moved it back), the chain was a way back here, and the message is
// admitted now.
func TestMessageFollowToAnEndedRunIsNotSentToTheNewRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		back bool // the new owner's drain moved the object back before it stopped
	}{
		{"object removed with the run", false},
		{"object moved back here", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, a, prev, n2, ref := movedToARunThatEnded(t, tc.back)
			before := prev.ObjectStats()
			// On a's cached route: prev passes it on along its move to n's
			// ended run.
			if err := a.Manager().SendActor(ctx, ref, []byte("two")); err != nil {
				t.Fatalf("send: %v", err)
			}
			// Waited for by its outcome: refused or admitted at prev, or
			// refused by the new run. FollowForwarded is counted before the
			// send, which the transport may refuse (the run it names ended).
			eventually(t, 10*time.Second, "prev to refuse or admit the message, or the new run to refuse it", func() bool {
				st := prev.ObjectStats()
				return st.FollowRefused+st.Delivered > before.FollowRefused+before.Delivered || n2.ObjectStats().FenceRefused > 0
			})
			st, st2 := prev.ObjectStats(), n2.ObjectStats()
			if st.FollowForwarded != before.FollowForwarded || st2.FenceRefused != 0 {
				t.Fatalf("passed on to the new run (forwarded %d→%d; the new run refused %d)", before.FollowForwarded, st.FollowForwarded, st2.FenceRefused)
			}
			if tc.back {
				if st.Delivered != before.Delivered+1 {
					t.Fatalf("the object hosted on prev again got %d messages, want 1", st.Delivered-before.Delivered)
				}
				return
			}
			if st.FollowRefused != before.FollowRefused+1 {
				t.Fatalf("prev refused %d follows, want 1 (the loss counted where it is known)", st.FollowRefused-before.FollowRefused)
			}
			// A request on the same route is answered at once: refused by
			// prev to its origin, which reads the store (the object is gone).
			if _, err := a.Manager().RequestActor(ctx, ref, []byte("three")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("request: %v, want ErrNotFound", err)
			}
			if st := prev.ObjectStats(); st.FollowRefused != before.FollowRefused+2 {
				t.Fatalf("prev refused %d follows, want 2 (the request went by the cached route)", st.FollowRefused-before.FollowRefused)
			}
		})
	}
}

// movedToARunThatEnded creates an actor on a server prev, which a client a
// has sent a message to (its cached route names prev), moves it to a server
// n, and — with back, by n's drain — back to prev; then n stops and starts
// again as n2, admitted by a and prev. prev's follow record of the first
// stay names n's run that ended.
func movedToARunThatEnded(t *testing.T, back bool) (ctx context.Context, a, prev, n2 *Node, ref ActorRef) {
	t.Helper()
	ctx, f, a, prev, n, nCfg, ref := movedToARestartable(t, back)
	n2 = restartNode(t, ctx, f, n, nCfg, a, prev)
	return ctx, a, prev, n2, ref
}

// movedToARestartable is movedToARunThatEnded before n stops: the object
// was moved to n (and, with back, back to prev), n runs under nCfg.
func movedToARestartable(t *testing.T, back bool) (ctx context.Context, f *fixture, a, prev, n *Node, nCfg config.Config, ref ActorRef) {
	t.Helper()
	return movedToARestartableOn(t, back, nil)
}

// movedToARestartableOn is movedToARestartable with prev on the Location
// Store prevLoc makes of the fixture's (nil: the fixture's).
func movedToARestartableOn(t *testing.T, back bool, prevLoc func(*fixture) locstore.Store) (ctx context.Context, f *fixture, a, prev, n *Node, nCfg config.Config, ref ActorRef) {
	t.Helper()
	f = newFixture(t)
	registerTestFactories(t, f.reg, newProbe())
	ctx = ctxT(t, 60*time.Second)
	a = startClient(t, ctx, f)
	if prevLoc == nil {
		prev = f.start(fastConfig("m"))
	} else {
		prev = f.startOn(fastConfig("m"), prevLoc(f))
	}
	awaitAdmitted(t, prev, a)
	ref = createOnceDiscovered(t, ctx, a, "followed")
	// a's route cache now holds the object on prev.
	if err := a.Manager().SendActor(ctx, ref, []byte("one")); err != nil {
		t.Fatal(err)
	}
	nCfg = restartableConfig(t, "0b0d")
	n = f.start(nCfg)
	awaitAdmitted(t, n, a, prev)
	awaitAdmitted(t, prev, n)
	// Once prev's discovery lists n (admitted is not listed: the move's
	// placement reads the list; under -race it once ran before the round).
	var res RelocationResult
	var err error
	eventually(t, 10*time.Second, "prev to move the object to n", func() bool {
		res, err = prev.Manager().RelocateActor(ctx, ref, ToNode(n.RID()))
		return !errors.Is(err, ErrUnavailable)
	})
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move to n: %+v, %v", res, err)
	}
	if back {
		if _, err := n.Drain(ctx, HostRelocateOptions{}); err != nil {
			t.Fatalf("drain: %v", err)
		}
		if _, ok := prev.obj.hostedFor(actorKey(ref.ActorID)); !ok {
			t.Fatal("the drain did not move the object back to prev")
		}
	}
	return ctx, f, a, prev, n, nCfg, ref
}

// The one-way messages a move took in, whose record comes to name an owner
// the move did not make on a run of that owner's node that ended (the
// node is admitted again under another run), are not handed over to the
// run admitted now: it refused them as addressed to another run and dropped
// them, while the handover counted them passed on. Now they are counted
// lost at the handover (its WARN line) and nothing is sent. A later run
// than the one the link holds (the link has not caught up with a restart)
// gets nothing on the link either — the old session would have kept them
// for the old run — but it is the node's run now: the follow record to it
// is kept, for what comes once the link admits it.
func TestOwnerChangedToAnEndedRunHandsNothingToTheNewRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		later   bool // the record names a later run than the one admitted
		follows bool // a follow record to that run is kept
	}{
		{"an earlier run", false, false},
		{"a later run", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHandoverScene(t, "handover-ended-run")
			for i := 1; i <= 3; i++ {
				if err := s.c.m(0).SendActor(s.ctx, s.ref, []byte(fmt.Sprintf("held-%d", i))); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 20*time.Second, "the messages in the source's hold", func() bool { return s.queuedAtSource() == 3 })
			other := s.c.nodes[s.other]
			gen := other.run.lifecycleGeneration
			if gen < 2 {
				t.Fatalf("node %d runs as %d: no earlier run to name", s.other, gen)
			}
			named := gen - 1 // a run of that node that ended
			if tc.later {
				named = gen + 1
			}
			owner, lg := other.Owner()
			if err := rewriteOwner(s.c, s.ref.ActorID, func(a *record.Authority) {
				a.OwnerID, a.OwnerLeaseGeneration = owner, record.Generation(lg)
				a.Allocation.Descriptor.RoutingID = append([]byte(nil), other.RID()...)
				a.Allocation.DescriptorLifecycleGeneration = record.Generation(named)
			}); err != nil {
				t.Fatal(err)
			}
			before := other.ObjectStats()
			s.cancel()
			s.ended(t)
			// A request from the source behind what the handover sent, on the same
			// link: once it is answered, anything handed over was read there.
			flushLink(t, s.ctx, s.c.nodes[s.src], other)
			if got := other.ObjectStats().FenceRefused - before.FenceRefused; got != 1 {
				t.Fatalf("the run admitted now refused %d messages handed over to another run", got-1)
			}
			if got := s.c.nodes[s.src].obj.follow.Len() > 0; got != tc.follows {
				t.Fatalf("follow record kept at the source: %v, want %v", got, tc.follows)
			}
		})
	}
}

// flushLink sends a request from node from to node to, on from's ordered
// link to to, for an object to does not host, and waits for its refusal
// (ErrNotFound): what from sent to before was read there by then. It adds 1
// to to's FenceRefused.
func flushLink(t *testing.T, ctx context.Context, from, to *Node) {
	t.Helper()
	owner, lg := to.Owner()
	_, err := from.obj.deliverRemote(ctx, msgTarget{fam: familyActor, id: "link-flush", gen: 1},
		follow.Ready{ObjectGeneration: 1, AuthorityOwnerGeneration: 1, Owner: follow.Owner{ID: owner, LeaseGeneration: lg},
			Route: follow.Route{NodeRID: to.RID(), NodeGeneration: to.LifecycleGeneration()}}, nil, true)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("request to flush the link: %v, want ErrNotFound", err)
	}
}

// A message for an earlier stay of an object hosted here again, whose
// follow chain is cut at a run that ended, is admitted here with the
// object's current fence (readmit) — and when that admission refuses it
// too (here: the object is closing), the refusal is the current stay's:
// two follow refusals (the earlier stay's, whose next owner's run ended;
// the current stay's, which has no move to follow) and Unavailable to the
// requester. Before, the refusal went back through the earlier stay's follow
// record to readmit again, round and round on the connection's reader for
// as long as the close lasted (a store Delete; the goroutine's stack grew
// with every round), and the request ran once the close was undone.
func TestReadmittedMessageRefusedAgainIsNotFollowedAgain(t *testing.T) {
	ctx, a, prev, _, ref := movedToARunThatEnded(t, true)
	key := actorKey(ref.ActorID)
	setState := func(s hostState) {
		prev.obj.mu.Lock()
		defer prev.obj.mu.Unlock()
		h, ok := prev.obj.hosted[key]
		if !ok {
			t.Error("the object is not hosted on prev")
			return
		}
		h.state = s
	}
	// A close under way: its store Delete not returned yet.
	setState(hostClosing)
	before := prev.ObjectStats()
	// Undone once prev has refused to follow the message three times
	// (before the fix: readmitted and refused again, in a loop).
	done := make(chan struct{})
	undone := make(chan struct{})
	go func() {
		defer close(undone)
		for prev.ObjectStats().FollowRefused < before.FollowRefused+3 {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
		setState(hostServing)
	}()
	// On a's cached route (the earlier stay): prev cannot pass it on.
	_, err := a.Manager().RequestActor(ctx, ref, []byte("req"))
	close(done)
	<-undone
	setState(hostServing)
	if got := prev.ObjectStats().FollowRefused - before.FollowRefused; got != 2 {
		t.Fatalf("prev refused to follow the request %d times, want 2", got)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("request to a closing object: %v, want ErrUnavailable (it ran once the close was undone)", err)
	}
}

// endedRun tells a run that ended — an earlier one than the run of its node
// admitted on the link now — from a run the link has not caught up with: a
// later one (the node restarted, and the link still holds the session of
// its previous run, which a hard stop leaves open until liveness or the
// new run's hello ends it). The later run is alive: its messages are not
// sent yet (on the old session they were kept for the old run and dropped
// when the new one was admitted), as over a link that is down — not
// refused as a route to a run that ended (a stale route: the cause
// other_run, a readmit on a previous owner, no follow record at a
// handover). The send itself tells them apart the same way (the transport
// checks the run on the session it queues on; deliverRemote): a one-way
// message for an object b does not host, which b refuses when its run is
// named.
func TestEndedRunIsOnlyAnEarlierRun(t *testing.T) {
	_, ctx, a, b, _ := clientAndRestartable(t, "0b0e")
	gen := b.LifecycleGeneration()
	owner, lg := b.Owner()
	checks := []struct {
		name  string
		check func(rid []byte, gen uint64) error
	}{
		{"endedRun", a.obj.endedRun},
		{"the send", func(rid []byte, gen uint64) error {
			_, err := a.obj.deliverRemote(ctx, msgTarget{fam: familyActor, id: "ended-run", gen: 1},
				follow.Ready{ObjectGeneration: 1, AuthorityOwnerGeneration: 1, Owner: follow.Owner{ID: owner, LeaseGeneration: lg},
					Route: follow.Route{NodeRID: rid, NodeGeneration: gen}}, nil, false)
			return err
		}},
	}
	for _, tc := range []struct {
		name     string
		rid      []byte
		gen      uint64
		ended    bool // errRunEnded (a stale route)
		notAdmit bool // transport.ErrNotAdmitted (not sent, as over a link that is down)
	}{
		{"the run admitted", b.RID(), gen, false, false},
		{"an earlier run", b.RID(), gen - 1, true, false},
		{"a later run", b.RID(), gen + 1, false, true},
		{"no link", []byte{0x0b, 0xff}, gen, false, false},
	} {
		for _, c := range checks {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				err := c.check(tc.rid, tc.gen)
				if got := errors.Is(err, errRunEnded); got != tc.ended {
					t.Errorf("%s(%x/%d) = %v: ended %v, want %v", c.name, tc.rid, tc.gen, err, got, tc.ended)
				}
				if got := errors.Is(err, errRouteStale); got != tc.ended {
					t.Errorf("%s(%x/%d) = %v: stale route %v, want %v", c.name, tc.rid, tc.gen, err, got, tc.ended)
				}
				if got := errors.Is(err, transport.ErrNotAdmitted); got != tc.notAdmit {
					t.Errorf("%s(%x/%d) = %v: not admitted %v, want %v", c.name, tc.rid, tc.gen, err, got, tc.notAdmit)
				}
				if (err != nil) != errors.Is(err, ErrUnavailable) {
					t.Errorf("%s(%x/%d) = %v, want nil or ErrUnavailable", c.name, tc.rid, tc.gen, err)
				}
			})
		}
	}
}

// A message for an earlier stay of an object that came back here and is
// moving on — it meets the object in its cutover, and waits for it in the
// fence check — follows the object along the move just recorded, once the
// earlier stay's follow chain turns out cut at a run that ended. Before, it
// went back to that chain and was dropped (other_run), though the object's
// way on was recorded here.
func TestMessageForAnEarlierStayFollowsTheObjectOutOfItsCutover(t *testing.T) {
	ctx, a, prev, n2, ref := movedToARunThatEnded(t, true)
	awaitListed(t, n2, prev)
	atCutover, waiting, goOn := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(goOn) }) }
	t.Cleanup(release)
	prev.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		switch {
		case id != ref.ActorID:
		case step == stepSourceCutover:
			close(atCutover)
			<-goOn
		case step == stepCutoverWait:
			close(waiting)
		}
	}})
	moving := make(chan error, 1)
	go func() {
		res, err := prev.Manager().RelocateActor(ctx, ref, ToNode(n2.RID()))
		if err == nil && res.Outcome != Moved {
			err = fmt.Errorf("outcome %v", res.Outcome)
		}
		moving <- err
	}()
	waitClosed(t, atCutover, "prev's move to n2 at its cutover")
	before, before2, beforeA := prev.ObjectStats(), n2.ObjectStats(), a.ObjectStats()
	// On a's cached route (the earlier stay): it waits for the cutover.
	if err := a.Manager().SendActor(ctx, ref, []byte("two")); err != nil {
		t.Fatalf("send: %v", err)
	}
	waitClosed(t, waiting, "the message to wait for the cutover")
	release()
	if err := <-moving; err != nil {
		t.Fatalf("move to n2: %v", err)
	}
	// Its cutover queue ends once it has been admitted again, passed on
	// or refused.
	eventually(t, 10*time.Second, "prev to take the message again after the cutover", func() bool {
		return prev.obj.cutoverQueues.Load() == 0
	})
	if st := prev.ObjectStats(); st.FollowForwarded != before.FollowForwarded+1 {
		t.Fatalf("prev passed on %d messages after the cutover (refused %d), want 1: the message did not follow the object",
			st.FollowForwarded-before.FollowForwarded, st.FollowRefused-before.FollowRefused)
	}
	eventually(t, 10*time.Second, "the message to reach the object on n2", func() bool {
		return n2.ObjectStats().Delivered > before2.Delivered
	})
	// The next one on a's cached route goes the same way, now to the
	// object open on n2 (the first went into its arrival, which sends no
	// command 50): n2's 50 names the route a used (the earlier stay's),
	// not the later stay's fence prev re-addressed it with, and a's cache
	// drops it. Before, the 50 named a route a's cache never held, and a
	// kept sending on the cut chain until its entry aged out.
	eventually(t, 10*time.Second, "the object to serve on n2", func() bool {
		n2.obj.mu.Lock()
		defer n2.obj.mu.Unlock()
		h, ok := n2.obj.hosted[actorKey(ref.ActorID)]
		return ok && h.state == hostServing
	})
	if err := a.Manager().SendActor(ctx, ref, []byte("three")); err != nil {
		t.Fatalf("send: %v", err)
	}
	eventually(t, 10*time.Second, "n2's command 50 to drop a's route", func() bool {
		return a.ObjectStats().FollowRoutesDropped > beforeA.FollowRoutesDropped
	})
}

// A message a previous owner passes on (Message Follow) is checked against
// the new owner's run on the send itself (the transport, on the session it
// queues on), not asked of the link before: here the new owner stops and
// starts again right before the pass-on's send (stepFollowPassOn, after
// where that check was), and its new run — which refused the message as
// addressed to another run, and dropped it — gets nothing. prev refuses
// it, where why is known.
func TestFollowToARunRestartedJustBeforeTheSendGetsNothing(t *testing.T) {
	ctx, f, a, prev, n, nCfg, ref := movedToARestartable(t, false)
	atPassOn, goOn := make(chan struct{}), make(chan struct{})
	var once sync.Once
	prev.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepFollowPassOn {
			once.Do(func() {
				close(atPassOn)
				<-goOn
			})
		}
	}})
	before := prev.ObjectStats()
	// On a's cached route: prev passes it on along its move to n.
	if err := a.Manager().SendActor(ctx, ref, []byte("two")); err != nil {
		t.Fatalf("send: %v", err)
	}
	select {
	case <-atPassOn:
	case <-ctx.Done():
		t.Fatal("prev did not pass the message on")
	}
	n2 := restartNode(t, ctx, f, n, nCfg, a, prev)
	close(goOn)
	eventually(t, 10*time.Second, "prev to refuse the message, or the new run to", func() bool {
		return prev.ObjectStats().FollowRefused > before.FollowRefused || n2.ObjectStats().FenceRefused > 0
	})
	flushLink(t, ctx, prev, n2)
	if st := n2.ObjectStats(); st.FenceRefused != 1 {
		t.Fatalf("the new run refused %d messages passed on to the run that ended", st.FenceRefused-1)
	}
	if st := prev.ObjectStats(); st.FollowForwarded != before.FollowForwarded || st.FollowRefused != before.FollowRefused+1 {
		t.Fatalf("prev passed on %d messages and refused %d, want 0 and 1", st.FollowForwarded-before.FollowForwarded, st.FollowRefused-before.FollowRefused)
	}
}

// A message a closing node reads after its pass-ons were sealed, for an
// object whose new owner's run ended, is refused by the send (the run it
// names ended) and not passed on: the close's WARN counts it neither
// among those passed on unconfirmed (passed.late: "sent, not confirmed").
// Counted before the send, it was, once the run was checked by the send
// rather than before the pass-on began.
func TestPassOnRefusedAfterTheSealIsNotCountedLate(t *testing.T) {
	ctx, a, prev, _, ref := movedToARunThatEnded(t, false)
	prev.obj.passed.seal(context.Background()) // as the closing node's last round does
	before := prev.ObjectStats()
	if err := a.Manager().SendActor(ctx, ref, []byte("two")); err != nil {
		t.Fatalf("send: %v", err)
	}
	eventually(t, 10*time.Second, "prev to refuse the message", func() bool {
		return prev.ObjectStats().FollowRefused > before.FollowRefused
	})
	if n := prev.obj.passed.late.Load(); n != 0 {
		t.Fatalf("%d messages counted passed on after the seal; none was (the new owner's run ended)", n)
	}
}

// The held messages a move relays to its target (§1.3 step 5) name the
// target's run in their route fence, as any object message: when the
// target stopped and started again after its relay-ready and the link
// admitted the new run before the relay, they are not sent there. The new
// run refused them as addressed to another run — counting one-way ones
// dropped (other_run), answering a request "not run" to its requester —
// while the source, whose target can no longer commit, put them back into
// the object (recoverLocal), a request too, which then ran although its
// requester had been told it did not. Refused by the send, they stay
// unrelayed, and the object taken back runs each once.
func TestHeldMessagesAreNotRelayedToARestartedTarget(t *testing.T) {
	f := newFixture(t)
	registerTestFactories(t, f.reg, newProbe())
	ctx := ctxT(t, 60*time.Second)
	a := startClient(t, ctx, f)
	prev := f.start(fastConfig("m"))
	awaitAdmitted(t, prev, a)
	ref := createOnceDiscovered(t, ctx, a, "relayed")
	nCfg := restartableConfig(t, "0b10")
	n := f.start(nCfg)
	awaitAdmitted(t, n, a, prev)
	awaitAdmitted(t, prev, n)
	awaitListed(t, n, prev)
	const held = 3
	var n2 *Node
	var once sync.Once
	type answer struct {
		body []byte
		err  error
	}
	request := make(chan answer, 1)
	prev.obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id != ref.ActorID || step != stepSourceReady {
			return
		}
		once.Do(func() {
			// Into the object's ingress hold, which is relayed next:
			// one-way messages, then a request behind them.
			for i := 0; i < held; i++ {
				if err := prev.Manager().SendActor(ctx, ref, []byte("held")); err != nil {
					t.Errorf("send into the hold: %v", err)
				}
			}
			go func() {
				body, err := a.Manager().RequestActor(ctx, ref, []byte("count"))
				request <- answer{body, err}
			}()
			eventually(t, 10*time.Second, "the request to reach the hold", func() bool {
				prev.obj.mu.Lock()
				defer prev.obj.mu.Unlock()
				h, ok := prev.obj.hosted[actorKey(ref.ActorID)]
				return ok && h.obj.Queued() == held+1
			})
			n2 = restartNode(t, ctx, f, n, nCfg, a, prev)
		})
	}})
	mctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	res, err := prev.Manager().RelocateActor(mctx, ref, ToNode(n.RID()))
	prev.obj.hooks.Store(nil)
	if n2 == nil {
		t.Fatalf("the move did not reach relay-ready: %v, %v", res, err)
	}
	if err != nil || res.Outcome != NotMoved {
		t.Fatalf("move: %v, %v; want notMoved (its target's run ended)", res.Outcome, err)
	}
	// The held request runs once, after the held one-way messages, on the
	// object taken back, and its requester gets that answer.
	if r := <-request; r.err != nil || string(r.body) != fmt.Sprintf("count:%d", held) {
		t.Fatalf("held request: %q, %v; want count:%d (run once, by the object taken back)", r.body, r.err, held)
	}
	got, err := a.Manager().RequestActor(ctx, ref, []byte("count"))
	if err != nil || string(got) != fmt.Sprintf("count:%d", held) {
		t.Fatalf("the object taken back: %q, %v; want count:%d (each held message run once)", got, err, held)
	}
	flushLink(t, ctx, prev, n2)
	if st := n2.ObjectStats(); st.FenceRefused != 1 {
		t.Fatalf("the new run refused %d messages relayed to the run that ended", st.FenceRefused-1)
	}
}
