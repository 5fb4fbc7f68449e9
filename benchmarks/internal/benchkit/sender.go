package benchkit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh"
)

// Window is a span of time.
type Window struct{ Start, End time.Time }

// Overlaps reports whether [s, e] overlaps w.
func (w Window) Overlaps(s, e time.Time) bool { return s.Before(w.End) && e.After(w.Start) }

// Len is the window's length.
func (w Window) Len() time.Duration { return w.End.Sub(w.Start) }

// Sender is a goroutine on a client node requesting "ping" from Blobs one
// request at a time, round robin over its refs, keeping each request's
// span. A refused request (ErrUnavailable, ErrMoving: the object is moving
// or its route changed) is retried at once and counts as one request from
// its first try to its answer. A try left unanswered for the try timeout
// is kept apart (Lost) and the span restarts at the next try: it is a lost
// request, not a pause.
type Sender struct {
	// Spans are the answered requests, Lost the tries never answered;
	// Retries counts refused tries. Read them after Halt.
	Spans, Lost []Window
	Retries     int

	n     *mesh.Node
	late  uint64 // the node transport's late replies when it started
	quiet chan struct{}
	stop  chan struct{}
	done  chan struct{}
	err   error
}

// StartSender starts a sender on client node n; Quiet is closed once
// quiet requests were answered. A try is bounded by try; the sender fails
// when one request is refused for giveUp.
func StartSender(n *mesh.Node, refs []mesh.ActorRef, quiet int, try, giveUp time.Duration) *Sender {
	s := &Sender{n: n, stop: make(chan struct{}), done: make(chan struct{}), quiet: make(chan struct{}),
		late: n.Transport().Stats().LateReplies}
	ping := func(ref mesh.ActorRef) error {
		ctx, cancel := context.WithTimeout(context.Background(), try)
		defer cancel()
		got, err := n.Manager().RequestActor(ctx, ref, []byte("ping"))
		if err == nil && string(got) != "pong" {
			return fmt.Errorf("%s: ping answered %q", ref.ActorID, got)
		}
		return err
	}
	go func() {
		defer close(s.done)
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			ref := refs[i%len(refs)]
			start := time.Now()
			for {
				tried := time.Now()
				err := ping(ref)
				if err == nil {
					break
				}
				switch {
				case errors.Is(err, mesh.ErrUnavailable) || errors.Is(err, mesh.ErrMoving):
					s.Retries++
				case errors.Is(err, context.DeadlineExceeded):
					s.Lost = append(s.Lost, Window{tried, time.Now()})
					start = time.Now()
				default:
					s.err = fmt.Errorf("%s: %w", ref.ActorID, err)
					return
				}
				if time.Since(start) > giveUp {
					s.err = fmt.Errorf("%s: ping refused for %v: %w", ref.ActorID, giveUp, err)
					return
				}
			}
			if s.Spans = append(s.Spans, Window{start, time.Now()}); len(s.Spans) == quiet {
				close(s.quiet)
			}
		}
	}()
	return s
}

// Quiet is closed once the first quiet requests were answered.
func (s *Sender) Quiet() <-chan struct{} { return s.quiet }

// WaitQuiet waits for Quiet, and fails the benchmark if the sender failed
// first.
func (s *Sender) WaitQuiet(b *testing.B) {
	b.Helper()
	select {
	case <-s.quiet:
	case <-s.done:
		s.Halt(b) // it failed
	}
}

// Halt stops the sender and fails the benchmark if it failed.
func (s *Sender) Halt(b *testing.B) {
	b.Helper()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	if s.err != nil {
		b.Fatalf("sender: %v", s.err)
	}
}

// LateReplies counts the replies the node's transport received after their
// request had ended, since the sender started.
func (s *Sender) LateReplies() uint64 { return s.n.Transport().Stats().LateReplies - s.late }
