package mesh

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// candidate is one node run a new object may be placed on (spec §4, §7).
type candidate struct {
	node   authority.Node
	owner  authority.Owner
	limits authority.Limits
	weight int
	local  bool
	// descriptorVersion is the descriptor's revision as the list saw it
	// (command 39's targetDescriptorVersion).
	descriptorVersion string
}

func (c candidate) key() string { return c.node.String() }

// candidateFilter is what placement needs to know besides the descriptor
// list: which node run is this one, and which peers are admitted now with
// which lifecycle generation (a descriptor alone does not mean a message
// can be sent, §4).
type candidateFilter struct {
	mesh       string
	kind       record.ObjectKind
	stableType string
	selfRID    []byte
	selfGen    uint64
	admitted   map[string]uint64    // RID bytes → admitted lifecycle generation
	excluded   map[string]exclusion // candidate keys excluded by earlier failures
}

// exclusion says why a call excluded a node run from its placement.
type exclusion uint8

const (
	excludedFull   exclusion = iota + 1 // the Reserve batch found no capacity
	excludedFailed                      // its lease changed or it failed before the callback
)

// candidatesOf lists the placement candidates of a complete descriptor list
// (§4, §7): Serving Object Server nodes of the mesh with a valid owner
// lease, a placement weight above 0, the stable type registered for the
// object kind, and a usable link (this node itself, or a peer admitted at
// the descriptor's lifecycle generation); minus the excluded node runs.
// Capacity is checked afterwards against the store counters.
func candidatesOf(snap directory.Snapshot, f candidateFilter) []candidate {
	var out []candidate
	for _, e := range snap.Entries {
		d := e.Descriptor
		if d.MeshName != f.mesh || !e.LeaseValid || d.State != record.StateServing ||
			d.ObjectRole != record.RoleServer || d.PlacementWeight <= 0 {
			continue
		}
		capLimit, ok := capabilityLimit(d, f.kind, f.stableType)
		if !ok {
			continue
		}
		local := bytes.Equal(d.RoutingID, f.selfRID) && uint64(d.LifecycleGeneration) == f.selfGen
		if !local {
			gen, admitted := f.admitted[string(d.RoutingID)]
			if !admitted || gen != uint64(d.LifecycleGeneration) {
				continue
			}
		}
		c := candidate{
			node:              authority.Node{MeshName: d.MeshName, RoutingID: d.RoutingID, LifecycleGeneration: uint64(d.LifecycleGeneration)},
			owner:             authority.Owner{ID: d.OwnerID, LeaseGeneration: uint64(d.LeaseGeneration)},
			limits:            authority.Limits{Actors: d.Capacity.Actors.Limit, Spots: d.Capacity.Spots.Limit, SpotType: capLimit},
			weight:            d.PlacementWeight,
			local:             local,
			descriptorVersion: strconv.FormatUint(uint64(d.DescriptorRevision), 10),
		}
		if f.excluded[c.key()] != 0 {
			continue
		}
		out = append(out, c)
	}
	return out
}

// capabilityLimit finds the (kind, stable type) capability of a descriptor
// and returns its per-type limit (0 = unlimited).
func capabilityLimit(d record.MeshNodeDescriptor, kind record.ObjectKind, stableType string) (int, bool) {
	for _, c := range d.ObjectCapabilities {
		if c.ObjectKind == kind && c.StableType == stableType {
			return c.Limit, true
		}
	}
	return 0, false
}

// pickWeighted returns the index of the candidate a uniform draw r in
// [0,1) selects, each candidate with probability weight/total (§4: a larger
// weight is chosen proportionally more often). -1 when there is none.
func pickWeighted(cands []candidate, r float64) int {
	total := 0
	for _, c := range cands {
		total += c.weight
	}
	if total <= 0 {
		return -1
	}
	x := int(r * float64(total))
	for i, c := range cands {
		if x < c.weight {
			return i
		}
		x -= c.weight
	}
	return len(cands) - 1
}

// hasRoom reports whether usage rows leave room for one more object of the
// bundle under the limits (0 = unlimited): the same rule the Reserve batch
// enforces atomically, used here only to skip nodes already known full.
func hasRoom(rows []authority.CapacityRow, limits authority.Limits, bun authority.Bundle) bool {
	for _, r := range rows {
		var limit, need int
		switch r.ID.Class {
		case authority.SlotActors:
			limit, need = limits.Actors, bun.Actors
		case authority.SlotSpots:
			limit, need = limits.Spots, bun.Spots
		case authority.SlotSpotType:
			limit = limits.SpotType
			if bun.SpotType != nil {
				need = bun.SpotType.Count
			}
		}
		if limit > 0 && r.Usage.Total()+need > limit {
			return false
		}
	}
	return true
}

// place chooses the node run for a new object: the candidates of the latest
// complete descriptor list, minus those whose store counters show no room,
// picked by weight. The Reserve batch re-checks capacity atomically; a
// failure there excludes the node run and the caller asks again (§7).
func (o *objects) place(ctx context.Context, kind record.ObjectKind, stableType, mesh string, excluded map[string]exclusion) (candidate, error) {
	snap, ok := o.n.LastSnapshot()
	if !ok {
		if err := o.n.Discover(ctx); err != nil {
			return candidate{}, classify(ctx, err, "discovery before placement")
		}
		if snap, ok = o.n.LastSnapshot(); !ok {
			return candidate{}, fmt.Errorf("%w: no descriptor list yet", ErrUnavailable)
		}
	}
	if o.hostMove.Load() {
		// A host Relocate empties this node: it takes no new objects.
		excluded = withSelfExcluded(excluded, authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid,
			LifecycleGeneration: o.n.run.lifecycleGeneration})
	}
	f := candidateFilter{mesh: mesh, kind: kind, stableType: stableType, selfRID: o.n.run.rid,
		selfGen: o.n.run.lifecycleGeneration, admitted: map[string]uint64{}, excluded: excluded}
	for _, p := range o.n.tr.Peers() {
		f.admitted[string(p.RID)] = p.LifecycleGeneration
	}
	return placeIn(ctx, snap, f, o.n.loc, rand.Float64)
}

