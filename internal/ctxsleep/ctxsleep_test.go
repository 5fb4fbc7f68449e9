package ctxsleep

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

var errStopped = errors.New("stopped for a reason")

// waitingCtx reports, by closing asked, that For has asked for Done — the
// last thing it does before it blocks — so that "cancelled while waiting"
// is an event the test waits for, not a guess at a duration.
type waitingCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// For returns at once for a wait that is already over, nil once d elapsed,
// and the context's cause (ctx.Err() when none was set) when the context
// ended before or during the wait.
func TestFor(t *testing.T) {
	const long = time.Hour // never elapses in a test: the context ends first
	for _, tc := range []struct {
		name string
		d    time.Duration
		// end ends the context: nil leaves it live; before ends it before
		// For is called, otherwise once For waits.
		end    func(context.Context) (context.Context, func())
		before bool
		want   error
	}{
		{name: "zero wait, live", d: 0},
		{name: "negative wait, live", d: -time.Second},
		{name: "zero wait, cancelled", d: 0, end: cancelPlain, before: true, want: context.Canceled},
		{name: "negative wait, cancelled with a cause", d: -time.Second, end: cancelCause, before: true, want: errStopped},
		{name: "wait elapses", d: time.Millisecond},
		{name: "cancelled before waiting", d: long, end: cancelPlain, before: true, want: context.Canceled},
		{name: "cancelled while waiting", d: long, end: cancelPlain, want: context.Canceled},
		{name: "cancelled with a cause while waiting", d: long, end: cancelCause, want: errStopped},
		{name: "deadline passed", d: long, end: deadlinePassed, before: true, want: context.DeadlineExceeded},
		{name: "deadline with a cause passed", d: long, end: deadlineCausePassed, before: true, want: errStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := &waitingCtx{Context: context.Background(), asked: make(chan struct{})}
			if tc.end != nil {
				inner, end := tc.end(context.Background())
				defer end()
				ctx.Context = inner
				if tc.before {
					end()
				} else {
					go func() { <-ctx.asked; end() }()
				}
			}
			start := time.Now()
			err := For(ctx, tc.d)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("For(%v) = %v, want %v", tc.d, err, tc.want)
			}
			if tc.want == nil && tc.d > 0 {
				if took := time.Since(start); took < tc.d {
					t.Fatalf("For(%v) returned nil after %v", tc.d, took)
				}
			}
		})
	}
}

func cancelPlain(parent context.Context) (context.Context, func()) {
	return context.WithCancel(parent)
}

func cancelCause(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	return ctx, func() { cancel(errStopped) }
}

// The deadline is in the past: the context is done when it is returned.
func deadlinePassed(parent context.Context) (context.Context, func()) {
	return context.WithDeadline(parent, time.Now().Add(-time.Second))
}

func deadlineCausePassed(parent context.Context) (context.Context, func()) {
	return context.WithDeadlineCause(parent, time.Now().Add(-time.Second), errStopped)
}
