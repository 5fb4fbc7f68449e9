package authority

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// rowHints remembers rows this executor (or its node) recently read or
// wrote, so that the first attempt of an operation can plan on them instead
// of reading them again: a move otherwise re-reads the authority row that
// its caller has just read, the reservation row it has just written and the
// node's own lease in every step (benchmarks/README.md, issue 11).
//
// Why this is safe: a hint is only ever used as an input to a conditional
// batch. Every row an operation plans on (authority, reservation, leases)
// becomes an IfVersion/IfMissing condition of its batch, so a stale hint
// makes the store refuse the batch (Conflict) and the operation re-reads —
// it costs one batch, never a wrong commit. A decision that writes nothing
// (a refusal, AlreadyApplied, a torn-read suspicion) is never taken on
// hints: the executor re-reads and plans again first (Executor.run). An
// expired lease cannot hide behind a hint either: an expired row is Missing
// to the store, so the batch's IfVersion on it fails.
//
// Counters (capacity, ObjectGeneration) are not hinted from these rows: they
// are shared by every concurrent operation, so a remembered counter would
// mostly be stale. Only a counter a caller has just read and handed over is
// planned on, under the stricter rules of counter_hints.go.
type rowHints struct {
	maxAge time.Duration
	now    func() time.Duration // a monotonic reading; only differences matter

	mu   sync.Mutex
	rows map[string]rowHint
	// order is the puts of rows in time order, from head on: put drops the
	// rows whose last put is older than maxAge from the front. Without it
	// an idle object's rows stayed until the map reached maxHints — for
	// every object a node had created or moved, its authority row as
	// written (encoded and decoded) and its final result: ~40 % of the live
	// heap of the host benchmark's nodes after creating 20,000 objects
	// (benchmarks/README.md), kept for rows no operation would plan on any
	// more.
	order []hintStamp
	head  int
	// peak is the most rows held since the map was last made: Go maps do
	// not give back their storage, so after a burst expires the rows move
	// to a new map of their size (expireLocked).
	peak int
	// counters are prefetched counter rows (ObserveCounter); misses is how
	// the batches planned on each counter's prefetched values fared lately
	// (counter_hints.go).
	counters map[string]rowHint
	misses   map[string]prefetchMisses
}

type rowHint struct {
	rr locstore.ReadResult
	at time.Duration // h.now() when it was seen
	// auth is rr decoded, for an authority row once one reader decoded it
	// (or the batch that wrote it had the record): the strict record decode
	// was the largest CPU item of a move (benchmarks/README.md), and a row is
	// read by several steps. res is the same for a reservation row, whose
	// strict decode was the next largest.
	auth *AuthorityRow
	res  *ReservationRow
}

// hintStamp is one put of a row: its key and when.
type hintStamp struct {
	key string
	at  time.Duration
}

// maxHints bounds the memory of the hints when more rows than that are put
// within maxAge: past it, old entries are swept, and if all are young the
// map starts over (a hint is an optimisation; losing one costs a read).
const maxHints = 1 << 16

// WithRowHints lets the first attempt of an operation plan on rows seen (read
// or written by this executor, or passed to Observe) within maxAge instead of
// reading them again; see rowHints for why a stale hint can only cost a
// Conflict. now is a monotonic clock reading (nil: time since the call).
// Off by default.
func WithRowHints(maxAge time.Duration, now func() time.Duration) ExecutorOption {
	return func(e *Executor) error {
		if maxAge <= 0 {
			return errors.New("authority: WithRowHints: maxAge must be positive")
		}
		if now == nil {
			origin := time.Now()
			now = func() time.Duration { return time.Since(origin) }
		}
		e.hints = &rowHints{maxAge: maxAge, now: now, rows: make(map[string]rowHint)}
		return nil
	}
}

// Observe tells the executor what a read of key outside it returned (the
// caller's own read of an authority row, a lease renewal's result), so that
// its next operation on that row need not read it again. Without row hints
// it does nothing.
func (e *Executor) Observe(key string, rr locstore.ReadResult) {
	if e.hints != nil {
		e.hints.put(key, rr)
	}
}

