package benchkit

import "testing"

// A replay's totals are the subject's for every shape, not only for the
// subjects measured today (a move: ~4.6 batches of ~11 rows and ~8
// condition rows; a creation: 2 of 8 and 2), whose every operation has
// well over one of each: Replay.Op shares the counts out jointly (an
// operation has rows only where it has a batch, condition rows ride on
// batches, the kinds of row on rows), and Rows.Run sends no empty batch.
// Until 2026-12-07 each count was shared on its own: a subject of fewer
// than one batch per operation, or about one row per batch, replayed more
// batches or fewer condition rows than it made, or failed ("no conditions
// and no mutations").
func TestReplayTotalsForSparseShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total Counts
		ops   int
	}{
		{"fewer batches than operations", Counts{Reads: 2, ReadKeys: 2, Writes: 1, WriteKeys: 3}, 2},
		{"condition rows with fewer batches than operations", Counts{Reads: 4, ReadKeys: 4, Writes: 1, WriteKeys: 1, CondKeys: 3}, 4},
		{"about one row per batch", Counts{Reads: 10, ReadKeys: 10, Writes: 46, WriteKeys: 47}, 10},
		{"nothing", Counts{}, 3},
		{"zero operations", Counts{Reads: 1, ReadKeys: 2, Writes: 1, WriteKeys: 1, NewKeys: 1}, 0},
		{"zero batches", Counts{Reads: 3, ReadKeys: 5, MissingKeys: 2}, 2},
		{"fewer read calls than operations", Counts{Reads: 1, ReadKeys: 3, MissingKeys: 1}, 2},
		{"fewer rows than batches", Counts{Writes: 3, WriteKeys: 1, CondKeys: 2}, 2},
		{"condition-only batches", Counts{Writes: 2, CondKeys: 3}, 3},
		{"a refused condition-only batch", Counts{Writes: 3, Conflicts: 2, WriteKeys: 2, ConflictKeys: 1, CondKeys: 2}, 2},
		{"every batch refused", Counts{Writes: 2, Conflicts: 2, WriteKeys: 3, ConflictKeys: 3, CondKeys: 1}, 3},
		{"kinds of row on fewer rows than operations", Counts{Writes: 2, WriteKeys: 4, NewKeys: 1, NewExpiringKeys: 1,
			ExpiringKeys: 1, DeleteKeys: 1}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) { checkReplay(t, tc.total, tc.ops) })
	}
}
