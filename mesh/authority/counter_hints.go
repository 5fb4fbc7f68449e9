package authority

import (
	"strings"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// Prefetched counters (issue 15). A creation's target reads the authority
// row and the creation request before running the factory, then commits:
// the Commit is conditioned on the target's capacity counters, which the
// executor otherwise reads in a call of their own — one more round trip in
// every creation. The target can read those counters in its first call
// (their keys follow from the order: this node run and the object's bundle)
// and hand them over with ObserveCounter; the Commit then plans on them.
//
// A counter is the row every concurrent operation moves, so a remembered
// value is only worth planning on while nothing else is moving it. Such a
// value is used when all of these hold, and otherwise the counter is read
// as before:
//   - it was handed over by a caller's read (ObserveCounter), never taken
//     from a batch this executor wrote;
//   - it is used once (taken), on an operation's first attempt, within the
//     hints' age, and no batch of this executor has changed that counter
//     since it was handed over;
//   - the operation did not wait for a lane. Another operation of this
//     executor may hold or wait for that counter's lane: the plan made on
//     the prefetched value then only finds the lane busy and queues, and
//     the operation plans again in its turn on what the holder left
//     (carry.go) — reading the counter before queueing was a call for
//     nothing (with 8 concurrent creators, one read per creation);
//   - the batches planned on that counter's prefetched values have not
//     mostly missed lately (maxMissRate), or the last miss is counterQuiet
//     old. A miss alone is no reason to stop: a counter only this node
//     moves still misses now and then (a value read just before another
//     Commit of the node applied), and when a 1 s pause followed every
//     miss, every Commit of a node with 8 concurrent creations read its
//     counter (measured: 3.3 read calls per creation instead of 2.2, and
//     more refused batches, not fewer: 0.08 instead of 0.05);
//   - every counter row the step reads is available so: a counter is two
//     stored rows (capacity.go), and rows of two reads are no snapshot
//     (takeCounters).
//
// Why it is safe is the hints' argument (hints.go): a counter an operation
// plans on is an IfVersion/IfMissing condition of its batch, so a stale one
// costs a Conflict and a re-read, never a wrong commit, and a refusal
// planned on it (capacity exhausted, a counter short of a record's slots) is
// re-planned on a fresh read before it is believed.

// counterQuiet is how long after the last miss prefetched values of a
// counter that mostly misses are not used (and, in carry.go, how long after
// a batch lost on a lane its holders read the counter in their turn).
const counterQuiet = time.Second

// ObserveCounter hands the executor a capacity or ObjectGeneration counter
// row the caller has just read (a key as CapacityKey or BundleCounterKeys
// gives it; hand over both rows of a counter, from one read), for the next
// operation that conditions it; see above for when it is used. Without row
// hints it does nothing.
func (e *Executor) ObserveCounter(key string, rr locstore.ReadResult) {
	if e.hints == nil || !isCounterKey(key) {
		return
	}
	h := e.hints
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counters == nil {
		h.counters = map[string]rowHint{}
	}
	if len(h.counters) >= maxHints {
		clear(h.counters)
	}
	h.counters[key] = rowHint{rr: rr, at: now}
}

// BundleCounterKeys are the store keys of the counters a bundle moves on
// node, both rows of each: what a caller reads to prefetch them
// (ObserveCounter).
func BundleCounterKeys(node Node, b Bundle) ([]string, error) {
	var keys []string
	for _, id := range CountersFor(node, b) {
		secured, active, err := CounterKeys(id)
		if err != nil {
			return nil, err
		}
		keys = append(keys, active, secured)
	}
	return keys, nil
}

func isCounterKey(key string) bool {
	return strings.HasPrefix(key, counterPrefix) || strings.HasPrefix(key, capacityPrefix)
}

// takeCounters returns the prefetched values of every counter row r reads
// (its non-anchor rows) and forgets them — or nothing, when one of them may
// not be planned on: a counter's two rows come from one read or not at all.
func (e *Executor) takeCounters(r rowSet) map[string]locstore.ReadResult {
	keys := r.counterKeys()
	if len(keys) == 0 {
		return nil
	}
	h := e.hints
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]locstore.ReadResult, len(keys))
	for _, k := range keys {
		v, ok := h.counters[k]
		if !ok || now-v.at > h.maxAge {
			return nil
		}
		if m := h.misses[k]; m.rate > maxMissRate && now-m.at < counterQuiet {
			return nil
		}
		out[k] = v.rr
	}
	for _, k := range keys {
		delete(h.counters, k)
	}
	return out
}

// counterMoved drops the prefetched values of the counters a batch of this
// executor changed or lost on (they are stale now) and, when the batch was
// planned on prefetched values, counts how they fared.
func (h *rowHints) counterMoved(req locstore.WriteRequest, applied, prefetched bool) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if applied {
		for _, m := range req.Mutations {
			delete(h.counters, m.Key)
		}
	}
	for _, c := range req.Conditions {
		if !isCounterKey(c.Key) {
			continue
		}
		if !applied {
			delete(h.counters, c.Key)
		}
		if prefetched {
			h.missed(c.Key, !applied, now)
		}
	}
}

// prefetchMisses is how often batches planned on one counter's prefetched
// values were refused lately: rate, a moving average over about the last
// eight such batches (1: every one refused), and when the last one was.
type prefetchMisses struct {
	rate float64
	at   time.Duration
}

// maxMissRate is the share of refused batches above which prefetched
// values of a counter are not planned on (for counterQuiet after the last
// refusal): a stale value costs a refused batch and a read, a read one
// call, so prefetching pays while fewer than about half of them miss.
const maxMissRate = 0.5

// missed records the outcome of a batch planned on the prefetched values of
// counter key.
func (h *rowHints) missed(key string, refused bool, now time.Duration) {
	if h.misses == nil {
		h.misses = map[string]prefetchMisses{}
	}
	m, ok := h.misses[key]
	if !ok && !refused {
		return // nothing to remember
	}
	if !ok && len(h.misses) >= maxHints {
		clear(h.misses)
	}
	m.rate *= 7.0 / 8
	if refused {
		m.rate += 1.0 / 8
		m.at = now
	} else if m.rate < 1.0/64 {
		delete(h.misses, key) // forgotten: as if it never missed
		return
	}
	h.misses[key] = m
}
