package mesh

import (
	"context"
	"errors"
	"testing"
)

// A message on a route to a node run that has ended, while the node's RID
// is admitted again under a new run (a rolling restart: the node stopped,
// removing the objects it could not move, and started again), is not sent:
// the new run would refuse it as addressed to another run, and a refused
// one-way message is dropped there while its Send had returned nil. The
// sender reads the store instead. Found in an operator try-out: a drain cut
// by its deadline removed 1,193 objects, and the Sessions bound to them
// went on "sending" to the restarted node for 36 s, ~100 messages a second
// dropped there (`one-way messages refused here and dropped …
// stale_route=…`).
func TestMessageOnARouteToAnEndedRunIsNotSentToTheNewRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, a *Node, ref ActorRef, s *Session) error
	}{
		{"bound Session", func(ctx context.Context, _ *Node, _ ActorRef, s *Session) error { return s.Send(ctx, []byte("one")) }},
		{"cached route", func(ctx context.Context, a *Node, ref ActorRef, _ *Session) error {
			return a.Manager().SendActor(ctx, ref, []byte("one"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx, a, b, bCfg := clientAndRestartable(t, "0b0b")
			ref := createOnceDiscovered(t, ctx, a, "gone")
			s, err := a.Manager().BindSession(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := tc.send(ctx, a, ref, s); err != nil {
				t.Fatalf("send before the restart: %v", err)
			}
			// b stops (its shutdown removes the object: no drain) and starts
			// again under the same RID; a admits the new run.
			b2 := restartNode(t, ctx, f, b, bCfg, a)
			err = tc.send(ctx, a, ref, s)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("send after the restart: %v, want ErrNotFound (the object went with the old run; the new run would drop the message)", err)
			}
			if st := b2.ObjectStats(); st.Delivered != 0 {
				t.Errorf("the new run delivered %d messages", st.Delivered)
			}
		})
	}
}

// The node run a message is meant for is checked on the send itself, by
// the transport, against the run admitted on the session the message is
// queued on — not asked of the link before the send (endedRun then, Peer),
// when the node could stop, start again and have its new run admitted
// before the send: the message went to the new run, which refused it as
// addressed to another run, and dropped a one-way message after its Send
// had returned nil. Here the restart happens right before the send
// (beforeRemoteSend, after where that check was). The sender reads the
// store instead (the object went with the old run), and the new run gets
// nothing: flushLink's request is the only message it refuses.
func TestRunRestartedJustBeforeTheSendGetsNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, a *Node, ref ActorRef) error
	}{
		{"one-way", func(ctx context.Context, a *Node, ref ActorRef) error {
			return a.Manager().SendActor(ctx, ref, []byte("one"))
		}},
		{"request", func(ctx context.Context, a *Node, ref ActorRef) error {
			_, err := a.Manager().RequestActor(ctx, ref, []byte("one"))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx, a, b, bCfg := clientAndRestartable(t, "0b0f")
			ref := createOnceDiscovered(t, ctx, a, "restarted")
			if err := tc.send(ctx, a, ref); err != nil {
				t.Fatalf("send before the restart: %v", err)
			}
			var b2 *Node
			a.obj.hooks.Store(&testHooks{beforeRemoteSend: func(id string) error {
				if id == ref.ActorID && b2 == nil {
					b2 = restartNode(t, ctx, f, b, bCfg, a)
				}
				return nil
			}})
			err := tc.send(ctx, a, ref)
			a.obj.hooks.Store(nil)
			if b2 == nil {
				t.Fatalf("the send did not reach the hook: %v", err)
			}
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("send across the restart: %v, want ErrNotFound (the object went with the old run; the new run would refuse the message)", err)
			}
			flushLink(t, ctx, a, b2)
			if st := b2.ObjectStats(); st.Delivered != 0 || st.FenceRefused != 1 {
				t.Fatalf("the new run delivered %d messages and refused %d besides the link's flush", st.Delivered, st.FenceRefused-1)
			}
		})
	}
}
