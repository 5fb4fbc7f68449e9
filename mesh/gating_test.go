package mesh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// renewBlocker is a Location Store that stops answering one node's
// owner-lease renewals: a Write that puts the blocked owner-lease key waits
// until its context ends (the renew timeout), as an unreachable store would.
// Every other call passes through, so whatever the node refuses after its
// deadline it refuses on its own admission gate, not because the store
// refused it; writes counts the writes that did reach the store.
type renewBlocker struct {
	locstore.Store
	blocked atomic.Pointer[string]
	writes  atomic.Int64
	stop    chan struct{} // closed at cleanup: blocked writes give up
}

func (s *renewBlocker) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if k := s.blocked.Load(); k != nil {
		for _, m := range req.Mutations {
			if m.Key == *k {
				select {
				case <-ctx.Done():
					return locstore.WriteResult{}, ctx.Err()
				case <-s.stop:
					return locstore.WriteResult{}, errors.New("renewBlocker: test over")
				}
			}
		}
	}
	s.writes.Add(1)
	return s.Store.Write(ctx, req)
}

// loseLeaseOf blocks n's owner-lease writes until n has lost its lease and
// returns the lease key; blocked.Store(nil) lets them through again.
func (s *renewBlocker) loseLeaseOf(t *testing.T, n *Node) string {
	t.Helper()
	owner, _ := n.Owner()
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		t.Fatal(err)
	}
	s.blocked.Store(&key)
	eventually(t, 20*time.Second, "the lease to be lost", func() bool { return n.LeaseLost() != nil })
	return key
}

// lapsed reports a refusal by a gate closed because the owner lease lapsed:
// expired locally, or — once the store's TTL has run out too and the
// manager re-read the missing record — lost.
func lapsed(err error) bool {
	return errors.Is(err, lease.ErrLeaseExpired) || errors.Is(err, lease.ErrLeaseLost)
}

// echoOf is the test object behind a hosted object's gate.
func echoOf(t *testing.T, h *hosted) *echo {
	t.Helper()
	g, ok := h.obj.Handler().(gated)
	if !ok {
		t.Fatalf("hosted handler is %T, want the gated wrapper", h.obj.Handler())
	}
	e, ok := g.h.(*echo)
	if !ok {
		t.Fatalf("object handler is %T, want *echo", g.h)
	}
	return e
}

// turnsRun is how many one-way and timer turns the echo handler ran.
func (e *echo) turnsRun() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sends
}

// releaseWhileShut releases a held object while the gate is shut: the
// runtime starts no turn (spot.Options.Admit) — the object holds itself
// again with every envelope still queued (they used to be taken and
// refused, so a timer or message was lost). It is held by Hold afterwards,
// as it was.
func releaseWhileShut(t *testing.T, obj *spot.Object, queued int) {
	t.Helper()
	obj.Release()
	eventually(t, 10*time.Second, "the object to hold itself", obj.GateHeld)
	if got := obj.Queued(); got != queued {
		t.Fatalf("%d envelopes queued after a release while the gate was shut, want all %d kept", got, queued)
	}
	obj.Hold()
}

