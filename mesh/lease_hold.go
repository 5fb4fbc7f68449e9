package mesh

import (
	"errors"
	"sync"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/spot"
)

// leaseHold keeps the work of this node's objects while its owner lease
// does not admit (§5: no turn may start; issue 12: "state, queue and timers
// of re-adopted objects are intact"). Without it a turn whose time came
// while the gate was shut was refused by gated.Receive — a queued one-way
// message accepted before the outage, or a timer, was lost. On
// EventExpired/EventLost every serving object's dispatch is held: arrivals
// and timers queue; when the gate admits again (a late renew, or Resume
// after re-adoption) the objects still hosted are released in order.
type leaseHold struct {
	mu   sync.Mutex // one hold/release at a time
	held map[spot.Key]*hosted
}

// holdForLease holds every serving object not held yet. Hold waits for a running
// turn, so the caller runs it off the lease's event goroutine.
func (o *objects) holdForLease() {
	o.lh.mu.Lock()
	defer o.lh.mu.Unlock()
	if o.n.lease.Gate().Admit() == nil {
		return // admitting again already (a late renew); a later event releases any race
	}
	if o.lh.held == nil {
		o.lh.held = map[spot.Key]*hosted{}
	}
	o.mu.Lock()
	var hold []spot.Key
	for k, h := range o.hosted {
		if !h.entry && h.state == hostServing && o.lh.held[k] == nil {
			o.lh.held[k] = h
			hold = append(hold, k)
		}
	}
	o.mu.Unlock()
	for _, k := range hold {
		o.lh.held[k].obj.Hold()
	}
	switch {
	case len(hold) == 0:
	case o.n.LeaseLost() != nil && !o.n.leaseRecoverable():
		// Lost with the store's data, or the routing id taken over:
		// nothing reacquires it, and "wait" read as if they would run
		// (an operator try-out, Redis restarted empty).
		o.log.Info("owner lease ended for good: objects' dispatch stopped; their messages and timers do not run here again",
			"objects", len(hold))
	default:
		o.log.Info("owner lease not admitting: objects' dispatch held; their messages and timers wait", "objects", len(hold))
	}
}

// releaseLeaseHold releases the objects held for the lease that are still
// hosted (and serving) once the gate admits again.
func (o *objects) releaseLeaseHold() {
	o.lh.mu.Lock()
	defer o.lh.mu.Unlock()
	if o.n.lease.Gate().Admit() != nil {
		return
	}
	// Objects that held themselves when a turn came while the gate was
	// shut, before holdForLease reached them (spot.Options.Admit).
	self := o.rt.ReleaseGateHeld()
	if len(o.lh.held) == 0 {
		if self > 0 {
			o.log.Info("owner lease admitting again: objects' dispatch released", "objects", self)
		}
		return
	}
	n := self
	for k, h := range o.lh.held {
		// Released under o.mu (the order admitMessage posts in: o.mu,
		// then the object's own lock): a move that began once the gate
		// admitted could otherwise hold and capture the object between
		// the check and the release, and be reopened mid-move.
		o.mu.Lock()
		if o.hosted[k] == h && h.state == hostServing {
			h.obj.Release()
			n++
		}
		o.mu.Unlock()
		delete(o.lh.held, k)
	}
	o.log.Info("owner lease admitting again: objects' dispatch released", "objects", n)
}

// leaseHeld reports whether objects are held for the lease.
func (o *objects) leaseHeld() bool {
	o.lh.mu.Lock()
	defer o.lh.mu.Unlock()
	return len(o.lh.held) > 0 || o.rt.GateHeld() > 0
}

// leaseRecoverable reports whether the admission gate is shut by an owner
// lease that expired or was lost in a way this node recovers from (a late
// renew, a reacquisition): not released, not lost with the store's data,
// not ended for good for a routing id taken over.
// Its serving objects are then held (holdForLease), not gone.
func (n *Node) leaseRecoverable() bool {
	err := n.lease.Gate().Admit()
	if !errors.Is(err, lease.ErrLeaseExpired) && !errors.Is(err, lease.ErrLeaseLost) {
		return false
	}
	// Lost with the store's data, or ended for good because another run
	// took this routing id over (readoptAfterReacquire): nothing
	// reacquires it (lease.Manager.Fail).
	lost := n.LeaseLost()
	return !errors.Is(lost, locstore.ErrDataLost) && !errors.Is(lost, directory.ErrRoutingIDInUse)
}
