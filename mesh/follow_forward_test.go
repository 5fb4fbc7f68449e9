package mesh

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// Message Follow on the wire (§7.3). The relocation coordinator is not wired
// yet, so a move is staged by hand: the object is created on its new owner
// and its AuthorityOwnerGeneration raised there (store row and hosted entry,
// as a completed move leaves them), the previous owners record the move
// (recordMove, what the coordinator calls), and the original sender's route
// cache is given the route it would still hold to the previous owner.

// followCluster starts count nodes sharing the memory store: node 0 is a
// client (the original sender), the others are servers of which only host
// takes placements, so every object created lives on host.
func followCluster(t *testing.T, count, host int, edit func(i int, cfg *config.Config)) *cluster {
	t.Helper()
	return newCluster(t, count, func(i int, cfg *config.Config) {
		switch {
		case i == 0:
			cfg.Node.ObjectRole = config.RoleClient
		case i != host:
			cfg.Node.PlacementWeight = 0
		}
		if edit != nil {
			edit(i, cfg)
		}
	})
}

// fobj is an object messages are sent to.
type fobj struct {
	key follow.Key
	gen uint64 // ObjectGeneration
}

func (o fobj) spotKey() spot.Key { return spot.Key{Spot: o.key.Kind == follow.KindSpot, ID: o.key.ID} }

// create creates an object of kind (on the cluster's only placement target).
func (c *cluster) create(t *testing.T, ctx context.Context, kind follow.Kind, id string) fobj {
	t.Helper()
	if kind == follow.KindSpot {
		ref, err := c.m(0).CreateUserSpot(ctx, testSpotType)
		if err != nil {
			t.Fatal(err)
		}
		return fobj{key: follow.Key{Kind: kind, ID: ref.SpotID}, gen: ref.ObjectGeneration}
	}
	ref, err := c.m(0).CreateActor(ctx, id, testActorType)
	if err != nil {
		t.Fatal(err)
	}
	return fobj{key: follow.Key{Kind: kind, ID: id}, gen: ref.ObjectGeneration}
}

// message sends body from node from to o through the Manager: a request
// (returning the answer) or a one-way message. A request that gets no answer
// ends in 10 s (DeadlineExceeded).
func (c *cluster) message(ctx context.Context, from int, o fobj, body string, request bool) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m := c.m(from)
	var b []byte
	var err error
	switch {
	case o.key.Kind == follow.KindSpot && request:
		b, err = m.RequestSpot(ctx, SpotRef{SpotID: o.key.ID, ObjectGeneration: o.gen}, []byte(body))
	case o.key.Kind == follow.KindSpot:
		err = m.SendSpot(ctx, SpotRef{SpotID: o.key.ID, ObjectGeneration: o.gen}, []byte(body))
	case request:
		b, err = m.RequestActor(ctx, ActorRef{ActorID: o.key.ID, ObjectGeneration: o.gen}, []byte(body))
	default:
		err = m.SendActor(ctx, ActorRef{ActorID: o.key.ID, ObjectGeneration: o.gen}, []byte(body))
	}
	return string(b), err
}

// arrived makes o, hosted on node host, look as a completed move to owner
// generation g leaves it: the authority row and the hosted entry both at g.
func (c *cluster) arrived(t *testing.T, host int, o fobj, g uint64) {
	t.Helper()
	kind := record.ObjectActor
	if o.key.Kind == follow.KindSpot {
		kind = record.ObjectUserSpot
	}
	rewriteAuthority(t, c.f.loc, kind, o.key.ID, func(a *record.Authority) { a.AuthorityOwnerGeneration = record.Generation(g) })
	obj := c.nodes[host].obj
	obj.mu.Lock()
	defer obj.mu.Unlock()
	h, ok := obj.hosted[o.spotKey()]
	if !ok {
		t.Fatalf("%s not hosted on node %d", o.key, host)
	}
	h.ownerGeneration = g
}