func (h *rowHints) put(key string, rr locstore.ReadResult) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expireLocked(now)
	h.order = append(h.order, hintStamp{key: key, at: now})
	if len(h.rows) >= maxHints {
		for k, v := range h.rows {
			if now-v.at > h.maxAge {
				delete(h.rows, k)
			}
		}
		if len(h.rows) >= maxHints {
			clear(h.rows)
		}
	}
	next := rowHint{rr: rr, at: now}
	if old, ok := h.rows[key]; ok && old.rr.Found == rr.Found && old.rr.Version == rr.Version {
		next.auth, next.res = old.auth, old.res // the same version read again (a poll): keep its decode
	}
	h.rows[key] = next
}

// ExpireHints forgets the row hints older than their age now, without
// waiting for the next operation: a node that went idle after a burst
// would otherwise keep that burst's last second of rows (and the map's
// storage for them) until it works again. The node calls it every
// discovery round. Without row hints it does nothing.
func (e *Executor) ExpireHints() {
	if h := e.hints; h != nil {
		now := h.now()
		h.mu.Lock()
		h.expireLocked(now)
		h.mu.Unlock()
	}
}

// expireLocked forgets the rows whose last put is older than maxAge: no
// operation plans on them any more (get), and a decode remembered with one
// only saves work while the row is being read again — within a move or a
// creation, well inside maxAge. The caller holds h.mu.
func (h *rowHints) expireLocked(now time.Duration) {
	for h.head < len(h.order) {
		st := h.order[h.head]
		if now-st.at <= h.maxAge {
			break
		}
		if v, ok := h.rows[st.key]; ok && v.at == st.at { // not put again since
			delete(h.rows, st.key)
		}
		h.order[h.head] = hintStamp{} // let the key go
		h.head++
	}
	h.peak = max(h.peak, len(h.rows))
	if h.peak >= 4096 && len(h.rows) <= h.peak/8 {
		rows := make(map[string]rowHint, len(h.rows))
		for k, v := range h.rows {
			rows[k] = v
		}
		h.rows, h.peak = rows, len(rows)
	}
	switch {
	case h.head == len(h.order):
		h.order, h.head = h.order[:0], 0
	case h.head >= 1024 && 2*h.head >= len(h.order):
		// Move the live part to the front once the dead part is the larger,
		// so the slice does not grow with every put.
		n := copy(h.order, h.order[h.head:])
		clear(h.order[n:])
		h.order, h.head = h.order[:n], 0
	}
}

func (h *rowHints) get(key string) (locstore.ReadResult, bool) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.rows[key]
	if !ok {
		return locstore.ReadResult{}, false
	}
	if now-v.at > h.maxAge {
		delete(h.rows, key)
		return locstore.ReadResult{}, false
	}
	return v.rr, true
}

// decoded returns the decoded authority row of the hint for key when it is
// still the one rr came from.
func (h *rowHints) decoded(key string, rr locstore.ReadResult) (AuthorityRow, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.rows[key]
	if !ok || v.auth == nil || v.rr.Found != rr.Found || v.rr.Version != rr.Version {
		return AuthorityRow{}, false
	}
	return *v.auth, true
}

// keepDecoded attaches row to the hint for key when it is still the one rr
// came from.
func (h *rowHints) keepDecoded(key string, rr locstore.ReadResult, row AuthorityRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.rows[key]; ok && v.rr.Found == rr.Found && v.rr.Version == rr.Version {
		kept := row // copied here: &row would move row to the heap on every call
		v.auth = &kept
		h.rows[key] = v
	}
}

// reservation returns the decoded reservation row of the hint for key when
// it is still the one rr came from.
func (h *rowHints) reservation(key string, rr locstore.ReadResult) (ReservationRow, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.rows[key]
	if !ok || v.res == nil || v.rr.Found != rr.Found || v.rr.Version != rr.Version {
		return ReservationRow{}, false
	}
	return *v.res, true
}

