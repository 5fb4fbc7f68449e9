// Package ctxsleep is the one "wait d, or stop when the context ends" of
// the module: the pauses of the authority executor's retries, the node's
// backoffs and polls (mesh) and the demo's polls (mesh/cli). Each used to
// carry its own copy, and they differed on a zero wait and on the error.
package ctxsleep

import (
	"context"
	"time"
)

// For waits d, or until ctx ends, whichever comes first. It returns nil
// when d elapsed and context.Cause(ctx) when ctx ended. A zero or negative
// d returns at once (the same answer: nil, or the cause of a ctx already
// done): no timer is started for a wait that is already over.
//
// Why the cause and not ctx.Err(): context.Cause is ctx.Err() unless the
// context was cancelled with one (WithCancelCause, WithTimeoutCause), so
// nothing changes for a plain context; where a cause was set — the owner
// lease's loop (lease.ErrManagerStopped), cli.SignalContext (the signal
// received) — it names why the wait ended instead of "context canceled".
// None of the callers compares the result with context.Canceled or
// context.DeadlineExceeded: the node's callers only test it against nil
// and build their error from ctx (mesh.ctxErr); the authority executor and
// the demo wrap it with %w to be read.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	// Stopped on every return, also when ctx ends first: a wait cut short
	// leaves no pending timer behind (the backoffs wait up to seconds).
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
