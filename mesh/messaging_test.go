package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// The target checks the route fence before a message enters a mailbox
// (§7.3): a request whose fence names another AuthorityOwnerGeneration,
// another ObjectGeneration, another node run or another owner lease
// generation is answered with a typed failure and never delivered.
func TestRouteFenceMismatchIsRefusedAndNotDelivered(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "fenced", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	target := c.nodes[1]
	good := fenceOf(t, target, ref)
	tests := []struct {
		name      string
		edit      func(*router.ActorRouteFence)
		result    router.TerminalResult
		code      router.FrameworkErrorCode
		delivered bool
	}{
		{"matching fence", func(*router.ActorRouteFence) {}, router.ResultOK, router.FailNone, true},
		{"other AuthorityOwnerGeneration", func(f *router.ActorRouteFence) { f.ExpectedAuthorityOwnerGeneration++ }, router.ResultInvalidState, router.FailNone, false},
		{"other ObjectGeneration", func(f *router.ActorRouteFence) { f.Actor.ObjectGeneration++ }, router.ResultConflict, router.FailActorLocationStale, false},
		{"other node run", func(f *router.ActorRouteFence) { f.TargetNodeGeneration++ }, router.ResultInvalidState, router.FailNone, false},
		{"other owner lease generation", func(f *router.ActorRouteFence) { f.ExpectedOwnerLeaseGeneration++ }, router.ResultInvalidState, router.FailNone, false},
		{"object not hosted", func(f *router.ActorRouteFence) { f.Actor.ActorID = "nobody" }, router.ResultNotFound, router.FailActorRouteNotFound, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := good
			tc.edit(&f)
			before := target.ObjectStats()
			rec := router.NewRecord(&router.ActorRequest{Operation: opIDOf(NewOperationID()), TargetActor: f}, nil,
				&router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("count")})
			resp, err := c.nodes[0].Transport().Request(ctx, transport.RID(target.RID()), rec)
			if err != nil {
				t.Fatal(err)
			}
			rep := resp.Body.(*router.Reply)
			if rep.Result != tc.result || rep.FailureCode != tc.code {
				t.Fatalf("reply %s/%s, want %s/%s", rep.Result, rep.FailureCode, tc.result, tc.code)
			}
			after := target.ObjectStats()
			if got := after.Delivered - before.Delivered; (got == 1) != tc.delivered {
				t.Fatalf("delivered %d (want delivered=%v)", got, tc.delivered)
			}
			if !tc.delivered && after.FenceRefused != before.FenceRefused+1 {
				t.Fatal("refusal not counted")
			}
		})
	}
	// The handler saw no send: only the matching request reached it.
	got, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
	if err != nil || string(got) != "count:0" {
		t.Fatalf("count = %q, %v", got, err)
	}
}

// fenceOf is the route fence of ref's Actor as its owner n holds it now.
func fenceOf(t *testing.T, n *Node, ref ActorRef) router.ActorRouteFence {
	t.Helper()
	h, ok := n.obj.hostedFor(actorKey(ref.ActorID))
	if !ok {
		t.Fatalf("%s not hosted on %x", ref.ActorID, n.RID())
	}
	_, leaseGen := n.Owner()
	return router.ActorRouteFence{Actor: router.ActorRef{ActorID: ref.ActorID, ObjectGeneration: ref.ObjectGeneration},
		TargetNodeRID: n.RID(), TargetNodeGeneration: n.LifecycleGeneration(),
		ExpectedAuthorityOwnerGeneration: h.ownerGeneration, ExpectedOwnerLeaseGeneration: leaseGen}
}

