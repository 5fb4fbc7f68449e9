package cli

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
)

// fakeSignals replaces notifySignals for one test and returns a function
// that delivers a signal as the os/signal package would (to every channel
// registered at that moment, without blocking).
func fakeSignals(t *testing.T) (send func(os.Signal)) {
	t.Helper()
	var (
		mu    sync.Mutex
		chans = map[chan<- os.Signal]bool{}
	)
	old := notifySignals
	notifySignals = func(c chan<- os.Signal) func() {
		mu.Lock()
		chans[c] = true
		mu.Unlock()
		return func() {
			mu.Lock()
			delete(chans, c)
			mu.Unlock()
		}
	}
	t.Cleanup(func() { notifySignals = old })
	return func(s os.Signal) {
		mu.Lock()
		defer mu.Unlock()
		for c := range chans {
			select {
			case c <- s:
			default:
			}
		}
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
}

// A second signal sent right after the first — before `run` has begun to
// listen for one, as two quick Ctrl-Cs do — still stops the drain. With
// signal.NotifyContext and a listener registered when the shutdown began,
// such a signal was swallowed and the drain ran to its end.
func TestSecondSignalRightAfterTheFirstIsNotMissed(t *testing.T) {
	for _, tc := range []struct {
		drain bool
		say   string
	}{
		{true, "second signal: the drain stops now"},
		{false, "second signal: the node is already shutting down"},
	} {
		send := fakeSignals(t)
		ctx, stopSignals := SignalContext(context.Background())
		send(syscall.SIGTERM)
		send(os.Interrupt) // both before anyone listens for a second one
		waitClosed(t, ctx.Done(), "the first signal cancels the context")
		if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "terminated signal received") {
			t.Errorf("cause %v, want the first signal named", cause)
		}
		var logs syncbuf.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		stop := make(chan struct{})
		done := secondSignal(ctx, log, tc.drain, stop)
		if tc.drain {
			waitClosed(t, stop, "the drain is told to stop")
		} else {
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String(), tc.say) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		done()
		stopSignals()
		if got := logs.String(); !strings.Contains(got, tc.say) || !strings.Contains(got, "signal=interrupt") {
			t.Errorf("drain %v: log %q, want %q naming the second signal (interrupt)", tc.drain, got, tc.say)
		}
		if !tc.drain {
			select {
			case <-stop:
				t.Error("a bare shutdown's stop channel was closed")
			default:
			}
		}
	}
}

// One signal is a shutdown, not a repeat; a signal that finds the context
// already ended by its parent is a repeat (the node is already stopping).
func TestSignalContextCountsRepeatsInArrivalOrder(t *testing.T) {
	repeated := func(ctx context.Context) bool {
		select {
		case <-ctx.Value(signalsKey{}).(*signalWatch).repeated:
			return true
		default:
			return false
		}
	}

	send := fakeSignals(t)
	ctx, stop := SignalContext(context.Background())
	send(syscall.SIGTERM)
	waitClosed(t, ctx.Done(), "the signal cancels the context")
	// The goroutine cancels the context while handling that signal, so by
	// now it has judged it.
	if repeated(ctx) {
		t.Error("a single signal counted as a repeat")
	}
	stop()

	send = fakeSignals(t)
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop = SignalContext(parent)
	defer stop()
	cancel()
	waitClosed(t, ctx.Done(), "the parent's cancellation reaches the context")
	send(os.Interrupt)
	waitClosed(t, ctx.Value(signalsKey{}).(*signalWatch).repeated, "a signal during a shutdown the parent began is a repeat")
}
