package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
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

// limited reports whether c has a capacity limit (then placement reads its
// store counters before choosing it).
func (c candidate) limited() bool {
	return c.limits.Actors > 0 || c.limits.Spots > 0 || c.limits.SpotType > 0
}

// exclusion says why a call excluded a node run from its placement.
type exclusion uint8

const (
	excludedFull   exclusion = iota + 1 // the Reserve batch found no capacity
	excludedFailed                      // its lease changed or it failed before the callback
)

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

// placeRequest is one placement's question.
type placeRequest struct {
	kind       record.ObjectKind
	stableType string
	mesh       string
	// excluded are node runs earlier attempts of the same call excluded.
	excluded map[string]exclusion
	// only, when set, is the one RoutingID acceptable (a relocation to a
	// named node); avoid are RoutingIDs never acceptable.
	only  []byte
	avoid [][]byte
	// prefer, when set, is taken if it is a usable candidate with room
	// (as if the draw had picked it first); otherwise the draw goes on.
	prefer []byte
	// notHere rules out this node's own run (a move away from it; any
	// placement while a host Relocate empties it).
	notHere bool
}

// placeEnv is what a placement reads besides the candidate set.
type placeEnv struct {
	// admitted returns the lifecycle generation a peer's link is admitted
	// at now (§4: a descriptor alone does not mean a message can be sent).
	admitted func(rid []byte) (uint64, bool)
	counters locstore.Store // holds the capacity counters
	rnd      func() float64 // uniform in [0, 1)
}

// place chooses the node run for a new object (§4, §7): a candidate of the
// latest complete descriptor list with a usable link and room in its store
// counters, picked by weight. The Reserve batch re-checks capacity
// atomically; a failure there excludes the node run and the caller asks
// again (§7).
func (o *objects) place(ctx context.Context, req placeRequest) (candidate, error) {
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok {
		if err := o.n.Discover(ctx); err != nil {
			return candidate{}, classify(ctx, err, "discovery before placement")
		}
		if snap, list, ok = o.n.lastSnapshotNumbered(); !ok {
			return candidate{}, fmt.Errorf("%w: no descriptor list yet", ErrUnavailable)
		}
	}
	if o.emptying() {
		// A host Relocate or a shutdown empties this node: it takes no
		// new objects.
		req.notHere = true
	}
	key := candidateSetKey{mesh: req.mesh, kind: req.kind, stableType: req.stableType}
	env := placeEnv{admitted: o.admittedAt, counters: o.n.loc, rnd: rand.Float64}
	c, err := decide(ctx, o.n.memo.candidates(list, snap, key, o.n.run.rid, o.n.run.lifecycleGeneration), req, env)
	if !errors.Is(err, errNothingPlaced) || !o.startListRefresh() {
		return c, err
	}
	defer o.listRefresh.Unlock()
	// The list may predate a node that can take it (discovery rounds are
	// lease.renew_interval apart: a server started a moment ago): once
	// more on a fresh list.
	if derr := o.n.freshList(ctx, placeLinkWait); derr != nil {
		return c, err
	}
	snap, list, _ = o.n.lastSnapshotNumbered()
	return decide(ctx, o.n.memo.candidates(list, snap, key, o.n.run.rid, o.n.run.lifecycleGeneration), req, env)
}

// leastTaken is the usable candidate (other than this node) for an object
// of (kind, stableType) that has taken the fewest objects for its weight
// after a run more, per taken, leaving out those taken rules out (nil when
// there is none), and the run's length: length of the number of usable
// candidates. A host command's target runs (host_targets.go) start on it.
func (o *objects) leastTaken(kind record.ObjectKind, stableType string, length func(usable int) int, taken func(rid []byte) (n int, out bool)) ([]byte, int) {
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok {
		return nil, 0
	}
	key := candidateSetKey{mesh: o.n.cfg.Node.MeshName, kind: kind, stableType: stableType}
	set := o.n.memo.candidates(list, snap, key, o.n.run.rid, o.n.run.lifecycleGeneration)
	return leastLoaded(set, placeEnv{admitted: o.admittedAt}, length, taken)
}

