package authority

import (
	"context"
	"slices"
	"sync"

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
// its turn, then reads and plans again and writes while no other operation
// of this executor can move that counter. Conflicts are then left to
// writers in other processes, which the CAS still settles as before.
//
// The lanes change nothing about correctness — every batch is still fully
// conditioned — only who goes when. An operation takes its lanes at most
// once (all at once, in key order, so two operations never wait on each
// other) and keeps them until it returns.
type lanes struct {
	mu sync.Mutex
	m  map[string]*lane
	// last is the hot keys of each operation kind's last batch: when they
	// are busy, an operation of that kind queues before its first read
	// instead of reading, finding them busy and reading again.
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
// busy now.
func (l *lanes) expected(op Op) []string {
	l.mu.Lock()
	keys := l.last[op]
	l.mu.Unlock()
	if len(keys) == 0 || !l.busy(keys) {
		return nil
	}
	return keys
}

type lane struct {
	token chan struct{} // holds one token while the lane is free
	refs  int           // holders and waiters
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
// returns their release. On ctx's end it gives back what it took.
func (l *lanes) acquire(ctx context.Context, keys []string) (func(), error) {
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
		}
		ln.refs++
		all[i] = ln
	}
	l.mu.Unlock()
	release := func() {
		for _, ln := range held {
			ln.token <- struct{}{}
		}
		l.mu.Lock()
		for i, ln := range all {
			if ln.refs--; ln.refs == 0 {
				delete(l.m, keys[i])
			}
		}
		l.mu.Unlock()
	}
	for _, ln := range all {
		select {
		case <-ln.token:
			held = append(held, ln)
		case <-ctx.Done():
			release()
			return nil, context.Cause(ctx)
		}
	}
	return release, nil
}
