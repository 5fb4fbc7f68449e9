package mesh

import (
	"context"
	"fmt"
	"reflect"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// readCapacity reads this node run's capacity counters (the source of truth,
// §4) and returns the descriptor's operator copy with the limits it already
// carries.
func (n *Node) readCapacity(ctx context.Context, c record.NodeCapacity) (record.NodeCapacity, error) {
	node := authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration}
	read := func(id authority.CounterID) (authority.Usage, error) {
		key, err := authority.CapacityKey(id)
		if err != nil {
			return authority.Usage{}, err
		}
		res, err := n.loc.Read(ctx, key)
		if err != nil || !res.Found {
			return authority.Usage{}, err // missing = zero (authority deletes rows at zero)
		}
		_, u, err := authority.DecodeCapacity(res.Value)
		if err != nil {
			return authority.Usage{}, fmt.Errorf("capacity counter %s: %w", id, err)
		}
		return u, nil
	}
	out := c
	out.SpotTypes = append([]record.SpotTypeUsage(nil), c.SpotTypes...)
	u, err := read(authority.CounterID{Node: node, Class: authority.SlotActors})
	if err != nil {
		return c, err
	}
	out.Actors.Active, out.Actors.Reserved = u.Active, u.Reserved
	if u, err = read(authority.CounterID{Node: node, Class: authority.SlotSpots}); err != nil {
		return c, err
	}
	out.Spots.Active, out.Spots.Reserved = u.Active, u.Reserved
	for i, st := range out.SpotTypes {
		if u, err = read(authority.CounterID{Node: node, Class: authority.SlotSpotType, SpotKind: st.ObjectKind, StableType: st.StableType}); err != nil {
			return c, err
		}
		out.SpotTypes[i].Active, out.SpotTypes[i].Reserved = u.Active, u.Reserved
	}
	return out, nil
}

// RefreshCapacityCopy republishes the descriptor when its capacity copy
// differs from the store counters. It runs once per discovery round, so the
// copy an operator sees (ctl topology) lags the counters by at most one
// round, and a burst of creations costs one descriptor revision, not one
// per object.
func (n *Node) RefreshCapacityCopy(ctx context.Context) {
	if n.cfg.Node.ObjectRole != "server" || !n.lease.Gate().Open() {
		return
	}
	n.mu.Lock()
	cur, state := n.descriptor.Capacity, n.state
	n.mu.Unlock()
	if state != record.StateServing {
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
	n.mu.Lock()
	n.descriptor.Capacity = fresh
	n.mu.Unlock()
	if err := n.publish(ctx, state); err != nil && ctx.Err() == nil {
		n.log.Warn("capacity copy: publish", "err", err)
	}
}
