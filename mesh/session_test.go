package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Bound Sessions stream sequence-numbered Sends and Requests to an Actor
// while it moves from one server to the other and back, twice: every
// message is delivered once and in order, each move switches every
// Session's route to the target by command 44 (Actor().NodeRID,
// SessionRouteSwitches), the bindings travel with the Actor, and the
// Sessions' node reads the Location Store only to bind. One Session sends
// a Request every 10 messages, the other every 100, so that one-way
// messages are on their way while a move ends (relayed from the ingress
// hold, or passed on by the previous owner before the switch).
func TestSessionFollowsActorAcrossMoves(t *testing.T) {
	t.Run("memory", func(t *testing.T) { runSessionAcrossMoves(t, nil) })
	t.Run("redis", func(t *testing.T) { runSessionAcrossMoves(t, newRedisLocation(t)) })
}

// sessionStream sends "s:<name>:<n>" (and every period-th a request
// "q:<name>:<n>", answered "ok:<n>") on s from one goroutine, so its order
// is the order to keep, until stop closes.
type sessionStream struct {
	name   string
	s      *Session
	period int64
	pace   time.Duration // a pause after each message (0: none)
	sent   atomic.Int64  // the last n accepted
	done   chan error
}

func (st *sessionStream) run(ctx context.Context, stop <-chan struct{}) {
	for n := int64(1); ; n++ {
		select {
		case <-stop:
			st.done <- nil
			return
		default:
		}
		var err error
		if n%st.period == 0 {
			var got []byte
			got, err = st.s.Request(ctx, []byte(fmt.Sprintf("q:%s:%d", st.name, n)))
			if err == nil && string(got) != fmt.Sprintf("ok:%d", n) {
				err = fmt.Errorf("answered %q", got)
			}
		} else {
			err = st.s.Send(ctx, []byte(fmt.Sprintf("s:%s:%d", st.name, n)))
			if errors.Is(err, transport.ErrBackpressure) {
				// Not sent (the link to the owner is full): the same
				// message again, after a pause for the link to drain.
				time.Sleep(time.Millisecond)
				n--
				continue
			}
		}
		if err != nil {
			st.done <- fmt.Errorf("%s message %d: %w", st.name, n, err)
			return
		}
		st.sent.Store(n)
		if st.pace > 0 {
			time.Sleep(st.pace)
		}
	}
}

// sessionState asks the seqType Actor behind s what it saw.
func sessionState(t *testing.T, ctx context.Context, s *Session) seqState {
	t.Helper()
	got, err := s.Request(ctx, []byte("state"))
	return decodeSeqState(t, got, err)
}

// waitStreaming is waitUntil that fails at once when a stream ended.
func waitStreaming(t *testing.T, what string, streams []*sessionStream, cond func() bool) {
	t.Helper()
	waitUntil(t, what, func() bool {
		for _, st := range streams {
			select {
			case err := <-st.done:
				t.Fatalf("%s: the %s stream ended: %v", what, st.name, err)
			default:
			}
		}
		return cond()
	})
}

