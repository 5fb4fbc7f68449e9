//go:build knownopen

package benchkit

import "testing"

// Known open: Replay.Op shares each count out over the operations on its
// own (share), and Rows.Run then forces a batch for rows without one
// (StoreOps.applied), drops the condition-only rows of an operation with
// no applied batch (StoreOps.batches), and sends an empty batch when an
// operation has more batches than rows. For the subjects measured today
// (a move: ~4.6 batches of ~11 rows and ~8 condition rows; a creation: 2
// of 8 and 2) every operation's shares are well above one, and
// TestReplayReproducesTheSubjectsCounts holds; for a subject of fewer
// than one batch per operation, or about one row per batch, the replay's
// totals are not the subject's (more batches, fewer condition rows) or
// the ceiling fails ("no conditions and no mutations").
func TestReplayTotalsForSparseShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total Counts
		ops   int
	}{
		{"fewer batches than operations", Counts{Reads: 2, ReadKeys: 2, Writes: 1, WriteKeys: 3}, 2},
		{"condition rows with fewer batches than operations", Counts{Reads: 4, ReadKeys: 4, Writes: 1, WriteKeys: 1, CondKeys: 3}, 4},
		{"about one row per batch", Counts{Reads: 10, ReadKeys: 10, Writes: 46, WriteKeys: 47}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) { checkReplay(t, tc.total, tc.ops) })
	}
}
