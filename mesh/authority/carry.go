package authority

import (
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// Lane hand-over (issue 15). The operations of this executor that condition
// one hot counter take turns on it (lanes.go). A turn used to be a read of
// the step's rows and then its batch: two store round trips during which no
// other operation of the process could move the counter, so one counter
// bounded a process to one batch per two round trips — the store-wide
// ObjectGeneration counter held a node's creations near 2,000/s on Redis
// whatever the number of creators (benchmarks/README.md), with the cores
// not busy.
//
// The holder whose batch applied knows what it left in the counter rows:
// the values it wrote, at the versions the store answered, and the rows it
// read and did not change. It leaves them to the lanes it holds, and the
// next holder plans on them instead of reading them. That holder read its
// other rows (authority row, leases, reservation) before it queued, so its
// turn is one round trip: the batch.
//
// Why it is safe is the hints' argument (hints.go, counter_hints.go): every
// counter row a batch changes is one of its conditions (IfVersion or
// IfMissing), so a row another process moved since costs a Conflict and a
// fresh read, never a wrong commit; and a decision that writes nothing
// (a refusal, AlreadyApplied) taken on carried rows is taken again on a
// fresh read (view.used). What a holder left is dropped when its batch did
// not apply or its answer was lost, and goes with the lane when no
// operation holds or waits for it; a batch of this executor that moves a
// counter without holding its lane found the lane idle (it would have
// queued otherwise), so what a lane holds is the last this process wrote —
// except in the moment a lane is made while such a batch is in flight,
// which again costs a Conflict at most.
//
// Where another process moves the counter too, a hand-over is mostly stale:
// a lane whose batch lost within counterQuiet is contended, and there the
// holders read the counters in their turn as before (contended).
//
// The counter rows a step reads without conditioning them (a Reserve's
// active row, a Commit's secured row) only feed checks; they come from the
// step's own read before it queued when it has one (leftFor).

// leftRows is what one applied batch left: every counter row its step
// planned on, as the batch left it. seq orders the batches of an executor.
type leftRows struct {
	seq  uint64
	rows map[string]locstore.ReadResult
}

// leftFor returns the counter rows keys for a step of the holder of h, or
// nil when one cannot be had without reading. A key that is one of h's
// lanes comes from what that lane was left (its last holder was the last of
// this process to move it, and conditioned it). Another key is a counter
// row the step reads without conditioning it (a Commit's secured row): it
// only feeds a check, and comes from prior — the step's own read before it
// queued, fresher than any hand-over — or else from the latest hand-over
// that has it.
func (h *hold) leftFor(keys []string, prior []keyRow) map[string]locstore.ReadResult {
	if h == nil || len(keys) == 0 || h.contended() {
		return nil
	}
	out := make(map[string]locstore.ReadResult, len(keys))
next:
	for _, k := range keys {
		for i, ln := range h.lanes {
			if h.keys[i] != k {
				continue
			}
			rr, ok := ln.rowOf(k)
			if !ok {
				return nil
			}
			out[k] = rr
			continue next
		}
		if rr, ok := rowIn(prior, k); ok {
			out[k] = rr
			continue
		}
		var best *leftRows
		for _, ln := range h.lanes {
			if _, ok := ln.rowOf(k); ok && (best == nil || ln.left.seq > best.seq) {
				best = ln.left
			}
		}
		if best == nil {
			return nil
		}
		out[k] = best.rows[k]
	}
	return out
}

func (ln *lane) rowOf(k string) (locstore.ReadResult, bool) {
	if ln.left == nil {
		return locstore.ReadResult{}, false
	}
	rr, ok := ln.left.rows[k]
	return rr, ok
}

// leave hands the counter rows of seen (the rows the step planned on), as
// req's applied batch (answered wr) left them, to the lanes h holds.
func (h *hold) leave(seen []keyRow, req locstore.WriteRequest, wr locstore.WriteResult) {
	if h == nil {
		return
	}
	rows := make(map[string]locstore.ReadResult, 4)
	for _, r := range seen {
		if isCounterKey(r.key) {
			rows[r.key] = r.rr
		}
	}
	for i, m := range req.Mutations {
		if !isCounterKey(m.Key) {
			continue
		}
		switch {
		case m.Kind == locstore.MutPut && i < len(wr.Versions):
			rows[m.Key] = locstore.ReadResult{Found: true, Value: m.Value, Version: wr.Versions[i], StoreNow: wr.StoreNow}
		case m.Kind == locstore.MutDelete:
			rows[m.Key] = locstore.ReadResult{StoreNow: wr.StoreNow}
		default:
			delete(rows, m.Key) // no version answered: not known
		}
	}
	lr := &leftRows{seq: h.l.seq.Add(1), rows: rows}
	for _, ln := range h.lanes {
		ln.left = lr
	}
}

// drop forgets what the lanes of h were left: the batch of their holder
// did not apply (lost: it was refused, so another process moves one of
// their counters), or its answer was lost.
func (h *hold) drop(lost bool) {
	if h == nil {
		return
	}
	now := h.l.clock()
	for _, ln := range h.lanes {
		ln.left = nil
		if lost {
			ln.lostAt.Store(int64(now) + 1)
		}
	}
}

// contended reports that a batch lost on one of h's lanes within
// counterQuiet: another process is moving that counter, and a row handed
// over between two of its batches would mostly be stale — a refused batch
// costs more than the read it saves (measured on host relocation, where
// two targets' owner CAS batches both move the source's counter).
func (h *hold) contended() bool {
	now := h.l.clock()
	for _, ln := range h.lanes {
		if ln.contended(now) {
			return true
		}
	}
	return false
}

// contended reports a loss on ln within counterQuiet of now.
func (ln *lane) contended(now time.Duration) bool {
	at := ln.lostAt.Load()
	return at != 0 && now-time.Duration(at-1) < counterQuiet
}
