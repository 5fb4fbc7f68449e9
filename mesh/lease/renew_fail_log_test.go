package lease_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/lease"
)

// A store that fails every renewal (down, or refusing writes) makes one WARN
// line at the first failure and then one per renewFailEvery (12) failures —
// not one per renew interval, as before 2026-12-06 (720 lines an hour at the
// default interval, each repeated by the node) — and the renewal that
// succeeds again says so once, with the count.
func TestRenewFailuresLogOncePerTwelve(t *testing.T) {
	const failLine = "owner lease renew failed"
	const againLine = "owner lease renewed again after failed renewals"
	start := func(t *testing.T) (*env, *syncbuf.Buffer) {
		t.Helper()
		e := newEnv(t)
		var logs syncbuf.Buffer
		cfg := e.config()
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		m, err := lease.Acquire(context.Background(), cfg)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		t.Cleanup(func() { _ = m.Close() })
		e.expect(lease.EventAcquired)
		e.waitIdle(m, 2)
		return e, &logs
	}

	t.Run("a long outage", func(t *testing.T) {
		e, logs := start(t)
		e.store.setModes(pass, refuse)
		// The first failure, then the second at the admission deadline
		// (the gate closes at the same instant), then one per interval
		// with only the renew tick pending.
		e.clock.Advance(5 * sec)
		e.expect(lease.EventRenewFailed)
		e.clock.Advance(5 * sec)
		e.expectSet(lease.EventExpired, lease.EventRenewFailed)
		const failures = 25
		for i := 3; i <= failures; i++ {
			if !e.clock.WaitFor(func(n int) bool { return n == 1 }, guard) {
				t.Fatalf("failure %d: the renew loop is not parked on its next tick", i)
			}
			e.clock.Advance(5 * sec)
			e.expect(lease.EventRenewFailed)
		}
		if got, want := strings.Count(logs.String(), failLine), 3; got != want { // failures 1, 12 and 24
			t.Fatalf("%d %q lines for %d failed renewals, want %d:\n%s", got, failLine, failures, want, logs.String())
		}
		if !strings.Contains(logs.String(), "failed_renews=24") {
			t.Fatalf("the reminder does not say how many renewals failed:\n%s", logs.String())
		}
	})

	t.Run("renewing again", func(t *testing.T) {
		e, logs := start(t)
		e.store.onceWrite(refuse)
		e.clock.Advance(5 * sec)
		e.expect(lease.EventRenewFailed)
		e.clock.Advance(5 * sec)
		e.expectSet(lease.EventExpired, lease.EventRenewed)
		out := logs.String()
		if strings.Count(out, failLine) != 1 || strings.Count(out, againLine) != 1 || !strings.Contains(out, "failed_renews=1") {
			t.Fatalf("want one failure line and one line saying the renewals succeed again after 1:\n%s", out)
		}
	})
}