func runSessionAcrossMoves(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	reg := registerSeqType(t, f)
	c := newClusterOn(t, f, loc, 3, clientRole0)
	ctx := ctxT(t, 90*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "sess-seq", seqType)
	if err != nil {
		t.Fatal(err)
	}
	var streams []*sessionStream
	for _, p := range []int64{10, 100} {
		s, err := c.m(0).BindSession(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams = append(streams, &sessionStream{name: fmt.Sprintf("sess%d", p), s: s, period: p, done: make(chan error, 1)})
	}
	reads := c.nodes[0].ObjectStats().AuthorityReads
	home := c.indexOf(streams[0].s.Actor().NodeRID)
	if home < 1 {
		t.Fatalf("bound to node %d", home)
	}
	stop := make(chan struct{})
	for _, st := range streams {
		go st.run(ctx, stop)
	}
	advance := func(what string) {
		from := streams[0].sent.Load()
		waitStreaming(t, what, streams, func() bool { return streams[0].sent.Load() >= from+30 })
	}

	route := []int{home, 3 - home, home, 3 - home, home} // servers 1 and 2: there and back, twice
	for i := 1; i < len(route); i++ {
		advance("messages before the move")
		src, dst := route[i-1], route[i]
		res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
		if err != nil || res.Outcome != Moved || !res.Confirmed {
			t.Fatalf("move %d: %+v, %v", i, res, err)
		}
		for _, st := range streams {
			waitStreaming(t, fmt.Sprintf("%s's route on node %d", st.name, dst), streams, func() bool {
				return bytes.Equal(st.s.Actor().NodeRID, c.nodes[dst].RID())
			})
			if _, ok := c.nodes[dst].obj.hostedSessions(actorKey(ref.ActorID))[string(st.s.rid)]; !ok {
				t.Fatalf("move %d: %s's binding did not move with the Actor", i, st.name)
			}
		}
		if got := c.nodes[0].ObjectStats().SessionRouteSwitches; got != uint64(i*len(streams)) {
			t.Fatalf("after move %d: %d route switches", i, got)
		}
	}
	advance("messages after the last move")
	close(stop)
	for _, st := range streams {
		if err := <-st.done; err != nil {
			t.Fatal(err)
		}
	}
	state := sessionState(t, ctx, streams[0].s)
	if state.Duplicates != 0 || state.Gaps != 0 || state.Hops != len(route)-1 {
		t.Fatalf("state %+v (want no duplicates, no gaps, %d hops)", state, len(route)-1)
	}
	for _, st := range streams {
		if last := int(st.sent.Load()); state.Last[st.name] != last {
			t.Fatalf("%s: last seen %d, sent %d", st.name, state.Last[st.name], last)
		}
	}
	if n := reg.overlap.Load(); n != 0 {
		t.Fatalf("%d overlapping turns", n)
	}
	stats := c.nodes[0].ObjectStats()
	if stats.AuthorityReads != reads || stats.SessionRebinds != 0 || stats.SessionRoutesIgnored != 0 {
		t.Fatalf("session node: %d store reads after binding, %d rebinds, %d commands 44 ignored",
			stats.AuthorityReads-reads, stats.SessionRebinds, stats.SessionRoutesIgnored)
	}
	t.Logf("sent %d and %d; %d passed on by previous owners", streams[0].sent.Load(), streams[1].sent.Load(),
		c.nodes[1].ObjectStats().FollowForwarded+c.nodes[2].ObjectStats().FollowForwarded)
}

// failRestoreType's snapshot Restore fails on the target, after the test
// let it go: the move is cancelled before relay-ready (§9.4).
const failRestoreType = "test.session-fail-restore"

// abortObj counts sends; a "probe" send records what sentAt returned when
// it ran.
type abortObj struct {
	mu     sync.Mutex
	sends  int
	sentAt func() int64
	probed *atomic.Int64
}

func (a *abortObj) Receive(t *spot.Turn, env spot.Envelope) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if env.Kind == spot.Request {
		return t.Reply([]byte("count:" + strconv.Itoa(a.sends)))
	}
	a.sends++
	if string(env.Body) == "probe" {
		a.probed.Store(a.sentAt())
	}
	return nil
}

type failRestore struct {
	restoring chan struct{}
	once      *sync.Once
	release   chan struct{}
}

func (failRestore) Snapshot(spot.Handler) ([]byte, error) { return []byte("x"), nil }

func (r failRestore) Restore(ctx context.Context, _ spot.CreateRequest, _ []byte) (spot.Handler, error) {
	r.once.Do(func() { close(r.restoring) })
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	return nil, errors.New("restore refused by the test")
}

