package redis

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// returnsWithin runs fn and fails the test when it has not returned after a
// generous bound (not a speed assertion: only a call that nothing bounds
// fails it).
func returnsWithin(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

type namedOp struct {
	name string
	do   func(context.Context) error
}

// opsOnK are the four operations on key "k" (and "l"), the write with a
// condition that fails (version "0"): whether it ran or not, "k" keeps its
// value. A Scan reaches its script only once the cursor key is loaded (a
// first Scan before).
func opsOnK(s *Store) []namedOp {
	return []namedOp{
		{"read", func(ctx context.Context) error { _, err := s.Read(ctx, "k"); return err }},
		{"readMany", func(ctx context.Context) error { _, err := s.ReadMany(ctx, []string{"k", "l"}); return err }},
		{"write", func(ctx context.Context) error {
			_, err := s.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion("k", "0")},
				Mutations: []locstore.Mutation{locstore.Put("k", []byte("w"))}})
			return err
		}},
		{"scan", func(ctx context.Context) error { _, err := s.Scan(ctx, locstore.ScanRequest{Limit: 10}); return err }},
	}
}

// TestCallersDeadlineWhileRedisIsPaused: with the server stopped (SIGSTOP:
// the connection stays open, nothing answers) a call ends at the caller's
// deadline with a *ProviderError that matches both ErrUnavailable and
// context.DeadlineExceeded (locstore.ProviderError: "Unwrap exposes the
// cause (for example context.DeadlineExceeded)"), as the Relocation Store
// provider's do; the framework tells a caller's deadline from an outage by
// it (mesh classify). Until 2026-12-07 the cause was only go-redis's
// "i/o timeout": the socket deadline, set from the context's, fires before
// the context's own timer marks it done. Once the server runs again the
// same Store works, and no goroutine is left behind.
func TestCallersDeadlineWhileRedisIsPaused(t *testing.T) {
	srv := testredis.NewServer(t)
	// Only the caller's deadline can end a call: the store's own timeout
	// is far longer.
	s := openStore(t, srv.Addr, "paused", func(o *Options) { o.OperationTimeout = 5 * time.Minute })
	v := put(t, s, "k", "v")
	if _, err := s.Scan(context.Background(), locstore.ScanRequest{Limit: 10}); err != nil {
		t.Fatal(err) // loads the cursor key, so a Scan below reaches the script
	}
	base := runtime.NumGoroutine()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = srv.Resume()
		}
	})
	for _, op := range opsOnK(s) {
		for range 3 {
			err := returnsWithin(t, op.name, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				return op.do(ctx)
			})
			var pe *locstore.ProviderError
			if !errors.As(err, &pe) || !errors.Is(err, locstore.ErrUnavailable) {
				t.Fatalf("%s on a paused server: %v, want a *ProviderError", op.name, err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s on a paused server past the caller's deadline: %v does not match context.DeadlineExceeded", op.name, err)
			}
		}
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	r, err := s.Read(context.Background(), "k")
	if err != nil || !r.Found || string(r.Value) != "v" || r.Version != v {
		t.Fatalf("read after the server resumed: %+v, %v (want v@%s: the refused Write had a failing condition)", r, err, v)
	}
	put(t, s, "k", "after")
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before the pause", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
