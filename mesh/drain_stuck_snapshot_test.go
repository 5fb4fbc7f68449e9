package mesh

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/hostmove"
)

// A drain whose own move of an object meets a Snapshot that never returns
// (not one left running by an earlier move: TestDrainReportsAnObjectHeldByALateSnapshot).
// The move waits for the application at most relocation.deadline, never
// past the drain's budget (shutdown_deadline less the shutdown's reserve):
// with relocation.deadline at least that budget (the defaults, 30 s
// against 22.5 s) it waits the budget out and the drain ends
// forceStopped; with a shorter one it ends at it, completed. Either way
// the other objects move meanwhile (they do not wait behind it), the
// object is listed failed (snapshotStillRunning) and named in the log,
// the shutdown removes it and reports the call (ApplicationStuckError
// InCalls), and nothing is left NotStarted. docs/OPERATIONS.md "Drain and
// rolling restarts" argues why the drain waits: the node cannot tell a
// Snapshot that never returns from a slow one, and the shutdown would
// wait for the call anyway.
func TestDrainOwnMoveOfAnObjectWhoseSnapshotNeverReturns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // relocation.deadline
		want     hostmove.End
	}{
		{"relocation.deadline past the drain's budget", 30 * time.Second, hostmove.ForceStopped},
		{"relocation.deadline within the drain's budget", time.Second, hostmove.Completed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adapter := newStuckSnapshot()
			defer adapter.free()
			f := newFixture(t)
			logs := make([]syncbuf.Buffer, 4)
			f.logTo = func(i int) io.Writer { return &logs[i] }
			id := "stuck-drain"
			c, ctx, held, src := blockingSnapshotHostOn(t, f, adapter, id, func(_ int, cfg *config.Config) {
				cfg.ShutdownDeadline = 4 * time.Second // the moves get 3 s
				cfg.Relocation.Deadline = tc.deadline
			})
			_, rest := createUntil(t, ctx, c, id+"-rest", src, 3)
			res, err := c.nodes[src].Drain(ctxT(t, 60*time.Second), HostRelocateOptions{})
			if res.End != tc.want || res.Progress.Moved != len(rest) || res.Progress.Failed != 1 || res.Progress.NotStarted != 0 {
				t.Errorf("drain: %s %+v; want %s, %d moved, 1 failed, none not started", res.End, res.Progress, tc.want, len(rest))
			}
			for _, o := range res.Objects {
				if o.Object.ID == held.ActorID && (o.Outcome != hostmove.Failed || !strings.HasPrefix(o.Reason, snapshotStillRunning)) {
					t.Errorf("%s: %s %q; want failed, %s…", o.Object.ID, o.Outcome, o.Reason, snapshotStillRunning)
				}
			}
			if !res.ShutdownSwept {
				t.Error("the drain's shutdown did not sweep")
			}
			var st *ApplicationStuckError
			if !errors.As(err, &st) || !slices.ContainsFunc(st.InCalls, func(c string) bool {
				return strings.HasPrefix(c, "Snapshot of actor "+held.ActorID+" ")
			}) {
				t.Errorf("Drain = %v; want an *ApplicationStuckError naming the Snapshot of actor %s", err, held.ActorID)
			}
			// The draining node's log names the object in both WARN lines.
			lines := strings.Split(logs[src].String(), "\n")
			for _, msg := range []string{
				`level=WARN msg="relocation: the object's snapshot adapter was still in its call at the move's deadline`,
				`level=WARN msg="host relocation: object stays on this node"`,
			} {
				if !slices.ContainsFunc(lines, func(l string) bool {
					return strings.Contains(l, msg) && strings.Contains(l, " object="+held.ActorID+" ")
				}) {
					t.Errorf("no %s naming %s in the draining node's log:\n%s", msg, held.ActorID, logs[src].String())
				}
			}
		})
	}
}
