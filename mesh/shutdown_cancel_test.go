package mesh

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestShutdownIncompleteSaysWhatEndedIt: a shutdown whose context its
// caller cancelled (a second Ctrl-C, the demo's interrupt) is not blamed on
// shutdown_deadline, which did not pass; one whose deadline passed is.
func TestShutdownIncompleteSaysWhatEndedIt(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	for _, tc := range []struct {
		name                 string
		ctx                  context.Context
		deadline, cancelled  bool
		want, mustNotContain string
	}{
		{"cancelled", cancelled, false, true, "the shutdown was cancelled", "shutdown_deadline"},
		{"deadline", expired, true, false, "before shutdown_deadline", "cancelled"},
		{"failed", context.Background(), false, false, "a store step failed for good", "shutdown_deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s shutdownSteps
			s.undone(stepSweep)
			err := s.result(tc.ctx)
			inc, ok := err.(*ShutdownIncompleteError)
			if !ok {
				t.Fatalf("result = %T %v", err, err)
			}
			if inc.Deadline != tc.deadline || inc.Cancelled != tc.cancelled {
				t.Errorf("Deadline, Cancelled = %v, %v; want %v, %v", inc.Deadline, inc.Cancelled, tc.deadline, tc.cancelled)
			}
			msg := inc.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.mustNotContain) {
				t.Errorf("message %q: want %q, not %q", msg, tc.want, tc.mustNotContain)
			}
		})
	}
}