// moved records on node from that o moved from owner generation prev to
// next on node to.
func (c *cluster) moved(t *testing.T, from int, o fobj, prev, next uint64, to int) {
	t.Helper()
	n := c.nodes[to]
	id, lg := n.Owner()
	err := c.nodes[from].obj.recordMove(follow.Move{Key: o.key, ObjectGeneration: o.gen, PreviousAuthorityOwnerGeneration: prev,
		AuthorityOwnerGeneration: next, Owner: follow.Owner{ID: id, LeaseGeneration: lg},
		Route: follow.Route{NodeRID: n.run.rid, NodeGeneration: n.run.lifecycleGeneration}})
	if err != nil {
		t.Fatalf("recordMove on node %d: %v", from, err)
	}
}

// staleRoute makes node at's route cache hold o on node to at owner
// generation g, as a sender that read the record before a move holds it.
func (c *cluster) staleRoute(t *testing.T, at int, o fobj, g uint64, to int) {
	t.Helper()
	n := c.nodes[to]
	id, lg := n.Owner()
	cache := c.nodes[at].obj.cache
	cache.Drop(o.key)
	ok, err := cache.Put(follow.Ready{Key: o.key, ObjectGeneration: o.gen, AuthorityOwnerGeneration: g, StoreVersion: "before-the-move",
		Owner: follow.Owner{ID: id, LeaseGeneration: lg}, ValidUntil: c.nodes[at].clock.Now() + time.Minute,
		Route: follow.Route{NodeRID: n.run.rid, NodeGeneration: n.run.lifecycleGeneration}})
	if !ok || err != nil {
		t.Fatalf("stale route not cached: %v, %v", ok, err)
	}
}

// cachedAt returns the node index o's cached route at node at points to, or
// -1 when nothing is cached.
func (c *cluster) cachedAt(at int, o fobj) int {
	r, ok := c.nodes[at].obj.cache.Get(o.key)
	if !ok {
		return -1
	}
	return c.indexOf(r.Route.NodeRID)
}

// lateReplies sums the command 20s no call took, over every node: a request
// answered twice, or answered to a node that only passed it on, shows here.
func (c *cluster) lateReplies() uint64 {
	var n uint64
	for _, node := range c.nodes {
		n += node.tr.Stats().LateReplies
	}
	return n
}

func (c *cluster) stats(i int) ObjectStats { return c.nodes[i].ObjectStats() }

func kindName(k follow.Kind, request bool) string {
	if request {
		return k.String() + " request"
	}
	return k.String() + " send"
}

// Nodes: 0 the original sender (client), 1 the previous owner, 2 the new
// owner, 3 a previous owner with Message Follow disabled.
const (
	fSender, fPrev, fOwner, fOff = 0, 1, 2, 3
)

