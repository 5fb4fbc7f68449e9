package mesh

import (
	"io"
	"log/slog"
	"testing"

	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// The reclaim sweep's shards are shared out by each node from its own copy
// of the list: they add up to sweepShardCopies sweepers a shard only when
// every node computes its position from the same list. A peer's refusal of
// a move as draining reaches only the node it refused, and the list that
// node holds shows the peer draining at once (peer_view.go). Before, the
// sweep read that list: the refused-at node counted one serving server
// fewer than every other node, and until a discovery round said draining
// for all, some shards had three sweepers and others one. Here one node of
// 18 serving servers has a refusal noted; every node must still place
// itself as a node without it does, and every shard have exactly
// sweepShardCopies sweepers.
func TestSweepSharesIgnoreThisNodesRefusalMarks(t *testing.T) {
	const servers, mesh, gen = sweepShardAll + 2, "m", 1
	rid := func(i int) []byte { return []byte{0xa0, byte(i)} }
	snap := directory.Snapshot{MeshName: mesh, Complete: true}
	for i := 0; i < servers; i++ {
		snap.Entries = append(snap.Entries, directory.Entry{LeaseValid: true, Descriptor: record.MeshNodeDescriptor{
			MeshName: mesh, RoutingID: rid(i), LifecycleGeneration: gen, State: record.StateServing, ObjectRole: record.RoleServer}})
	}
	for _, tc := range []struct {
		name           string
		noter, refused int // noter noted refused's refusal
		state          record.State
	}{
		{"the refusing peer sorts before the node", 9, 3, record.StateDraining},
		{"the refusing peer sorts after the node", 3, 9, record.StateDraining},
		{"the refusing peer is the node's neighbour", 5, 6, record.StateStopped},
		{"the first node refused the last", servers - 1, 0, record.StateDraining},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*Node, servers)
			for i := range nodes {
				n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil)), run: hostRun{rid: rid(i), lifecycleGeneration: gen}}
				n.cfg.Node.MeshName = mesh
				n.mu.Lock()
				n.setViewLocked(snap, 0)
				n.mu.Unlock()
				nodes[i] = n
			}
			noter := nodes[tc.noter]
			noter.noteRefusedLeaving(rid(tc.refused), gen, tc.state)
			if !noter.isLeaving(rid(tc.refused), gen) {
				t.Fatal("the refusal was not noted in the list the node holds") // else this tests nothing
			}
			sweepers := map[string]int{}
			for i, n := range nodes {
				self, count := n.sweepPosition()
				if wantSelf, wantCount := sweepPositionIn(snap, mesh, rid(i)); self != wantSelf || count != wantCount {
					t.Fatalf("node %d places itself %d of %d, the list all nodes read places it %d of %d",
						i, self, count, wantSelf, wantCount)
				}
				for _, p := range sweepPrefixes(authBase, self, count) {
					sweepers[p]++
				}
			}
			if len(sweepers) != sweepShards {
				t.Fatalf("%d shards have a sweeper, want %d", len(sweepers), sweepShards)
			}
			for p, c := range sweepers {
				if c != sweepShardCopies {
					t.Fatalf("shard %s has %d sweepers, want %d", p, c, sweepShardCopies)
				}
			}
		})
	}
}
