package redisconn

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestReplicasValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		r     Replicas
		valid bool
	}{
		{"off", Replicas{}, true},
		{"one", Replicas{Acks: 1, Timeout: time.Second}, true},
		{"the most", Replicas{Acks: MaxReplicaAcks, Timeout: time.Second}, true},
		{"too many", Replicas{Acks: MaxReplicaAcks + 1, Timeout: time.Second}, false},
		{"negative", Replicas{Acks: -1, Timeout: time.Second}, false},
		{"no timeout", Replicas{Acks: 1}, false},
		{"negative timeout", Replicas{Timeout: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.r.Validate(); (err == nil) != tc.valid {
				t.Fatalf("Validate: %v, want valid %v", err, tc.valid)
			}
		})
	}
	if NewReplicaWait(Replicas{}, "s", nil, nil) != nil {
		t.Fatal("a wait for no replica")
	}
}

// The wait's states: keeping up (every write waits the full timeout);
// behind (writes go on without waiting, one write per ProbeEvery waits the
// full timeout to find out whether the replicas are back). Each change of
// state is logged once.
func TestReplicaWait(t *testing.T) {
	type step struct {
		advance  time.Duration // clock moves first
		plan     bool          // Plan is called
		wantWait bool
		done     *int // Done(true, *done); nil: Done(false, 0) when it waited, unless pending
		pending  bool // the write is still under way: no Done
		behind   bool // Behind after the step
		log      string
	}
	acked := func(n int) *int { return &n }
	const to = 200 * time.Millisecond
	for _, tc := range []struct {
		name  string
		acks  int
		steps []step
	}{
		{"replicas keep up", 1, []step{
			{plan: true, wantWait: true, done: acked(1)},
			{plan: true, wantWait: true, done: acked(2)},
		}},
		{"behind, then back at the next probe", 1, []step{
			{plan: true, wantWait: true, done: acked(0), behind: true, log: "WARN"},
			{plan: true, wantWait: false, behind: true},
			{advance: ProbeEvery / 2, plan: true, wantWait: false, behind: true},
			{advance: ProbeEvery / 2, plan: true, wantWait: true, done: acked(1), log: "INFO"},
			{plan: true, wantWait: true, done: acked(1)},
		}},
		{"a probe that falls short keeps it behind for another interval", 2, []step{
			{plan: true, wantWait: true, done: acked(1), behind: true, log: "WARN"},
			{advance: ProbeEvery, plan: true, wantWait: true, done: acked(1), behind: true},
			{advance: ProbeEvery / 2, plan: true, wantWait: false, behind: true},
			{advance: ProbeEvery / 2, plan: true, wantWait: true, done: acked(2), log: "INFO"},
		}},
		{"one probe at a time", 1, []step{
			{plan: true, wantWait: true, done: acked(0), behind: true, log: "WARN"},
			{advance: ProbeEvery, plan: true, wantWait: true, pending: true, behind: true},
			{plan: true, wantWait: false, behind: true},
		}},
		{"a failed write says nothing", 1, []step{
			{plan: true, wantWait: true}, // Done(false, 0)
			{plan: true, wantWait: true, done: acked(1)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			var buf bytes.Buffer
			w := NewReplicaWait(Replicas{Acks: tc.acks, Timeout: to}, "Test Store",
				slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
			for i, st := range tc.steps {
				now = now.Add(st.advance)
				buf.Reset()
				if st.plan {
					wait, timeout := w.Plan()
					if wait != st.wantWait || (wait && timeout != to) {
						t.Fatalf("step %d: Plan = %v %v, want wait %v", i, wait, timeout, st.wantWait)
					}
					switch {
					case st.done != nil:
						w.Done(true, *st.done)
					case wait && !st.pending:
						w.Done(false, 0)
					}
				}
				if w.Behind() != st.behind {
					t.Fatalf("step %d: behind %v, want %v", i, w.Behind(), st.behind)
				}
				got := ""
				for _, lvl := range []string{"WARN", "INFO"} {
					if strings.Contains(buf.String(), "level="+lvl) {
						got += lvl
					}
				}
				if got != st.log {
					t.Fatalf("step %d: logged %q, want %q: %s", i, got, st.log, buf.String())
				}
			}
		})
	}
}

// WAIT's timeout under a caller's deadline: the configured one while the
// deadline leaves room for it, the round trip's reserve and Redis's late
// answer to a timed-out WAIT (its cron tick); less when not, never under
// 1 ms (WAIT 0 blocks for good).
func TestWithinDeadline(t *testing.T) {
	const timeout = 500 * time.Millisecond
	if got, cut := WithinDeadline(context.Background(), timeout); got != timeout || cut {
		t.Fatalf("no deadline: %v %v, want the timeout uncut", got, cut)
	}
	for _, tc := range []struct {
		left     time.Duration
		min, max time.Duration
		cut      bool
	}{
		{left: 10 * time.Second, min: timeout, max: timeout},
		{left: 700 * time.Millisecond, min: timeout, max: timeout},                                          // 700-50-100 = 550
		{left: 600 * time.Millisecond, min: 445 * time.Millisecond, max: 450 * time.Millisecond, cut: true}, // 600-50-100
		{left: 200 * time.Millisecond, min: 45 * time.Millisecond, max: 50 * time.Millisecond, cut: true},   // 200-50-100
		{left: 100 * time.Millisecond, min: time.Millisecond, max: time.Millisecond, cut: true},
		{left: -time.Second, min: time.Millisecond, max: time.Millisecond, cut: true},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), tc.left)
		got, cut := WithinDeadline(ctx, timeout)
		cancel()
		if got < tc.min || got > tc.max || cut != tc.cut || got%time.Millisecond != 0 {
			t.Errorf("%v left: %v (cut %v), want %v..%v whole ms (cut %v)", tc.left, got, cut, tc.min, tc.max, tc.cut)
		}
	}
}
