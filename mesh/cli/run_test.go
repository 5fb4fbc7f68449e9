package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/hostmove"
)

func TestRunCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{"client role runs without the demo factories",
			[]string{"--location_store.provider", "memory", "--node.object_role", "client"}, ExitOK, "serving at tcp://127.0.0.1:", ""},
		{"server runs with both stores",
			[]string{"--location_store.provider", "memory", "--relocation_store.provider", "memory"}, ExitOK, "serving at", ""},
		{"server without a relocation store is a config error (demo factories need one)",
			[]string{"--location_store.provider", "memory"}, ExitUsage, "", "relocation_store"},
		{"no store at all lists every problem", []string{"--lease.ttl", "1s"}, ExitUsage, "", "location_store.provider"},
		{"role none without a store is a config error too", []string{"--node.object_role", "none"}, ExitUsage, "",
			"config: location_store.provider: a running node needs a Location Store whatever its object_role"},
		{"unexpected argument", []string{"extra"}, ExitUsage, "", "unexpected argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var out, errb bytes.Buffer
			args := append([]string{"run", "--log.level", "warn"}, tc.args...)
			code := Main(ctx, args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.inStdout) || !strings.Contains(errb.String(), tc.inStderr) {
				t.Fatalf("stdout %q / stderr %q; want %q / %q", out.String(), errb.String(), tc.inStdout, tc.inStderr)
			}
		})
	}
}

// The line `meshnode run` prints after a SIGTERM drain says what became of
// the objects that stayed, and does not claim the shutdown removed them
// when its sweep did not (it failed, or the lease was lost).
func TestDrainedLine(t *testing.T) {
	stayed := func(swept bool) mesh.HostRelocationResult {
		return mesh.HostRelocationResult{
			End:      hostmove.Completed,
			Progress: mesh.HostProgress{Moved: 5, Failed: 2},
			Objects: []mesh.HostObjectResult{
				{Outcome: hostmove.Moved}, {Outcome: hostmove.Failed}, {Outcome: hostmove.Failed},
			},
			Took:          1500 * time.Millisecond,
			MovesTook:     1500 * time.Millisecond,
			ShutdownSwept: swept,
		}
	}
	tests := []struct {
		name      string
		res       mesh.HostRelocationResult
		want, not string
	}{
		{"all moved", mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 3}, Took: time.Second,
			MovesTook: time.Second, ShutdownSwept: true},
			"meshnode: drained: 3 moved, 0 skipped, 0 failed, 0 not started (completed in 1s: 0s before the moves, 1s moving, 0s after them)", ";"},
		{"all moved, nothing to sweep", mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 3}, Took: time.Second,
			MovesTook: time.Second},
			"meshnode: drained: 3 moved, 0 skipped, 0 failed, 0 not started (completed in 1s: 0s before the moves, 1s moving, 0s after them)", ";"},
		// The whole drain's time, with the wait for the owner lease before
		// the moves and the linger after them (before 2026-12-06 the line
		// said "completed in 40ms", the moves alone).
		{"waited for the lease, then lingered", mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 3},
			Took: 10*time.Second + 5140*time.Millisecond, BeforeMoves: 10 * time.Second, MovesTook: 40 * time.Millisecond, ShutdownSwept: true},
			"meshnode: drained: 3 moved, 0 skipped, 0 failed, 0 not started (completed in 15.14s: 10s before the moves, 40ms moving, 5.1s after them)", ";"},
		{"nothing could move", mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{NotStarted: 2},
			Objects: []mesh.HostObjectResult{{Outcome: hostmove.NotStarted}, {Outcome: hostmove.NotStarted}},
			Took:    10 * time.Second, BeforeMoves: 10 * time.Second, ShutdownSwept: true},
			"0 moved, 0 skipped, 0 failed, 2 not started (completed in 10s: 10s before the moves, 0s moving, 0s after them); 2 removed by the shutdown", "reclaim"},
		{"some stayed, swept", stayed(true),
			"meshnode: drained: 5 moved, 0 skipped, 2 failed, 0 not started (completed in 1.5s: 0s before the moves, 1.5s moving, 0s after them); 2 removed by the shutdown, their state is lost", "reclaim"},
		{"some stayed, not swept", stayed(false),
			"; 2 not moved, their state is lost, and the shutdown could not remove their records: they name this node until the serving nodes reclaim them", "removed by the shutdown"},
		// After the store lost its data there are no records to reclaim
		// (an operator try-out: the line said they named this node).
		{"some stayed, the store lost its data", func() mesh.HostRelocationResult {
			r := stayed(false)
			r.StoreDataLost = true
			return r
		}(), "; 2 not moved, their state is lost; the Location Store lost its data, and their records with it", "reclaim"},
		// Instance Spots are not moved by a drain (spec §8): said as what
		// it is, not as a loss among failures, in each step of a rolling
		// restart.
		{"only Instance Spots stayed", mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 3, Skipped: 2},
			Objects: []mesh.HostObjectResult{{Outcome: hostmove.Moved}, {Object: hostmove.Object{Spot: true, Instance: true}, Outcome: hostmove.Skipped},
				{Object: hostmove.Object{Spot: true, Instance: true}, Outcome: hostmove.Skipped}},
			Took: time.Second, MovesTook: time.Second, ShutdownSwept: true},
			"; 2 Instance Spots removed by the shutdown, as a drain does: each activates again on its next message, with fresh state", "state is lost"},
		{"Instance Spots and a failure stayed", mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Skipped: 1, Failed: 1},
			Objects: []mesh.HostObjectResult{{Outcome: hostmove.Failed}, {Object: hostmove.Object{Spot: true, Instance: true}, Outcome: hostmove.Skipped}},
			Took:    time.Second, MovesTook: time.Second, ShutdownSwept: true},
			"; 2 removed by the shutdown, their state is lost (the log says why each stayed); 1 of them Instance Spots, which activate again on their next message", "as a drain does"},
		// SIGTERM during `ctl relocate --drain`: that drain stopped the
		// node, and this one's zeros would read as if nothing had moved.
		{"drained by the drain already running", mesh.HostRelocationResult{End: hostmove.Completed, OtherDrain: true, ShutdownSwept: true},
			"meshnode: drained by the drain already running (started through the admin listener; its caller got the outcome)", "0 moved"},
		{"one left to its target", mesh.HostRelocationResult{End: hostmove.ForceStopped, Progress: mesh.HostProgress{Moved: 2, Failed: 1},
			Objects: []mesh.HostObjectResult{{Outcome: hostmove.Moved}, {Outcome: hostmove.Failed, Reason: "leftToTarget"}},
			Took:    time.Second, MovesTook: time.Second, ShutdownSwept: true},
			"(forceStopped in 1s: 0s before the moves, 1s moving, 0s after them); 1 left to their targets, whose commit this node stopped before seeing", "removed by the shutdown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := drainedLine(tt.res)
			if !strings.Contains(line, tt.want) || strings.Contains(line, tt.not) {
				t.Fatalf("line %q, want it to contain %q and not %q", line, tt.want, tt.not)
			}
		})
	}
}

