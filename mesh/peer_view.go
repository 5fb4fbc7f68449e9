package mesh

import (
	"strings"
	"time"

	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// The node's view of its peers is the descriptor list it holds (lastSnap):
// the last list discovery read, with what the peers told this node since
// (directory.Refusals). Everything that asks which peers serve reads it —
// placement's candidate sets, a drain's look for targets (peersNow), the
// wait for a target (serversRecently, mayServeAgain), isLeaving — so a
// peer that refused a move as draining is left out of all of them at once,
// as a list showing it draining would leave it out. What the nodes must
// compute alike (the reclaim sweep's shares, sweepPosition) reads the list
// as discovery read it (listed) instead: a refusal reaches one node only.
// Before (an operator try-out: every server of a mesh stopped at once),
// each drain offered object after object to peers that had refused the
// previous ones as draining, until its next discovery round; leaving such
// a peer out of the command's placements alone (a "bench") made the moves
// wait noTargetPatience for it instead, since the list still showed it
// serving.

// setViewLocked makes snap, a list discovery read at now, the list the
// node holds, with the refusals noted since shown (those of runs snap no
// longer lists are forgotten), and records what is derived from it. snap
// itself is kept too (listed): refusals are this node's own news, and what
// every node must compute alike is computed from the list they all read.
// n.mu is held.
func (n *Node) setViewLocked(snap directory.Snapshot, now time.Duration) {
	n.listed = snap
	n.lastSnap, n.haveSnap = n.refusals.Apply(snap), true
	n.viewSeq++
	n.noteServingLocked(n.lastSnap, now)
	n.noteLeaving(n.lastSnap)
}

// noteRefusedLeaving takes a peer run's refusal of a move because it is
// draining or stopped (state): the list the node holds shows that run so
// from now on, until a list no longer names the run. A refusal of a run
// the list does not hold — an earlier run of the RoutingID, where a newer
// list shows the new run — changes nothing.
func (n *Node) noteRefusedLeaving(rid []byte, gen uint64, state record.State) {
	n.mu.Lock()
	if !n.haveSnap {
		n.mu.Unlock()
		return
	}
	snap, changed := n.refusals.Note(n.lastSnap, rid, record.Generation(gen), state)
	if changed {
		n.lastSnap = snap
		n.viewSeq++
		n.noteLeaving(snap)
	}
	n.mu.Unlock()
	if changed {
		n.log.Info("discovery: a peer refused a move as "+string(state)+"; this node's list shows it so from now on (no more objects placed on it)",
			"peer", transport.RID(rid).String(), "peer_gen", gen)
	}
}

// stateRefusalPrefix begins the detail of a Restore this node refuses for
// its state ("node is draining"): leavingRefusal reads it back.
const stateRefusalPrefix = "node is "

// stateRefusal is the detail of a Restore refused because this node is in
// state s rather than serving.
func stateRefusal(s record.State) string { return stateRefusalPrefix + string(s) }

// leavingRefusal reports whether a Restore refusal (failure f, detail)
// says its node run is draining or stopped (stateRefusal), and which.
func leavingRefusal(f router.RelocationFailure, detail string) (record.State, bool) {
	s, ok := strings.CutPrefix(detail, stateRefusalPrefix)
	st := record.State(s)
	return st, ok && f == router.RelocationFailureNotServing && directory.Leaving(st)
}