func TestMessageFollow(t *testing.T) {
	c := followCluster(t, 4, fOwner, func(i int, cfg *config.Config) {
		if i == fOff {
			cfg.Routing.MessageFollowDuration = 0
		}
	})
	ctx := ctxT(t, 60*time.Second)
	late := c.lateReplies()
	t.Cleanup(func() {
		if got := c.lateReplies(); got != late {
			t.Errorf("%d command 20s arrived where no call waited", got-late)
		}
	})

	// A Send and a Request sent to the previous owner are passed on and run
	// by the new owner; a request is answered to its requester (portable
	// reply). Command 50 drops the sender's route, and its next message goes
	// straight to the new owner.
	for _, kind := range []follow.Kind{follow.KindActor, follow.KindSpot} {
		for _, request := range []bool{false, true} {
			t.Run("forward/"+kindName(kind, request), func(t *testing.T) {
				o := c.create(t, ctx, kind, fmt.Sprintf("fwd-%s-%v", kind, request))
				c.arrived(t, fOwner, o, 2)
				c.moved(t, fPrev, o, 1, 2, fOwner)
				c.staleRoute(t, fSender, o, 1, fPrev)
				s0, p0, n0 := c.stats(fSender), c.stats(fPrev), c.stats(fOwner)
				portable0 := c.nodes[fSender].tr.Stats().PortableReplies

				got, err := c.message(ctx, fSender, o, "first", request)
				if err != nil {
					t.Fatalf("first message: %v", err)
				}
				if request && got != "echo:first" {
					t.Fatalf("answer %q", got)
				}
				eventually(t, 10*time.Second, "command 50 to drop the sender's route", func() bool {
					return c.stats(fSender).FollowRoutesDropped == s0.FollowRoutesDropped+1
				})
				if p := c.stats(fPrev); p.FollowForwarded != p0.FollowForwarded+1 || p.FollowRefused != p0.FollowRefused {
					t.Fatalf("previous owner forwarded %d, refused %d; want 1, 0", p.FollowForwarded-p0.FollowForwarded, p.FollowRefused-p0.FollowRefused)
				}
				if n := c.stats(fOwner); n.FollowNotices != n0.FollowNotices+1 {
					t.Fatalf("new owner sent %d commands 50, want 1", n.FollowNotices-n0.FollowNotices)
				}
				if at := c.cachedAt(fSender, o); at != -1 {
					t.Fatalf("sender still caches a route to node %d", at)
				}
				if request {
					if got := c.nodes[fSender].tr.Stats().PortableReplies - portable0; got != 1 {
						t.Fatalf("%d portable replies, want the new owner's one", got)
					}
				}

				// The next message reads the store once and goes straight to
				// the new owner; it also shows the first one was run there.
				got, err = c.message(ctx, fSender, o, "count", true)
				if err != nil {
					t.Fatalf("second message: %v", err)
				}
				want := "count:1"
				if request {
					want = "count:0"
				}
				if got != want {
					t.Fatalf("second message answered %q, want %q", got, want)
				}
				if s := c.stats(fSender); s.RouteCacheMisses != s0.RouteCacheMisses+1 {
					t.Fatalf("route cache misses %d, want 1 (one store read after command 50)", s.RouteCacheMisses-s0.RouteCacheMisses)
				}
				if at := c.cachedAt(fSender, o); at != fOwner {
					t.Fatalf("sender caches node %d, want the new owner", at)
				}
				if p := c.stats(fPrev); p.FollowForwarded != p0.FollowForwarded+1 {
					t.Fatal("the second message went through the previous owner")
				}
			})
		}
	}

	// Refusals: the node that cannot pass a message on answers a request
	// with exactly one command 20, to its requester; a one-way message is
	// dropped and counted there.
	refusals := []struct {
		name    string
		stage   func(t *testing.T, o fobj) // o has ObjectGeneration 7 and does not exist
		sentGen uint64                     // the generation the sender's ref names
		refuser int                        // the node that refuses
		want    error
	}{
		{
			// 1 → 2 at node 1 passes it on, node 2 says "back to 1 at 2":
			// no progress, Unavailable.
			name: "cycle", sentGen: 7, refuser: fOwner, want: ErrUnavailable,
			stage: func(t *testing.T, o fobj) {
				c.moved(t, fPrev, o, 1, 2, fOwner)
				c.moved(t, fOwner, o, 1, 2, fPrev)
			},
		},
		{
			name: "generation mismatch", sentGen: 6, refuser: fPrev, want: ErrInvalidOperation,
			stage: func(t *testing.T, o fobj) { c.moved(t, fPrev, o, 1, 2, fOwner) },
		},
	}
	for _, tc := range refusals {
		for _, request := range []bool{false, true} {
			t.Run(tc.name+"/"+kindName(follow.KindActor, request), func(t *testing.T) {
				o := fobj{key: follow.Key{Kind: follow.KindActor, ID: fmt.Sprintf("%s-%v", strings.ReplaceAll(tc.name, " ", "-"), request)}, gen: 7}
				tc.stage(t, o)
				sent := fobj{key: o.key, gen: tc.sentGen}
				c.staleRoute(t, fSender, sent, 1, fPrev)
				r0 := c.stats(tc.refuser)
				_, err := c.message(ctx, fSender, sent, "x", request)
				if !request {
					if err != nil {
						t.Fatalf("one-way send: %v", err)
					}
					eventually(t, 10*time.Second, "the refusal to be counted", func() bool {
						return c.stats(tc.refuser).FollowRefused == r0.FollowRefused+1
					})
					return
				}
				wantIs(t, err, tc.want)
				if r := c.stats(tc.refuser); r.FollowRefused != r0.FollowRefused+1 {
					t.Fatalf("refuser counted %d refusals, want 1", r.FollowRefused-r0.FollowRefused)
				}
			})
		}
	}

	// A passed-on request the new owner admits but cannot queue (mailbox
	// full) is answered to its requester, not to the node that passed it
	// on.
	t.Run("mailbox full at the new owner", func(t *testing.T) {
		o := c.create(t, ctx, follow.KindActor, "full")
		c.arrived(t, fOwner, o, 2)
		c.moved(t, fPrev, o, 1, 2, fOwner)
		c.staleRoute(t, fSender, o, 1, fPrev)
		h, ok := c.nodes[fOwner].obj.hostedFor(o.spotKey())
		if !ok {
			t.Fatal("not hosted")
		}
		h.obj.Hold()
		defer h.obj.Release()
		for {
			if err := h.obj.Post(spot.Envelope{Kind: spot.Send}); err != nil {
				wantIs(t, err, spot.ErrMailboxFull)
				break
			}
		}
		_, err := c.message(ctx, fSender, o, "x", true)
		wantIs(t, err, spot.ErrMailboxFull)
	})

	// MessageFollowDuration 0: nothing is recorded, the previous owner
	// refuses as it does for any object it does not host (NotFound), and
	// the sender re-reads the store and reaches the owner itself.
	t.Run("disabled", func(t *testing.T) {
		o := c.create(t, ctx, follow.KindActor, "follow-off")
		c.arrived(t, fOwner, o, 2)
		c.moved(t, fOff, o, 1, 2, fOwner)
		c.staleRoute(t, fSender, o, 1, fOff)
		f0, n0 := c.stats(fOff), c.stats(fOwner)
		got, err := c.message(ctx, fSender, o, "x", true)
		if err != nil || got != "echo:x" {
			t.Fatalf("request = %q, %v", got, err)
		}
		f := c.stats(fOff)
		if f.FollowMoves != 0 || f.FollowForwarded != f0.FollowForwarded || f.FenceRefused != f0.FenceRefused+1 {
			t.Fatalf("disabled node: moves %d, forwarded %d, refused %d; want 0, 0, 1",
				f.FollowMoves, f.FollowForwarded-f0.FollowForwarded, f.FenceRefused-f0.FenceRefused)
		}
		if n := c.stats(fOwner); n.FollowNotices != n0.FollowNotices {
			t.Fatal("command 50 sent for a message that was not followed")
		}
	})

	// Command 50 drops only the exact route it names: an entry the sender
	// has since replaced (here: already the new owner's) is kept. Two
	// notices on one connection arrive in order, so when the second (which
	// matches) has been applied, the first has too.
	t.Run("notice drops only the exact route", func(t *testing.T) {
		newer := c.create(t, ctx, follow.KindActor, "notice-newer")
		c.arrived(t, fOwner, newer, 2)
		c.staleRoute(t, fSender, newer, 2, fOwner) // already re-read
		stale := fobj{key: follow.Key{Kind: follow.KindActor, ID: "notice-stale"}, gen: 9}
		c.staleRoute(t, fSender, stale, 1, fPrev)
		s0 := c.stats(fSender)
		prev, owner := c.nodes[fPrev], c.nodes[fOwner]
		viaPrev := routeTo{nodeRID: prev.run.rid, nodeGen: prev.run.lifecycleGeneration, ownerGen: 1, leaseGen: prev.leaseGen.Load()}
		toOwner := routeTo{nodeRID: owner.run.rid, nodeGen: owner.run.lifecycleGeneration, ownerGen: 2, leaseGen: owner.leaseGen.Load()}
		for _, o := range []fobj{newer, stale} {
			m := inMessage{fam: familyActor, id: o.key.ID, gen: o.gen}
			notice := router.NewRecord(&router.MessageFollow{Route: router.MessageFollowRouteV1{
				Source: followRoute(m, viaPrev), Target: followRoute(m, toOwner), HopCount: 1}}, nil, nil)
			if err := owner.tr.Send(ctx, c.nodes[fSender].run.rid, notice); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 10*time.Second, "the matching notice to drop its route", func() bool {
			return c.stats(fSender).FollowRoutesDropped == s0.FollowRoutesDropped+1
		})
		if at := c.cachedAt(fSender, stale); at != -1 {
			t.Fatalf("the named route is still cached (node %d)", at)
		}
		if at := c.cachedAt(fSender, newer); at != fOwner {
			t.Fatalf("a notice naming an older route dropped the newer one (cached: node %d)", at)
		}
	})

	// The original sender can be the new owner itself (the object moved
	// to it while it still cached the previous owner): its own request
	// comes back to it and is answered to its own waiting call, and it
	// drops its cache entry without a command 50.
	t.Run("back to the sender", func(t *testing.T) {
		o := c.create(t, ctx, follow.KindActor, "back-home")
		c.arrived(t, fOwner, o, 2)
		c.moved(t, fPrev, o, 1, 2, fOwner)
		c.staleRoute(t, fOwner, o, 1, fPrev)
		n0 := c.stats(fOwner)
		got, err := c.message(ctx, fOwner, o, "home", true)
		if err != nil || got != "echo:home" {
			t.Fatalf("request = %q, %v", got, err)
		}
		n := c.stats(fOwner)
		if n.FollowRoutesDropped != n0.FollowRoutesDropped+1 || n.FollowNotices != n0.FollowNotices {
			t.Fatalf("routes dropped %d, notices %d; want 1, 0", n.FollowRoutesDropped-n0.FollowRoutesDropped, n.FollowNotices-n0.FollowNotices)
		}
		if at := c.cachedAt(fOwner, o); at != -1 {
			t.Fatalf("stale route kept (node %d)", at)
		}
	})
}