// Route cache (§7.3): the first message reads the store, later ones hit the
// cache; a failed delivery drops the entry and the store decides; a newer
// generation replaces the entry; the entry never outlives the owner's
// admission deadline.
func TestRouteCacheHitMissAndInvalidation(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	src := c.nodes[0]
	ref, err := c.m(0).CreateActor(ctx, "cached", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	s0 := src.ObjectStats()
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("a")); err != nil {
		t.Fatal(err)
	}
	s1 := src.ObjectStats()
	if s1.RouteCacheMisses != s0.RouteCacheMisses+1 || s1.RouteCacheHits != s0.RouteCacheHits {
		t.Fatalf("first message: %+v -> %+v, want one miss", s0, s1)
	}
	for i := 0; i < 3; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte("b")); err != nil {
			t.Fatal(err)
		}
	}
	s2 := src.ObjectStats()
	if s2.RouteCacheHits != s1.RouteCacheHits+3 || s2.AuthorityReads != s1.AuthorityReads {
		t.Fatalf("cached sends: %+v -> %+v, want 3 hits and no store read", s1, s2)
	}

	// The cached entry ends no later than the owner's admission deadline
	// derived from its lease record: TTL − fencing margin after the read.
	r, ok := src.obj.cache.Get(follow.Key{Kind: follow.KindActor, ID: "cached"})
	if !ok {
		t.Fatal("route not cached")
	}
	cfg := objConfig("objects")
	if left := r.ValidUntil - src.clock.Now(); left <= 0 || left > cfg.Lease.TTL-cfg.Lease.FencingMargin {
		t.Fatalf("cached route valid for %v more, want within (0, %v]", left, cfg.Lease.TTL-cfg.Lease.FencingMargin)
	}

	// Destroyed on its owner: the cached route fails at the target (not
	// hosted), is dropped, and the store says NotFound.
	if ok, err := c.m(1).Destroy(ctx, ref); err != nil || !ok {
		t.Fatalf("Destroy = %v, %v", ok, err)
	}
	_, err = c.m(0).RequestActor(ctx, ref, []byte("c"))
	wantIs(t, err, ErrNotFound)
	if _, ok := src.obj.cache.Get(follow.Key{Kind: follow.KindActor, ID: "cached"}); ok {
		t.Fatal("a failed delivery left the route cached")
	}

	// Re-created: a new generation. The old ref is stale; the new one
	// resolves from the store and is cached again.
	ref2, err := c.m(0).CreateActor(ctx, "cached", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	if ref2.ObjectGeneration <= ref.ObjectGeneration {
		t.Fatalf("generation %d after %d", ref2.ObjectGeneration, ref.ObjectGeneration)
	}
	if _, err := c.m(0).RequestActor(ctx, ref2, []byte("d")); err != nil {
		t.Fatal(err)
	}
	_, err = c.m(0).RequestActor(ctx, ref, []byte("e"))
	wantIs(t, err, ErrStaleGeneration)
	if r, ok := src.obj.cache.Get(follow.Key{Kind: follow.KindActor, ID: "cached"}); !ok || r.ObjectGeneration != ref2.ObjectGeneration {
		t.Fatalf("cache holds %+v (%v), want generation %d", r, ok, ref2.ObjectGeneration)
	}
	// Missing and Creating are never cached.
	_, err = c.m(0).RequestActor(ctx, ActorRef{ActorID: "never", ObjectGeneration: 1}, nil)
	wantIs(t, err, ErrNotFound)
	if _, ok := src.obj.cache.Get(follow.Key{Kind: follow.KindActor, ID: "never"}); ok {
		t.Fatal("a Missing record was cached")
	}
}

// A stale cached route whose fence the target refuses is re-resolved once
// from the store and the message is delivered on the fresh route.
func TestStaleCachedRouteIsRefreshedAndDelivered(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	src := c.nodes[0]
	ref, err := c.m(0).CreateActor(ctx, "refresh", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("warm")); err != nil {
		t.Fatal(err)
	}
	// Poison the cached route with an AuthorityOwnerGeneration the owner
	// does not have (as after an owner change this node has not seen).
	key := follow.Key{Kind: follow.KindActor, ID: "refresh"}
	r, ok := src.obj.cache.Get(key)
	if !ok {
		t.Fatal("not cached")
	}
	src.obj.cache.Drop(key)
	r.AuthorityOwnerGeneration++
	if ok, err := src.obj.cache.Put(r); !ok || err != nil {
		t.Fatalf("Put: %v %v", ok, err)
	}
	refused := c.nodes[1].ObjectStats().FenceRefused
	got, err := c.m(0).RequestActor(ctx, ref, []byte("after"))
	if err != nil || string(got) != "echo:after" {
		t.Fatalf("RequestActor = %q, %v", got, err)
	}
	if c.nodes[1].ObjectStats().FenceRefused != refused+1 {
		t.Fatal("the stale fence was not refused by the target")
	}
	h, _ := c.nodes[1].obj.hostedFor(actorKey("refresh"))
	if r2, ok := src.obj.cache.Get(key); !ok || r2.AuthorityOwnerGeneration != h.ownerGeneration {
		t.Fatalf("cache after refresh: %+v (%v), want AuthorityOwnerGeneration %d", r2, ok, h.ownerGeneration)
	}
}
