package redis

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// TestCancelWhileRedisIsPausedReturns: a caller that cancels its context
// (no deadline) while Redis does not answer — SIGSTOP, a network
// partition — gets its call back at once with a *ProviderError matching
// ErrUnavailable and context.Canceled; a cancelled Write is such an error
// (outcome unknown), never a Conflict. Until 2026-12-07 the call came back
// only at the store's OperationTimeout: go-redis bounds socket I/O by the
// context's deadline only and never watches ctx.Done() once the command is
// written, so a stopping node or a Ctrl-C'd ctl command waited up to
// operation_timeout per call in flight. Now the call goes on without its
// caller (redisconn.Leavable) until Redis answers: once the server runs
// again its connection goes back to the pool and no goroutine is left.
func TestCancelWhileRedisIsPausedReturns(t *testing.T) {
	srv := testredis.NewServer(t)
	s := openStore(t, srv.Addr, "cancel", func(o *Options) { o.OperationTimeout = 5 * time.Minute })
	v := put(t, s, "k", "v")
	if _, err := s.Scan(context.Background(), locstore.ScanRequest{Limit: 10}); err != nil {
		t.Fatal(err) // loads the cursor key, so a Scan below reaches the script
	}
	base := runtime.NumGoroutine()
	for _, op := range opsOnK(s) {
		err := testredis.CancelWhilePaused(t, srv, s.client, op.name, op.do)
		var pe *locstore.ProviderError
		if !errors.As(err, &pe) || !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled %s: %v, want a *ProviderError matching ErrUnavailable and context.Canceled", op.name, err)
		}
	}
	r, err := s.Read(context.Background(), "k")
	if err != nil || !r.Found || string(r.Value) != "v" || r.Version != v {
		t.Fatalf("read after the server resumed: %+v, %v (want v@%s: the cancelled Write had a failing condition)", r, err, v)
	}
	testredis.WaitGoroutines(t, base)
}

// TestWriteLeftByItsCallerKeepsItsValue: a Write whose caller cancelled
// returns at once, and its command may still be sent afterwards; what it
// sends is the value as it was when Write was called, although the caller
// reused the buffer after Write returned (the SPI lets it: "the provider
// copies what it keeps"). A provider that sent the caller's buffer itself
// would store the new contents (and race with the caller).
func TestWriteLeftByItsCallerKeepsItsValue(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: testredis.Addr(t), ContextTimeoutEnabled: true, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	h := testredis.NewHoldHook()
	c.AddHook(h)
	s, err := NewWithClient(c, Options{Namespace: testredis.Namespace(t), OperationTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	put(t, s, "k", "before") // the write script is cached from here on
	buf := []byte("original")
	h.ArmCmd.Store(true)
	err = testredis.CancelWhileHeld(t, h, "write", func(ctx context.Context) error {
		_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", buf)}})
		return err
	})
	if !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		close(h.Release)
		t.Fatalf("cancelled write: %v, want ErrUnavailable matching context.Canceled", err)
	}
	copy(buf, "CHANGED!") // the caller reuses its buffer
	close(h.Release)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := s.Read(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Value) != "before" {
			if string(r.Value) != "original" {
				t.Fatalf("the write left by its caller stored %q, want %q (the value when Write was called)", r.Value, "original")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write left by its caller never applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEndedContextSendsNothing: a call whose context has already ended
// sends nothing and says so — not the "outcome unknown" of a call left in
// flight (a review's argued item of 2026-12-07) — and the value is not
// written.
func TestEndedContextSendsNothing(t *testing.T) {
	srv := testredis.NewServer(t)
	s := openStore(t, srv.Addr, "ended", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
	var pe *locstore.ProviderError
	if !errors.As(err, &pe) || !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("write under an ended context: %v; want a ProviderError matching ErrUnavailable and context.Canceled", err)
	}
	if want := "nothing was sent"; !strings.Contains(err.Error(), want) {
		t.Fatalf("write under an ended context: %q; want it to say %q", err, want)
	}
	if rr, err := s.Read(context.Background(), "k"); err != nil || rr.Found {
		t.Fatalf("read after: %+v, %v; want nothing written", rr, err)
	}
}
