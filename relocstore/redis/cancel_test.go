package redis_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
)

// cancelClient is a client of the test's own on addr, so that the test can
// see which of its connections are in use. Its fixed socket timeouts are
// as long as the stores' operation timeout here (5 min), as New's client's
// are: only the context can end a call sooner (go-redis's default 3 s read
// timeout would end a cancelled call without the fix too).
func cancelClient(t *testing.T, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		ReadTimeout: 5 * time.Minute, WriteTimeout: 5 * time.Minute})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestCancelWhileRedisIsPausedReturns: a caller that cancels its context
// (no deadline) while Redis does not answer (SIGSTOP) gets its call back at
// once, with a *ProviderError matching ErrUnavailable and context.Canceled
// (an unknown outcome, §10). Until 2026-12-07 it came back only at the
// store's OperationTimeout: go-redis bounds socket I/O by the context's
// deadline only. The call goes on without its caller until Redis answers;
// then its connection is back in the pool and no goroutine is left.
func TestCancelWhileRedisIsPausedReturns(t *testing.T) {
	srv := testredis.NewServer(t)
	c := cancelClient(t, srv.Addr)
	s, err := relocredis.NewWithClient(c, relocredis.Options{Namespace: "cancel", OperationTimeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	mustPut(t, s, "t/ref", []byte("x"), time.Hour, relocstore.Stored)
	base := runtime.NumGoroutine()
	ops := []struct {
		name string
		do   func(context.Context) error
	}{
		{"put small", func(ctx context.Context) error { _, err := s.Put(ctx, "t/other", []byte("y"), 0); return err }},
		{"put large", func(ctx context.Context) error {
			_, err := s.Put(ctx, "t/large", fill(relocredis.InlineMax+1, 1), 0)
			return err
		}},
		{"read", func(ctx context.Context) error { _, err := s.Read(ctx, "t/ref"); return err }},
		{"renew", func(ctx context.Context) error { _, err := s.Renew(ctx, "t/ref", 0); return err }},
		{"delete", func(ctx context.Context) error { return s.Delete(ctx, "t/gone") }},
	}
	for _, op := range ops {
		err := testredis.CancelWhilePaused(t, srv, c, op.name, op.do)
		var pe *relocstore.ProviderError
		if !errors.As(err, &pe) || !errors.Is(err, relocstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled %s: %v, want a *ProviderError matching ErrUnavailable and context.Canceled", op.name, err)
		}
	}
	mustRead(t, s, "t/ref", []byte("x"))
	testredis.WaitGoroutines(t, base)
}

// TestPutLeftByItsCallerKeepsItsPayload: a Put whose caller cancelled
// returns at once, and its commands may still be sent afterwards; what they
// send is the payload as it was when Put was called, although the caller
// reused the buffer after Put returned (the SPI lets it). Both ways a
// payload travels: inline in the script call, and staged by a SET in the
// pipeline after the probe.
func TestPutLeftByItsCallerKeepsItsPayload(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"inline", 64}, {"staged", relocredis.InlineMax + 1}} {
		t.Run(tc.name, func(t *testing.T) {
			c := cancelClient(t, testredis.Addr(t))
			h := testredis.NewHoldHook()
			c.AddHook(h)
			s, err := relocredis.NewWithClient(c, relocredis.Options{Namespace: testredis.Namespace(t), OperationTimeout: 5 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			mustPut(t, s, "warm", []byte("w"), time.Hour, relocstore.Stored) // the put script is cached from here on
			payload := fill(tc.size, 7)
			buf := bytes.Clone(payload)
			if tc.size > relocredis.InlineMax {
				h.ArmPipe.Store(true) // the staging SET and the script, after the probe
			} else {
				h.ArmCmd.Store(true)
			}
			err = testredis.CancelWhileHeld(t, h, "put", func(ctx context.Context) error {
				_, err := s.Put(ctx, "ref", buf, time.Hour)
				return err
			})
			if !errors.Is(err, relocstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
				close(h.Release)
				t.Fatalf("cancelled put: %v, want ErrUnavailable matching context.Canceled", err)
			}
			for i := range buf {
				buf[i] ^= 0xff // the caller reuses its buffer
			}
			close(h.Release)
			deadline := time.Now().Add(30 * time.Second)
			for {
				r, err := s.Read(context.Background(), "ref")
				if err != nil {
					t.Fatalf("read after the left put landed: %v", err)
				}
				if r.Found {
					if !bytes.Equal(r.Bytes, payload) {
						t.Fatal("the put left by its caller stored other bytes than the payload it was given")
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the put left by its caller never applied")
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