// leastLoaded is leastTaken on a candidate set.
func leastLoaded(set *candidateSet, env placeEnv, length func(usable int) int, taken func(rid []byte) (n int, out bool)) ([]byte, int) {
	req := placeRequest{notHere: true}
	var usable []*candidate
	var loads []int
	for i := range set.cands {
		c := &set.cands[i]
		n, out := taken(c.node.RoutingID)
		if out || req.usability(*c, env) != usableNow {
			continue
		}
		usable, loads = append(usable, c), append(loads, n)
	}
	if len(usable) == 0 {
		return nil, 0
	}
	size := length(len(usable))
	best := 0
	for i, c := range usable {
		// (loads[i] + size) / weight < (loads[best] + size) / weight of best,
		// in integers.
		if int64(loads[i]+size)*int64(usable[best].weight) < int64(loads[best]+size)*int64(c.weight) {
			best = i
		}
	}
	return usable[best].node.RoutingID, size
}

// relistedWithNewOwner runs one discovery round and reports whether the
// list now shows cand's node run serving, with a valid lease, under
// another owner lease than the one it was placed with: the list was
// stale — the run lost its lease and reacquired a new generation since
// this node's last round (after a store outage, every node for a moment)
// — not the run gone, and a placement may pick it again.
func (o *objects) relistedWithNewOwner(ctx context.Context, cand candidate) bool {
	until := time.Now().Add(relistWait)
	for {
		if err := o.n.freshList(ctx, placeLinkWait); err != nil {
			return false
		}
		switch e, ok := o.listedRun(cand); {
		case !ok:
			return false
		case e.LeaseReacquired && time.Now().Before(until):
			// The run holds a newer lease but has not republished its
			// descriptor under it yet (it does so right after
			// re-adopting its objects): look again shortly.
			if ctxsleep.For(ctx, relistPause) != nil {
				return false
			}
			continue
		case !e.LeaseValid || (e.Descriptor.OwnerID == cand.owner.ID && uint64(e.Descriptor.LeaseGeneration) == cand.owner.LeaseGeneration):
			return false
		default:
			// A round that saw the run's lease invalid meanwhile (it was
			// lost) disconnected it and the fresh round links it again;
			// placement needs the link admitted (at once when it stayed
			// up).
			wctx, cancel := context.WithTimeout(ctx, placeLinkWait)
			defer cancel()
			_, _ = o.n.tr.WaitAdmitted(wctx, transport.RID(e.Descriptor.RoutingID))
			return true
		}
	}
}

// listedRun is the last list's entry of cand's node run.
func (o *objects) listedRun(cand candidate) (directory.Entry, bool) {
	snap, _ := o.n.LastSnapshot()
	for _, e := range snap.Entries {
		d := e.Descriptor
		if bytes.Equal(d.RoutingID, cand.node.RoutingID) && uint64(d.LifecycleGeneration) == cand.node.LifecycleGeneration {
			return e, true
		}
	}
	return directory.Entry{}, false
}

// relistWait bounds how long relistedWithNewOwner waits for a run that
// reacquired its lease to republish its descriptor (about a tenth of a
// second after the reacquisition when its store answers), looking again
// every relistPause.
const (
	relistWait  = time.Second
	relistPause = 50 * time.Millisecond
)

// errNothingPlaced matches (errors.Is) decide's error when no candidate
// was usable, as opposed to a store failure while reading counters.
var errNothingPlaced = errors.New("nothing placed")

// nothingPlacedError is nothingPlaced's error, matching errNothingPlaced.
type nothingPlacedError struct{ error }

func (e nothingPlacedError) Is(target error) bool { return target == errNothingPlaced }
func (e nothingPlacedError) Unwrap() error        { return e.error }

// placeLinkWait bounds how long that refresh waits for links being
// admitted to the peers it found.
const placeLinkWait = 500 * time.Millisecond

// listRefreshAge is how old the descriptor list must be before a
// placement that found nothing runs a discovery round and tries again: a
// mesh that really has no room does not turn every failed creation into a
// round.
const listRefreshAge = time.Second

// startListRefresh reports whether a placement that found nothing should
// run a discovery round first — the list is older than listRefreshAge and
// no other placement is refreshing it now — and if so holds listRefresh
// (the caller unlocks it).
func (o *objects) startListRefresh() bool {
	if age, ok := o.n.snapshotAge(); !ok || age < listRefreshAge {
		return false
	}
	return o.listRefresh.TryLock()
}

