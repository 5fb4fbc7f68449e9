package redis

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/meshnode/meshnode/locstore"
)

// Why a rollback watch. Redis replicates asynchronously: a failover to a
// replica that had not received the master's last writes, or a restore
// from an older backup while the mesh runs, takes the namespace back in
// time — every key at once, the namespace marker included, so the
// framework's marker check (mesh/marker) sees nothing wrong. The commit
// sequence {ns}:seq goes back with it, and the versions it issues next are
// ones already handed out (package doc, Versions): a process still holding
// such a version could match a record it never saw, and the ObjectGeneration
// counter issues generations again (spec §3.2 forbids both).
//
// The sequence is what tells. A write that is sent after another write of
// this Store completed must draw a larger sequence number than that one
// did: Redis runs script calls one at a time. So the Store keeps the
// highest number its completed writes drew, takes it before each write is
// sent, and a write that draws no more than that has seen the store go back.
// Writes that overlap in time are never compared with each other, so
// concurrency cannot raise a false alarm. A rollback shorter than the gap
// between this process's writes goes unseen by it; a node renews its owner
// lease every few seconds, so a rollback of more than that is seen by every
// node that wrote in the lost span.

// RollbackError is the cause (inside a *locstore.ProviderError) of every
// operation of a Store once it saw the store go back in time:
// errors.Is(err, locstore.ErrDataLost). The Store refuses everything from
// then on; only a new Store — in practice a restarted process, after the
// operator restored the data or accepted the loss — uses the namespace
// again.
type RollbackError struct {
	Drew uint64 // the sequence number the write drew (Read: the one the read found)
	Seen uint64 // the highest one an earlier, completed write had drawn
	// Read: a read saw it — the commit sequence stood below what an
	// earlier, completed write of this process had drawn.
	Read bool
}

func (e *RollbackError) Error() string {
	what := fmt.Sprintf("a write drew commit sequence %d", e.Drew)
	if e.Read {
		what = fmt.Sprintf("a read found the commit sequence at %d", e.Drew)
	}
	return fmt.Sprintf("the Redis namespace went back in time: %s after this process's "+
		"writes had reached %d, so Redis lost acknowledged writes (a failover to a replica that missed them, "+
		"a restore from an older backup, FLUSHALL, a restart without persistence); restore the store or accept the loss, then restart this process",
		what, e.Seen)
}

// Is makes errors.Is(err, locstore.ErrDataLost) true.
func (e *RollbackError) Is(target error) bool { return target == locstore.ErrDataLost }

// seqWatch is the rollback watch of one Store.
type seqWatch struct {
	high atomic.Uint64                 // highest sequence a completed write drew
	lost atomic.Pointer[RollbackError] // set once, for good
}

// before is taken just before a write is sent.
func (w *seqWatch) before() uint64 { return w.high.Load() }

// drew records the sequence numbers a write drew (its versions; a delete's
// is empty) given what before returned for it. It returns the
// RollbackError when the store went back, now or earlier.
func (w *seqWatch) drew(before uint64, versions []string) error {
	if e := w.lost.Load(); e != nil {
		return e
	}
	top := uint64(0)
	for _, v := range versions {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			continue // not a sequence number: nothing to judge (the reply parser owns its shape)
		}
		top = max(top, n)
	}
	if top == 0 {
		return nil
	}
	if top <= before {
		e := &RollbackError{Drew: top, Seen: before}
		w.lost.CompareAndSwap(nil, e)
		return w.lost.Load()
	}
	for {
		cur := w.high.Load()
		if top <= cur || w.high.CompareAndSwap(cur, top) {
			return nil
		}
	}
}

// saw judges the commit sequence a read found (the read script's reply
// element: the counter's value, "0" when absent) given what before
// returned for it: a read sent after a write of this Store completed must
// find the sequence at least where that write left it. Without this, a
// store restarted empty answered every read "absent" — objects "not found",
// which an application takes for destroyed — until the node's next write
// or marker check (an operator try-out: 1,897 sends answered not found in
// the seconds before the node stopped). It returns the RollbackError when
// the store went back, now or earlier.
func (w *seqWatch) saw(before uint64, reply any) error {
	if e := w.lost.Load(); e != nil {
		return e
	}
	if before == 0 {
		return nil // no write of this Store completed before: nothing to judge
	}
	s, ok := reply.(string)
	if !ok {
		return nil // not a sequence: nothing to judge (the caller checks shapes)
	}
	cur, err := strconv.ParseUint(s, 10, 64)
	if err != nil || cur >= before {
		return nil
	}
	e := &RollbackError{Drew: cur, Seen: before, Read: true}
	w.lost.CompareAndSwap(nil, e)
	return w.lost.Load()
}

// err is the RollbackError once one was seen, else nil.
func (w *seqWatch) err() error {
	if e := w.lost.Load(); e != nil {
		return e
	}
	return nil
}
