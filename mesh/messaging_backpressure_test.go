package mesh

import (
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router/transport"
)

// Backpressure on the link keeps the cached route (no store reads under
// overload) and fails the call at once; the next send uses the cache.
func TestBackpressureKeepsCachedRoute(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 20*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "bp", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	sender := 1 - c.indexOf(ref.NodeRID) // the node that does not host it
	s := c.nodes[sender]
	if err := c.m(sender).SendActor(ctx, ref, []byte("warm")); err != nil {
		t.Fatal(err)
	}
	before := s.ObjectStats()
	s.obj.hooks.Store(&testHooks{beforeRemoteSend: func(string) error { return transport.ErrBackpressure }})
	err = c.m(sender).SendActor(ctx, ref, []byte("x"))
	if !errors.Is(err, transport.ErrBackpressure) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send under backpressure: %v, want ErrUnavailable wrapping ErrBackpressure", err)
	}
	mid := s.ObjectStats()
	if mid.AuthorityReads != before.AuthorityReads || mid.RouteCacheMisses != before.RouteCacheMisses {
		t.Fatalf("backpressure read the store: authority reads %d -> %d, misses %d -> %d",
			before.AuthorityReads, mid.AuthorityReads, before.RouteCacheMisses, mid.RouteCacheMisses)
	}
	s.obj.hooks.Store(&testHooks{})
	if err := c.m(sender).SendActor(ctx, ref, []byte("y")); err != nil {
		t.Fatal(err)
	}
	after := s.ObjectStats()
	if after.RouteCacheHits <= mid.RouteCacheHits || after.AuthorityReads != before.AuthorityReads {
		t.Fatalf("the route was not kept: hits %d -> %d, authority reads %d -> %d",
			mid.RouteCacheHits, after.RouteCacheHits, before.AuthorityReads, after.AuthorityReads)
	}
}
