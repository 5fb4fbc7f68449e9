package directory_test

import (
	"testing"

	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// states is what snap shows each entry's state as, by RoutingID byte and
// lifecycle generation.
func states(snap directory.Snapshot) map[[2]int]record.State {
	out := map[[2]int]record.State{}
	for _, e := range snap.Entries {
		out[[2]int{int(e.Descriptor.RoutingID[0]), int(e.Descriptor.LifecycleGeneration)}] = e.Descriptor.State
	}
	return out
}

// A node run's refusal as draining or stopped shows it so in every list
// that names that run, and in no other: not a new run of its RoutingID,
// not a list read after the run left (which forgets it).
func TestRefusals(t *testing.T) {
	type note struct {
		rid   byte
		gen   record.Generation
		state record.State
		want  bool // Note changed the list
	}
	type step struct {
		note  *note
		apply *directory.Snapshot                         // a new list from discovery
		want  map[[2]int]record.State                     // what the list held shows
		runs  int                                         // refusals kept after the step
		check func(t *testing.T, held directory.Snapshot) // optional
	}
	serving := list(peer(1), peer(2))
	drained := list(peer(1), peer(2, state(record.StateDraining)))
	restarted := list(peer(1), peer(2, lifecycle(2)))
	gone := list(peer(1))
	tests := []struct {
		name  string
		first directory.Snapshot
		steps []step
	}{
		{"a draining refusal shows the run draining, also in later lists", serving, []step{
			{note: &note{2, 1, record.StateDraining, true}, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 1}: record.StateDraining}, runs: 1},
			{apply: &serving, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 1}: record.StateDraining}, runs: 1},
		}},
		{"stopped likewise", serving, []step{
			{note: &note{1, 1, record.StateStopped, true}, want: map[[2]int]record.State{{1, 1}: record.StateStopped, {2, 1}: record.StateServing}, runs: 1},
		}},
		{"another state is no refusal to take", serving, []step{
			{note: &note{2, 1, record.StatePreparing, false}, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 1}: record.StateServing}},
			{note: &note{2, 1, record.StateError, false}, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 1}: record.StateServing}},
		}},
		{"a refusal of an earlier run does not mark the newer run the list holds", restarted, []step{
			{note: &note{2, 1, record.StateDraining, false}, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 2}: record.StateServing}},
		}},
		{"a new run of the RoutingID is judged by its own descriptor", serving, []step{
			{note: &note{2, 1, record.StateDraining, true}, runs: 1},
			{apply: &restarted, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 2}: record.StateServing}},
			// The old run named again (a list read before the restart,
			// stored late) is not marked any more: the refusal was forgotten.
			{apply: &serving, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 1}: record.StateServing}},
		}},
		{"a run no longer listed is forgotten", serving, []step{
			{note: &note{2, 1, record.StateDraining, true}, runs: 1},
			{apply: &gone, want: map[[2]int]record.State{{1, 1}: record.StateServing}},
		}},
		{"a list that shows it leaving itself keeps showing its own state", serving, []step{
			{note: &note{2, 1, record.StateStopped, true}, runs: 1},
			{apply: &drained, want: map[[2]int]record.State{{1, 1}: record.StateServing, {2, 1}: record.StateDraining}, runs: 1},
			{note: &note{2, 1, record.StateDraining, false}, runs: 1},
		}},
		{"a run not listed is not noted", gone, []step{
			{note: &note{2, 1, record.StateDraining, false}, want: map[[2]int]record.State{{1, 1}: record.StateServing}},
		}},
		{"the list discovery handed over is not modified", serving, []step{
			{note: &note{2, 1, record.StateDraining, true}, runs: 1, check: func(t *testing.T, _ directory.Snapshot) {
				if s := serving.Entries[1].Descriptor.State; s != record.StateServing {
					t.Fatalf("the input list was modified: %s", s)
				}
			}},
			{apply: &serving, runs: 1, check: func(t *testing.T, held directory.Snapshot) {
				if s := serving.Entries[1].Descriptor.State; s != record.StateServing || held.Entries[1].Descriptor.State != record.StateDraining {
					t.Fatalf("input %s, held %s", s, held.Entries[1].Descriptor.State)
				}
			}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r directory.Refusals
			held := r.Apply(tc.first)
			for i, s := range tc.steps {
				if s.note != nil {
					next, changed := r.Note(held, []byte{s.note.rid}, s.note.gen, s.note.state)
					if changed != s.note.want {
						t.Fatalf("step %d: Note changed %v, want %v", i, changed, s.note.want)
					}
					held = next
				}
				if s.apply != nil {
					held = r.Apply(*s.apply)
				}
				if s.want != nil {
					got := states(held)
					if len(got) != len(s.want) {
						t.Fatalf("step %d: list shows %v, want %v", i, got, s.want)
					}
					for k, v := range s.want {
						if got[k] != v {
							t.Fatalf("step %d: list shows %v, want %v", i, got, s.want)
						}
					}
				}
				if r.Len() != s.runs {
					t.Fatalf("step %d: %d refusals kept, want %d", i, r.Len(), s.runs)
				}
				if s.check != nil {
					s.check(t, held)
				}
			}
		})
	}
}
