package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
)

// runsOver is target runs of size over the candidates of set, all linked.
func runsOver(set *candidateSet, size int, linked func(rid []byte) bool) *targetRuns {
	env := placeEnv{admitted: func(rid []byte) (uint64, bool) { return 1, linked == nil || linked(rid) }}
	return newTargetRuns(size, nil, func(_ record.ObjectKind, _ string, length func(int) int, taken func([]byte) (int, bool)) ([]byte, int) {
		return leastLoaded(set, env, length, taken)
	})
}

// hand gives one move its target and records that it went there.
func hand(r *targetRuns) []byte {
	rid := r.prefer(record.ObjectActor, "t")
	r.took(rid, rid, false)
	return rid
}

// A run hands its target to size consecutive moves; over the command the
// targets take the moves in proportion to their weights, within one run.
func TestTargetRunsFollowWeights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		size    int
		moves   int
	}{
		{"equal weights", []int{100, 100}, 8, 400},
		{"one to two to one", []int{100, 200, 100}, 10, 1000},
		{"runs longer than a share", []int{1, 3}, 64, 500},
		{"runs of one", []int{100, 300}, 1, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := weightedSet(tc.weights...)
			r := runsOver(set, tc.size, nil)
			got := map[byte]int{}
			var prev []byte
			run := 0
			for i := range tc.moves {
				rid := hand(r)
				if rid == nil {
					t.Fatalf("move %d: no target", i)
				}
				got[rid[0]]++
				if prev != nil && rid[0] == prev[0] {
					run++
				} else {
					if prev != nil && run%tc.size != 0 {
						t.Fatalf("move %d: a run of %d moves ended before %d", i, run, tc.size)
					}
					run = 1
				}
				prev = rid
			}
			checkShares(t, tc.weights, got, tc.moves, tc.size)
		})
	}
}

// A move that its run's target could not take, or that failed on it, ends
// the run and benches the target: no run for 500 ms, then 1 s after the
// next incident, doubling up to 8 s; moves failing while it is benched are
// the same incident; a move that ended before placement changes nothing.
func TestTargetRunsBenchATargetThatFailed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		went    []byte
		failed  bool
		benched bool
	}{
		{"placed elsewhere", []byte{2}, false, true},
		{"failed on the target", []byte{1}, true, true},
		{"ended before placement", nil, false, false},
		{"moved there", []byte{1}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runsOver(weightedSet(100, 100), 4, nil)
			clock := time.Unix(1000, 0)
			r.now = func() time.Time { return clock }
			// Two moves of a run to target 1 in flight; the first ends.
			first := r.prefer(record.ObjectActor, "t")
			second := r.prefer(record.ObjectActor, "t")
			if first[0] != 1 || second[0] != 1 {
				t.Fatalf("run on %d, %d, want 1 (ties go to the first listed)", first[0], second[0])
			}
			r.took(first, tc.went, tc.failed)
			onOne := func(moves int) int {
				n := 0
				for range moves {
					if hand(r)[0] == 1 {
						n++
					}
				}
				return n
			}
			if n := onOne(20); tc.benched && n != 0 {
				t.Fatalf("%d moves went to the benched target", n)
			} else if !tc.benched && n == 0 {
				t.Fatal("target 1 was benched")
			}
			if !tc.benched {
				return
			}
			// The other move in flight fails too: the same incident, the
			// bench stays.
			r.took(second, tc.went, tc.failed)
			if got := r.out[string([]byte{1})].pause; got != firstBench {
				t.Fatalf("bench %v after a second failure of one incident, want %v", got, firstBench)
			}
			clock = clock.Add(firstBench)
			if onOne(20) == 0 {
				t.Fatal("target 1 still benched after its 500 ms")
			}
			for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, maxBench, maxBench} {
				for r.prefer(record.ObjectActor, "t")[0] != 1 { // until a run of target 1 begins
					r.took([]byte{2}, []byte{2}, false)
				}
				r.took([]byte{1}, tc.went, tc.failed)
				if got := r.out[string([]byte{1})].pause; got != want {
					t.Fatalf("bench %v, want %v", got, want)
				}
				clock = clock.Add(want - time.Millisecond)
				if onOne(10) != 0 {
					t.Fatalf("target 1 had a run before its %v bench ended", want)
				}
				clock = clock.Add(time.Millisecond)
			}
		})
	}
}

// With every target ruled out or unusable, moves are placed on their own;
// runs of size 0 never prefer a target.
func TestTargetRunsWithoutTargets(t *testing.T) {
	r := runsOver(weightedSet(100), 4, func([]byte) bool { return false })
	if rid := r.prefer(record.ObjectActor, "t"); rid != nil {
		t.Fatalf("a run on %x with no usable target", rid)
	}
	off := runsOver(weightedSet(100), 0, nil)
	if rid := off.prefer(record.ObjectActor, "t"); rid != nil {
		t.Fatalf("runs of 0 preferred %x", rid)
	}
	var none *targetRuns
	if none.prefer(record.ObjectActor, "t") != nil {
		t.Fatal("a nil targetRuns preferred a target")
	}
	none.took([]byte{1}, []byte{1}, false)
}