// §7.3, §12: at most 8 hops. Nodes 1..9 form a chain of moves; a message to
// node 1 is passed on 8 times to node 9, where the object is; the same chain
// one move longer refuses the 9th hop at node 9 (Unavailable), answered to
// the requester once.
func TestMessageFollowHopLimit(t *testing.T) {
	const last = 9
	c := followCluster(t, last+1, last, nil)
	ctx := ctxT(t, 60*time.Second)
	late := c.lateReplies()

	t.Run("8 hops", func(t *testing.T) {
		o := c.create(t, ctx, follow.KindActor, "far")
		c.arrived(t, last, o, last)
		for i := 1; i < last; i++ {
			c.moved(t, i, o, uint64(i), uint64(i+1), i+1)
		}
		s0, l0 := c.stats(0), c.stats(last)
		for k, request := range []bool{true, false} {
			c.staleRoute(t, 0, o, 1, 1)
			got, err := c.message(ctx, 0, o, "hi", request)
			if err != nil || (request && got != "echo:hi") {
				t.Fatalf("%s = %q, %v", kindName(o.key.Kind, request), got, err)
			}
			// Its command 50 drops the stale route before the next
			// message puts it back (a late 50 would drop that one).
			eventually(t, 10*time.Second, "the command 50", func() bool {
				return c.stats(0).FollowRoutesDropped == s0.FollowRoutesDropped+uint64(k+1)
			})
		}
		for i := 1; i < last; i++ {
			if f := c.stats(i).FollowForwarded; f != 2 {
				t.Fatalf("node %d forwarded %d messages, want 2", i, f)
			}
		}
		if l := c.stats(last); l.FollowNotices != l0.FollowNotices+2 || l.FollowRefused != 0 {
			t.Fatalf("node %d: notices %d, refused %d", last, l.FollowNotices-l0.FollowNotices, l.FollowRefused)
		}
		if got, err := c.message(ctx, 0, o, "count", true); err != nil || got != "count:1" {
			t.Fatalf("count = %q, %v (the one-way message must have run at the end of the chain)", got, err)
		}
	})

	t.Run("9th hop refused", func(t *testing.T) {
		o := fobj{key: follow.Key{Kind: follow.KindActor, ID: "farther"}, gen: 999}
		for i := 1; i < last; i++ {
			c.moved(t, i, o, uint64(i), uint64(i+1), i+1)
		}
		c.moved(t, last, o, last, last+1, 1)
		c.staleRoute(t, 0, o, 1, 1)
		_, err := c.message(ctx, 0, o, "hi", true)
		wantIs(t, err, ErrUnavailable)
		if r := c.stats(last).FollowRefused; r != 1 {
			t.Fatalf("node %d refused %d, want 1", last, r)
		}
		c.staleRoute(t, 0, o, 1, 1)
		if _, err := c.message(ctx, 0, o, "hi", false); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the one-way refusal to be counted", func() bool { return c.stats(last).FollowRefused == 2 })
	})
	if got := c.lateReplies(); got != late {
		t.Fatalf("%d command 20s arrived where no call waited", got-late)
	}
}
