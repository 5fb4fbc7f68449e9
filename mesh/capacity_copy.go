package mesh

import (
	"context"
	"reflect"
	"time"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// readCapacity reads this node run's capacity counters (the source of truth,
// §4), all in one store call, and returns the descriptor's operator copy
// with the limits it already carries.
func (n *Node) readCapacity(ctx context.Context, c record.NodeCapacity) (record.NodeCapacity, error) {
	node := authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration}
	ids := []authority.CounterID{{Node: node, Class: authority.SlotActors}, {Node: node, Class: authority.SlotSpots}}
	for _, st := range c.SpotTypes {
		ids = append(ids, authority.CounterID{Node: node, Class: authority.SlotSpotType, SpotKind: st.ObjectKind, StableType: st.StableType})
	}
	rows, err := authority.ReadCounters(ctx, n.loc, ids)
	if err != nil {
		return c, err
	}
	usage := make([]authority.Usage, len(ids))
	for i, r := range rows {
		usage[i] = r.Usage // missing rows are zero (authority deletes rows at zero)
	}
	out := c
	out.SpotTypes = append([]record.SpotTypeUsage(nil), c.SpotTypes...)
	out.Actors.Active, out.Actors.Reserved = usage[0].Active, usage[0].Reserved
	out.Spots.Active, out.Spots.Reserved = usage[1].Active, usage[1].Reserved
	for i := range out.SpotTypes {
		out.SpotTypes[i].Active, out.SpotTypes[i].Reserved = usage[2+i].Active, usage[2+i].Reserved
	}
	return out, nil
}

// RefreshCapacityCopy republishes the descriptor when its capacity copy
// differs from the store counters.
func (n *Node) RefreshCapacityCopy(ctx context.Context) { n.refreshCapacityCopy(ctx, true) }

// capacityCopyRounds is how many discovery rounds the copy may lag the
// counters when no class became full or stopped being full: every publish
// is a descriptor change that every node of the mesh reads the next round
// (docs/DISCOVERY.md §3.1), and a node creating objects would otherwise
// publish on every round.
const capacityCopyRounds = 12

// capacityCopyMeshRate is how many capacity-copy publishes per round the
// whole mesh may make: in a mesh of N nodes each node's copy may lag
// max(capacityCopyRounds, N / capacityCopyMeshRate) rounds. Each publish
// costs every node about one read the next round, so without this bound a
// mesh of busy nodes would cost O(N²) reads per round again (N/12 changes
// per round, each read by N nodes), and at N ≳ 700 it would change faster
// than the descriptor journal keeps, sending every node back to whole
// lists.
const capacityCopyMeshRate = 2

// capacityCopyInterval is the lag allowed, in rounds, in a mesh of listed
// nodes.
func capacityCopyInterval(listed int) int {
	return max(capacityCopyRounds, (listed+capacityCopyMeshRate-1)/capacityCopyMeshRate)
}

// refreshCapacityCopy is the discovery loop's refresh: the copy is for
// operators (placement reads the counters themselves), so unless force it
// is republished at most every capacityCopyInterval rounds — or at once when
// a class with a limit became full or left full, which an operator wants to
// see.
func (n *Node) refreshCapacityCopy(ctx context.Context, force bool) {
	if n.cfg.Node.ObjectRole != "server" || !n.lease.Gate().Open() {
		return
	}
	n.mu.Lock()
	cur, state, at, listed := n.descriptor.Capacity, n.state, n.capCopyAt, len(n.lastSnap.Entries)
	n.mu.Unlock()
	if state != record.StateServing || n.obj.hostMove.Load() {
		// A host command publishes draining; its answer may have been
		// lost (the store says draining, n.state still serving): a copy
		// published now would say serving over it.
		return
	}
	fresh, err := n.readCapacity(ctx, cur)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("capacity copy: reading counters", "err", err)
		}
		return
	}
	if reflect.DeepEqual(fresh, cur) {
		return
	}
	now := n.clock.Now()
	if !force && now-at < time.Duration(capacityCopyInterval(listed))*n.discoveryEvery && fullness(fresh) == fullness(cur) {
		return
	}
	// Checked again under drainMu, which a drain (or Close) holds while it
	// publishes draining: a drain that began while the counters were read
	// above has said draining by now, and serving published after it
	// would stand for the rest of the drain (the others place on the node
	// and move their objects to it). Until 2026-12-07 it did
	// (TestCapacityCopyUnderWayWhenADrainBeginsDoesNotSayServing).
	n.drainMu.Lock()
	defer n.drainMu.Unlock()
	if n.drainSaid || n.obj.hostMove.Load() || n.State() != record.StateServing {
		return
	}
	n.mu.Lock()
	n.descriptor.Capacity = fresh
	n.capCopyAt = now
	n.mu.Unlock()
	if err := n.publish(ctx, record.StateServing); err != nil && ctx.Err() == nil {
		n.log.Warn("capacity copy: publish", "err", err)
	}
}

// fullness says which limited classes are full, as a comparable string.
func fullness(c record.NodeCapacity) string {
	full := func(u record.SlotUsage) byte {
		if u.Limit > 0 && u.Active+u.Reserved >= u.Limit {
			return '1'
		}
		return '0'
	}
	b := []byte{full(c.Actors), full(c.Spots)}
	for _, st := range c.SpotTypes {
		b = append(b, full(record.SlotUsage{Active: st.Active, Reserved: st.Reserved, Limit: st.Limit}))
	}
	return string(b)
}
