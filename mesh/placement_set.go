package mesh

import (
	"bytes"
	"sort"
	"strconv"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// candidateSet is what one descriptor list offers a placement of one
// (mesh, object kind, stable type), §4 and §7: the Serving Object Server
// node runs with a valid owner lease, a placement weight above 0 and the
// stable type registered, each with its cumulative weight. It depends on
// the list alone, so it is built once per list and shared by every
// placement until discovery replaces the list; what changes between two
// placements — an admitted link, a call's exclusions, room in the store
// counters — is checked only for the candidates a placement draws
// (decide), so a placement does not grow with the mesh.
type candidateSet struct {
	cands []candidate
	cum   []int64 // cum[i] is the total weight of cands[:i+1]
	// leaving counts the other servers of the mesh with the type that
	// are listed draining or stopped (or shown so by their refusal):
	// not candidates, but what a placement that finds none says, so that
	// a drain of the last serving nodes reads as that, not as a mesh
	// without nodes.
	leaving int
}

// servingServer reports whether e is a Serving Object Server run of mesh
// with a valid owner lease (§4): what every use of the descriptor list
// that looks for object hosts asks first.
func servingServer(e directory.Entry, mesh string) bool {
	d := &e.Descriptor
	return d.MeshName == mesh && e.LeaseValid && d.State == record.StateServing && d.ObjectRole == record.RoleServer
}

// leavingServer reports whether e is an Object Server run of mesh with a
// valid owner lease listed draining or stopped: it will not serve again.
func leavingServer(e directory.Entry, mesh string) bool {
	d := &e.Descriptor
	return d.MeshName == mesh && e.LeaseValid && directory.Leaving(d.State) && d.ObjectRole == record.RoleServer
}

// newCandidateSet lists the candidates of snap for (mesh, kind,
// stableType); self identifies this node's own run (local placement).
func newCandidateSet(snap directory.Snapshot, mesh string, kind record.ObjectKind, stableType string, selfRID []byte, selfGen uint64) *candidateSet {
	s := &candidateSet{}
	var total int64
	for _, e := range snap.Entries {
		d := e.Descriptor
		if !servingServer(e, mesh) || d.PlacementWeight <= 0 {
			if leavingServer(e, mesh) && !(bytes.Equal(d.RoutingID, selfRID) && uint64(d.LifecycleGeneration) == selfGen) {
				if _, ok := capabilityLimit(d, kind, stableType); ok {
					s.leaving++
				}
			}
			continue
		}
		capLimit, ok := capabilityLimit(d, kind, stableType)
		if !ok {
			continue
		}
		total += int64(d.PlacementWeight)
		s.cands = append(s.cands, candidate{
			node:              authority.Node{MeshName: d.MeshName, RoutingID: d.RoutingID, LifecycleGeneration: uint64(d.LifecycleGeneration)},
			owner:             authority.Owner{ID: d.OwnerID, LeaseGeneration: uint64(d.LeaseGeneration)},
			limits:            authority.Limits{Actors: d.Capacity.Actors.Limit, Spots: d.Capacity.Spots.Limit, SpotType: capLimit},
			weight:            d.PlacementWeight,
			local:             bytes.Equal(d.RoutingID, selfRID) && uint64(d.LifecycleGeneration) == selfGen,
			descriptorVersion: strconv.FormatUint(uint64(d.DescriptorRevision), 10),
		})
		s.cum = append(s.cum, total)
	}
	return s
}

func (s *candidateSet) total() int64 {
	if len(s.cum) == 0 {
		return 0
	}
	return s.cum[len(s.cum)-1]
}

// drawer draws the candidates of a set one at a time, each draw without
// replacement and with probability weight / (weight not yet drawn). A
// placement takes the first drawn candidate it can use, which selects
// among the usable ones exactly by weight (§4: "picks a target by weight
// ratio"), whichever and however many were unusable.
//
// Draws are made from a pool — at first the whole set — by a binary search
// over its cumulative weights; a draw landing on a candidate already drawn
// is drawn again (rejection keeps the distribution exact). Once half of
// the pool's weight is drawn, the pool is rebuilt from its undrawn
// candidates, so a draw lands on an undrawn one with probability ≥ 1/2
// whatever was drawn before: a placement that must pass over many unusable
// candidates (links not admitted yet while a large mesh starts) costs
// O(N log W) at worst, not a scan per draw.
type drawer struct {
	set *candidateSet
	rnd func() float64 // uniform in [0, 1)
	// pool holds indices into set.cands and their cumulative weights;
	// nil means the whole set (set.cum).
	pool    []int
	poolCum []int64
	drawn   map[int]struct{}
	// poolDrawn is the weight drawn from the current pool, allDrawn from
	// the set.
	poolDrawn, allDrawn int64
}

// rejectionDraws bounds the draws that may land on a drawn candidate
// before next scans the pool's undrawn ones instead. With at most half the
// pool's weight drawn a draw lands on an undrawn one with probability
// ≥ 1/2, so the scan is rare; the bound only keeps a pathological draw
// function from looping.
const rejectionDraws = 8

// next returns the index of the next candidate, or false when every one
// was drawn.
func (d *drawer) next() (int, bool) {
	if d.set.total()-d.allDrawn <= 0 {
		return -1, false
	}
	if d.poolDrawn*2 > d.poolTotal() {
		d.repool()
	}
	total := d.poolTotal()
	for range rejectionDraws {
		x := scaled(d.rnd(), total)
		i := d.at(sort.Search(d.poolLen(), func(j int) bool { return d.cumAt(j) > x }))
		if _, seen := d.drawn[i]; !seen {
			return d.take(i), true
		}
	}
	x := scaled(d.rnd(), total-d.poolDrawn)
	for j := range d.poolLen() {
		i := d.at(j)
		if _, seen := d.drawn[i]; seen {
			continue
		}
		if w := int64(d.set.cands[i].weight); x >= w {
			x -= w
			continue
		}
		return d.take(i), true
	}
	// Unreachable while the weights add up; never return a drawn one.
	return -1, false
}

func (d *drawer) poolLen() int {
	if d.pool == nil {
		return len(d.set.cands)
	}
	return len(d.pool)
}

func (d *drawer) at(j int) int {
	if d.pool == nil {
		return j
	}
	return d.pool[j]
}

func (d *drawer) cumAt(j int) int64 {
	if d.pool == nil {
		return d.set.cum[j]
	}
	return d.poolCum[j]
}

func (d *drawer) poolTotal() int64 {
	if n := d.poolLen(); n > 0 {
		return d.cumAt(n - 1)
	}
	return 0
}

// repool makes the pool the current pool's undrawn candidates.
func (d *drawer) repool() {
	var pool []int
	var cum []int64
	var total int64
	for j := range d.poolLen() {
		i := d.at(j)
		if _, seen := d.drawn[i]; seen {
			continue
		}
		total += int64(d.set.cands[i].weight)
		pool, cum = append(pool, i), append(cum, total)
	}
	d.pool, d.poolCum, d.poolDrawn = pool, cum, 0
	if d.pool == nil {
		d.pool = []int{} // empty, not "the whole set"
	}
}

func (d *drawer) take(i int) int {
	if d.drawn == nil {
		d.drawn = make(map[int]struct{}, 4)
	}
	d.drawn[i] = struct{}{}
	w := int64(d.set.cands[i].weight)
	d.poolDrawn += w
	d.allDrawn += w
	return i
}

// scaled maps a uniform r in [0, 1) to an integer in [0, n).
func scaled(r float64, n int64) int64 {
	x := int64(r * float64(n))
	return min(max(x, 0), n-1)
}

type candidateSetKey struct {
	mesh       string
	kind       record.ObjectKind
	stableType string
}
