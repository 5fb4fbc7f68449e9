package mesh

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
)

// routing.route_cache_max_entries bounds the node's route cache: a client
// requesting more objects than it holds reads the store again for those it
// evicted, where the default keeps every route of the second pass.
func TestRouteCacheMaxEntriesBoundsTheCache(t *testing.T) {
	const objects = 8
	for _, tc := range []struct {
		name       string
		entries    int // 0: the default
		wantMisses func(uint64) bool
	}{
		{"default", 0, func(m uint64) bool { return m == 0 }},
		{"two entries", 2, func(m uint64) bool { return m >= objects-2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 2, func(i int, cfg *config.Config) {
				clientRole0(i, cfg)
				if i == 0 && tc.entries > 0 {
					cfg.Routing.RouteCacheMaxEntries = tc.entries
				}
			})
			ctx := ctxT(t, 30*time.Second)
			var refs []ActorRef
			for i := range objects {
				ref, err := c.m(0).CreateActor(ctx, fmt.Sprintf("cached-%d", i), testMoverType)
				if err != nil {
					t.Fatal(err)
				}
				refs = append(refs, ref)
			}
			pass := func() {
				t.Helper()
				for _, ref := range refs {
					if _, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil {
						t.Fatal(err)
					}
				}
			}
			pass()
			before := c.nodes[0].ObjectStats().RouteCacheMisses
			pass()
			if m := c.nodes[0].ObjectStats().RouteCacheMisses - before; !tc.wantMisses(m) {
				t.Fatalf("%d route cache misses in the second pass over %d objects", m, objects)
			}
		})
	}
}
