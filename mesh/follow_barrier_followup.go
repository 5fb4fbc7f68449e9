package mesh

import (
	"context"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/router/transport"
)

// A route switch's barrier passed on (Message Follow) is answered by the
// node that admits it; the node that passed it on waits for nothing. Queued
// on a session whose peer closes before reading it — a drain closing the
// new owner's run just as the barrier arrives at the previous owner (the
// link is still up there for a moment) — it is gone, and nobody answers:
// its sender, which watches only its own link to the previous owner, gave
// up after two barrier slices (24 s, "did not answer the barrier in time";
// found in a try-out, 2026-12-08, TestBarrierPassedOnIntoAClosingRunIsAnswered).
//
// So a node that passes a barrier on sends one of its own behind it, on the
// same link, and waits for its answer (any: admitted, refused, passed on
// and admitted). That answer means the new owner's run read the sender's
// barrier first and dealt with it. Should that link end first (the run
// closed or crashed, or the link was down by then), this node handles the
// sender's barrier again, as though it had just arrived: with the link
// down its follow chain is cut at a run that ended (readmit, passOnLater),
// or it is refused as when the new owner is unreachable — answered either
// way. A barrier the new owner's run did read and answer is answered twice;
// its sender takes the first answer and drops the second. Bounded by
// barrierMaxWait and the node's halt; gave up, it does nothing (the
// sender's own wait decides).

// followUpBarrier sends, once a barrier m was passed on along move to, a
// barrier of this node's own behind it, and runs again when the link to
// to's run ended before that one was answered.
func (o *objects) followUpBarrier(m inMessage, to follow.Move, again func()) {
	o.goWork(func() {
		ctx, cancel := context.WithTimeout(o.halt, barrierMaxWait)
		defer cancel()
		start := time.Now()
		err := o.sendBarrier(ctx, msgTarget{fam: m.fam, id: m.id, gen: m.gen, control: controlBarrier}, readyOf(to))
		if err == nil || o.halt.Err() != nil ||
			!errorsIsAny(err, transport.ErrPeerDown, transport.ErrNotAdmitted, transport.ErrUnknownPeer, errRunEnded) {
			return
		}
		o.log.Debug("message follow: the link ended before the new owner confirmed a barrier passed on; handling it again",
			"object", m.id, "target", transport.RID(to.Route.NodeRID).String(), "waited", time.Since(start).Round(time.Millisecond), "err", err)
		o.hook().step(m.id, stepBarrierFollowUpAgain)
		again()
	})
}

// stepBarrierFollowUpAgain: a barrier passed on is handled again, its
// pass-on not confirmed before the link ended (a test hook step).
const stepBarrierFollowUpAgain = "follow:barrier-again"