// placeIn is place's decision on its inputs: the descriptor list, the
// filter, the store holding the capacity counters and the random draw.
func placeIn(ctx context.Context, snap directory.Snapshot, f candidateFilter, counters locstore.Store, draw func() float64) (candidate, error) {
	kind, stableType, mesh, excluded := f.kind, f.stableType, f.mesh, f.excluded
	cands := candidatesOf(snap, f)
	bun, err := authority.BundleFor(kind, stableType)
	if err != nil {
		return candidate{}, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	// The counters of every candidate with a limit, in one read.
	var limited []authority.Node
	for _, c := range cands {
		if c.limits.Actors > 0 || c.limits.Spots > 0 || c.limits.SpotType > 0 {
			limited = append(limited, c.node)
		}
	}
	usage, err := readCapacities(ctx, counters, limited, bun)
	if err != nil {
		return candidate{}, classify(ctx, err, "read capacity of the candidate nodes")
	}
	full := 0
	roomy := cands[:0:0]
	for _, c := range cands {
		if rows, ok := usage[c.key()]; ok && !hasRoom(rows, c.limits, bun) {
			full++
			continue
		}
		roomy = append(roomy, c)
	}
	i := pickWeighted(roomy, draw())
	if i < 0 {
		failed := 0
		for _, why := range excluded {
			if why == excludedFull {
				full++
			} else {
				failed++
			}
		}
		if full > 0 {
			return candidate{}, fmt.Errorf("%w: no Serving node of mesh %q with %s %q has capacity left (%d full, %d failed): %w",
				ErrUnavailable, mesh, kind, stableType, full, failed, ErrCapacityExhausted)
		}
		if failed > 0 {
			return candidate{}, fmt.Errorf("%w: every node of mesh %q able to host %s %q failed this creation (%d)",
				ErrUnavailable, mesh, kind, stableType, failed)
		}
		return candidate{}, fmt.Errorf("%w: no Serving node of mesh %q registered %s %q with a weight above 0 and a usable link",
			ErrUnavailable, mesh, kind, stableType)
	}
	return roomy[i], nil
}

func (o *objects) readCapacity(ctx context.Context, node authority.Node, bun authority.Bundle) ([]authority.CapacityRow, error) {
	rows, err := readCapacities(ctx, o.n.loc, []authority.Node{node}, bun)
	return rows[node.String()], err
}

// readCapacities reads the counters bun uses on each of nodes, in as few
// calls as locstore.ReadMany allows, by candidate key.
func readCapacities(ctx context.Context, store locstore.Store, nodes []authority.Node, bun authority.Bundle) (map[string][]authority.CapacityRow, error) {
	var ids []authority.CounterID
	for _, node := range nodes {
		ids = append(ids, authority.CountersFor(node, bun)...)
	}
	rows, err := authority.ReadCounters(ctx, store, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]authority.CapacityRow, len(nodes))
	for _, row := range rows {
		k := row.ID.Node.String()
		out[k] = append(out[k], row)
	}
	return out, nil
}

// otherMesh answers a creation whose InMesh names a mesh this node is not a
// member of (§7: "if the specified Mesh doesn't exist, NotFound"). The store
// decides: with no MeshNode descriptor of that mesh whose owner lease is
// live, the mesh does not exist (ErrNotFound); with one, it exists but this
// node cannot place there — a node joins one RouteMesh and reaches only its
// members (§4: a descriptor alone is no usable link) — so ErrNotMember, with
// ErrUnavailable. It reads that mesh's complete descriptor list the way
// discovery reads its own, writes nothing, and never returns nil.
func (o *objects) otherMesh(ctx context.Context, mesh string) error {
	snap, err := directory.Lister{Store: o.n.loc, PageSize: locstore.MaxPageItems, Logger: o.log}.List(ctx, mesh)
	if err != nil {
		return classify(ctx, err, "list the MeshNodes of mesh "+mesh)
	}
	live := 0
	for _, e := range snap.Entries {
		if e.LeaseValid {
			live++
		}
	}
	own := o.n.cfg.Node.MeshName
	if live == 0 {
		return fmt.Errorf("%w: mesh %q: no MeshNode with a live owner lease (this node is a member of %q)", ErrNotFound, mesh, own)
	}
	return fmt.Errorf("%w: %w: mesh %q has %d live MeshNode(s); this node is a member of %q and places objects only there",
		ErrUnavailable, ErrNotMember, mesh, live, own)
}

// withSelfExcluded returns excluded plus self, leaving the caller's map as
// it was.
func withSelfExcluded(excluded map[string]exclusion, self authority.Node) map[string]exclusion {
	out := make(map[string]exclusion, len(excluded)+1)
	for k, v := range excluded {
		out[k] = v
	}
	out[self.String()] = excludedFailed
	return out
}