// A move cancelled before relay-ready (the target's Restore fails) sends
// command 44 abort to the Session's owner before the source reopens: a
// message held during the move runs after the reopen and sees the abort
// already sent. The Session keeps its route, counts the abort, and keeps
// delivering in order without reading the store.
func TestSessionAbortOnCancelledMove(t *testing.T) {
	f := newFixture(t)
	fr := failRestore{restoring: make(chan struct{}), once: new(sync.Once), release: make(chan struct{})}
	var probed atomic.Int64
	probed.Store(-1)
	var sentAt atomic.Pointer[func() int64]
	if err := f.reg.Register(spot.Factory{StableType: failRestoreType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState, Snapshot: fr,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return &abortObj{probed: &probed, sentAt: func() int64 { return (*sentAt.Load())() }}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	ref, s := boundSession(t, ctx, c, "sess-abort", failRestoreType)
	if got, err := s.Request(ctx, []byte("count")); err != nil || string(got) != "count:3" {
		t.Fatalf("before: %q, %v", got, err)
	}
	src := c.indexOf(s.Actor().NodeRID)
	dst := 3 - src
	fn := func() int64 { return int64(c.nodes[src].ObjectStats().SessionRoutesSent) }
	sentAt.Store(&fn)
	reads := c.nodes[0].ObjectStats().AuthorityReads

	moved := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	select {
	case <-fr.restoring:
	case <-ctx.Done():
		t.Fatal("the target never restored")
	}
	// The source holds dispatch: the probe waits in the ingress hold.
	if err := s.Send(ctx, []byte("probe")); err != nil {
		t.Fatal(err)
	}
	h, _ := c.nodes[src].obj.hostedFor(actorKey(ref.ActorID))
	waitUntil(t, "the probe in the ingress hold", func() bool { return h.obj.Queued() == 1 })
	close(fr.release)
	if res := outcomeOf(t, moved); res.Outcome != NotMoved {
		t.Fatalf("move: %+v", res)
	}
	if got, err := s.Request(ctx, []byte("count")); err != nil || string(got) != "count:4" {
		t.Fatalf("after: %q, %v", got, err)
	}
	if got := probed.Load(); got != 1 {
		t.Fatalf("when the first turn after the reopen ran, the source had sent %d commands 44 (want the abort)", got)
	}
	waitUntil(t, "the abort at the session's owner", func() bool { return c.nodes[0].ObjectStats().SessionAborts == 1 })
	stats := c.nodes[0].ObjectStats()
	if !bytes.Equal(s.Actor().NodeRID, c.nodes[src].RID()) || stats.SessionRouteSwitches != 0 || stats.SessionRoutesIgnored != 0 ||
		stats.AuthorityReads != reads || stats.SessionRebinds != 0 {
		t.Fatalf("route %x (source %x), stats %+v, %d store reads", s.Actor().NodeRID, c.nodes[src].RID(), stats, stats.AuthorityReads-reads)
	}
	if n := c.nodes[dst].ObjectStats().SessionRoutesSent; n != 0 {
		t.Fatalf("the target sent %d commands 44", n)
	}
}

// Command 44 at the Session's owner, through the wire and the dispatch
// table: what does not match the live Session's owner run, RID, Actor,
// binding generation and route is ignored and counted (a commit of a move
// the route is already past too; one of a later move, whose predecessors'
// commits are late, is taken as the next move's); an abort keeps the
// route; a commit whose ReplayedHighWater covers every message sent
// switches at once; one below waits for the new owner to admit the last
// message sent on the old route (command 50).
func TestSessionCommand44(t *testing.T) {
	c := newCluster(t, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	ref, s := boundSession(t, ctx, c, "sess-44", testMoverType)
	cur := s.route.ownerGen
	owner, lg := c.nodes[0].Owner()
	srv, srvLease := c.nodes[1].Owner()
	abort := func(gen uint64) router.SessionRouteUpdate {
		return router.SessionRouteUpdate{Action: router.RouteAbort, Abort: &router.SessionRouteAbort{CurrentAuthorityOwnerGeneration: gen}}
	}
	commit := func(prev, hw uint64) router.SessionRouteUpdate {
		return router.SessionRouteUpdate{Action: router.RouteCommit, Commit: &router.SessionRouteCommit{PreviousAuthorityOwnerGeneration: prev,
			TargetAuthorityOwnerGeneration: prev + 1, TargetNodeRID: c.nodes[1].RID(), TargetNodeGeneration: c.nodes[1].LifecycleGeneration(),
			ReplayedHighWater: hw}}
	}
	base := func(role router.RelocationRole, u router.SessionRouteUpdate) *router.SessionRelocationRoute {
		return &router.SessionRelocationRoute{Relocation: router.RelocationID{High: 1, Low: 2},
			Coordinator: router.RelocationCoordinatorFence{CoordinatorOwnerID: srv, CoordinatorLeaseGeneration: srvLease,
				CoordinatorNodeRID: c.nodes[1].RID(), CoordinatorNodeGeneration: c.nodes[1].LifecycleGeneration(), ExpectedAuthorityStoreVersion: "v"},
			SenderRole: role, Actor: router.ActorRef{ActorID: ref.ActorID, ObjectGeneration: ref.ObjectGeneration},
			SessionOwnerNodeRID: c.nodes[0].RID(), SessionOwnerNodeGeneration: c.nodes[0].LifecycleGeneration(), SessionOwnerID: owner,
			SessionOwnerLeaseGeneration: lg, SessionRID: s.rid, BindingGeneration: 1, Route: u}
	}
	steps := []struct {
		name                      string
		rec                       *router.SessionRelocationRoute
		ignored, aborts, switches uint64
		wantOwnerGen, wantPending uint64 // the route's AuthorityOwnerGeneration; a pending switch's "after" (0: none)
	}{
		{"abort keeps the route", base(router.RoleSource, abort(cur)), 0, 1, 0, cur, 0},
		{"abort of another generation", base(router.RoleSource, abort(cur+1)), 1, 1, 0, cur, 0},
		{"other binding generation", func() *router.SessionRelocationRoute {
			r := base(router.RoleSource, abort(cur))
			r.BindingGeneration = 2
			return r
		}(), 2, 1, 0, cur, 0},
		{"unknown session", func() *router.SessionRelocationRoute {
			r := base(router.RoleSource, abort(cur))
			r.SessionRID = bytes.Repeat([]byte{7}, 16)
			return r
		}(), 3, 1, 0, cur, 0},
		{"another host run of the owner node", func() *router.SessionRelocationRoute {
			r := base(router.RoleSource, abort(cur))
			r.SessionOwnerLeaseGeneration++
			return r
		}(), 4, 1, 0, cur, 0},
		{"another actor", func() *router.SessionRelocationRoute {
			r := base(router.RoleSource, abort(cur))
			r.Actor.ActorID = "someone-else"
			return r
		}(), 5, 1, 0, cur, 0},
		{"commit to a node run not in the descriptor list", func() *router.SessionRelocationRoute {
			r := base(router.RoleTarget, commit(cur, 3))
			r.Route.Commit.TargetNodeRID = []byte{0xee}
			return r
		}(), 6, 1, 0, cur, 0},
		{"commit below the last sequence waits", base(router.RoleTarget, commit(cur, 2)), 6, 1, 0, cur, 3},
		{"commit of the next move chains on the pending one", base(router.RoleCoordinator, commit(cur+1, 3)), 6, 1, 1, cur + 2, 0},
		{"late commit of a move the route is past", base(router.RoleTarget, commit(cur, 3)), 7, 1, 1, cur + 2, 0},
		{"late commit of the move the route came by", base(router.RoleTarget, commit(cur+1, 3)), 7, 1, 1, cur + 2, 0},
		{"commit of a later move whose predecessor's commit is late", base(router.RoleTarget, commit(cur+3, 3)), 7, 1, 2, cur + 4, 0},
	}
	for _, st := range steps {
		if err := c.nodes[1].Transport().SendWait(ctx, c.nodes[0].RID(), router.NewRecord(st.rec, nil, nil)); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		// Each step changes a counter or the route: wait for all of it.
		waitUntil(t, st.name, func() bool {
			x := c.nodes[0].ObjectStats()
			s.mu.Lock()
			gen, pending := s.route.ownerGen, uint64(0)
			if s.pending != nil {
				pending = s.pending.after
			}
			s.mu.Unlock()
			return x.SessionRoutesIgnored == st.ignored && x.SessionAborts == st.aborts && x.SessionRouteSwitches == st.switches &&
				gen == st.wantOwnerGen && pending == st.wantPending
		})
	}

	// A pending switch completes when the new owner admitted the last
	// message sent on the old route (or a later one), not an earlier one.
	next := cur + 6
	s.mu.Lock()
	s.pending = newSessionSwitch(routeTo{nodeRID: c.nodes[1].RID(), nodeGen: c.nodes[1].LifecycleGeneration(), ownerGen: next, leaseGen: srvLease}, 3, 0)
	s.mu.Unlock()
	notice := func(ownerGen uint64) router.MessageFollowRoute {
		return followRoute(inMessage{fam: familyActor, id: ref.ActorID, gen: ref.ObjectGeneration},
			routeTo{nodeRID: c.nodes[1].RID(), nodeGen: c.nodes[1].LifecycleGeneration(), ownerGen: ownerGen, leaseGen: srvLease})
	}
	s.mu.Lock()
	sent := followRoute(inMessage{fam: familyActor, id: ref.ActorID, gen: ref.ObjectGeneration}, s.route) // the old route
	s.mu.Unlock()
	c.nodes[0].obj.sessionFollowed(router.OperationID{High: s.opHigh, Low: 2}, sent, notice(next))
	c.nodes[0].obj.sessionFollowed(router.OperationID{High: s.opHigh, Low: 3}, sent, notice(next-1))
	c.nodes[0].obj.sessionFollowed(router.OperationID{High: s.opHigh + 1, Low: 3}, sent, notice(next))
	if n := c.nodes[0].ObjectStats().SessionRouteSwitches; n != 2 {
		t.Fatalf("switched on an earlier message, another owner or another session: %d switches", n)
	}
	c.nodes[0].obj.sessionFollowed(router.OperationID{High: s.opHigh, Low: 3}, sent, notice(next))
	s.mu.Lock()
	pending, gen := s.pending, s.route.ownerGen
	s.mu.Unlock()
	if n := c.nodes[0].ObjectStats().SessionRouteSwitches; n != 3 || pending != nil || gen != next {
		t.Fatalf("the last message's notice did not switch: %d switches, route at %d", n, gen)
	}

	// A closed Session refuses messages and ignores 44.
	s.Close()
	if err := s.Send(ctx, nil); !errors.Is(err, ErrSessionClosed) || !errors.Is(err, ErrInvalidOperation) {
		t.Fatalf("send after close: %v", err)
	}
	if c.nodes[0].obj.sessions.byRID(s.rid) != nil {
		t.Fatal("a closed session is still in the table")
	}
}

// boundSession creates the Actor id on a server, binds a Session to it on
// node 0 (closed at the end of the test) and sends it three "one"s.
func boundSession(t *testing.T, ctx context.Context, c *cluster, id, stableType string) (ActorRef, *Session) {
	t.Helper()
	ref, err := c.m(0).CreateActor(ctx, id, stableType)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.m(0).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for i := 0; i < 3; i++ {
		if err := s.Send(ctx, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	return ref, s
}

// The envelope meta keeps its layout without a session tail (what builds
// without sessions write and read) and carries the tail when there is one;
// malformed metas are refused, typed.
func TestEnvMetaSessionLayout(t *testing.T) {
	op := router.OperationID{High: 0x0102030405060708, Low: 9}
	org := origin{rid: []byte{0xaa, 0xbb}, gen: 5}
	plain := envMeta{op: op, org: org}.encode()
	want := append(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, op.High), op.Low), 5), 0xaa, 0xbb)
	if !bytes.Equal(plain, want) {
		t.Fatalf("meta without a session: %x, want %x", plain, want)
	}
	tagged := envMeta{op: op, org: org, sess: &sessionTag{rid: []byte("sess"), bindGen: 2, seq: 7}}.encode()
	for _, b := range [][]byte{plain, tagged} {
		m, err := decodeEnvMeta(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.op != op || !m.org.same(org) {
			t.Fatalf("decoded %+v", m)
		}
	}
	m, _ := decodeEnvMeta(tagged)
	if m.sess == nil || string(m.sess.rid) != "sess" || m.sess.bindGen != 2 || m.sess.seq != 7 {
		t.Fatalf("session tail %+v", m.sess)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"short", plain[:24]},
		{"tagged, truncated", tagged[:len(tagged)-1]},
		{"tagged, trailing", append(append([]byte(nil), tagged...), 0)},
		{"tagged, empty origin", func() []byte {
			b := append([]byte(nil), tagged[:33]...)
			b[32] = 0
			return append(b, tagged[35:]...)
		}()},
		{"tagged, sequence 0", append(append([]byte(nil), tagged[:len(tagged)-8]...), make([]byte, 8)...)},
	} {
		if _, err := decodeEnvMeta(c.b); !errors.Is(err, errBadRoute) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
