package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// A drain called while another host command runs on the node — a host
// Relocate or a drain started through the admin listener, then SIGTERM —
// waits for that command instead of shutting the node down under it. Before,
// the refused drain went straight to the shutdown, whose sweep removed every
// object the running command had not moved yet, with its state (an operator
// try-out: SIGTERM 0.15 s into `ctl relocate --drain`).
func TestDrainWaitsForTheHostCommandRunning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drain bool // the command running is a drain (else a host Relocate)
	}{{"host relocate", false}, {"drain", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := hostCluster(t, nil)
			ctx := ctxT(t, 60*time.Second)
			_, mine := createUntil(t, ctx, c, "under", 1, 6)
			n := c.nodes[1]
			atSecure, release := holdMovesAtSecure(n)
			running := make(chan HostRelocationResult, 1)
			go func() {
				var res HostRelocationResult
				if tc.drain {
					res, _ = n.Drain(ctx, HostRelocateOptions{MaxConcurrent: 1})
				} else {
					res, _ = n.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1})
				}
				running <- res
			}()
			<-atSecure
			signalled := make(chan HostRelocationResult, 1)
			go func() {
				res, _ := n.Drain(ctx, HostRelocateOptions{})
				signalled <- res
			}()
			time.Sleep(300 * time.Millisecond) // long enough for the second drain to have shut the node down
			close(release)
			first, second := <-running, <-signalled
			t.Logf("running command: %s %+v; the second drain: %s %+v other=%v", first.End, first.Progress,
				second.End, second.Progress, second.OtherDrain)
			wantMovedOffStoppedNode(t, c, mine, 1)
			if tc.drain != second.OtherDrain {
				t.Errorf("the second drain's OtherDrain = %v, want %v", second.OtherDrain, tc.drain)
			}
		})
	}
}

// wantMovedOffStoppedNode checks that every one of refs kept its record
// (the shutdown of node stopped did not remove it) and that none is
// recorded on that node.
func wantMovedOffStoppedNode(t *testing.T, c *cluster, refs []ActorRef, stopped int) {
	t.Helper()
	for _, ref := range refs {
		if !rowOf(t, c, record.ObjectActor, ref.ActorID).Found {
			t.Errorf("%s was removed by the shutdown: its state is lost", ref.ActorID)
			continue
		}
		if owner := ownerIndex(t, c, record.ObjectActor, ref.ActorID); owner == stopped {
			t.Errorf("%s is still recorded on the stopped node %d", ref.ActorID, stopped)
		}
	}
}
