package mesh

import (
	"context"
	"sync"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/router/transport"
)

// runChecks are the reads of node runs' descriptors that linkRunStopped
// started, under way or done within the last followSendWait, by run. One
// read per run at a time, off the connection's reader: every message that
// needs the answer waits for the same read (waitCutover), and a store that
// does not answer costs each run one read per followSendWait, not one per
// message.
type runChecks struct {
	mu sync.Mutex
	m  map[nodeRun]*runCheck
}

// runCheck is one read of a node run's descriptor. stopped and at are
// written before done is closed and only read after.
type runCheck struct {
	done    chan struct{}
	stopped bool
	at      time.Duration // n.clock time the read ended
}

// linkRunStopped reports whether node run r, to which a pass-on found no
// run of its node admitted, has ended: the discovery list no longer shows
// it live (a later run took its RoutingID's descriptor, or it stopped a
// round ago), or its descriptor says it stopped cleanly or is gone (§11's
// Close removes it before the transport closes, so it is gone by the time
// the link goes down). Not a read of the object's route (§7.3): whether
// the run is over. A run listed live whose descriptor says nothing (a link
// that only dropped, a run that crashed) has not: the message is refused
// as before — the transport may still hold this node's earlier messages
// for that run's return, which a readmit here would overtake.
//
// When the list still shows r live, the answer is the descriptor's, read
// off the caller's goroutine — the reader of a peer's connection, where a
// store read (up to followSendWait) held every record on that link: wait
// is then non-nil, and the caller waits for it (waitCutover) and asks
// again. A read done less than followSendWait ago answers at once.
func (o *objects) linkRunStopped(r follow.Route) (stopped bool, wait <-chan struct{}) {
	if snap, list, ok := o.n.lastSnapshotNumbered(); ok {
		if listed, live := o.n.memo.runListed(list, snap, r.NodeRID, r.NodeGeneration); !listed || !live {
			return true, nil
		}
	}
	key := nodeRun{rid: string(r.NodeRID), gen: r.NodeGeneration}
	now := o.n.clock.Now()
	rc := &o.runChecks
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if c, ok := rc.m[key]; ok {
		select {
		case <-c.done:
			if now-c.at < followSendWait {
				return c.stopped, nil
			}
		default:
			return false, c.done
		}
	}
	for k, c := range rc.m {
		select {
		case <-c.done:
			if now-c.at >= followSendWait {
				delete(rc.m, k)
			}
		default:
		}
	}
	if rc.m == nil {
		rc.m = map[nodeRun]*runCheck{}
	}
	c := &runCheck{done: make(chan struct{})}
	rc.m[key] = c
	go o.readRunStopped(r, c)
	return false, c.done
}

// readRunStopped reads whether node run r stopped (directory.RunStopped)
// into c, bounded by followSendWait; a read that fails says it did not.
func (o *objects) readRunStopped(r follow.Route, c *runCheck) {
	// Not bound to o.halt, as the pass-on's send is not (passOn): what
	// waits for it is refused when the node halts (runCutoverQueue).
	ctx, cancel := context.WithTimeout(context.Background(), followSendWait)
	defer cancel()
	stopped, err := directory.RunStopped(ctx, o.n.loc, o.n.cfg.Node.MeshName, r.NodeRID, r.NodeGeneration)
	if err != nil {
		o.log.Debug("message follow: could not read the new owner's descriptor", "node", transport.RID(r.NodeRID).String(), "err", err)
	}
	c.stopped, c.at = stopped && err == nil, o.n.clock.Now()
	close(c.done)
}
