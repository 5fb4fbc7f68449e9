package testredis

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ConnsInUse counts the connections of c taken from its pools (its
// pipeline pool too, where it has one of its own): a call in flight holds
// one.
func ConnsInUse(c redis.UniversalClient) int {
	st := c.PoolStats()
	n := int(st.TotalConns) - int(st.IdleConns)
	if st.PipelineStats != nil {
		n += int(st.PipelineStats.TotalConns) - int(st.PipelineStats.IdleConns)
	}
	return n
}

// WaitConnsInUse waits until exactly n connections of c are in use, and
// fails the test when that has not happened after a generous bound (it
// guards against a hang, it does not measure speed).
func WaitConnsInUse(t testing.TB, c redis.UniversalClient, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ConnsInUse(c) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d connections in use, want %d (%+v)", what, ConnsInUse(c), n, c.PoolStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CancelWhilePaused pauses srv (SIGSTOP), runs do on a goroutine of its
// own, waits until it holds a connection of c (its command sent or about
// to be; Redis answers neither), cancels its context and returns what do
// returned — failing the test when it has not returned 30 s after the
// cancellation. Then it resumes srv and waits until the call left behind
// has given its connection back (c's pools hold no other call).
func CancelWhilePaused(t testing.TB, srv *Server, c redis.UniversalClient, what string, do func(context.Context) error) error {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- do(ctx) }()
	WaitConnsInUse(t, c, 1, what+" on the paused server")
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("a %s cancelled while Redis was paused had not returned 30 s after the cancellation", what)
	}
	resumed = true
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	WaitConnsInUse(t, c, 0, "after "+what+" once the server resumed")
	return err
}

// HoldHook is a go-redis hook that holds the next command (ArmCmd) or
// pipeline (ArmPipe) it sees until Release is closed, Entered being closed
// when it holds one, and then sends it under a context that is not
// cancelled: the commands of a call whose caller left while they were on
// their way.
type HoldHook struct {
	ArmCmd, ArmPipe  atomic.Bool
	Entered, Release chan struct{}
}

// NewHoldHook returns an unarmed HoldHook.
func NewHoldHook() *HoldHook {
	return &HoldHook{Entered: make(chan struct{}), Release: make(chan struct{})}
}

func (h *HoldHook) hold(ctx context.Context, armed *atomic.Bool) context.Context {
	if !armed.CompareAndSwap(true, false) {
		return ctx
	}
	close(h.Entered)
	<-h.Release
	return context.WithoutCancel(ctx)
}

// DialHook implements redis.Hook.
func (h *HoldHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *HoldHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return next(h.hold(ctx, &h.ArmCmd), cmd) }
}

// ProcessPipelineHook implements redis.Hook.
func (h *HoldHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return next(h.hold(ctx, &h.ArmPipe), cmds) }
}

// CancelWhileHeld runs do on a goroutine of its own, waits until h holds
// its command (h armed by the caller), cancels its context and returns what
// do returned, h still holding the command: the test releases it (closes
// h.Release). It fails the test when do has not returned 30 s after the
// cancellation.
func CancelWhileHeld(t testing.TB, h *HoldHook, what string, do func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- do(ctx) }()
	<-h.Entered
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		close(h.Release)
		t.Fatalf("a %s cancelled while its command was held had not returned 30 s after the cancellation", what)
		return nil
	}
}

// WaitGoroutines waits until the process runs no more goroutines than
// base, and fails the test when that has not happened after a generous
// bound: a goroutine left for good fails it, not a slow one.
func WaitGoroutines(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
