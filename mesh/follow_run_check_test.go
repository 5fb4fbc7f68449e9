package mesh

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

// runCheckStore is a Location Store whose discovery can be frozen (the
// change counter's read fails: the node keeps the list it holds) and whose
// read of one node's descriptor can be held until the test lets it go —
// whatever the caller's deadline, as a store that does not answer.
type runCheckStore struct {
	locstore.Store
	counterKey string
	mu         sync.Mutex
	frozen     bool
	froze      chan struct{} // closed by the first counter read refused
	descKey    string        // "": no read is held
	held       chan struct{} // closed by the first read of descKey
	release    chan struct{} // closed by the test: held reads go on
	heldReads  int
	failHeld   bool // a held read fails once let go (the store down)
}

func newRunCheckStore(t *testing.T, s locstore.Store) *runCheckStore {
	t.Helper()
	name, err := record.DescriptorCounter(record.KindMeshNode)
	if err != nil {
		t.Fatal(err)
	}
	key, err := record.CounterKey(name)
	if err != nil {
		t.Fatal(err)
	}
	return &runCheckStore{Store: s, counterKey: key, froze: make(chan struct{}), held: make(chan struct{}), release: make(chan struct{})}
}

// freeze fails every discovery round from now on and waits for the first
// to fail: no round under way can change the list the node holds after.
func (s *runCheckStore) freeze(t *testing.T, ctx context.Context) {
	t.Helper()
	s.mu.Lock()
	s.frozen = true
	s.mu.Unlock()
	t.Cleanup(func() { // before the nodes close: their shutdown publishes
		s.mu.Lock()
		s.frozen = false
		s.mu.Unlock()
	})
	waitClosedCtx(t, ctx, s.froze, "a discovery round to fail")
}

// hold makes the reads of node rid's descriptor wait for the test.
func (s *runCheckStore) hold(t *testing.T, rid []byte) {
	t.Helper()
	key, err := record.MeshNodeKey("m", rid)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.descKey = key
	s.mu.Unlock()
	t.Cleanup(s.letGo) // before the nodes close (cleanups run last first)
}

func (s *runCheckStore) letGo() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *runCheckStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	s.mu.Lock()
	switch {
	case key == s.counterKey && s.frozen:
		select {
		case <-s.froze:
		default:
			close(s.froze)
		}
		s.mu.Unlock()
		return locstore.ReadResult{}, &locstore.ProviderError{Provider: "test", Op: "read", Err: errors.New("discovery frozen (test)")}
	case key == s.descKey:
		s.heldReads++
		if s.heldReads == 1 {
			close(s.held)
		}
		fail := s.failHeld
		s.mu.Unlock()
		<-s.release
		if fail {
			return locstore.ReadResult{}, &locstore.ProviderError{Provider: "test", Op: "read", Err: errors.New("connection refused (test)")}
		}
		return s.Store.Read(context.WithoutCancel(ctx), key)
	}
	s.mu.Unlock()
	return s.Store.Read(ctx, key)
}

// closeUnlinked closes n and waits until on's link to it is down.
func closeUnlinked(t *testing.T, ctx context.Context, n, on *Node) {
	t.Helper()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the link to the stopped run to go down", func() bool {
		_, ok := on.tr.Peer(transport.RID(n.RID()))
		return !ok
	})
}

func waitClosedCtx(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A pass-on that finds the new owner's link down while the discovery list
// still shows that run live asks the store whether the run stopped
// (linkRunStopped). That read waits off the connection's reader: the
// sender's messages to other objects are delivered meanwhile, and its
// later messages to the same object wait behind the one being checked
// (the order the sender sent them in), then are decided on its answer —
// the run stopped: admitted here (readmit); the store does not answer:
// refused as before, each counted once. Before, the read ran on the
// reader, up to followSendWait each: every record on the link waited for
// it, and with the store down each such message stalled the link again.
func TestRunStoppedCheckWaitsOffTheReader(t *testing.T) {
	for _, tc := range []struct {
		name      string
		storeDown bool
	}{
		{"the run stopped", false},
		{"the store does not answer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var store *runCheckStore
			ctx, _, a, prev, n, _, ref := movedToARestartableOn(t, true, func(f *fixture) locstore.Store {
				store = newRunCheckStore(t, f.loc)
				store.failHeld = tc.storeDown
				return store
			})
			// Created on prev, the one server serving once a's list shows n
			// drained; a's route cache holds it there.
			eventually(t, 10*time.Second, "a's list to show n draining", func() bool {
				return a.isLeaving(n.RID(), n.LifecycleGeneration())
			})
			other := createOnceDiscovered(t, ctx, a, "other")
			if string(other.NodeRID) != string(prev.RID()) {
				t.Fatalf("the other object was created on %x, want prev", other.NodeRID)
			}
			if _, err := a.Manager().RequestActor(ctx, other, []byte("hi")); err != nil {
				t.Fatal(err)
			}
			// prev's list keeps n's run live; its descriptor's read waits.
			store.freeze(t, ctx)
			store.hold(t, n.RID())
			closeUnlinked(t, ctx, n, prev)
			before := prev.ObjectStats()
			// On a's cached route (prev's first stay): prev's follow record
			// names n's run, whose link is down.
			if err := a.Manager().SendActor(ctx, ref, []byte("two")); err != nil {
				t.Fatalf("send: %v", err)
			}
			waitClosedCtx(t, ctx, store.held, "prev to read the stopped run's descriptor")
			// Behind "two" on the same link, to another object: delivered
			// while the read waits.
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if body, err := a.Manager().RequestActor(rctx, other, []byte("hi")); err != nil || string(body) != "echo:hi" {
				t.Fatalf("request to another object behind the checked message: %q, %v (it waited for the store read on the connection's reader)", body, err)
			}
			// Behind "two" to the same object: it waits behind it.
			count := make(chan string, 1)
			go func() {
				body, err := a.Manager().RequestActor(ctx, ref, []byte("count"))
				if err != nil {
					body = []byte(err.Error())
				}
				count <- string(body)
			}()
			eventually(t, 10*time.Second, "the request to queue behind the checked message", func() bool {
				prev.obj.mu.Lock()
				defer prev.obj.mu.Unlock()
				return prev.obj.cutoverWaiting == 2
			})
			store.letGo()
			var got string
			select {
			case got = <-count:
			case <-ctx.Done():
				t.Fatal("no answer to the request behind the checked message")
			}
			st := prev.ObjectStats()
			if tc.storeDown {
				// Refused as a link down (Unavailable), each once.
				if refused := st.FollowRefused - before.FollowRefused; refused != 2 {
					t.Errorf("prev counted %d follow refusals, want 2 (\"two\" and the request, once each)", refused)
				}
				if st.Delivered != before.Delivered+1 {
					t.Errorf("prev delivered %d messages, want 1 (the request to the other object)", st.Delivered-before.Delivered)
				}
				return
			}
			// The run stopped (its descriptor is gone): "two" is admitted
			// here (readmit), then the request.
			if got != "count:2" {
				t.Fatalf("count = %q, want count:2 (\"one\" and \"two\" before it)", got)
			}
		})
	}
}
