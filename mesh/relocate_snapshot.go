package mesh

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// The snapshot adapter's call on the source, bounded by the move's deadline
// (docs/RELOCATION.md §4, "the snapshot adapter is still in its call at the
// move's deadline"). Snapshot runs while the object is held and reads the
// handler; until 2026-12-07 it ran on the move's goroutine and a call that
// did not return held the move — and a drain, a host Relocate, a Close's
// wait for it — without bound. Now the move ends at its deadline without
// it, NotMoved (deadlineExceeded), and the object stays this node's, held
// (no turn runs beside the adapter's read) until the call returns; its
// result is then discarded and dispatch reopens (the machine's
// ActReopenAfterSnapshot).

// snapshotStopGrace is how long a move whose context ended waits for an
// adapter that implements spot.ContextSnapshotter to return, before it
// ends without it: such an adapter was told to stop, and one that does
// frees its object with the move's end instead of a moment after it.
const snapshotStopGrace = 200 * time.Millisecond

// snapshotCall is one call of the snapshot adapter on its own goroutine,
// counted as work in flight: a node's stop waits for it as for any call
// into the application and, when it does not return, reports it
// (ApplicationStuckError.Calls) and goes on.
type snapshotCall struct {
	done  chan struct{} // closed once the call returned
	start time.Time

	mu       sync.Mutex
	state    []byte
	err      error
	returned bool
	after    func() // set by a move that ended first: run once the call returns
}

// snapshot calls the adapter for the held object and waits for it until
// ctx ends. late reports a call still running then (s.snap has it).
func (s *sourceMove) snapshot(ctx context.Context) (state []byte, late bool, err error) {
	o := s.o
	c := &snapshotCall{done: make(chan struct{}), start: time.Now()}
	s.snap = c
	h := unwrapGated(s.h.obj.Handler())
	// Added while the move's own count (o.call) holds the group above
	// zero, as an arrival's build is.
	o.work.Add(1)
	go func() {
		defer o.work.Done()
		st, err := runSnapshot(ctx, &o.apps, s.key, s.f.Snapshot, h)
		c.mu.Lock()
		c.state, c.err, c.returned = st, err, true
		after := c.after
		c.mu.Unlock()
		close(c.done)
		if after != nil {
			after()
		}
	}()
	select {
	case <-c.done:
	case <-ctx.Done():
		wait := time.Duration(0)
		if _, ok := s.f.Snapshot.(spot.ContextSnapshotter); ok {
			wait = snapshotStopGrace
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-c.done:
		case <-t.C:
			return nil, true, ctx.Err()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, false, c.err
}

// whenReturned runs f once the call has returned: on the call's goroutine
// when it has not yet, at once otherwise.
func (c *snapshotCall) whenReturned(f func()) {
	c.mu.Lock()
	if !c.returned {
		c.after = f
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	f()
}

// snapshotEnded is ActHoldAndCapture's answer when the move's context
// ended while the snapshot adapter was in its call: still in it (late), or
// returned as it ended (a spot.ContextSnapshotter told to stop, err its
// answer). The captured queue is back in the object already.
func (s *sourceMove) snapshotEnded(ctx context.Context, late bool, err error) relocation.SourceEvent {
	o := s.o
	s.res.Timings.Capture = s.lap()
	deadline := errors.Is(ctx.Err(), context.DeadlineExceeded)
	ended := "at the move's deadline"
	if !deadline {
		ended = "when the move was cancelled"
	}
	if !late {
		// It stopped when told to: the object is released with the move.
		s.res.Detail = "the snapshot adapter stopped " + ended
		if err != nil {
			s.res.Detail = validText(s.res.Detail + ": " + err.Error())
		}
		o.log.Warn("relocation: the object's snapshot adapter stopped "+ended+"; not moved, it stays served here",
			"object", s.id, "type", s.h.stableType, "err", s.res.Detail, "waited", s.res.Timings.Capture)
		if deadline {
			return relocation.EvDeadline
		}
		return relocation.EvCancel
	}
	s.res.Detail = "the snapshot adapter was still in its call " + ended +
		" (a Snapshot that does not return, or not in time); the object stays here, held until the call returns"
	o.log.Warn("relocation: the object's snapshot adapter was still in its call "+ended+
		"; not moved, the object stays here, held (no turn runs) until the call returns",
		"object", s.id, "type", s.h.stableType, "waited", s.res.Timings.Capture)
	if deadline {
		return relocation.EvDeadlineInSnapshot
	}
	return relocation.EvCancelInSnapshot
}

// reopenAfterSnapshot performs ActReopenAfterSnapshot: the move ends now,
// the object stays marked moving (Destroy/Close and another move answer
// ErrMoving; the lease hold leaves it alone) and held, its arrivals
// queued, until the adapter's call returns; then what it returned is
// dropped and the object serves again, as ActReopen would have made it.
func (s *sourceMove) reopenAfterSnapshot() {
	o, c := s.o, s.snap
	if c == nil {
		o.log.Error("relocation: reopen after a snapshot that was never called", "object", s.id)
		return
	}
	leftToTarget := s.leftToTarget
	began := s.self.Owner.LeaseGeneration
	ended := time.Now()
	returned := make(chan struct{}) // for host commands (awaitLateSnapshot)
	o.mu.Lock()
	if o.hosted[s.key] == s.h && s.h.state == hostMoving {
		s.h.lateSnapshot = returned
	}
	o.mu.Unlock()
	c.whenReturned(func() {
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		o.mu.Lock()
		if s.h.lateSnapshot == returned {
			s.h.lateSnapshot = nil
		}
		close(returned)
		o.mu.Unlock()
		if leftToTarget {
			// The node stopped while the release was unconfirmed: as
			// ActReopen, nothing is reopened.
			o.log.Warn("relocation: the snapshot adapter's call that outlived its move returned; the node stopped meanwhile, nothing reopened",
				"object", s.id, "type", s.h.stableType, "after_the_move", time.Since(ended), "took", time.Since(c.start))
			return
		}
		o.mu.Lock()
		here := o.hosted[s.key] == s.h && s.h.state == hostMoving
		if here {
			s.h.state = hostServing
			// Under o.mu, as the lease hold's release: a move that begins
			// once the object serves again is not reopened mid-move.
			s.h.obj.Release()
		}
		o.mu.Unlock()
		args := []any{"object", s.id, "type", s.h.stableType, "after_the_move", time.Since(ended), "took", time.Since(c.start)}
		if err != nil {
			args = append(args, "err", validText(err.Error()))
		}
		if !here {
			o.log.Warn("relocation: the snapshot adapter's call that outlived its move returned; its result is discarded (the object is no longer hosted here)", args...)
			return
		}
		o.log.Warn("relocation: the snapshot adapter's call that outlived its move returned; its result is discarded and the object serves here again", args...)
		ctx, cancel := s.bg(5 * time.Second)
		defer cancel()
		o.readoptAfterHold(ctx, s.key, began)
	})
}
