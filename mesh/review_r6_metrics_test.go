package mesh

import (
	"os"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh/directory"
)

// Review R6: meshnode_discovery_rounds_total{list="cached"} is computed at
// scrape time as Rounds-Listed-Followed from three atomics loaded one after
// the other (DiscoveryStats), while the node's loop adds a round as
// rounds+1, then listed+1 (discoveryCounters.add). A scrape that loads
// Rounds before a round's add and Listed after it reads one listed round
// too many: "cached" goes one down (a counter reset to Prometheus) or, at
// 0, wraps to 2^64-1 (1.8e19 rounds). docs/OPERATIONS.md "Metrics": a
// counter; the rules: counters are monotonic. The test adds listed rounds
// while it reads the stats as a scrape does, and fails at the first
// "cached" value other than 0 (no timing: a bounded number of rounds; the
// interleaving comes within about a million on two cores).
func TestReviewR6DiscoveryCachedRoundsCounterIsMonotonic(t *testing.T) {
	n := &Node{}
	const rounds = 10_000_000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < rounds; i++ {
			n.discoveryReads.add(directory.RoundStats{Listed: true})
		}
	}()
	var prev uint64
	for reads := 0; ; reads++ {
		select {
		case <-done:
			t.Logf("%d rounds, %d reads: cached stayed monotonic", rounds, reads)
			return
		default:
		}
		ds := n.DiscoveryStats()
		cached := ds.Rounds - ds.Listed - ds.Followed // what Collect exports
		// Every round was listed: "cached" is 0 throughout; any other
		// value is followed by a step back to 0 at the next scrape.
		if cached != 0 {
			t.Fatalf("meshnode_discovery_rounds_total{list=\"cached\"} read %d (after %d) though every round was listed (stats %+v): the next scrape reads 0, a counter going down",
				cached, prev, ds)
		}
		prev = cached
	}
}

// Review R6: the metrics table documents the `op` label of
// meshnode_authority_conflicts_total (and of the lane-wait counters, "`op`")
// as reserve … sweep; the node exports one series per authorityOps entry,
// which has "reclaim" too (authority.OpReclaim): a label value /metrics has
// that docs/OPERATIONS.md "Metrics" does not name.
func TestReviewR6AuthorityOpsLabelsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "| `meshnode_authority_conflicts_total`") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("no meshnode_authority_conflicts_total row in docs/OPERATIONS.md")
	}
	_, labels, _ := strings.Cut(row, "`op` = ")
	labels, _, _ = strings.Cut(labels, " |")
	documented := map[string]bool{}
	for _, v := range strings.Split(labels, ",") {
		documented[strings.TrimSpace(v)] = true
	}
	for _, op := range authorityOps {
		if !documented[string(op)] {
			t.Errorf("op=%q is exported (authorityOps) but not in the documented label values %q", op, labels)
		}
	}
}