// A command of few objects is still spread: runs are no longer than the
// moves left over runsPerTarget runs per usable target (a try-out drained
// 515 objects onto three nodes as 256, 256 and 3 before).
func TestTargetRunsSpreadAFewObjects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		moves   int
	}{
		{"515 objects, three equal targets", []int{100, 100, 100}, 515},
		{"40 objects, two targets", []int{100, 100}, 40},
		{"1,000 objects, one to three", []int{100, 300}, 1000},
		{"3 objects, three targets", []int{100, 100, 100}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := weightedSet(tc.weights...)
			env := placeEnv{admitted: func([]byte) (uint64, bool) { return 1, true }}
			left := tc.moves
			r := newTargetRuns(256, func() int { return left }, func(_ record.ObjectKind, _ string, length func(int) int, taken func([]byte) (int, bool)) ([]byte, int) {
				return leastLoaded(set, env, length, taken)
			})
			got := map[byte]int{}
			longest, run := 0, 0
			var prev byte
			for range tc.moves {
				rid := hand(r)
				left--
				got[rid[0]]++
				if rid[0] == prev {
					run++
				} else {
					run = 1
				}
				prev, longest = rid[0], max(longest, run)
			}
			bound := max(tc.moves/(runsPerTarget*len(tc.weights)), 1)
			checkShares(t, tc.weights, got, tc.moves, bound)
			if longest > 2*bound { // two runs in a row can go to one target
				t.Errorf("longest stretch on one target %d, want at most %d", longest, 2*bound)
			}
		})
	}
}

// The end-of-command log counts the moved objects by target.
func TestMovedToCountsMovedObjectsByTarget(t *testing.T) {
	objs := []HostObjectResult{
		{Outcome: hostmove.Moved, Target: []byte{0xaa}}, {Outcome: hostmove.Moved, Target: []byte{0xbb}},
		{Outcome: hostmove.Moved, Target: []byte{0xaa}}, {Outcome: hostmove.Failed, Target: []byte{0xcc}},
		{Outcome: hostmove.Skipped},
	}
	got := movedTo(objs)
	if len(got) != 2 || got["aa"] != 2 || got["bb"] != 1 {
		t.Fatalf("movedTo = %v, want aa:2 bb:1", got)
	}
}

// checkShares fails unless target i+1 (weight weights[i]) took its share of
// moves, by weight, within bound; got counts the moves by target.
func checkShares(t *testing.T, weights []int, got map[byte]int, moves, bound int) {
	t.Helper()
	total := 0
	for _, w := range weights {
		total += w
	}
	for i, w := range weights {
		want := float64(moves) * float64(w) / float64(total)
		if d := float64(got[byte(i+1)]) - want; d > float64(bound) || d < -float64(bound) {
			t.Errorf("target %d (weight %d) took %d of %d moves, want %.0f within %d", i+1, w, got[byte(i+1)], moves, want, bound)
		}
	}
}

// TestFailedOnTargetBenchesOnlyTheTargetsFault: only an attempt that failed
// because of its target benches that target. A capacity batch the store did
// not answer (storeFailed, reported as a capacity failure) and a move that
// ended waiting for its own application (appSlow) say nothing of the
// target; before 2026-12-08 the former benched every target a store outage
// on the source met.
func TestFailedOnTargetBenchesOnlyTheTargetsFault(t *testing.T) {
	capacity := relocation.ReasonCapacity.String()
	for _, tc := range []struct {
		name string
		res  RelocationResult
		err  error
		want bool
	}{
		{"moved", RelocationResult{Outcome: Moved}, nil, false},
		{"target full", RelocationResult{Outcome: NotMoved, Reason: capacity}, nil, true},
		{"target failed", RelocationResult{Outcome: NotMoved, Reason: relocation.ReasonTargetFailed.String()}, nil, true},
		{"stream failed", RelocationResult{Outcome: NotMoved, Reason: relocation.ReasonStreamFailed.String()}, nil, true},
		{"target lost", RelocationResult{Outcome: NotMoved, Reason: relocation.ReasonTargetLost.String()}, nil, true},
		{"store did not answer the capacity batch", RelocationResult{Outcome: NotMoved, Reason: capacity, storeFailed: true}, nil, false},
		{"waited for the application", RelocationResult{Outcome: NotMoved, Reason: relocation.ReasonDeadline.String(), appSlow: true}, nil, false},
		{"deadline on the target", RelocationResult{Outcome: NotMoved, Reason: relocation.ReasonDeadline.String()}, nil, true},
		{"record changed", RelocationResult{Outcome: NotMoved, Reason: relocation.ReasonRecordChanged.String()}, nil, false},
		{"error before placement", RelocationResult{}, errNoUsableNode, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failedOnTarget(tc.res, tc.err); got != tc.want {
				t.Fatalf("failedOnTarget = %v, want %v", got, tc.want)
			}
		})
	}
}
