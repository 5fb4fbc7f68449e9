package authority

import "github.com/meshnode/meshnode/locstore"

// Blaming a refused batch on the counters that moved (issue 15).
//
// A refused batch says only that one of its conditions failed, not which.
// Its counters were all marked as moved by another process (contended): for
// counterQuiet their lanes' holders read them in their turn instead of
// planning on a hand-over (carry.go), and their prefetched values went
// unused (counter_hints.go). But a creation's Reserve conditions both the
// store-wide ObjectGeneration counter, which every target moves, and its
// own target's capacity counter, which mostly only that target moves; when
// two targets' Reserves raced on the generation, the loser's capacity lanes
// were marked contended too, and every Commit on that target read its
// capacity rows again for a second: with 8 concurrent creators on three
// nodes, 1.05 extra read calls per creation (3.3 instead of 2.2).
//
// The operation reads its rows again anyway before it plans again. That
// read says which conditioned counters moved: a row whose version is not
// the one the refused batch expected (or that exists where it expected
// none). Only those are blamed. A counter that did not move was not what
// refused the batch; its hand-overs stay good. When the read cannot tell —
// it answered rows from hints or a hand-over rather than from the store,
// or the operation ends before reading again — every conditioned counter
// is blamed, as before.

// counterConds are req's conditions on counters: what a refusal of req may
// be blamed on.
func counterConds(req locstore.WriteRequest) []locstore.Condition {
	var out []locstore.Condition
	for _, c := range req.Conditions {
		if isCounterKey(c.Key) {
			out = append(out, c)
		}
	}
	return out
}

// movedCounters returns the keys of conds whose row in seen is not what the
// condition expected; all of them when judged is false (seen was not read
// from the store) and every key seen lacks.
func movedCounters(conds []locstore.Condition, seen []keyRow, judged bool) []string {
	var out []string
	for _, c := range conds {
		if judged {
			rr, ok := rowIn(seen, c.Key)
			if ok && !condMoved(c, rr) {
				continue
			}
		}
		out = append(out, c.Key)
	}
	return out
}

// condMoved reports that rr no longer satisfies c.
func condMoved(c locstore.Condition, rr locstore.ReadResult) bool {
	if c.Kind == locstore.CondMissing {
		return rr.Found
	}
	return !rr.Found || rr.Version != c.Version
}

// blame notes that another process moved the counters keys: on the lanes
// of h (nil: none held) and for the prefetched counters.
func (e *Executor) blame(h *hold, keys []string) {
	if len(keys) == 0 {
		return
	}
	h.lost(keys)
	if e.hints != nil {
		e.hints.lostOn(keys)
	}
}
