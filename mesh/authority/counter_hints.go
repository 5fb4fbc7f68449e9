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
//   - the operation did not wait for a lane, and no other operation of
//     this executor holds or waits for that counter's lane (lanes.go);
//   - no batch of this executor lost on that counter within counterQuiet:
//     a lost batch means writers elsewhere are moving it;
//   - every counter row the step reads is available so: a counter is two
//     stored rows (capacity.go), and rows of two reads are no snapshot
//     (takeCounters).
//
// Why it is safe is the hints' argument (hints.go): a counter an operation
// plans on is an IfVersion/IfMissing condition of its batch, so a stale one
// costs a Conflict and a re-read, never a wrong commit, and a refusal
// planned on it (capacity exhausted, a counter short of a record's slots) is
// re-planned on a fresh read before it is believed.

// counterQuiet is how long after a batch of this executor lost on a counter
// prefetched values of that counter are not used: a single creator never
// loses, a crowd keeps losing now and then, and then a read costs less than
// the Conflict a stale value would.
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
	if len(keys) == 0 || e.lanes.busy(keys) {
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
		if at, lost := h.lost[k]; lost && now-at < counterQuiet {
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
// executor changed (they are stale now) and, when the batch lost, notes the
// contention on the counters it was conditioned on.
func (h *rowHints) counterMoved(req locstore.WriteRequest, applied bool) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if applied {
		for _, m := range req.Mutations {
			delete(h.counters, m.Key)
		}
		return
	}
	for _, c := range req.Conditions {
		if !isCounterKey(c.Key) {
			continue
		}
		delete(h.counters, c.Key)
		if h.lost == nil {
			h.lost = map[string]time.Duration{}
		}
		if len(h.lost) >= maxHints {
			clear(h.lost)
		}
		h.lost[c.Key] = now
	}
}
