package mesh

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// What a node run that ended had sent this node is admitted here before
// anything allowed to overtake it on the strength of that run's end
// (docs/RELOCATION.md §7, "A node that crashed with messages it passed
// on").
//
// Two decisions rest on a run's end: a previous owner readmits a message
// whose follow chain the ended run cut (follow_forward.go, readmit), and a
// sender whose route switch's barrier found the previous owner's run gone
// switches to the new owner (route_barrier.go). Both take it that nothing
// the ended run passed on is still on its way. A clean stop makes that
// true before its transport closes (its last barriers,
// shutdown_passons.go); a crash does not: what the run passed on here
// before it died may still be in this node's kernel buffer, read and not
// yet handed on (a reader that lags: a busy handler, a starved CPU), or
// waiting here for a cutover behind the run's earlier messages. Taken
// first, the next message overtook it (review, 2026-12-07).
//
// So such a decision waits, for the object concerned, until the ended
// run's inbound connections here are read to their end — every record of
// them handed on (transport.Node.InboundReading) — and the run's messages
// for the object waiting for a cutover here are admitted. A dead process's
// sockets end at once, so the wait is as long as this node's own backlog;
// a run that only lost its lease (a paused process) ends at the liveness
// bound (transport.peer_timeout). Bounded by endedRunReadWait, then it
// goes on, logged.

// metaBarrierAfterRun is the metadata key of a route switch's barrier to
// the new owner naming the previous owner's ended node run
// ("<lowercase hex RoutingId>/<lifecycle generation>", as metaOrigin): the
// new owner answers it once what that run sent it is admitted
// (route_barrier.go, barrierBehindEnded). A node that does not know the
// key answers the barrier at once, as any barrier.
const metaBarrierAfterRun = "meshnode.barrier-after-run"

// endedRunReadWait bounds the wait for an ended run's connections to be
// read to their end.
const endedRunReadWait = barrierMaxWait

// endedReadKeep is how long a finished wait answers "go on" at once: the
// messages that waited for it are admitted again right after it ends, and
// a wait that hit its bound must not start again for each of them.
const endedReadKeep = barrierWait

// endedReads are the waits for ended runs' messages, by run and object.
type endedReads struct {
	mu sync.Mutex
	m  map[endedReadKey]*endedRead
}

type endedReadKey struct {
	run nodeRun
	obj spot.Key
}

// endedRead is one wait; at is written before done is closed and read only
// after.
type endedRead struct {
	done chan struct{}
	at   time.Duration // node clock when it ended
}

// afterEndedRun returns nil when nothing that node run run sent this node
// for obj is still unadmitted here, else a channel closed once it is (or
// at endedRunReadWait): the caller waits for it off the connection's
// reader (waitCutover) and admits its message again. fromRID is the node
// the caller's message came from: a later run of run's own node needs no
// wait — its connection delivers nothing before the ended run's was read to
// its end (the transport's supersede order), and its messages for obj queue
// behind the ended run's.
func (o *objects) afterEndedRun(fromRID []byte, run nodeRun, obj spot.Key) <-chan struct{} {
	if bytes.Equal(fromRID, []byte(run.rid)) || o.n.tr == nil {
		return nil
	}
	key := endedReadKey{run: run, obj: obj}
	now := o.n.clock.Now()
	e := &o.endedReads
	e.mu.Lock()
	defer e.mu.Unlock()
	if w, ok := e.m[key]; ok {
		select {
		case <-w.done:
			if now-w.at < endedReadKeep {
				return nil
			}
			delete(e.m, key)
		default:
			return w.done
		}
	}
	if o.endedPending(run, obj) == nil {
		return nil
	}
	for k, w := range e.m {
		select {
		case <-w.done:
			if now-w.at >= endedReadKeep {
				delete(e.m, k)
			}
		default:
		}
	}
	if e.m == nil {
		e.m = map[endedReadKey]*endedRead{}
	}
	w := &endedRead{done: make(chan struct{})}
	if !o.goWork(func() { o.awaitEndedRun(run, obj, w) }) {
		return nil // the node halted: what waits is refused anyway
	}
	e.m[key] = w
	return w.done
}

// awaitEndedRun waits until nothing run sent for obj is pending here
// (endedPending), at most endedRunReadWait, and ends w.
func (o *objects) awaitEndedRun(run nodeRun, obj spot.Key, w *endedRead) {
	bound := time.NewTimer(endedRunReadWait)
	defer bound.Stop()
	start := time.Now()
	o.hook().step(obj.ID, stepEndedRunWait)
	for {
		ch := o.endedPending(run, obj)
		if ch == nil {
			o.log.Debug("messages of an ended node run admitted before what follows them", "object", obj.ID,
				"run", transport.RID(run.rid).String(), "generation", run.gen, "waited", time.Since(start).Round(time.Millisecond))
			break
		}
		select {
		case <-ch:
			continue
		case <-o.halt.Done():
		case <-bound.C:
			o.log.Warn("ended node run: its connection here was not read to its end in time; going on (what it passed on may arrive after later messages)",
				"object", obj.ID, "run", transport.RID(run.rid).String(), "generation", run.gen, "waited", endedRunReadWait)
		}
		break
	}
	o.endedReads.mu.Lock()
	w.at = o.n.clock.Now()
	close(w.done)
	o.endedReads.mu.Unlock()
}

// endedPending returns a channel to wait on while something run sent this
// node for obj is not admitted yet — one of its inbound connections still
// being read, or its messages for obj waiting for a cutover here — and nil
// when nothing is.
func (o *objects) endedPending(run nodeRun, obj spot.Key) <-chan struct{} {
	if ch := o.n.tr.InboundReading(transport.RID(run.rid), run.gen); ch != nil {
		return ch
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if q := o.afterCutover[cutoverWaitKey{peer: run.rid, obj: obj}]; q != nil {
		return q.done
	}
	return nil
}

// barrierAfterRun is the wait of a barrier naming an ended node run
// (metaBarrierAfterRun) before it is admitted here, as afterEndedRun's; nil
// when it names none or nothing of that run is pending. A malformed entry
// is refused to its sender (typed, ErrInvalidOperation): refused is then
// true and the barrier is done.
func (o *objects) barrierAfterRun(from transport.PeerInfo, fam opFamily, id string, corr uint64, rec *router.Record,
	reply func(*router.Record) error) (wait <-chan struct{}, refused bool) {
	v, ok, err := metaValue(rec.Metadata, metaBarrierAfterRun)
	var run origin
	if err == nil && ok {
		if run, err = parseOrigin(v); err != nil {
			err = fmt.Errorf("barrier: %s: %w", metaBarrierAfterRun, err)
		}
	}
	if err != nil {
		o.log.Debug("barrier refused: malformed metadata", "object", id, "err", err)
		o.answerOrigin(from, rec, fam, corr, reply, nil, err)
		return nil, true
	}
	if !ok {
		return nil, false
	}
	return o.afterEndedRun(from.RID, nodeRun{rid: string(run.rid), gen: run.gen}, spot.Key{Spot: fam == familySpot, ID: id}), false
}
