package mesh

import (
	"sync"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// listMemo keeps what is derived from the node's current descriptor list
// — placement's candidate sets, the host runs listed alive, each node
// run's owner, the Instance Spot types each mesh offers — so that work
// done per creation, move, lookup or route switch does not scan a list of
// every node of the mesh. Discovery replaces the list once per round, and
// a peer's refusal may change it between rounds (its number,
// Node.lastSnapshotNumbered); the memo is dropped when the number changes
// and rebuilt on first use.
type listMemo struct {
	mu   sync.Mutex
	list uint64
	sets map[candidateSetKey]*candidateSet
	live map[authority.Owner]struct{} // nil until asked
	runs map[nodeRun]authority.Owner  // nil until asked
	// runLive: every node run listed, and whether its host run's lease
	// holds (valid, or reacquired by the same run); nil until asked.
	runLive map[nodeRun]bool
	// instanceTypes: per mesh, the Instance Spot types its serving
	// server nodes offer (one entry per offering node); nil until asked.
	instanceTypes map[string][]string
}

// nodeRun is a node run: RoutingID bytes and lifecycle generation.
type nodeRun struct {
	rid string
	gen uint64
}

// maxCandidateSets bounds the memo's candidate sets: one per (mesh, kind,
// stable type) placed since the last discovery round; more than this many
// types in one round only costs rebuilding.
const maxCandidateSets = 256

// forList drops what belongs to an older list. m.mu is held.
func (m *listMemo) forList(list uint64) {
	if m.list != list {
		m.list, m.sets, m.live, m.runs, m.runLive, m.instanceTypes = list, nil, nil, nil, nil, nil
	}
}

// candidates returns the candidate set of key for the list numbered list
// (snap), building it on first use.
func (m *listMemo) candidates(list uint64, snap directory.Snapshot, key candidateSetKey, selfRID []byte, selfGen uint64) *candidateSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forList(list)
	if m.sets == nil || len(m.sets) >= maxCandidateSets {
		m.sets = make(map[candidateSetKey]*candidateSet)
	}
	s, ok := m.sets[key]
	if !ok {
		s = newCandidateSet(snap, key.mesh, key.kind, key.stableType, selfRID, selfGen)
		m.sets[key] = s
	}
	return s
}

// listedAlive reports whether the list numbered list (snap) has a
// descriptor of owner's host run with a valid lease.
func (m *listMemo) listedAlive(list uint64, snap directory.Snapshot, owner authority.Owner) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forList(list)
	if m.live == nil {
		m.live = make(map[authority.Owner]struct{}, len(snap.Entries))
		for i := range snap.Entries {
			if e := &snap.Entries[i]; e.LeaseValid {
				m.live[authority.Owner{ID: e.Descriptor.OwnerID, LeaseGeneration: uint64(e.Descriptor.LeaseGeneration)}] = struct{}{}
			}
		}
	}
	_, ok := m.live[owner]
	return ok
}

// runOwner returns the host run (OwnerId, LeaseGeneration) the list
// numbered list (snap) names for node run (rid, gen); false when it has no
// such descriptor with an owner.
func (m *listMemo) runOwner(list uint64, snap directory.Snapshot, rid []byte, gen uint64) (authority.Owner, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forList(list)
	if m.runs == nil {
		m.runs = make(map[nodeRun]authority.Owner, len(snap.Entries))
		for i := range snap.Entries {
			d := &snap.Entries[i].Descriptor
			if d.OwnerID != "" && d.LeaseGeneration != 0 {
				m.runs[nodeRun{rid: string(d.RoutingID), gen: uint64(d.LifecycleGeneration)}] =
					authority.Owner{ID: d.OwnerID, LeaseGeneration: uint64(d.LeaseGeneration)}
			}
		}
	}
	o, ok := m.runs[nodeRun{rid: string(rid), gen: gen}]
	return o, ok
}

// runListed reports whether the list numbered list (snap) has a
// descriptor of node run (rid, gen), and whether its host run's lease
// holds (LeaseValid, or LeaseReacquired: the same run, about to
// republish).
func (m *listMemo) runListed(list uint64, snap directory.Snapshot, rid []byte, gen uint64) (listed, live bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forList(list)
	if m.runLive == nil {
		m.runLive = make(map[nodeRun]bool, len(snap.Entries))
		for i := range snap.Entries {
			e := &snap.Entries[i]
			m.runLive[nodeRun{rid: string(e.Descriptor.RoutingID), gen: uint64(e.Descriptor.LifecycleGeneration)}] = e.LeaseValid || e.LeaseReacquired
		}
	}
	live, listed = m.runLive[nodeRun{rid: string(rid), gen: gen}]
	return listed, live
}

// offeredInstanceTypes returns the Instance Spot types the serving server
// nodes of mesh with a valid lease offer in the list numbered list (snap),
// one entry per offering node (§7.1's type rule looks at them). The slice
// is shared: callers must not modify it.
func (m *listMemo) offeredInstanceTypes(list uint64, snap directory.Snapshot, mesh string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forList(list)
	if m.instanceTypes == nil {
		m.instanceTypes = make(map[string][]string)
		for i := range snap.Entries {
			e := &snap.Entries[i]
			d := &e.Descriptor
			if !servingServer(*e, d.MeshName) {
				continue
			}
			for _, cp := range d.ObjectCapabilities {
				if cp.ObjectKind == record.ObjectInstanceSpot {
					m.instanceTypes[d.MeshName] = append(m.instanceTypes[d.MeshName], cp.StableType)
				}
			}
		}
	}
	return m.instanceTypes[mesh]
}
