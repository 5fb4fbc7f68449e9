package authority

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Lanes queue this executor's own operations on a hot counter (issue 15).
//
// Every creation's Reserve is conditioned on the store-wide ObjectGeneration
// counter and the target's capacity counter, and every Commit on the
// capacity counter: with many creators in one process, each batch that
// applies makes every other one in flight a Conflict, and each Conflict is
// a wasted batch and another read — measured: 3.3 conflicts per creation
// with 8 creators, 10.9 with 32, where 32 creators made fewer creations per
// second than one. Batches of one process on one counter cannot all win;
// they can only take turns. So an operation whose batch would condition a
// counter that another operation of this executor is already queued on (or
// whose batch just lost on a counter) joins that counter's lane: it waits
// its turn, then plans again — on the counter rows the previous holder's
// batch left and on its own read from before it queued (carry.go), so its
// turn is the batch's round trip alone — and writes while no other
// operation of this executor can move that counter. Conflicts are then left
// to writers in other processes, which the CAS still settles as before.
//
// The lanes change nothing about correctness — every batch is still fully
// conditioned — only who goes when. An operation takes its lanes at most
// once (all at once, in key order, so two operations never wait on each
// other) and keeps them until it returns.
type lanes struct {
	seq atomic.Uint64 // orders hand-overs (carry.go)
	// inUse counts the lanes someone holds or waits for: while it is zero
	// no operation records its rows for a hand-over (carry.go).
	inUse atomic.Int32
	// now is a monotonic reading (the row hints' clock when there are
	// hints) for when a lane's batch last lost (carry.go).
	now func() time.Duration
	mu  sync.Mutex
	m   map[string]*lane
	// last is the hot keys of each operation kind's last batch: when they
	// are busy and contended, an operation of that kind queues before its
	// first read (expected).
	last map[Op][]string
}

// remember records the hot keys of op's batch.
func (l *lanes) remember(op Op, keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[Op][]string{}
	}
	if !slices.Equal(l.last[op], keys) {
		l.last[op] = keys
	}
}

// expected returns the hot keys of op's last batch when one of them is
// busy and contended now (carry.go): the operation would read, find them
// busy, queue and read again, since a hand-over on a contended lane is not
// planned on — so it queues first.
func (l *lanes) expected(op Op) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := l.last[op]
	if len(keys) == 0 {
		return nil
	}
	now := l.clock()
	busy, contended := false, false
	for _, k := range keys {
		if ln := l.m[k]; ln != nil && ln.refs > 0 {
			busy = true
			contended = contended || ln.contended(now)
		}
	}
	if !busy || !contended {
		return nil
	}
	return keys
}

type lane struct {
	token chan struct{} // holds one token while the lane is free
	refs  int           // holders and waiters
	// left is the counter rows as the last applied batch of a holder of
	// this lane left them, for the next holder (carry.go); nil when the
	// last holder's batch did not apply or nothing was left yet. Only a
	// holder reads or writes it.
	left *leftRows
	// lostAt is 1 + when a holder's batch last lost on this lane (0:
	// never): another process moves its counter, so for counterQuiet the
	// holders read it in their turn instead of planning on a hand-over, and
	// operations queue before they read (expected). Atomic: expected reads
	// it without holding the lane.
	lostAt atomic.Int64
}

// hold is the lanes one operation holds, in key order.
type hold struct {
	l     *lanes
	keys  []string
	lanes []*lane
}

// hotKeys are the shared counters req is conditioned on: the
// ObjectGeneration counter and capacity counters. Rows of one object and
// owner leases are not lanes: the former are rarely contended within one
// process, and every operation of the node is conditioned on its own lease.
func hotKeys(req locstore.WriteRequest) []string {
	var out []string
	for _, c := range req.Conditions {
		if out == nil && isCounterKey(c.Key) {
			out = make([]string, 0, len(req.Conditions))
		}
		if isCounterKey(c.Key) {
			out = append(out, c.Key)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var (
	counterPrefix  = record.KindPrefix(record.KindCounter)
	capacityPrefix = record.KindPrefix(KindCapacity)
)

// clock reads now (a process-wide monotonic clock when none was set).
func (l *lanes) clock() time.Duration {
	if l.now != nil {
		return l.now()
	}
	return time.Since(processStart)
}

var processStart = time.Now()

// quiet reports that no lane is in use (always without lanes).
func (l *lanes) quiet() bool { return l == nil || l.inUse.Load() == 0 }

// busy reports whether another operation holds or waits for one of keys
// (never without lanes).
func (l *lanes) busy(keys []string) bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if ln := l.m[k]; ln != nil && ln.refs > 0 {
			return true
		}
	}
	return false
}

// acquire waits for the lanes of keys (sorted, distinct) in order and
// returns them held; hold.release gives them back. On ctx's end it gives
// back what it took.
func (l *lanes) acquire(ctx context.Context, keys []string) (*hold, error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*lane{}
	}
	held := make([]*lane, 0, len(keys))
	all := make([]*lane, len(keys))
	for i, k := range keys {
		ln := l.m[k]
		if ln == nil {
			ln = &lane{token: make(chan struct{}, 1)}
			ln.token <- struct{}{}
			l.m[k] = ln
			l.inUse.Add(1)
		}
		ln.refs++
		all[i] = ln
	}
	l.mu.Unlock()
	h := &hold{l: l, keys: keys, lanes: all}
	for _, ln := range all {
		select {
		case <-ln.token:
			held = append(held, ln)
		case <-ctx.Done():
			h.give(held)
			return nil, context.Cause(ctx)
		}
	}
	return h, nil
}

// release gives the lanes back (nil: nothing held).
func (h *hold) release() {
	if h != nil {
		h.give(h.lanes)
	}
}

// give returns the tokens of held and drops the references of every lane
// h waited for; a lane nobody holds or waits for goes, with what it was
// left.
func (h *hold) give(held []*lane) {
	for _, ln := range held {
		ln.token <- struct{}{}
	}
	h.l.mu.Lock()
	for i, ln := range h.lanes {
		if ln.refs--; ln.refs == 0 {
			delete(h.l.m, h.keys[i])
			h.l.inUse.Add(-1)
		}
	}
	h.l.mu.Unlock()
}