// admittedAt is placeEnv.admitted on the node's transport.
func (o *objects) admittedAt(rid []byte) (uint64, bool) {
	p, ok := o.n.tr.Peer(transport.RID(rid))
	return p.LifecycleGeneration, ok
}

// maxCapacityBatch bounds the candidates whose counters one placement reads
// in one go; the first read is of one candidate, each further read of
// capacityBatchGrowth times more (a mesh of mostly full nodes is walked in
// a few calls, a mesh with room costs one).
const (
	maxCapacityBatch    = 256
	capacityBatchGrowth = 8
)

// decide draws set's candidates by weight and returns the first usable one
// with room: its link admitted at the listed lifecycle generation (or this
// node itself), not excluded by req, and — when it has limits — room for
// the object in its store counters (current usage and what other
// operations secured, the Reserve batch's rule). Counters are read only
// for drawn candidates, a few at a time, so a placement in a mesh of N
// nodes with room costs one draw and at most one read whatever N is; only
// a placement that finds nothing walks the whole set. Taking the first
// usable draw picks among the usable candidates exactly by weight.
func decide(ctx context.Context, set *candidateSet, req placeRequest, env placeEnv) (candidate, error) {
	bun, err := authority.BundleFor(req.kind, req.stableType)
	if err != nil {
		return candidate{}, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
	}
	d := drawer{set: set, rnd: env.rnd}
	var left leftOut // why drawn candidates were not usable, for the error
	usable := func() (int, bool) {
		for {
			i, ok := d.next()
			if !ok {
				return -1, false
			}
			switch req.usability(set.cands[i], env) {
			case usableNow:
				return i, true
			case ruledOut:
				left.ruledOut++
			case noLink:
				left.noLink++
			case thisNode:
				left.thisNode++
			}
		}
	}
	var (
		order []int // usable candidates in draw order
		usage map[string][]authority.CapacityRow
		read  int // order[:read] had their counters read
		batch = 1
	)
	if req.prefer != nil {
		if i := slices.IndexFunc(set.cands, func(c candidate) bool { return bytes.Equal(c.node.RoutingID, req.prefer) }); i >= 0 &&
			req.usability(set.cands[i], env) == usableNow {
			order = append(order, d.take(i))
		}
	}
	for pos := 0; ; pos++ {
		if pos == len(order) {
			i, ok := usable()
			if !ok {
				break
			}
			order = append(order, i)
		}
		c := set.cands[order[pos]]
		if !c.limited() {
			return c, nil
		}
		if pos >= read {
			// This candidate's counters, and those of the next usable
			// draws up to the batch, in one read.
			for len(order) < pos+batch {
				i, ok := usable()
				if !ok {
					break
				}
				order = append(order, i)
			}
			var nodes []authority.Node
			for _, i := range order[pos:] {
				if set.cands[i].limited() {
					nodes = append(nodes, set.cands[i].node)
				}
			}
			rows, err := readCapacities(ctx, env.counters, nodes, bun)
			if err != nil {
				return candidate{}, classify(ctx, err, "read capacity of the candidate nodes")
			}
			if usage == nil {
				usage = rows
			} else {
				maps.Copy(usage, rows)
			}
			read, batch = len(order), min(batch*capacityBatchGrowth, maxCapacityBatch)
		}
		if hasRoom(usage[c.key()], c.limits, bun) {
			return c, nil
		}
		left.full++
	}
	left.leaving = set.leaving
	return candidate{}, nothingPlacedError{req.nothingPlaced(left)}
}

// usability says whether the placement may use a candidate now, and if
// not, why (for the error of a placement that finds none).
type usability uint8

const (
	usableNow      usability = iota
	excludedByCall           // an earlier attempt of this call excluded it (req.excluded)
	ruledOut                 // req.only / req.avoid rule it out (a named target, targets already tried)
	noLink                   // a peer whose link is not admitted at the listed lifecycle generation
	thisNode                 // this node's own run, and req.notHere
)