// keepReservation attaches row to the hint for key when it is still the
// one rr came from.
func (h *rowHints) keepReservation(key string, rr locstore.ReadResult, row ReservationRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.rows[key]; ok && v.rr.Found == rr.Found && v.rr.Version == rr.Version {
		kept := row
		v.res = &kept
		h.rows[key] = v
	}
}

// reservationRowOf decodes rr (the reservation row at key), at most once
// per version while hints remember it.
func (e *Executor) reservationRowOf(key string, rr locstore.ReadResult) (ReservationRow, error) {
	if e.hints == nil {
		return ReservationRowOf(key, rr)
	}
	if row, ok := e.hints.reservation(key, rr); ok {
		return row, nil
	}
	row, err := ReservationRowOf(key, rr)
	if err == nil {
		e.hints.keepReservation(key, rr, row)
	}
	return row, err
}

// authorityRowOf decodes rr (the row at key), at most once per version
// while hints remember it.
func (e *Executor) authorityRowOf(key string, rr locstore.ReadResult) (AuthorityRow, error) {
	if e.hints == nil {
		return AuthorityRowOf(key, rr)
	}
	if row, ok := e.hints.decoded(key, rr); ok {
		return row, nil
	}
	row, err := AuthorityRowOf(key, rr)
	if err == nil {
		e.hints.keepDecoded(key, rr, row)
	}
	return row, err
}

// ObserveAuthority is Observe for an authority row that the caller also
// wants decoded: it returns AuthorityRowOf(key, rr), decoded once for the
// caller and the executor's next operation on the row.
func (e *Executor) ObserveAuthority(key string, rr locstore.ReadResult) (AuthorityRow, error) {
	e.Observe(key, rr)
	return e.authorityRowOf(key, rr)
}

// wrote records the rows an applied batch of p left: each put at its new
// version, each deleted row as Missing; the authority row and the
// reservation row with the records p encoded into them, so that the next
// step need not decode what this one wrote.
func (h *rowHints) wrote(p Plan, wr locstore.WriteResult) {
	for i, m := range p.Request.Mutations {
		rr := locstore.ReadResult{StoreNow: wr.StoreNow}
		switch {
		case m.Kind == locstore.MutDelete:
		case i < len(wr.Versions):
			rr.Found, rr.Value, rr.Version = true, m.Value, wr.Versions[i]
			if m.Retention > 0 {
				rr.ExpiresAt = wr.StoreNow.Add(m.Retention)
			}
		default:
			continue
		}
		h.put(m.Key, rr)
		switch {
		case !rr.Found:
		case i == p.AuthorityMutation && p.Record != nil:
			h.keepDecoded(m.Key, rr, AuthorityRow{Key: m.Key, Found: true, Record: *p.Record, Version: rr.Version})
		case m.Key == p.ReservationKey && p.Reservation != nil:
			h.keepReservation(m.Key, rr, ReservationRow{Key: m.Key, Found: true, Reservation: *p.Reservation, Version: rr.Version})
		}
	}
}

// view is one snapshot read of one attempt: whether it may use hints, and
// whether it did.
type view struct {
	hinted   bool        // may answer from hints
	counters bool        // may also answer counters from prefetched values
	used     atomic.Bool // answered at least one row from hints
	// prefetched: the counters came from values a caller prefetched
	// (counter_hints.go); a refused batch planned on them is blamed on them.
	prefetched bool
	// hold, when set, is the lanes the operation holds: counters may come
	// from what they were left (carry.go), anchors from prior (the rows of
	// the operation's read before it queued).
	hold  *hold
	prior []keyRow
	// seen, when not nil, gets every row the view answered: what the
	// operation planned on, to hand over (carry.go) or to plan on again
	// once it holds the lanes (prior).
	seen []keyRow
}

// keyRow is one row read.
type keyRow struct {
	key string
	rr  locstore.ReadResult
}

// rowIn returns the row of key in rows.
func rowIn(rows []keyRow, key string) (locstore.ReadResult, bool) {
	for _, r := range rows {
		if r.key == key {
			return r.rr, true
		}
	}
	return locstore.ReadResult{}, false
}
