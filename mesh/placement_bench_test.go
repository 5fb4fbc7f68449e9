package mesh

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// countingReads counts the store calls and keys placement reads.
type countingReads struct {
	locstore.Store
	calls, keys atomic.Int64
}

func (c *countingReads) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	c.calls.Add(1)
	c.keys.Add(1)
	return c.Store.Read(ctx, key)
}

func (c *countingReads) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	c.calls.Add(1)
	c.keys.Add(int64(len(keys)))
	return locstore.ReadMany(ctx, c.Store, keys)
}

// placementMesh is a descriptor list of n serving server nodes of mesh
// "m", every one admitted, each registering Actor type "t" with the given
// Actor limit (0: unlimited), weights 50..149; and the admitted links.
func placementMesh(n, actorLimit int) (directory.Snapshot, map[string]uint64) {
	snap := directory.Snapshot{MeshName: "m", Complete: true}
	admitted := map[string]uint64{}
	for i := range n {
		rid := binary.BigEndian.AppendUint64([]byte("node"), uint64(i))
		d := record.MeshNodeDescriptor{MeshName: "m", RoutingID: rid, LifecycleGeneration: 3, ObjectRole: record.RoleServer,
			PlacementWeight: 50 + i%100, State: record.StateServing, OwnerID: fmt.Sprintf("owner-%d", i), LeaseGeneration: 2,
			DescriptorRevision: 9,
			ObjectCapabilities: []record.ObjectCapability{
				{ObjectKind: record.ObjectUserSpot, StableType: "room"},
				{ObjectKind: record.ObjectActor, StableType: "t"},
			}}
		d.Capacity.Actors.Limit = actorLimit
		snap.Entries = append(snap.Entries, directory.Entry{Descriptor: d, LeaseValid: true})
		admitted[string(rid)] = 3
	}
	return snap, admitted
}

// BenchmarkPlacement is one placement decision (§4, §7) in meshes of 3 to
// 1,000 serving nodes, without capacity limits and with an Actor limit on
// every node (then the counters of drawn candidates are read from the
// store), as place makes it: the candidate set of the current list from
// the memo, then decide, whose admission lookups go to a map here (the
// transport's Peer in a node). "2-admitted" is a mesh of 1,000 listed
// nodes of which this node has admitted links to 2 (a large mesh starting
// up): the draws pass over the unusable ones. It reports the store calls
// and keys one decision reads. (Before the candidate sets, one decision
// at 1,000 nodes cost 0.4 ms and 705 KB, 1.5 ms, 2.4 MB and 32 calls /
// 2,000 keys with limits: docs/OBJECTS.md "Placement".)
func BenchmarkPlacement(b *testing.B) {
	cases := []struct {
		name            string
		nodes, admitted int
		limit           int
	}{
		{"nodes-3/unlimited", 3, 3, 0},
		{"nodes-3/limited", 3, 3, 1_000_000},
		{"nodes-100/unlimited", 100, 100, 0},
		{"nodes-100/limited", 100, 100, 1_000_000},
		{"nodes-1000/unlimited", 1000, 1000, 0},
		{"nodes-1000/limited", 1000, 1000, 1_000_000},
		{"nodes-1000/2-admitted", 1000, 2, 0},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			snap, all := placementMesh(tc.nodes, tc.limit)
			admitted := map[string]uint64{}
			for _, e := range snap.Entries[:tc.admitted] {
				admitted[string(e.Descriptor.RoutingID)] = all[string(e.Descriptor.RoutingID)]
			}
			mem, err := locmemory.New()
			if err != nil {
				b.Fatal(err)
			}
			defer mem.Close()
			store := &countingReads{Store: mem}
			env := placeEnv{counters: store, rnd: rand.Float64, admitted: func(rid []byte) (uint64, bool) {
				gen, ok := admitted[string(rid)]
				return gen, ok
			}}
			var memo listMemo
			key := candidateSetKey{mesh: "m", kind: record.ObjectActor, stableType: "t"}
			req := placeRequest{kind: record.ObjectActor, stableType: "t", mesh: "m"}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c, err := decide(ctx, memo.candidates(1, snap, key, []byte("client"), 1), req, env)
				if _, ok := admitted[string(c.node.RoutingID)]; err != nil || !ok {
					b.Fatal(c, err)
				}
			}
			b.ReportMetric(float64(store.calls.Load())/float64(b.N), "store-reads/op")
			b.ReportMetric(float64(store.keys.Load())/float64(b.N), "store-read-keys/op")
		})
	}
}
