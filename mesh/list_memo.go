package mesh

import (
	"sync"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
)

// listMemo keeps what is derived from the node's current descriptor list
// — placement's candidate sets, the host runs listed alive — so that work
// done per creation, move or lookup does not scan a list of every node of
// the mesh. Discovery replaces the list once per round (its number,
// Node.lastSnapshotNumbered); the memo is dropped when the number changes
// and rebuilt on first use.
type listMemo struct {
	mu   sync.Mutex
	list uint64
	sets map[candidateSetKey]*candidateSet
	live map[authority.Owner]struct{} // nil until asked
}

// maxCandidateSets bounds the memo's candidate sets: one per (mesh, kind,
// stable type) placed since the last discovery round; more than this many
// types in one round only costs rebuilding.
const maxCandidateSets = 256

// forList drops what belongs to an older list. m.mu is held.
func (m *listMemo) forList(list uint64) {
	if m.list != list {
		m.list, m.sets, m.live = list, nil, nil
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