// usability checks c: not excluded by an earlier attempt or by req's
// RoutingID filters, and this node itself or a peer whose link is admitted
// at the listed lifecycle generation.
func (req placeRequest) usability(c candidate, env placeEnv) usability {
	if len(req.excluded) > 0 && req.excluded[c.key()] != 0 {
		return excludedByCall
	}
	if req.only != nil && !bytes.Equal(c.node.RoutingID, req.only) {
		return ruledOut
	}
	if slices.ContainsFunc(req.avoid, func(a []byte) bool { return bytes.Equal(a, c.node.RoutingID) }) {
		return ruledOut
	}
	if c.local {
		if req.notHere {
			return thisNode
		}
		return usableNow
	}
	if gen, ok := env.admitted(c.node.RoutingID); !ok || gen != c.node.LifecycleGeneration {
		return noLink
	}
	return usableNow
}

// leftOut counts the candidates a placement drew and could not use, by
// reason (those excluded by earlier attempts are counted from
// req.excluded).
type leftOut struct {
	full     int // counters showed no room
	ruledOut int // req.only / req.avoid
	noLink   int // no admitted link at the listed generation
	thisNode int // this node, ruled out by req.notHere
	leaving  int // other servers with the type, draining or stopped (candidateSet.leaving)
}

// errNoUsableNode marks a placement that found no node it could use at all
// (none listed serving with the type, or none with an admitted link) —
// not one whose candidates were full or already tried. Right after a store
// outage longer than the lease TTL every peer looks so for a few seconds
// (reacquiring its lease, re-adopting its objects): a host command waits
// for them (transientMove).
var errNoUsableNode = errors.New("no usable node")

// nothingPlaced is the error of a placement that found no candidate. It
// is worded for whatever asked (a creation, a move, a cold activation)
// and says what was left out, so that a move retried elsewhere does not
// read as if the mesh had no node at all.
func (req placeRequest) nothingPlaced(left leftOut) error {
	full, failed := left.full, 0
	for _, why := range req.excluded {
		if why == excludedFull {
			full++
		} else {
			failed++
		}
	}
	var extra []string
	if left.ruledOut > 0 {
		extra = append(extra, fmt.Sprintf("%d ruled out: tried before or not the node asked for", left.ruledOut))
	}
	if left.noLink > 0 {
		extra = append(extra, fmt.Sprintf("%d without an admitted link", left.noLink))
	}
	if left.leaving > 0 {
		extra = append(extra, fmt.Sprintf("%d draining or stopped", left.leaving))
	}
	counts := func(parts ...string) string { return strings.Join(append(parts, extra...), ", ") }
	kind, stableType, mesh := req.kind, req.stableType, req.mesh
	switch {
	case full > 0:
		return fmt.Errorf("%w: no Serving node of mesh %q with %s %q has capacity left (%s): %w", ErrUnavailable, mesh, kind,
			stableType, counts(fmt.Sprintf("%d full", full), fmt.Sprintf("%d failed", failed)), ErrCapacityExhausted)
	case failed > 0 || left.ruledOut > 0:
		return fmt.Errorf("%w: no Serving node of mesh %q that hosts %s %q is left to try (%s)", ErrUnavailable, mesh, kind,
			stableType, counts(fmt.Sprintf("%d failed", failed)))
	case left.thisNode > 0 && left.ruledOut == 0 && left.noLink == 0:
		others := ""
		if left.leaving > 0 {
			others = fmt.Sprintf(" (%d draining or stopped)", left.leaving)
		}
		return fmt.Errorf("%w: no Serving node of mesh %q other than this one registered %s %q with a weight above 0%s%w",
			ErrUnavailable, mesh, kind, stableType, others, quiet{errNoUsableNode})
	case len(extra) > 0:
		return fmt.Errorf("%w: no Serving node of mesh %q registered %s %q with a weight above 0 and a usable link (%s)%w",
			ErrUnavailable, mesh, kind, stableType, counts(), quiet{errNoUsableNode})
	}
	return fmt.Errorf("%w: no Serving node of mesh %q registered %s %q with a weight above 0 and a usable link%w",
		ErrUnavailable, mesh, kind, stableType, quiet{errNoUsableNode})
}

// quiet wraps an error for errors.Is without adding to the message.
type quiet struct{ err error }

func (q quiet) Error() string { return "" }
func (q quiet) Unwrap() error { return q.err }

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
