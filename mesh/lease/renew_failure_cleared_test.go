package lease_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
)

// RenewFailure (`ctl status`: "lease renewals failing: …") says why the
// renewals fail now. A lease is declared lost only on an answer of the
// store (the re-read that found the record gone or replaced, the node's
// marker check), so the failure of the outage before is over by then; and
// nothing renews after the loss. Every path out of the outage leaves
// RenewFailure nil: the loss itself (Fail: the node's marker check
// found the store restarted empty), and the reacquisition after an ordinary loss. Before, a
// node stopped on a store data loss went on showing the outage's
// "connection reset" beside STORE DATA LOST (an operator try-out), as if
// the store were still unreachable.
func TestRenewFailureEndsWithTheOutage(t *testing.T) {
	tests := []struct {
		name      string
		reacquire bool
		back      func(e *env, m *lease.Manager) // the store answers again
		want      lease.EventKind                // the event that ends the outage
	}{
		{name: "restarted empty: the node's marker check fails the lease", reacquire: true, want: lease.EventLost, back: func(e *env, m *lease.Manager) {
			e.deleteLease(m)
			e.store.setModes(pass, pass)
			m.Fail(fmt.Errorf("namespace marker gone: %w", locstore.ErrDataLost))
		}},
		{name: "lost past the TTL, not reacquiring", want: lease.EventLost, back: func(e *env, m *lease.Manager) {
			e.clock.AdvanceTo(start + 20*sec)
			e.store.setModes(pass, pass)
		}},
		{name: "restarted empty past the TTL: reacquired", reacquire: true, want: lease.EventReacquired, back: func(e *env, m *lease.Manager) {
			e.clock.AdvanceTo(start + 20*sec)
			e.deleteLease(m)
			e.store.setModes(pass, pass)
		}},
		{name: "reacquired, its write's answer lost", reacquire: true, want: lease.EventReacquired, back: func(e *env, m *lease.Manager) {
			e.clock.AdvanceTo(start + 20*sec)
			e.store.onceWrite(applyThenFail)
			e.store.setModes(pass, pass)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config()
			cfg.Reacquire = tt.reacquire
			m := e.acquireWith(cfg)
			e.waitIdle(m, 2)
			e.store.setModes(fail, fail)
			e.clock.Advance(5 * sec)
			e.expect(lease.EventRenewFailed)
			if err := m.RenewFailure(); err == nil {
				t.Fatal("RenewFailure nil while the store is down")
			}
			tt.back(e, m)
			deadline := time.After(guard)
			for got := false; !got; {
				select {
				case ev := <-e.events:
					got = ev.Kind == tt.want
				case <-deadline:
					t.Fatalf("no %v", tt.want)
				case <-time.After(20 * time.Millisecond):
					e.clock.Advance(sec / 4)
				}
			}
			if err := m.RenewFailure(); err != nil {
				t.Fatalf("RenewFailure after the outage ended (%v) = %v, want nil", tt.want, err)
			}
		})
	}
}
