package mesh

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

// A node whose owner lease ended before its shutdown may write nothing in
// its name: the owner sweep and the stopped publish are skipped, and its
// descriptor, not stopped, is kept (directory.ReclaimKey keeps it as a
// crashed run's). Close says so in one ShutdownIncompleteError naming the
// lease — before, it skipped them silently and returned nil, and `meshnode
// run` exited 0 with its descriptor and records left in the store.
func TestShutdownAfterTheLeaseEndedSaysWhatIsLeft(t *testing.T) {
	cases := []struct {
		name      string
		end       func(t *testing.T, n *Node, st *shutdownOutageStore)
		leaseErr  error
		notDone   []string
		deadline  bool
		reasonMsg string
		// record: what the left-behind list says of the owner lease
		// record (until 2026-12-06 nothing, when the lease was lost).
		record string
	}{{
		// Lost for good (the routing id taken over, the store's data
		// lost): the store answers, nothing is reacquired.
		name: "lost",
		end: func(t *testing.T, n *Node, _ *shutdownOutageStore) {
			n.lease.Fail(errors.New("test: this run's lease is gone"))
			eventually(t, 30*time.Second, "the loss to be reported", func() bool { return n.LeaseLost() != nil })
		},
		leaseErr:  lease.ErrLeaseLost,
		notDone:   []string{stepSweep, stepStopped, stepRemoveStopped},
		reasonMsg: "test: this run's lease is gone",
		record:    "the owner lease record, until it expires (lease.ttl): still this run's when the lease ended for good",
	}, {
		// The store lost its data (FLUSHALL, restarted empty): the
		// owner lease record vanished while still valid.
		name: "lost with the store's data",
		end: func(t *testing.T, n *Node, _ *shutdownOutageStore) {
			owner, _ := n.Owner()
			key, err := record.OwnerLeaseKey(owner)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := n.loc.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the loss to be reported", func() bool { return n.LeaseLost() != nil })
		},
		leaseErr:  locstore.ErrDataLost,
		notDone:   []string{stepSweep, stepStopped, stepRemoveStopped},
		reasonMsg: "store data lost",
		record:    "the owner lease record: none left, it went with the store's data",
	}, {
		// Redis stopped for longer than lease.ttl, then SIGTERM: the
		// gate expired and the store still does not answer.
		name: "expired in an outage",
		end: func(t *testing.T, n *Node, st *shutdownOutageStore) {
			st.mu.Lock()
			st.down, st.leaseDown = true, true
			st.mu.Unlock()
			eventually(t, 30*time.Second, "the gate to expire", func() bool {
				return errors.Is(n.lease.Gate().Admit(), lease.ErrLeaseExpired)
			})
		},
		leaseErr:  lease.ErrLeaseExpired,
		notDone:   []string{stepSweep, stepStopped, stepRelease, stepRemoveStopped},
		deadline:  true,
		reasonMsg: "local admission deadline passed",
		record:    "the owner lease record, until it expires (lease.ttl)",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			st := &shutdownOutageStore{Store: f.loc, leasePrefix: record.KindPrefix(record.KindOwnerLease), failed: map[string]int{}}
			c := newClusterOn(t, f, st, 1, func(_ int, cfg *config.Config) {
				cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
				cfg.ShutdownDeadline = time.Second
				cfg.Relocation.DrainOnShutdown = false
			})
			n := c.nodes[0]
			if _, err := c.m(0).CreateActor(ctxT(t, 30*time.Second), "outlived-its-lease", testMoverType); err != nil {
				t.Fatal(err)
			}
			descKey := n.pub.Key()
			tc.end(t, n, st)

			err := n.Close(context.Background())
			var inc *ShutdownIncompleteError
			if !errors.As(err, &inc) {
				t.Fatalf("Close = %v, want a *ShutdownIncompleteError naming the lease", err)
			}
			if strings.Join(inc.NotDone, ",") != strings.Join(tc.notDone, ",") {
				t.Errorf("NotDone = %q, want %q", inc.NotDone, tc.notDone)
			}
			if inc.Deadline != tc.deadline {
				t.Errorf("Deadline = %v, want %v", inc.Deadline, tc.deadline)
			}
			if !errors.Is(err, tc.leaseErr) {
				t.Errorf("errors.Is(err, %v) = false", tc.leaseErr)
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("the error spans lines:\n%s", msg)
			}
			for _, part := range []string{"the owner lease ended before the shutdown", tc.reasonMsg,
				"this run's authority records", "the descriptor (not stopped)", tc.record} {
				if !strings.Contains(msg, part) {
					t.Errorf("error %q does not say %q", msg, part)
				}
			}
			// What the error says is left is left.
			if rr, err := f.loc.Read(context.Background(), descKey); err != nil || !rr.Found {
				t.Errorf("descriptor %s not stored after the shutdown (err %v), though reported left", descKey, err)
			}
			if keys := storedKeys(t, f.loc, record.KindPrefix(record.KindAuthority)); len(keys) == 0 {
				t.Error("no authority record left, though reported left")
			}
		})
	}
}
