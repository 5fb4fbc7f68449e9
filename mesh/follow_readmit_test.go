package mesh

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A message for an earlier stay of an object hosted here again, whose
// follow chain is cut at a run that ended, is admitted here (readmit) and
// brings its sender a command 50, as a message passed on along the chain
// back here would have: the sender drops the route it used, reads the
// store, and its next message goes straight to the current stay — no
// follow lookup, no refusal, no readmit, and no route switch barrier (the
// 50 names the message it is about). Before, readmit sent no 50, and every
// message of the sender took that way until its cache entry aged out.
func TestReadmittedMessageTellsItsSenderItsRoute(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(ctx context.Context, a *Node, ref ActorRef) error
	}{
		{"one-way", func(ctx context.Context, a *Node, ref ActorRef) error {
			return a.Manager().SendActor(ctx, ref, []byte("two"))
		}},
		{"request", func(ctx context.Context, a *Node, ref ActorRef) error {
			_, err := a.Manager().RequestActor(ctx, ref, []byte("two"))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, a, prev, _, ref := movedToARunThatEnded(t, true)
			before, beforeA := prev.ObjectStats(), a.ObjectStats()
			// On a's cached route (the earlier stay on prev).
			if err := tc.send(ctx, a, ref); err != nil {
				t.Fatalf("send on the earlier stay's route: %v", err)
			}
			eventually(t, 10*time.Second, "prev to admit the message", func() bool {
				return prev.ObjectStats().Delivered > before.Delivered
			})
			if st := prev.ObjectStats(); st.FollowRefused != before.FollowRefused+1 {
				t.Fatalf("prev refused %d follows, want 1 (the chain cut at the ended run, then readmitted)", st.FollowRefused-before.FollowRefused)
			}
			eventually(t, 5*time.Second, "a command 50 to drop a's route", func() bool {
				return a.ObjectStats().FollowRoutesDropped > beforeA.FollowRoutesDropped
			})
			mid := prev.ObjectStats()
			if err := a.Manager().SendActor(ctx, ref, []byte("three")); err != nil {
				t.Fatalf("next send: %v", err)
			}
			eventually(t, 10*time.Second, "prev to admit the next message", func() bool {
				return prev.ObjectStats().Delivered > mid.Delivered
			})
			if st := prev.ObjectStats(); st.FollowRefused != mid.FollowRefused {
				t.Errorf("the next message took the cut chain again (%d follow refusals): not straight to the current stay", st.FollowRefused-mid.FollowRefused)
			}
			if st := a.ObjectStats(); st.RouteBarriers != beforeA.RouteBarriers {
				t.Errorf("a sent %d route switch barriers, want none (the 50 named the message)", st.RouteBarriers-beforeA.RouteBarriers)
			}
		})
	}
}

// A message a previous owner passes on along a move to a node run that has
// stopped, read after that run's connection ended and before its node's
// next run is admitted (a rolling restart: the node is down, or starting)
// — so no run of the node is admitted, endedRun lets it through and the
// send fails on the link that is down — is treated as for a run that
// ended once the run's descriptor shows it stopped (or gone): with the
// object hosted here again it is admitted here (readmit); with the object
// gone, a request is refused as a stale route, and its origin reads the
// store. Before, the link down was the answer: a one-way message was
// dropped although its object was right here, and a request was answered
// Unavailable.
func TestMessageFollowToAStoppedRunWhileItsLinkIsDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		back bool // the stopped run's drain moved the object back to prev
	}{
		{"object moved back here", true},
		{"object removed with the run", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _, a, prev, n, _, ref := movedToARestartable(t, tc.back)
			closeUnlinked(t, ctx, n, prev)
			before := prev.ObjectStats()
			if !tc.back {
				// On a's cached route (prev's stay): prev cannot pass it on,
				// and refuses it as addressed to a run that ended.
				if _, err := a.Manager().RequestActor(ctx, ref, []byte("two")); !errors.Is(err, ErrNotFound) {
					t.Fatalf("request: %v, want ErrNotFound (the object went with the stopped run)", err)
				}
				return
			}
			if err := a.Manager().SendActor(ctx, ref, []byte("two")); err != nil {
				t.Fatalf("send: %v", err)
			}
			eventually(t, 10*time.Second, "prev to admit or refuse the message", func() bool {
				st := prev.ObjectStats()
				return st.Delivered > before.Delivered || st.FollowRefused > before.FollowRefused
			})
			eventually(t, 5*time.Second, "the object hosted on prev to get the message", func() bool {
				return prev.ObjectStats().Delivered > before.Delivered
			})
		})
	}
}
