package spot

import (
	"context"
	"errors"
	"testing"
)

// Turn.Context ends when the object is closed, discarded or its runtime
// closes, with the reason as its cause, so that a handler blocked on a
// slow call made with it returns. Until 2026-12-07 it was
// context.Background(): the handler could not learn it, and the close
// waited for the handler's call to end by itself.
func TestTurnContextEndsWhenTheObjectOrTheRuntimeCloses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(rt *Runtime, o *Object)
		cause error
	}{
		{"object closed", func(_ *Runtime, o *Object) { o.Close() }, ErrClosed},
		{"object discarded", func(_ *Runtime, o *Object) { o.Discard() }, ErrClosed},
		{"runtime closed", func(rt *Runtime, _ *Object) { rt.Close() }, ErrRuntimeDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(Options{Workers: 1})
			defer rt.Close()
			release := make(chan struct{})
			defer close(release) // without the fix the turn waits for this
			started := make(chan struct{})
			ended := make(chan error, 1)
			o, err := rt.Open(Spec{Key: Key{ID: "slow"}, Kind: KindActor, Generation: 1,
				Handler: handlerFunc(func(turn *Turn, _ Envelope) error {
					ctx := turn.Context()
					close(started)
					select {
					case <-ctx.Done():
						ended <- context.Cause(ctx)
					case <-release:
						ended <- errors.New("released by the test: the context never ended")
					}
					return nil
				})})
			must(t, err)
			must(t, o.Post(send("slow call")))
			<-started
			go tc.close(rt, o)
			var cause error
			waitFor(t, "the turn's context to end", func() bool {
				select {
				case cause = <-ended:
					return true
				default:
					return false
				}
			})
			if !errors.Is(cause, tc.cause) {
				t.Fatalf("context ended with cause %v, want %v", cause, tc.cause)
			}
		})
	}
}

// Holding and capturing the object (a move), and a move that gives up at
// its deadline while a turn still runs (HoldContext), leave the turn's
// context alone: the turn runs to completion, and the object goes on.
// A context asked for after the object closed is ended already.
func TestTurnContextOutlivesHoldAndCapture(t *testing.T) {
	rt := New(Options{Workers: 1})
	defer rt.Close()
	release := make(chan struct{})
	ctxs := make(chan context.Context, 2)
	o, err := rt.Open(Spec{Key: Key{ID: "o"}, Kind: KindActor, Generation: 1,
		Handler: handlerFunc(func(turn *Turn, env Envelope) error {
			ctxs <- turn.Context()
			if string(env.Body) == "block" {
				<-release
			}
			return nil
		})})
	must(t, err)
	must(t, o.Post(send("block")))
	first := <-ctxs
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.HoldContext(gone); err == nil {
		t.Fatal("HoldContext with an ended context returned nil while a turn runs")
	}
	if first.Err() != nil {
		t.Fatalf("a move giving up ended the running turn's context: %v", context.Cause(first))
	}
	close(release)
	o.Hold()
	c, err := o.Capture()
	must(t, err)
	must(t, o.Requeue(c))
	o.Release()
	must(t, o.Post(send("next")))
	second := <-ctxs
	if first.Err() != nil || second.Err() != nil {
		t.Fatalf("hold and capture ended the turn context: %v, %v", first.Err(), second.Err())
	}
	o.Close()
	if !errors.Is(context.Cause(second), ErrClosed) {
		t.Fatalf("after Close the context's cause is %v, want ErrClosed", context.Cause(second))
	}
	late := (&Turn{obj: o}).Context()
	if !errors.Is(context.Cause(late), ErrClosed) {
		t.Fatalf("a context asked for after Close has cause %v, want ErrClosed", context.Cause(late))
	}
}