// servingStops is `meshnode run`'s stdout for a test: it cancels the run
// once the node says it serves, so that the test waits for that event and
// not for a guessed duration.
type servingStops struct {
	syncbuf.Buffer
	stop func()
}

func (s *servingStops) Write(p []byte) (int, error) {
	n, err := s.Buffer.Write(p)
	if strings.Contains(s.String(), "serving at") {
		s.stop()
	}
	return n, err
}

// `meshnode run` says, at start, which Redis settings the user set for a
// store whose provider is not redis (one WARN per store): an operator who
// set the addresses and forgot provider: redis ran on a memory store
// without a word. Defaults, and a store that uses Redis, give no such line.
func TestRunWarnsOfIgnoredStoreSettings(t *testing.T) {
	const ignored = "redis settings"
	memory := []string{"--location_store.provider", "memory", "--relocation_store.provider", "memory"}
	tests := []struct {
		name string
		args func(t *testing.T) []string
		want []string // lines expected in stderr; nil: none naming ignored settings
	}{
		{"defaults", func(*testing.T) []string { return memory }, nil},
		{"memory with Redis addresses and a bad db", func(*testing.T) []string {
			return append(memory, "--location_store.redis.addrs", "redis-a:6379", "--location_store.redis.db", "-1")
		}, []string{"location_store: redis settings (addrs, db) are ignored: provider is memory"}},
		{"both stores", func(*testing.T) []string {
			return append(memory, "--location_store.redis.addrs", "redis-a:6379", "--relocation_store.redis.namespace", "reloc")
		}, []string{
			"location_store: redis settings (addrs) are ignored: provider is memory",
			"relocation_store: redis settings (namespace) are ignored: provider is memory",
		}},
		{"provider redis uses them", func(t *testing.T) []string {
			return []string{"--location_store.provider", "redis", "--location_store.redis.addrs", testredis.Addr(t),
				"--location_store.redis.namespace", testredis.Namespace(t), "--relocation_store.provider", "memory"}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out := &servingStops{stop: cancel}
			var errb syncbuf.Buffer
			args := append([]string{"run", "--log.level", "warn", "--node.endpoint", "tcp://127.0.0.1:0"}, tc.args(t)...)
			if code := Main(ctx, args, out, &errb); code != ExitOK || !strings.Contains(out.String(), "serving at") {
				t.Fatalf("exit %d, want %d after serving\nstdout %s\nstderr %s", code, ExitOK, out.String(), errb.String())
			}
			got := errb.String()
			for _, line := range tc.want {
				if !strings.Contains(got, "level=WARN msg=\""+line+"\"") {
					t.Errorf("no WARN %q in stderr:\n%s", line, got)
				}
			}
			if n := strings.Count(got, ignored); n != len(tc.want) {
				t.Errorf("%d lines naming %q, want %d:\n%s", n, ignored, len(tc.want), got)
			}
		})
	}
}

type closeResult struct{ err error }

func (c closeResult) Close(context.Context) error { return c.err }

// TestAdminStoppedReportsAnIncompleteShutdown: a node stopped by a drain
// through its admin listener ends run with the shutdown's own result — an
// incomplete shutdown is printed and exits 1 (it exited 0 without looking).
func TestAdminStoppedReportsAnIncompleteShutdown(t *testing.T) {
	incomplete := &mesh.ShutdownIncompleteError{NotDone: []string{"publish stopped"}}
	for _, tc := range []struct {
		name    string
		err     error
		want    int
		wantErr bool
	}{
		{name: "complete", want: ExitOK},
		{name: "incomplete", err: incomplete, want: ExitError, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := adminStopped(closeResult{tc.err}, &out, &errOut); got != tc.want {
				t.Fatalf("exit %d, want %d (stderr %q)", got, tc.want, errOut.String())
			}
			if !strings.Contains(out.String(), "drained through the admin listener") {
				t.Fatalf("stdout %q", out.String())
			}
			if has := strings.Contains(errOut.String(), "meshnode run: shutdown: "); has != tc.wantErr {
				t.Fatalf("stderr %q, want the shutdown's error: %v", errOut.String(), tc.wantErr)
			}
		})
	}
}
