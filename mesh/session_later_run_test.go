package mesh

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

// A bound Session whose route names a later run of its node than the one
// the link holds (the node restarted, and the link still has the earlier
// run's session: endedRun's transport.ErrNotAdmitted) is treated as over
// a link that is down, which is what it is for that run: the message is
// not sent (the earlier run's session would keep a one-way one and drop it
// when the later run is admitted), the Session falls back once to the
// store (one rebind, which names the same run) and the caller gets
// ErrUnavailable — not nil for a message that went nowhere, not a route
// taken for stale (no other_run, no switch away from the run the store
// names), no second rebind or retry loop. Once the store names a run the
// link admits, the next message goes there. Checked against a link that is
// down for the run admitted (the transport's ErrNotAdmitted): the same.
func TestSessionOnARouteToALaterRunIsAsOverALinkThatIsDown(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut makes the Session's route unreachable as the case says and
		// returns the node run generation the route names then, and what
		// makes it reachable again.
		cut func(t *testing.T, f *fixture, a, b *Node, ref ActorRef) (named uint64, heal func())
	}{
		{"a later run", func(t *testing.T, f *fixture, a, b *Node, ref ActorRef) (uint64, func()) {
			gen := b.LifecycleGeneration()
			nameRun := func(g uint64) {
				if err := rewriteOwner(&cluster{f: f}, ref.ActorID, func(r *record.Authority) {
					r.Allocation.DescriptorLifecycleGeneration = record.Generation(g)
					r.AuthorityOwnerGeneration-- // kept: rewriteOwner raises it, and b's fence checks it
				}); err != nil {
					t.Fatal(err)
				}
				a.obj.cache.Drop(follow.Key{Kind: follow.KindActor, ID: ref.ActorID})
			}
			nameRun(gen + 1)
			return gen + 1, func() { nameRun(gen) }
		}},
		{"a link that is down", func(t *testing.T, _ *fixture, a, b *Node, ref ActorRef) (uint64, func()) {
			a.obj.hooks.Store(&testHooks{beforeRemoteSend: func(id string) error {
				if id != ref.ActorID {
					return nil
				}
				return fmt.Errorf("%w: %s (test: the link is down)", transport.ErrNotAdmitted, transport.RID(b.RID()))
			}})
			return b.LifecycleGeneration(), func() { a.obj.hooks.Store(&testHooks{}) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ctx, a, b, _ := clientAndRestartable(t, "0b0f")
			ref := createOnceDiscovered(t, ctx, a, "later-run")
			named, heal := tc.cut(t, f, a, b, ref)
			s, err := a.Manager().BindSession(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before, beforeB := a.ObjectStats(), b.ObjectStats()
			for i, send := range []func(context.Context) error{
				func(ctx context.Context) error { return s.Send(ctx, []byte("one-way")) },
				func(ctx context.Context) error { _, err := s.Request(ctx, []byte("request")); return err },
			} {
				err := send(ctx)
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, transport.ErrNotAdmitted) {
					t.Fatalf("message %d: %v, want ErrUnavailable wrapping transport.ErrNotAdmitted (not sent)", i, err)
				}
				if errors.Is(err, errRouteStale) || errors.Is(err, errRunEnded) {
					t.Fatalf("message %d: %v, taken for a stale route or a run that ended", i, err)
				}
				if got := a.ObjectStats().SessionRebinds - before.SessionRebinds; got != uint64(i+1) {
					t.Fatalf("after message %d: %d rebinds, want %d (one store read per message, no loop)", i, got, i+1)
				}
			}
			s.mu.Lock()
			route, pending := s.route, s.pending
			s.mu.Unlock()
			if string(route.nodeRID) != string(b.RID()) || route.nodeGen != named || pending != nil {
				t.Fatalf("route %x/%d (pending switch %v), want %x/%d as the store names it", route.nodeRID, route.nodeGen, pending != nil, b.RID(), named)
			}
			if st := b.ObjectStats(); st.Delivered != beforeB.Delivered || st.FenceRefused != beforeB.FenceRefused {
				t.Fatalf("b got messages: delivered %d, refused %d", st.Delivered-beforeB.Delivered, st.FenceRefused-beforeB.FenceRefused)
			}
			heal()
			if err := s.Send(ctx, []byte("after")); err != nil {
				t.Fatalf("send once the route is reachable: %v", err)
			}
			waitUntil(t, "the message to reach the actor on b", func() bool {
				return b.ObjectStats().Delivered > beforeB.Delivered
			})
		})
	}
}
