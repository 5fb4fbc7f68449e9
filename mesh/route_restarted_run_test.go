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
			ref, err := a.Manager().CreateActor(ctx, "gone", testMoverType)
			if err != nil {
				t.Fatal(err)
			}
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
