package discovery

import (
	"slices"
	"testing"
)

// A notice time of 0 in BenchmarkDiscoveryMinute means the event was never
// noticed within the minute; reported as a figure it reads as the best
// possible one (a Tracker that stopped noticing dead nodes would have
// looked instant). The benchmark fails on it instead.
func TestDiscoveryMinuteUnnoticedEvents(t *testing.T) {
	if got := (minuteResult{}).unnoticed(); len(got) != 4 {
		t.Fatalf("a minute that noticed nothing: unnoticed = %v, want all four events", got)
	}
	res := minute(t, 10, 0)
	if got := res.unnoticed(); len(got) != 0 {
		t.Fatalf("ten nodes, one dying and one joining: never noticed %v (%+v)", got, res)
	}
	if missed := (minuteResult{deathFull: 1, deathTracked: 1, joinFull: 1}).unnoticed(); !slices.Equal(missed, []string{"the joined node (tracked)"}) {
		t.Fatalf("unnoticed = %v, want the tracked join only", missed)
	}
}
