package redisconn

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLeavable: a call its caller cancels is left at once and goes on to
// its end on its own goroutine; a caller already gone runs nothing; a
// context that cannot end runs the call on the caller's goroutine; a call
// that ended is answered.
func TestLeavable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started, release, ended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { <-started; cancel() }()
	v, left, err := Leavable(ctx, func() (int, error) {
		close(started)
		<-release // Redis does not answer
		defer close(ended)
		return 1, nil
	})
	if !left || err != nil || v != 0 {
		t.Fatalf("cancelled call: %v, left %v, %v; want left", v, left, err)
	}
	close(release)
	<-ended // the left call ends on its own

	ran := false
	if _, left, _ := Leavable(ctx, func() (int, error) { ran = true; return 1, nil }); !left || ran {
		t.Fatalf("caller already gone: left %v, ran %v; want left without running", left, ran)
	}

	boom := errors.New("boom")
	if v, left, err := Leavable(context.Background(), func() (int, error) { return 2, boom }); left || v != 2 || err != boom {
		t.Fatalf("background: %v, left %v, %v", v, left, err)
	}
	live, stop := context.WithCancel(context.Background())
	defer stop()
	if v, left, err := Leavable(live, func() (int, error) { return 3, nil }); left || v != 3 || err != nil {
		t.Fatalf("live caller: %v, left %v, %v", v, left, err)
	}
}

// TestMayLeave: only a context that can end and has no deadline gets a
// goroutine of its own (leave.go: one with a deadline is bounded by it).
func TestMayLeave(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	live, stop := context.WithCancel(context.Background())
	defer stop()
	timed, stopTimed := context.WithTimeout(live, time.Hour)
	defer stopTimed()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"never ends", context.Background(), false},
		{"cancellable, no deadline", live, true},
		{"with a deadline", timed, false},
		{"already ended", cancelled, false},
	} {
		if got := MayLeave(tc.ctx); got != tc.want {
			t.Errorf("%s: MayLeave = %v, want %v", tc.name, got, tc.want)
		}
	}
}
