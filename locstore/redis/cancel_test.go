//go:build knownopen

package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// TestCancelWhileRedisIsPausedReturns (known open): a caller that cancels
// its context (no deadline) while Redis does not answer — SIGSTOP, a
// network partition — gets its call back only at the store's own
// OperationTimeout, not at the cancellation: go-redis bounds socket I/O by
// the context's deadline only and never watches ctx.Done(). A node
// stopping, or a Ctrl-C'd ctl command, therefore waits up to
// operation_timeout (2 s by default, longer where operators raised it for
// a slow link) per call in flight. The memory provider has no such wait.
// Fixing it needs the call to give up on ctx.Done() while its connection
// is still in use (returning at once and leaving the connection to be
// dropped at the operation timeout), which is a change to how every
// script call is run, not a local fix.
func TestCancelWhileRedisIsPausedReturns(t *testing.T) {
	srv := testredis.NewServer(t)
	s := openStore(t, srv.Addr, "cancel", func(o *Options) { o.OperationTimeout = 5 * time.Minute })
	put(t, s, "k", "v")
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Resume() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := s.Read(ctx, "k"); done <- err }()
	// Wait until the call holds the pool's connection (sent, not answered).
	deadline := time.Now().Add(30 * time.Second)
	for st := s.client.PoolStats(); st.TotalConns == 0 || st.IdleConns > 0; st = s.client.PoolStats() {
		if time.Now().After(deadline) {
			t.Fatalf("the read never took a connection: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read: %v, want ErrUnavailable matching context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a read cancelled while Redis was paused had not returned 30 s after the cancellation (it waits for the 5 min operation timeout)")
	}
}
