package directory

import (
	"github.com/meshnode/meshnode/mesh/record"
)

// Refusals is what a node learnt from its peers themselves since it read
// its descriptor list: node runs that refused its work because they are
// draining or stopped. Such a run published that state before it refused
// (a node's state changes only once its descriptor is written), but the
// list this node holds may predate the publish by up to a discovery round
// — when every server of a mesh is stopped at once, each one's drain read
// its list before the others published draining, and offered object after
// object to peers that refused each of them. Applied to a list, Refusals
// shows those runs in the state they refused in, so that everything that
// reads the list (placement, a drain's look for targets, the wait for a
// target) treats them as a list showing them so would.
//
// A refusal is kept by node run (RoutingID and lifecycle generation) for
// as long as the lists name that run: draining and stopped end a run (only
// a drain publishes draining, and it ends in the node's stop; a republish
// after a lease recovery says draining again), so no later descriptor of
// the same run can say serving. A list without the run — it stopped, or a
// new run took its RoutingID — forgets it: a new run is judged by its own
// descriptor. A refusal is noted only while the list held names the very
// run that refused, so a late refusal of an earlier run cannot mark the
// run a newer list shows.
//
// Not safe for concurrent use: the caller guards it with its list.
type Refusals struct {
	runs map[refusedRun]record.State
}

// refusedRun names a node run: RoutingID bytes and lifecycle generation.
type refusedRun struct {
	rid string
	gen record.Generation
}

// Leaving reports whether s is a state a node run does not leave: it ends
// in the run's stop.
func Leaving(s record.State) bool {
	return s == record.StateDraining || s == record.StateStopped
}

// Note records that node run (rid, gen) refused work because it is in
// state (draining or stopped), and returns snap as Apply shows it, with
// true, when that changed what snap shows. It changes nothing — false —
// for another state, or when snap does not list that run (a newer run of
// the RoutingID, or none) or already shows it leaving.
func (r *Refusals) Note(snap Snapshot, rid []byte, gen record.Generation, state record.State) (Snapshot, bool) {
	if !Leaving(state) {
		return snap, false
	}
	i := snap.find(rid, gen)
	if i < 0 || Leaving(snap.Entries[i].Descriptor.State) {
		return snap, false
	}
	if r.runs == nil {
		r.runs = map[refusedRun]record.State{}
	}
	r.runs[refusedRun{string(rid), gen}] = state
	return r.Apply(snap), true
}

// Apply returns snap with every noted run it lists shown in the state it
// refused in (unless snap already shows it leaving), and forgets the noted
// runs snap does not list. snap itself is not modified: the entries are
// copied when one changes.
func (r *Refusals) Apply(snap Snapshot) Snapshot {
	if len(r.runs) == 0 {
		return snap
	}
	copied := false
	for run, state := range r.runs {
		i := snap.find([]byte(run.rid), run.gen)
		switch {
		case i < 0:
			delete(r.runs, run)
			continue
		case Leaving(snap.Entries[i].Descriptor.State):
			continue // the list says it itself
		}
		if !copied {
			snap.Entries, copied = append([]Entry(nil), snap.Entries...), true
		}
		snap.Entries[i].Descriptor.State = state
	}
	return snap
}

// Len is how many node runs are noted.
func (r *Refusals) Len() int { return len(r.runs) }

// find returns the index of the entry of node run (rid, gen), or -1.
func (s Snapshot) find(rid []byte, gen record.Generation) int {
	for i := range s.Entries {
		if d := &s.Entries[i].Descriptor; d.LifecycleGeneration == gen && string(d.RoutingID) == string(rid) {
			return i
		}
	}
	return -1
}
