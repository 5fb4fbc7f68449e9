package transport

import (
	"fmt"
	"testing"
	"time"
)

// The per-peer times of duplicate refusals do not grow for good: peers
// that refused and never came back (runs that ended) leave entries that a
// hold's bound has made useless, and they go once the table is large.
func TestRefusedAsDuplicateDropsEntriesTooOldToMatter(t *testing.T) {
	n := &Node{cfg: Config{PeerTimeout: time.Second, KeepUnsent: 2 * time.Second},
		kept: map[string]*keptRecords{}, refusedAsDuplicate: map[string]time.Time{}}
	old := time.Now().Add(-time.Minute)
	for i := range refusedAsDuplicatePrune {
		n.refusedAsDuplicate[fmt.Sprintf("gone-%d", i)] = old
	}
	n.refusedAsDuplicate["recent"] = time.Now()
	n.noteRefusedAsDuplicate(RID("new"))
	if got := len(n.refusedAsDuplicate); got != 2 {
		t.Fatalf("%d entries left, want 2 (the recent one and the new one)", got)
	}
	if n.lastRefusedAsDuplicate(RID("recent")).IsZero() || n.lastRefusedAsDuplicate(RID("new")).IsZero() {
		t.Fatal("an entry within a hold's bound was dropped")
	}
}
