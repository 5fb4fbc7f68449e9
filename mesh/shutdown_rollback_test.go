package mesh

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

// Redis restarted empty under a running node (no persistence), then
// SIGTERM: the node stopped on the data loss (the rollback watch refuses
// every later call of its Store), and its shutdown writes nothing in its
// name. Its one-line error names the loss once and says what may be left
// given that loss. Before, the shutdown still tried to remove the
// descriptor from the store that had lost its data, which the watch
// refused: the line added "a store step failed for good" and repeated the
// whole rollback text as "last error: remove descriptor: …", and it said
// the authority records and descriptor were left for the other nodes'
// reclaim, while the drain's line just above says the records went with the
// store's data (an operator try-out, 2026-12-07).
func TestShutdownAfterTheStoreRestartedEmptyNamesTheLossOnce(t *testing.T) {
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	empty := testredis.TakeSnapshot(t, addr, "{"+ns+"}:")
	f := newFixture(t)
	c := newClusterWith(t, f, func(int) locstore.Store {
		s, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns,
			OperationTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, 1, func(_ int, cfg *config.Config) {
		cfg.ShutdownDeadline = 5 * time.Second
		cfg.Relocation.DrainOnShutdown = false
	})
	n := c.nodes[0]
	if _, err := c.m(0).CreateActor(ctxT(t, 30*time.Second), "before-the-restart", testActorType); err != nil {
		t.Fatal(err)
	}
	testredis.RollBack(t, addr, empty) // what a restart without persistence leaves
	eventually(t, 30*time.Second, "the node to stop on the data loss", func() bool {
		return n.State() == record.StateError && errors.Is(n.LeaseLost(), locstore.ErrDataLost)
	})
	err := n.Close(context.Background())
	var inc *ShutdownIncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("Close = %v, want a *ShutdownIncompleteError", err)
	}
	msg := err.Error()
	t.Log(msg)
	if !errors.Is(err, locstore.ErrDataLost) || !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("the error does not wrap the data loss and the lease loss: %v", err)
	}
	if want := []string{stepSweep, stepStopped, stepRemoveStopped}; strings.Join(inc.NotDone, ",") != strings.Join(want, ",") {
		t.Errorf("NotDone = %q, want %q", inc.NotDone, want)
	}
	if inc.Err != nil || strings.Contains(msg, "failed for good") {
		t.Errorf("a store step reported failed after the store's data loss (Err %v): %s", inc.Err, msg)
	}
	if k := strings.Count(msg, "went back in time"); k != 1 {
		t.Errorf("the rollback is told %d times, want once: %s", k, msg)
	}
	for _, part := range []string{"the owner lease record: none left, it went with the store's data",
		"this run's authority records", "the descriptor (not stopped)"} {
		if !strings.Contains(msg, part) {
			t.Errorf("error does not say %q: %s", part, msg)
		}
	}
	for _, left := range inc.Left {
		if (strings.Contains(left, "authority records") || strings.Contains(left, "descriptor")) &&
			!strings.Contains(left, "when it lost its data") {
			t.Errorf("left behind %q: said as if the store had kept it all", left)
		}
	}
}
