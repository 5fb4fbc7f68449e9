package directory_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// A stored descriptor this runtime cannot decode — here a newer runtime's (recordVersion 9) of another mesh sharing
// the store, the case docs/DISCOVERY.md names for ErrStoredDescriptor — is
// skipped by the list, as it must be. It must not also turn every later
// change into a whole list on every node: the value never changes, so the
// journal still proves every other key (docs/DISCOVERY.md §3.1/§3.2: a round
// costs O(1 + changes) whatever N; the whole list only when "a changed value
// does not decode"). Until 2026-12-07 (review) Tracker.followJournal refused
// whenever the last list counted an undecodable value, so from the first
// round on every change cost each node 2 + N/1000 scan pages of every
// descriptor of every mesh (and a WARN per undecodable value), for as long
// as the value stayed — Reclaim never deletes an undecodable one.
func TestTrackerFollowsTheJournalPastAnUndecodableDescriptor(t *testing.T) {
	mem, _ := newMem(t)
	var nodes []*node
	for i := 1; i <= 3; i++ {
		l := grantLease(t, mem, fmt.Sprintf("owner-%d", i), record.Generation(i), leaseTTL)
		nodes = append(nodes, newNode(t, mem, l, "m", []byte{byte(i)}))
	}
	// A newer runtime's descriptor of mesh "other", under its own key.
	rid := []byte{0x42}
	newer, err := descriptor("other", rid, "tcp://other:1").Encode()
	if err != nil {
		t.Fatal(err)
	}
	newer = bytes.Replace(newer, []byte(`"recordVersion":1`), []byte(`"recordVersion":9`), 1)
	if _, err := record.DecodeMeshNode(newer); err == nil {
		t.Fatal("setup: the newer descriptor decodes")
	}
	put(t, mem, mustKey(t, "other", rid), newer)

	tr := &directory.Tracker{Store: mem, PageSize: 1000, Logger: quiet()}
	trackerRound(t, tr, mem, "m", "first") // a whole list: the first round always is
	for round, n := range nodes {
		n.desc.Endpoint = fmt.Sprintf("tcp://moved-%d:1", round)
		mustPublish(t, n.pub, n.desc, directory.Published)
		st := trackerRound(t, tr, mem, "m", fmt.Sprintf("change %d", round))
		if !st.Followed || st.Listed || st.ScanPages != 0 {
			t.Fatalf("change %d, one descriptor changed, the undecodable one untouched: the round read the whole list "+
				"instead of following the journal: %+v", round, st)
		}
	}
}
