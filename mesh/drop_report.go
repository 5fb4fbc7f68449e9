package mesh

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/spot"
)

// A one-way message the target refuses is dropped: no reply carries the
// refusal back (§7.3), so its sender never learns of it. Each drop is
// logged at DEBUG only — a flood of them (a node resuming after a pause
// refuses everything queued to it while its lease is being reacquired)
// would bury the log — and counted in
// meshnode_messages_refused_total{reason="fence"}. dropReport adds what
// an operator reading the log needs: one WARN line per discovery round in
// which any were dropped, counted by cause.

// dropCause classifies why a one-way message was refused.
type dropCause int

const (
	dropOwnerLease      dropCause = iota // this node's admission gate was shut (§5)
	dropOtherRun                         // a route naming another run of a node than its run now (a restart)
	dropStaleRoute                       // addressed to another node, owner lease or owner generation
	dropNotHosted                        // not here and no follow route to pass it on
	dropStaleGeneration                  // the object here is another generation
	dropMailboxFull                      // admitted, but the object's mailbox was full
	dropOther                            // closing, a follow failure, a bad origin
	dropCauses
)

func (c dropCause) String() string {
	return [...]string{"owner_lease", "other_run", "stale_route", "not_hosted", "stale_generation", "mailbox_full", "other"}[c]
}

func dropCauseOf(err error) dropCause {
	switch {
	case errors.Is(err, lease.ErrLeaseExpired), errors.Is(err, lease.ErrLeaseLost), errors.Is(err, lease.ErrLeaseReleased):
		return dropOwnerLease
	case errors.Is(err, errRunEnded):
		// Its sender's route is from before this node restarted (or, on
		// a previous owner, the new owner it recorded restarted): told
		// apart from other stale routes, as operators asked after a
		// rolling restart whose drops read as "stale_route".
		return dropOtherRun
	case errors.Is(err, ErrMoving):
		// Refused at a cutover (too many waiting, the node stopping): not
		// delivered, but no stale route of its sender's.
		return dropOther
	case errors.Is(err, errRouteStale):
		return dropStaleRoute
	case errors.Is(err, ErrNotFound):
		return dropNotHosted
	case errors.Is(err, ErrStaleGeneration):
		return dropStaleGeneration
	case errors.Is(err, spot.ErrMailboxFull):
		return dropMailboxFull
	}
	return dropOther
}

// dropReport counts dropped one-way messages by cause until the next
// report.
type dropReport struct {
	n [dropCauses]atomic.Uint64
}

func (d *dropReport) add(err error) { d.n[dropCauseOf(err)].Add(1) }

// report writes one WARN line with the drops counted since the last
// report, if there were any, and starts counting afresh. since is how long
// ago the last report was.
func (d *dropReport) report(log *slog.Logger, since time.Duration) {
	attrs := make([]any, 0, 2*int(dropCauses)+4)
	var total uint64
	for c := range dropCauses {
		if v := d.n[c].Swap(0); v > 0 {
			attrs = append(attrs, c.String(), v)
			total += v
		}
	}
	if total == 0 {
		return
	}
	attrs = append(attrs, "total", total, "since", since.Round(time.Millisecond))
	log.Warn("one-way messages refused here and dropped (a one-way send has no reply to carry a refusal; "+
		"senders that must know use a request)", attrs...)
}
