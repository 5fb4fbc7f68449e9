package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
)

// lateStore fails the next write once armed, keeping its request: the
// write reached the store's queue but applies only later (a slow link, a
// Redis busy with a script): its outcome is unknown when the call fails.
type lateStore struct {
	locstore.Store
	mu    sync.Mutex
	armed bool
	kept  *locstore.WriteRequest
}

func (s *lateStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	s.mu.Lock()
	if s.armed {
		s.armed = false
		r := req
		s.kept = &r
		s.mu.Unlock()
		return locstore.WriteResult{}, &locstore.ProviderError{Provider: "late", Op: "write", Err: errors.New("i/o timeout")}
	}
	s.mu.Unlock()
	return s.Store.Write(ctx, req)
}

// A renew times out (outcome unknown); the next tick's re-read still sees
// the old version (the write has not applied yet), then the write applies,
// and the renew under the old version conflicts although the record is
// still ours, unexpired, same generation. A read of our key decides: not
// lost. Before, the conflict was taken for a loss (every object held, work
// refused until a reacquisition).
func TestLateAppliedRenewIsNotALoss(t *testing.T) {
	e, m := lateRenew(t)
	// The late write lands after the next tick's re-read, just before its renew.
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec) // start+10: the next tick (re-read, then renew)
	evs := []lease.Event{}
	deadline := time.After(2 * time.Second)
collect:
	for {
		select {
		case ev := <-e.events:
			evs = append(evs, ev)
		case <-deadline:
			break collect
		}
	}
	if rec, rr := e.readRecord(m); !rr.Found || rec.OwnerID != m.OwnerID() || uint64(rec.LeaseGeneration) != m.Generation() {
		t.Fatalf("the record is not ours any more (found %v): the test's late write did not apply as meant", rr.Found)
	}
	for _, ev := range evs {
		if ev.Kind == lease.EventLost {
			t.Fatalf("lease declared lost (%v) while the store still holds our record, same generation, unexpired", ev.Err)
		}
	}
}

// Release after a renew whose outcome is unknown: the re-read sees the old
// version, then the renew applies, and the Delete under the old version
// conflicts. Release reads again and deletes under the new version. Before,
// it reported success ("already expired or changed") and the record stayed
// ours, valid for a whole TTL after a clean stop (a restart with the same
// routing id within it failed).
func TestReleaseConflictAfterLateRenewDeletes(t *testing.T) {
	e, m := lateRenew(t) // the late write lands between Release's re-read and its Delete
	if err := m.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, rr := e.readRecord(m); rr.Found {
		t.Fatal("Release returned but our owner-lease record is still stored")
	}
}

// lateRenew acquires a lease whose first renew (at start+5) fails with
// its request kept, and arms the store to apply that request just before
// the next write it forwards: a renew that applies late.
func lateRenew(t *testing.T) (*env, *lease.Manager) {
	t.Helper()
	e := newEnv(t)
	ls := &lateStore{Store: e.store}
	cfg := e.config()
	cfg.Store = ls
	m, err := lease.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.expect(lease.EventAcquired)
	ls.mu.Lock()
	ls.armed = true
	ls.mu.Unlock()
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec) // renew at start+5: answer lost, not applied yet
	e.expect(lease.EventRenewFailed)
	e.store.mu.Lock()
	e.store.beforeOnce = func() {
		ls.mu.Lock()
		req := *ls.kept
		ls.mu.Unlock()
		if wr, err := e.mem.Write(context.Background(), req); err != nil || !wr.Applied {
			t.Errorf("late write: %v %+v", err, wr)
		}
	}
	e.store.mu.Unlock()
	return e, m
}
