package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/hostmove"
)

// The drain check tells what the drain reported not moved — removed by the
// shutdown with the messages sent to it — from a loss among the counters
// that live on, and a sender's error on a counter the drain did not move
// does not hide the drain's report.
func TestDrainCheckCountsCountersNotMovedApart(t *testing.T) {
	ref := func(id string) mesh.ActorRef { return mesh.ActorRef{ActorID: id, ObjectGeneration: 1} }
	obj := func(id string, o hostmove.Outcome, reason string) hostmove.Result {
		return hostmove.Result{Object: hostmove.Object{ID: id, Generation: 1}, Outcome: o, Reason: reason}
	}
	notFound := fmt.Errorf("read c2: %w", mesh.ErrNotFound)
	tests := []struct {
		name     string
		res      mesh.HostRelocationResult
		runs     []*drainRun
		seen     map[string][4]int64 // each counter's sequence check (absent: not found)
		demoFail bool                // errDemoCheck, else another error (nil when wantErr is "")
		wantErr  string
		want     []string
	}{
		{
			name: "every counter moved or stayed elsewhere",
			res: mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 1},
				Objects: []hostmove.Result{obj("c1", hostmove.Moved, "")}},
			runs: []*drainRun{{ref: ref("c1"), accepted: 10}, {ref: ref("c3"), accepted: 5}},
			seen: map[string][4]int64{"c1": {10, 0, 0, 0}, "c3": {5, 0, 0, 0}},
			want: []string{"15 messages accepted by the senders; lost 0, duplicated 0, reordered 0", "check: every object moved"},
		},
		{
			name: "a counter not moved, its sender stopped on not found",
			res: mesh.HostRelocationResult{End: hostmove.ForceStopped, Progress: mesh.HostProgress{Moved: 1, Failed: 1, NotStarted: 1},
				Objects: []hostmove.Result{obj("c1", hostmove.Moved, ""), obj("c2", hostmove.Failed, "targetLost"), obj("c4", hostmove.NotStarted, "")}},
			runs: []*drainRun{{ref: ref("c1"), accepted: 10}, {ref: ref("c2"), accepted: 7, err: notFound},
				{ref: ref("c3"), accepted: 5}, {ref: ref("c4"), accepted: 3}},
			seen:     map[string][4]int64{"c1": {10, 0, 0, 0}, "c3": {5, 0, 0, 0}},
			demoFail: true,
			wantErr:  "1 objects failed to move, 1 not started (drain forceStopped)",
			want: []string{"drain forceStopped", "15 messages accepted by the senders of the other counters; lost 0, duplicated 0, reordered 0",
				"the drain did not move 2 counters (1 failed (targetLost), 1 notStarted)", "the 10 messages sent to them are not checked (1 of their senders stopped"},
		},
		{
			name: "a moved counter's sender failed",
			res: mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 1},
				Objects: []hostmove.Result{obj("c1", hostmove.Moved, "")}},
			runs:    []*drainRun{{ref: ref("c1"), accepted: 10, err: notFound}},
			wantErr: "sender to c1: read c2: mesh: not found",
		},
		{
			name: "a moved counter is gone",
			res: mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 1},
				Objects: []hostmove.Result{obj("c1", hostmove.Moved, "")}},
			runs:    []*drainRun{{ref: ref("c1"), accepted: 10}},
			wantErr: "c1 not found",
		},
		{
			name: "a moved counter saw a message twice",
			res: mesh.HostRelocationResult{End: hostmove.Completed, Progress: mesh.HostProgress{Moved: 1},
				Objects: []hostmove.Result{obj("c1", hostmove.Moved, "")}},
			runs:     []*drainRun{{ref: ref("c1"), accepted: 10}},
			seen:     map[string][4]int64{"c1": {10, 1, 0, 0}},
			demoFail: true,
			wantErr:  "the drain lost 0, duplicated 1 and reordered 0 messages",
			want:     []string{"10 messages accepted by the senders; lost 0, duplicated 1, reordered 0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read := func(_ context.Context, ref mesh.ActorRef) ([4]int64, error) {
				v, ok := tc.seen[ref.ActorID]
				if !ok {
					return v, fmt.Errorf("%s not found: %w", ref.ActorID, mesh.ErrNotFound)
				}
				return v, nil
			}
			var out bytes.Buffer
			err := printDrain(context.Background(), &out, tc.res, tc.runs, read)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v\n%s", err, out.String())
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one containing %q\n%s", err, tc.wantErr, out.String())
			case tc.wantErr != "" && errors.Is(err, errDemoCheck) != tc.demoFail:
				t.Fatalf("err %v: errDemoCheck %v, want %v", err, errors.Is(err, errDemoCheck), tc.demoFail)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q\n%s", w, out.String())
				}
			}
		})
	}
}