// §5, §12 "Once the last time it can accept new work passes, descriptor
// publishing, starting object messages/timers, and relocation changes are
// all blocked together": a node's store stops answering its owner-lease
// renewals; once its local admission deadline passes, each blocked target is
// observed refusing — descriptor publishing (no new revision), a message to
// a hosted object and a timer callback (handler not run), a capacity
// reservation (CreateActor writes nothing), and recording a factory's result
// (a creation whose factory finishes after the lapse is not Ready).
// Relocation (source/target state changes) does not exist yet; when it does,
// its changes belong in this test too.
func TestLapsedLeaseBlocksAllNewWork(t *testing.T) {
	onEachStore(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		store := &renewBlocker{Store: loc, stop: make(chan struct{})}
		c := newClusterOn(t, f, store, 1, nil)
		// Registered after the node's Close, so it runs first: the
		// release at Close reaches the store again.
		t.Cleanup(func() { store.blocked.Store(nil); close(store.stop) })
		n, m := c.nodes[0], c.m(0)
		ctx := ctxT(t, 60*time.Second)

		// Before the lapse: an object whose turns run ...
		ref, err := m.CreateActor(ctx, "hosted", testActorType)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SendActor(ctx, ref, []byte("before the lapse")); err != nil {
			t.Fatal(err)
		}
		if got, err := m.RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:1" {
			t.Fatalf("count before the lapse = %q, %v; want count:1", got, err)
		}
		hs, ok := n.obj.hostedFor(actorKey("hosted"))
		if !ok {
			t.Fatal("the actor is not hosted on the node")
		}
		e := echoOf(t, hs)
		// ... a creation whose factory is running ...
		created := make(chan error, 1)
		go func() {
			_, err := m.CreateActor(ctx, "late-factory", testActorType, WithBody([]byte("wait:late")))
			created <- err
		}()
		eventually(t, 10*time.Second, "the late factory to start", func() bool { return c.probe.runCount("late-factory") == 1 })
		// ... and a message accepted into the (held) object's queue.
		hs.obj.Hold()
		if err := m.SendActor(ctx, ref, []byte("queued before the lapse")); err != nil {
			t.Fatal(err)
		}
		if q := hs.obj.Queued(); q != 1 {
			t.Fatalf("%d envelopes queued, want the one message", q)
		}

		// The store stops answering the renewals; the gate closes at the
		// local admission deadline.
		owner, _ := n.Owner()
		leaseKey, err := record.OwnerLeaseKey(owner)
		if err != nil {
			t.Fatal(err)
		}
		closing := n.Gate().Closing()
		store.blocked.Store(&leaseKey)
		select {
		case <-closing:
		case <-ctx.Done():
			t.Fatal("the admission gate did not close after the renewals stopped")
		}
		if err := n.Gate().Admit(); !lapsed(err) {
			t.Fatalf("gate after the deadline: %v, want a lapsed lease", err)
		}
		writes := store.writes.Load()

		t.Run("descriptor publishing", func(t *testing.T) {
			prefix := record.KindPrefix(record.KindMeshNode)
			before, rev := rawRows(t, n.loc, prefix), n.pub.Revision()
			if err := n.publish(ctx, record.StateDraining); !lapsed(err) {
				t.Fatalf("publish after the lapse = %v, want a lapsed-lease refusal", err)
			}
			sameRows(t, "descriptors", before, rawRows(t, n.loc, prefix))
			if n.pub.Revision() != rev || n.State() != record.StateServing {
				t.Fatalf("revision %d -> %d, state %s after a refused publish", rev, n.pub.Revision(), n.State())
			}
		})

		t.Run("messages and timers", func(t *testing.T) {
			// A message sent now is refused at the fence ...
			if err := m.SendActor(ctx, ref, []byte("after the lapse")); !errors.Is(err, ErrUnavailable) || !lapsed(err) {
				t.Fatalf("send after the lapse = %v, want ErrUnavailable for the lapsed lease", err)
			}
			if _, err := m.RequestActor(ctx, ref, []byte("count")); !errors.Is(err, ErrUnavailable) || !lapsed(err) {
				t.Fatalf("request after the lapse = %v, want ErrUnavailable for the lapsed lease", err)
			}
			// ... and neither the message queued before the lapse nor a
			// timer firing after it starts its turn.
			if err := hs.obj.SetTimer("after the lapse", 0, 0); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the timer to fire into the held queue", func() bool { return hs.obj.Queued() == 2 })
			releaseWhileShut(t, hs.obj, 2)
			if got := e.turnsRun(); got != 1 {
				t.Fatalf("the handler ran %d one-way/timer turns, want only the one before the lapse", got)
			}
		})

		t.Run("capacity reservation", func(t *testing.T) {
			_, err := m.CreateActor(ctx, "after-lapse", testActorType)
			if !errors.Is(err, ErrUnavailable) || !lapsed(err) {
				t.Fatalf("CreateActor after the lapse = %v, want ErrUnavailable for the lapsed lease", err)
			}
			if row := rowOf(t, c, record.ObjectActor, "after-lapse"); row.Found {
				t.Fatalf("a record was written after the lapse: %+v", row.Record)
			}
			if runs := c.probe.runCount("after-lapse"); runs != 0 {
				t.Fatalf("the factory ran %d times after the lapse", runs)
			}
		})

		// Nothing above reached the store (the blocked renewals aside).
		if w := store.writes.Load(); w != writes {
			t.Fatalf("%d store writes after the lapse", w-writes)
		}

		t.Run("factory result", func(t *testing.T) {
			close(c.probe.gate("late"))
			select {
			case err := <-created:
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("creation finishing after the lapse = %v, want ErrUnavailable", err)
				}
			case <-ctx.Done():
				t.Fatal("the creation did not end")
			}
			if row := rowOf(t, c, record.ObjectActor, "late-factory"); row.Found && row.Record.Allocation.State == record.AllocationActive {
				t.Fatal("Ready was recorded after the lapse")
			}
			if _, ok := n.obj.hostedFor(actorKey("late-factory")); ok {
				t.Fatal("the object created after the lapse is hosted")
			}
		})
	})
}
