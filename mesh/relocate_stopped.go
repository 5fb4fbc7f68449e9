package mesh

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// A target that stops tells its source (docs/RELOCATION.md §9, "A move to a
// node that stops"). The stopping node's §11 owner sweep fences every move
// to it that has not committed: it releases the move's reservation, so
// that an owner CAS still on its way can never apply (sweep.go,
// fenceArrival). For an arrival that had answered relay-ready, nobody told
// the source: it found out only once the target's owner lease was gone (a
// second after the shutdown released it) or at the move's deadline, and
// the object answered nobody meanwhile. Now the fence, once its release
// applied, answers the Restore request a second time: 53 failed,
// notServing, "node is stopped". The source's Restore call has its answer
// (relay-ready) by then, so the transport hands that 53 to the node
// (transport.Config.UnawaitedReady), which matches it to the move by its
// relocation id and target attempt and from the target's RoutingId. The
// move stops waiting for the commit and releases the reservation and reads
// the record as at its deadline: its own release and read decide, not the
// target's word — a record naming the target is still Moved.
//
// A target whose arrival fails for relay mismatch after its relay-ready
// (the relayed records differ from the cutover's count or CRC-32C) says
// so the same way: 53 failed, checksumMismatch, "relay mismatch: …"
// (relocate_target.go, ActReplyFailed). That attempt never sent its owner
// CAS (a mismatch once the CAS is under way is a late event, ignored), so
// none can apply; before, the source waited for the commit until its
// deadline while the object answered nobody.

// moveAttempt names one attempt of a move: its relocation id and target
// attempt, as the record's progress, a 53 and the binding carry them.
type moveAttempt struct {
	id      [16]byte
	attempt uint64
}

func attemptOf(b router.RelocationID, attempt uint64) moveAttempt {
	k := moveAttempt{attempt: attempt}
	copyID(&k.id, b)
	return k
}

// targetSaid is what a target said of a move after its relay-ready (its
// 53 failed): the move's wait for the commit ends with it.
type targetSaid struct {
	failure router.RelocationFailure
	detail  string
}

func (e *targetSaid) Error() string { return fmt.Sprintf("%s: %s", e.failure, e.detail) }

// Source side.

// streamStarts registers s, whose Restore request is about to leave, for
// the target's word after its relay-ready: before the request, so that a
// 53 following the relay-ready at once finds it.
func (o *objects) streamStarts(s *sourceMove) {
	o.mu.Lock()
	o.streamed[attemptOf(s.bind.Relocation, s.bind.TargetAttempt)] = s
	o.mu.Unlock()
}

// moveEndsLocked forgets s (called under o.mu when the move ends).
func (o *objects) moveEndsLocked(s *sourceMove) {
	k := attemptOf(s.bind.Relocation, s.bind.TargetAttempt)
	if o.streamed[k] == s {
		delete(o.streamed, k)
	}
}

// unawaitedReady takes a 53 that no Restore call awaits
// (transport.Config.UnawaitedReady): a failure sent by the target of one
// of this node's moves after its relay-ready. It only ends the move's wait
// for the commit (toldStopped: the target stopped, or its arrival failed
// for relay mismatch); anything else is not taken (counted late).
// It runs on the connection's reader and does not block.
func (o *objects) unawaitedReady(from transport.RID, rec *router.Record) bool {
	r, ok := rec.Body.(*router.RelocationReady)
	if !ok || r.Outcome != router.RelocationFailed {
		return false
	}
	o.mu.Lock()
	s := o.streamed[attemptOf(r.Relocation, r.TargetAttempt)]
	o.mu.Unlock()
	if s == nil || !from.Equal(transport.RID(s.target.node.RoutingID)) {
		return false
	}
	s.tell(&targetSaid{failure: r.Failure, detail: r.Detail})
	return true
}

// toldStopped is the move's answer once its wait for the commit ended on
// the target's word (s.told): EvTargetFailed, which releases the
// reservation and reads the record as at the deadline — only that decides
// whether the object is taken back.
func (s *sourceMove) toldStopped() relocation.SourceEvent {
	o := s.o
	said := context.Cause(s.told)
	s.res.Detail = said.Error()
	var ts *targetSaid
	if errors.As(said, &ts) {
		if st, ok := leavingRefusal(ts.failure, ts.detail); ok {
			o.n.noteRefusedLeaving(s.target.node.RoutingID, s.target.node.LifecycleGeneration, st)
		}
	}
	o.log.Info("relocation: the target says the move can no longer commit (it stopped, or the relay did not match the cutover); releasing the move now instead of waiting for its lease or the deadline",
		"object", s.id, "target", fmt.Sprintf("%x/%d", s.target.node.RoutingID, s.target.node.LifecycleGeneration), "said", s.res.Detail)
	o.hook().step(s.id, stepSourceTold)
	return relocation.EvTargetFailed
}

// Target side.

// relayReadySent keeps a, which answered relay-ready, for its node's stop:
// the owner sweep's fence then tells its source (tellFenced).
func (o *objects) relayReadySent(a *arrival) {
	o.mu.Lock()
	o.readySent[attemptOf(a.bind.Relocation, a.bind.TargetAttempt)] = a
	o.mu.Unlock()
}

// arrivalEndsLocked forgets a when it ends (under o.mu) — unless the node
// is stopping and a did not open: then its record may still name this run
// as the move's target, for the sweep to fence and tell its source.
func (o *objects) arrivalEndsLocked(a *arrival) {
	if o.halt.Err() != nil && a.m.State() != relocation.TgtOwner {
		return
	}
	k := attemptOf(a.bind.Relocation, a.bind.TargetAttempt)
	if o.readySent[k] == a {
		delete(o.readySent, k)
	}
}

// tellFenced tells the source of the move p (a move to this stopping run
// whose reservation the owner sweep has just released: its owner CAS can
// never apply) that it can no longer commit — when this run had answered
// it relay-ready; before that, the halt answered it failed already. Sent
// on the connection the Restore request came on, before the transport
// closes (the sweep runs first, and the close flushes what is queued). It
// never blocks: a reply that cannot be queued is logged, and the source
// finds out as before (the target's lease gone, or its deadline).
func (o *objects) tellFenced(p *record.RelocationProgress) {
	k := moveAttempt{id: p.RelocationID, attempt: uint64(p.TargetAttempt)}
	o.mu.Lock()
	a := o.readySent[k]
	delete(o.readySent, k)
	o.mu.Unlock()
	if a == nil {
		return
	}
	if err := failReady(a.reply, &a.prep, router.RelocationFailureNotServing, stateRefusal(record.StateStopped)); err != nil {
		o.log.Info("owner sweep: the source of a move fenced here not told; it finds out when this node's lease is gone",
			"object", a.prep.Object.ObjectID, "err", err)
		return
	}
	o.log.Info("owner sweep: the source of a move fenced here told that it cannot commit", "object", a.prep.Object.ObjectID)
}
