package mesh

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
)

// jumpClock is the wall clock moved ahead by the test (hostClock).
type jumpClock struct{ ahead atomic.Int64 }

func (c *jumpClock) Now() time.Time       { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *jumpClock) jump(d time.Duration) { c.ahead.Add(int64(d)) }

// A drain's reported duration (HostRelocationResult.Took, the "in …" of
// `meshnode run`'s drained line, the admin result's tookMs) is the whole
// drain's, including what it waited for before its moves: its own owner
// lease being recovered, or a peer recovering its lease. The clock the
// drain measures by jumps ahead while the drain waits; the wait then counts
// in Took and in Waited, and not in the moves' time. Before, Took started
// after those waits: a drain that waited seconds for its lease reported
// the milliseconds of its moves.
func TestDrainTookIncludesTheWaitBeforeTheMoves(t *testing.T) {
	const jump = 5 * time.Second // less than noTargetPatience (10 s): the wait goes on after it
	const objects = 3            // on the drained node
	tests := []struct {
		name string
		// scene starts the mesh and makes the drain of the returned node
		// wait; release ends that wait.
		scene   func(t *testing.T) (leaving *Node, logs *syncbuf.Buffer, release func())
		waitLog string
	}{
		{"own lease being recovered", func(t *testing.T) (*Node, *syncbuf.Buffer, func()) {
			f, _, blocker, fast := republishScene(t)
			ctx := ctxT(t, 60*time.Second)
			logs := f.logNode(1)
			leaving := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
			startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
			client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
			createOnNode(t, ctx, client, leaving, "own", objects)
			// Renewals and the reacquisition wait until release.
			blocker.loseLeaseOf(t, leaving)
			return leaving, logs, func() { blocker.blocked.Store(nil) }
		}, "drain: this node's owner lease is being recovered"},
		{"a peer recovering its lease", func(t *testing.T) (*Node, *syncbuf.Buffer, func()) {
			f, hold, blocker, fast := republishScene(t)
			ctx := ctxT(t, 60*time.Second)
			logs := f.logNode(1)
			leaving := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
			peer := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
			client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
			createOnNode(t, ctx, client, leaving, "stay", objects)
			loseLeaseHoldRepublish(t, peer, blocker, hold) // serves again once its republish is released
			return leaving, logs, func() { close(hold.release) }
		}, "drain: no other node serves now, but some are recovering"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			leaving, logs, release := tc.scene(t)
			clock := &jumpClock{}
			leaving.hostClock = clock.Now
			type outcome struct {
				res HostRelocationResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := leaving.Drain(ctxT(t, 60*time.Second), HostRelocateOptions{})
				done <- outcome{res, err}
			}()
			eventually(t, 20*time.Second, "the drain to wait before its moves", func() bool {
				return strings.Contains(logs.String(), tc.waitLog)
			})
			clock.jump(jump)
			release()
			out := <-done
			if out.err != nil {
				t.Fatal(out.err)
			}
			res := out.res
			if res.Progress.Moved < objects || len(res.NotMoved()) != 0 {
				t.Fatalf("drain moved %d of %d, not moved %+v", res.Progress.Moved, objects, res.NotMoved())
			}
			if res.Took < jump {
				t.Fatalf("Took %v: the %v waited before the moves is not in it", res.Took, jump)
			}
			if res.BeforeMoves < jump || res.MovesTook >= jump || res.MovesTook <= 0 {
				t.Fatalf("BeforeMoves %v, MovesTook %v: want the %v wait before the moves, not in them", res.BeforeMoves, res.MovesTook, jump)
			}
			if res.BeforeMoves+res.MovesTook > res.Took {
				t.Fatalf("BeforeMoves %v + MovesTook %v exceed Took %v", res.BeforeMoves, res.MovesTook, res.Took)
			}
		})
	}
}
