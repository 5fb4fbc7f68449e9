package mesh

import (
	"bytes"
	"sync"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// targetRuns keeps a host command's consecutive moves on one target at a
// time (issue 11).
//
// Why: every owner CAS of a move (NewOwner, run by the target) moves the
// source's capacity rows in the same batch (§8.2), so while two targets
// take this node's objects, their CAS batches refuse each other on those
// rows — measured 0.54–0.59 refused batches per handoff with two targets,
// each a read and a batch more — and each CAS reads those rows again besides,
// since a target's lane does not hand on rows that another process writes
// (carry.go). One target's CAS batches take turns in its own lane instead,
// without a refusal. So a run of moves goes to one target
// (benchmarks/README.md has what it saves).
//
// Which target: each run goes to the usable candidate that has taken the
// fewest of this command's moves for its weight, counting the run, so that
// over the command the targets take the objects in proportion to their
// weights, within about one run — what independent weighted draws give on
// average. How long: relocation.host_target_run moves at most, and no more
// than the moves still to place over runsPerTarget runs per usable target,
// so that a command of few objects is still spread (a try-out drained 515
// objects onto three nodes in runs of 256: 256, 256 and 3) and the last
// runs, shorter, even the split out. Placement still checks every move (a
// usable candidate with room, as for any move); a move its run's target
// could not take, or that failed on it, is placed like any (the host
// command's retry), and that target gets no run for a pause: 500 ms, doubled
// at each later incident (a move that fails once the pause has ended) up to
// 8 s; the moves in flight that fail together are one incident. Then it is
// behind its share and takes the next runs until it has caught up. Not for
// the rest of the command, nor for long: a try-out that paused Redis 8 s
// during a host Relocate saw a few moves fail on the run's target, which
// then took 37 of 470 objects against the other's 433 when it was ruled
// out for the command, and 47 of 501 when benched 2 s and more (the
// command ended within the bench).
type targetRuns struct {
	size int // moves per run at most; 0 places every move on its own
	// pick returns the target of a new run for an object of (kind,
	// stableType) — the usable candidate minimizing (taken + the run's
	// length) / weight, leaving out those taken reports ruled out; nil
	// when there is none — and the run's length, length of the number of
	// usable candidates.
	pick func(kind record.ObjectKind, stableType string, length func(usable int) int, taken func(rid []byte) (n int, out bool)) ([]byte, int)
	// unplaced is how many of the command's moves have not been handed a
	// target yet (nil: unknown, runs of size).
	unplaced func() int

	mu   sync.Mutex
	rid  []byte             // the run's target
	left int                // moves the run has left to hand out
	sent map[string]int     // moves handed to each target (by RoutingID)
	out  map[string]benched // targets a move could not use, by RoutingID
	now  func() time.Time   // injected by tests
}

// runsPerTarget is how many runs each usable target should get at least,
// for the moves still to place: it bounds a run's length.
const runsPerTarget = 4

// benched is a target that gets no run until until; pause is how long the
// last bench was (the next one doubles it).
type benched struct {
	until time.Time
	pause time.Duration
}

// The bench of a target a move could not use: firstBench, doubled at each
// later incident, at most maxBench.
const (
	firstBench = 500 * time.Millisecond
	maxBench   = 8 * time.Second
)

func newTargetRuns(size int, unplaced func() int, pick func(record.ObjectKind, string, func(int) int, func([]byte) (int, bool)) ([]byte, int)) *targetRuns {
	return &targetRuns{size: size, unplaced: unplaced, pick: pick, sent: map[string]int{}, out: map[string]benched{}, now: time.Now}
}

// runLength is the length of a run over usable targets.
func (t *targetRuns) runLength(usable int) int {
	n := t.size
	if t.unplaced != nil {
		n = min(n, t.unplaced()/(runsPerTarget*max(usable, 1)))
	}
	return max(n, 1)
}

// prefer hands a move of an object of (kind, stableType) the target it
// should take: the current run's, or a new run's; nil places it on its own.
func (t *targetRuns) prefer(kind record.ObjectKind, stableType string) []byte {
	if t == nil || t.size <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.left <= 0 {
		now := t.now()
		rid, n := t.pick(kind, stableType, t.runLength, func(rid []byte) (int, bool) {
			return t.sent[string(rid)], now.Before(t.out[string(rid)].until)
		})
		if rid == nil {
			return nil
		}
		t.rid, t.left = rid, n
	}
	t.left--
	t.sent[string(t.rid)]++
	return t.rid
}

// took records where a move handed preferred went: rid (nil: nowhere),
// failed if it failed on that target. A move that did not go to its
// preferred target, or failed there, ends that target's run and benches
// it.
func (t *targetRuns) took(preferred, rid []byte, failed bool) {
	if t == nil || preferred == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if bytes.Equal(rid, preferred) && !failed {
		return
	}
	t.sent[string(preferred)]--
	if rid != nil && !bytes.Equal(rid, preferred) {
		t.sent[string(rid)]++
	}
	if rid == nil && !failed {
		return // the move ended before placement: nothing learnt
	}
	if b, now := t.out[string(preferred)], t.now(); !now.Before(b.until) { // a new incident
		b.pause = min(max(2*b.pause, firstBench), maxBench)
		b.until = now.Add(b.pause)
		t.out[string(preferred)] = b
	}
	if bytes.Equal(t.rid, preferred) {
		t.left = 0
	}
}
