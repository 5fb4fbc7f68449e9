package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
)

// A lease lost for an ordinary reason (to be reacquired) and then found
// lost to store data loss (the node's marker check calls Fail) reports the
// data loss. Before, the second loss was swallowed: the node said "owner
// lease lost ... (no restart needed)" for good while nothing could ever
// reacquire (seen with Redis restarted empty).
func TestFailAfterOrdinaryLossReportsDataLoss(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Reacquire = true
	cfg.OnEvent = func(ev lease.Event) {
		if ev.Kind == lease.EventLost {
			e.store.setModes(fail, fail) // the store refuses everything from now on (a Redis RollbackError)
		}
		e.events <- ev
	}
	m, err := lease.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.expect(lease.EventAcquired)
	e.waitIdle(m, 2)
	e.putLease(m, m.OwnerID(), m.Generation()+1) // replaced: ordinary loss, reacquisition conflicts
	e.clock.AdvanceTo(start + 5*sec)
	lost := e.expect(lease.EventLost)
	if errors.Is(lost.Err, locstore.ErrDataLost) {
		t.Fatalf("first loss already data loss: %v", lost.Err)
	}
	if got := m.LostRecord(); got != lease.RecordNotOurs {
		t.Fatalf("LostRecord after the record was replaced = %d, want RecordNotOurs", got)
	}
	m.Fail(fmt.Errorf("%w: the namespace marker is gone", locstore.ErrDataLost))
	if got := m.LostRecord(); got != lease.RecordDataLost {
		t.Errorf("LostRecord after the data loss = %d, want RecordDataLost", got)
	}
	deadline := time.After(2 * time.Second)
	for {
		select {
		case ev := <-e.events:
			if errors.Is(ev.Err, locstore.ErrDataLost) {
				return
			}
		case <-deadline:
			t.Fatal("Fail(ErrDataLost) after an ordinary loss reported nothing: the node's lostErr stays \"no restart needed\"")
		}
	}
}

// Fail on a lease whose record is still this run's (the routing id taken
// over, say) leaves the record to expire by its TTL: LostRecord says so,
// for the stopping node's list of what is left (mesh
// ShutdownIncompleteError); a lease that holds says 0.
func TestFailLeavesTheRecordToExpire(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.waitIdle(m, 2)
	if got := m.LostRecord(); got != 0 {
		t.Fatalf("LostRecord of a held lease = %d, want 0", got)
	}
	m.Fail(errors.New("test: the routing id was taken over"))
	if got := m.LostRecord(); got != lease.RecordKept {
		t.Fatalf("LostRecord after Fail = %d, want RecordKept", got)
	}
}
