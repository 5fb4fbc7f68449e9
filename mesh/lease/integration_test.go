package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/lease"
)

// TestRealClockStoreStops runs the §5 scenario on the real clocks (system
// monotonic clock for the lease, system time for the memory store): after
// the store stops answering, every Admit that succeeds started before the
// deadline, and the first refusal happens at or after it. Nothing here
// asserts how fast anything runs; the guard only stops a hung test.
//
// A healthy lease is the precondition: on a machine so loaded that the
// process stalls for longer than the TTL before the store is stopped, the
// lease is (correctly) lost. That attempt proves nothing about the scenario,
// so it is repeated, at most three times.
func TestRealClockStoreStops(t *testing.T) {
	for attempt := 1; ; attempt++ {
		if realClockScenario(t) {
			return
		}
		if attempt == 3 {
			t.Fatal("the lease was lost before the store stopped in every attempt")
		}
		t.Logf("attempt %d: lease lost before the store stopped (machine stalled); retrying", attempt)
	}
}

// realClockScenario reports false if the precondition failed (lease lost
// before the store stopped).
func realClockScenario(t *testing.T) bool {
	mem, err := memory.New(memory.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	store := newFlaky(mem)
	clock := lease.SystemClock()
	timing := lease.Timing{
		RenewInterval: 100 * time.Millisecond,
		TTL:           time.Second,
		RenewTimeout:  100 * time.Millisecond,
		FencingMargin: 500 * time.Millisecond,
	}
	events := make(chan lease.Event, 1024)
	base := runtime.NumGoroutine()
	m, err := lease.Acquire(context.Background(), lease.Config{
		Store: store, Timing: timing, Clock: clock, Logger: testLogger(),
		OnEvent: func(ev lease.Event) { events <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g := m.Gate()

	next := func(kind lease.EventKind) bool {
		t.Helper()
		limit := time.After(guard)
		for {
			select {
			case ev := <-events:
				if ev.Kind == lease.EventLost {
					return false
				}
				if ev.Kind == kind {
					return true
				}
			case <-limit:
				t.Fatalf("no %v event", kind)
			}
		}
	}
	for _, k := range []lease.EventKind{lease.EventAcquired, lease.EventRenewed, lease.EventRenewed} {
		if !next(k) {
			return false
		}
	}

	store.setModes(block, block)
	// The first call that blocks started after every earlier attempt ended
	// (attempts never overlap), so from here on no renew can succeed and the
	// deadline is final.
	select {
	case <-store.blocked:
	case <-time.After(guard):
		t.Fatal("no store call blocked")
	}
	// Drain later notifications so the wrapper never stalls.
	stopDrain := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopDrain) }) }
	defer stop()
	go func() {
		for {
			select {
			case <-store.blocked:
			case <-stopDrain:
				return
			}
		}
	}()
	deadline := g.Deadline()
	if rem := deadline - clock.Now(); rem > timing.TTL-timing.FencingMargin {
		t.Fatalf("remaining %v exceeds TTL - margin", rem)
	}
	closing := g.Closing()

	limit := time.Now().Add(guard)
	admitted := 0
	for {
		before := clock.Now()
		err := g.Admit()
		after := clock.Now()
		if err == nil {
			admitted++
			if before >= deadline {
				t.Fatalf("admitted at %v, deadline %v", before, deadline)
			}
		} else {
			if !errors.Is(err, lease.ErrLeaseExpired) {
				t.Fatalf("Admit = %v, want ErrLeaseExpired", err)
			}
			if after < deadline {
				t.Fatalf("refused at %v, before the deadline %v", after, deadline)
			}
			break
		}
		if time.Now().After(limit) {
			t.Fatal("gate never closed")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-closing:
	case <-time.After(guard):
		t.Fatal("Closing never closed")
	}
	if !next(lease.EventExpired) {
		t.Fatal("lease lost while the store was not answering")
	}
	for i := 0; i < 10; i++ {
		if err := g.Admit(); !errors.Is(err, lease.ErrLeaseExpired) {
			t.Fatalf("Admit after the deadline = %v", err)
		}
	}
	t.Logf("admitted %d times between the last success and the deadline", admitted)

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	stop()
	waitGoroutines(t, base)
	return true
}
