package mesh

import "time"

// relistGap is the least time between a discovery round and one run early
// (relist). A peer that keeps failing creation orders — its owner lease in
// doubt, a host Relocate running, both of which leave its descriptor
// serving — costs a node at most one round more a second, where every
// refused order asking for one would read the store once per creation.
const relistGap = time.Second

// relist runs the discovery loop's early rounds. A creation order failed
// by a peer before its callback may mean the peer is leaving: a drain
// publishes draining before it refuses anything, but command 20 does not
// say why it refused (docs/OBJECTS.md §8), and the creating node kept
// placing on it until its next round (lease.renew_interval later), each
// such creation paying a Reserve, a round trip and an Abort more. An early
// round reads the state the peer published, through the same list every
// reader of the view uses (no second way to mark a peer).
//
// Only the loop's goroutine uses it.
type relist struct {
	last  time.Time   // when the last round (early or not) ended
	timer *time.Timer // an early round armed for later; nil when none
}

// ask is a request for an early round at now: true runs it at once; false
// means one is armed (due) or was already.
func (r *relist) ask(now time.Time) bool {
	if r.timer != nil {
		return false
	}
	wait := r.last.Add(relistGap).Sub(now)
	if wait <= 0 {
		return true
	}
	r.timer = time.NewTimer(wait)
	return false
}

// due is the armed early round's channel (nil, never ready, when none).
func (r *relist) due() <-chan time.Time {
	if r.timer == nil {
		return nil
	}
	return r.timer.C
}

// fired is called when due delivered: the armed round runs now.
func (r *relist) fired() { r.timer = nil }

// ran records a round that ended at now. A round of any kind that ran
// after a request answers it: an armed early round is not needed any more.
func (r *relist) ran(now time.Time) {
	r.last = now
	r.stop()
}

func (r *relist) stop() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// askRelist asks the discovery loop for an early round (relist); a request
// already waiting covers this one.
func (n *Node) askRelist() {
	select {
	case n.relistSoon <- struct{}{}:
	default:
	}
}
