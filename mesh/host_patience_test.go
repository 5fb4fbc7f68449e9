package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
)

func TestTargetPatience(t *testing.T) {
	const patience = 10 * time.Second
	type step struct {
		at     time.Duration // on the command's clock
		landed bool          // a move landed (else: a move found no target)
		want   bool          // wait's answer
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first wait starts the patience", []step{{at: 0, want: true}, {at: 9 * time.Second, want: true}, {at: 10 * time.Second, want: false}}},
		{"a later wave shares it", []step{{at: 0, want: true}, {at: 6 * time.Second, want: true}, {at: 11 * time.Second, want: false}, {at: 12 * time.Second, want: false}}},
		{"a landed move ends the episode", []step{{at: 0, want: true}, {at: 8 * time.Second, landed: true}, {at: 15 * time.Second, want: true}, {at: 24 * time.Second, want: true}, {at: 25 * time.Second, want: false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := time.Unix(1_000_000, 0)
			var now time.Time
			p := newTargetPatience(patience, func() time.Time { return now })
			for i, s := range tc.steps {
				now = base.Add(s.at)
				if s.landed {
					p.landed()
					continue
				}
				if got := p.wait(); got != s.want {
					t.Fatalf("step %d (at %v): wait = %v, want %v", i, s.at, got, s.want)
				}
			}
		})
	}
}

// A host command waits for a usable target once, not once per wave of
// moves: with max_concurrent 1 and four objects on a node whose only peer
// server just died, the command gives up after one noTargetPatience.
// Before, each object waited its own (here 4 × 10 s on the command's
// clock; a drain of a node whose peers were all stopping waited 20 s
// where the documentation said at most 10).
func TestHostCommandWaitsForATargetOnce(t *testing.T) {
	c := newClusterOn(t, newFixture(t), nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
	})
	ctx := ctxT(t, 60*time.Second)
	mine := createOn(t, c, "wave", 1, 4)
	leaving := c.nodes[1]
	c.nodes[2].crash()
	eventually(t, 15*time.Second, "node 1 to see its only peer server gone", func() bool {
		serving, _, err := leaving.peersNow(ctx)
		return err == nil && serving == 0
	})
	// The command's clock runs 20 times as fast: noTargetPatience (10 s)
	// passes in half a second.
	speedUpHostClock(leaving, 20)
	res, err := leaving.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Moved != 0 || len(res.NotMoved()) != len(mine) {
		t.Fatalf("moved %d, not moved %d; want 0 and %d (no other server)", res.Progress.Moved, len(res.NotMoved()), len(mine))
	}
	patience := leaving.noTargetPatience()
	if res.Took >= 2*patience {
		t.Fatalf("the command took %v on its clock: it waited for a target more than once (patience %v)", res.Took, patience)
	}
}

// speedUpHostClock makes the clock n's host commands measure by (hostClock)
// run factor times as fast as the wall clock from now on: their patience
// periods pass in a fraction of the time. Set it before a command runs.
func speedUpHostClock(n *Node, factor int) {
	start := time.Now()
	n.hostClock = func() time.Time { return start.Add(time.Duration(factor) * time.Since(start)) }
}
