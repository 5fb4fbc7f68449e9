package mesh

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnode/meshnode/mesh/directory"
)

// meshnode_discovery_rounds_total is monotonic in each of its series while
// the node's loop counts rounds: every round was listed here, so
// {list="cached"} is 0 at every scrape. Until 2026-12-07 (review R6)
// "cached" was computed at scrape time as Rounds−Listed−Followed from
// three atomics loaded one after the other while the loop added a round
// as rounds+1, then listed+1: a scrape that loaded Rounds before a round's
// add and Listed after it read one listed round too many, and "cached"
// wrapped to 2^64−1 (or went one down: a counter reset to Prometheus).
// The test scrapes the collector while rounds are added, and fails at the
// first "cached" value other than 0 (no timing: a bounded number of
// rounds; the interleaving came within about a million on two cores).
func TestDiscoveryCachedRoundsCounterIsMonotonic(t *testing.T) {
	n := &Node{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(nodeCollector{n: n})
	const rounds = 10_000_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < rounds; i++ {
			n.discoveryReads.add(directory.RoundStats{Listed: true})
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			t.Logf("%d rounds, %d scrapes: cached stayed 0", rounds, reads)
			if cached, _ := metricSample(t, reg, "meshnode_discovery_rounds_total", "list", "cached"); cached != 0 {
				t.Fatalf("cached = %v after %d listed rounds", cached, rounds)
			}
			return
		default:
		}
		if cached, ok := metricSample(t, reg, "meshnode_discovery_rounds_total", "list", "cached"); !ok || cached != 0 {
			t.Fatalf("meshnode_discovery_rounds_total{list=\"cached\"} = %v (found %v) though every round was listed (stats %+v): the next scrape reads 0, a counter going down",
				cached, ok, n.DiscoveryStats())
		}
	}
}
