package mesh

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Right after a store problem of its own, a watcher does not remove at
// once the descriptor of a watched run found without its lease: after a
// store outage longer than the lease TTL every run lost its lease, and the
// watcher that got its own back first removed a live server still
// recovering its lease — every node then dropped it until it republished
// (an operator try-out: Redis paused 20 s, TTL 15 s). It looks again a
// TTL later, and a run that reacquired its lease meanwhile is left alone.
func TestWatcherAfterAStoreProblemWaitsBeforeRemovingALeaselessRun(t *testing.T) {
	f, watcher, watched, blocker, logs, key := watcherScene(t, nil)
	const removed = "a watched run lost its owner lease while its links were up"
	watcher.noteStoreTrouble() // the watcher met the same outage
	blocker.loseLeaseOf(t, watched)
	waitUntil(t, "the watcher to find the watched run without its lease", func() bool {
		watcher.discoverMu.Lock()
		_, pending := watcher.deadPending[key]
		watcher.discoverMu.Unlock()
		return pending || strings.Contains(logs.String(), removed)
	})
	if strings.Contains(logs.String(), removed) {
		t.Fatal("the watcher removed the descriptor of a run found without its lease right after a store problem of its own")
	}
	blocker.blocked.Store(nil) // the store answers it again: it reacquires and republishes
	waitUntil(t, "the watched run to serve again", func() bool {
		rr, err := f.loc.Read(context.Background(), key)
		if err != nil || !rr.Found {
			return false
		}
		d, err := record.DecodeMeshNode(rr.Value)
		_, gen := watched.Owner()
		return err == nil && d.State == record.StateServing && uint64(d.LeaseGeneration) == gen
	})
	// The second look, a TTL after the first, finds the lease back.
	waitUntil(t, "the watcher's second look", func() bool {
		watcher.discoverMu.Lock()
		defer watcher.discoverMu.Unlock()
		return len(watcher.deadPending) == 0
	})
	if strings.Contains(logs.String(), removed) {
		t.Fatal("the watcher removed the descriptor of a run that had reacquired its lease")
	}
	if rr, err := f.loc.Read(context.Background(), key); err != nil || !rr.Found {
		t.Fatalf("the watched run's descriptor is gone (%v)", err)
	}
}

// removalRefuser fails, while armed, every write that deletes the
// descriptor at key — the watcher's ReclaimKey of a leaseless run — as a
// store that does not answer would.
type removalRefuser struct {
	locstore.Store
	key   atomic.Pointer[string]
	armed atomic.Bool
}

func (s *removalRefuser) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if k := s.key.Load(); k != nil && s.armed.Load() {
		for _, m := range req.Mutations {
			if m.Kind == locstore.MutDelete && m.Key == *k {
				return locstore.WriteResult{}, &locstore.ProviderError{Provider: "test", Op: "write", Err: errors.New("no answer")}
			}
		}
	}
	return s.Store.Write(ctx, req)
}

// A watcher whose removal of a leaseless run's descriptor fails tries it
// again, as its WARN says, although its own round has dropped its link to
// the run meanwhile (the run is no longer valid in its list, so the
// planner disconnects it in the same round). Before, the retry needed the
// link up (Tracker.DeadWatched reports only runs still linked): it never
// came, and the nodes that trust the list for that run — linked to it, not
// its watchers — were never told its lease had ended (found by review).
func TestWatcherRetriesAFailedRemovalAfterDroppingTheLink(t *testing.T) {
	refuser := &removalRefuser{}
	f, watcher, watched, blocker, logs, key := watcherScene(t, func(loc locstore.Store) locstore.Store { refuser.Store = loc; return refuser })
	refuser.key.Store(&key)
	refuser.armed.Store(true)
	blocker.loseLeaseOf(t, watched) // and keeps it from reacquiring
	waitUntil(t, "the watcher's removal to fail", func() bool {
		return strings.Contains(logs.String(), "descriptor of a run without its lease not removed")
	})
	waitUntil(t, "the watcher to drop its link to the leaseless run", func() bool {
		return !watcher.linked(watched.RID(), watched.run.lifecycleGeneration)
	})
	refuser.armed.Store(false)
	waitUntil(t, "the watcher to remove the watched run's descriptor", func() bool {
		return strings.Contains(logs.String(), "a watched run lost its owner lease while its links were up")
	})
	if rr, err := f.loc.Read(context.Background(), key); err != nil || rr.Found {
		t.Fatalf("the leaseless run's descriptor is still stored (found %v, err %v)", rr.Found, err)
	}
}

// A watcher that removes the descriptor of a run found without its lease
// while its links were up keeps a removal record of it, naming itself, so
// that ctl topology shows the run as removed instead of not at all
// (docs/DISCOVERY.md §6; before, the run just vanished from the topology).
func TestWatcherKeepsARemovalRecordOfTheRunItRemoved(t *testing.T) {
	f, watcher, watched, blocker, logs, key := watcherScene(t, nil)
	stored, err := f.loc.Read(context.Background(), key)
	if err != nil || !stored.Found {
		t.Fatalf("the watched run's descriptor: %v", err)
	}
	blocker.loseLeaseOf(t, watched) // and keeps it from reacquiring
	waitUntil(t, "the watcher to remove the watched run's descriptor", func() bool {
		return strings.Contains(logs.String(), "a watched run lost its owner lease while its links were up")
	})
	rk, err := record.RemovedMeshNodeKey("objects", watched.RID())
	if err != nil {
		t.Fatal(err)
	}
	rr, err := f.loc.Read(context.Background(), rk)
	if err != nil || !rr.Found {
		t.Fatalf("no removal record of the removed run (found %v, err %v)", rr.Found, err)
	}
	r, err := record.DecodeRemovedMeshNode(rr.Value)
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := watcher.Owner()
	if string(r.RemovedByRoutingID) != string(watcher.RID()) || r.RemovedByOwnerID != owner ||
		string(r.Descriptor.RoutingID) != string(watched.RID()) || rr.ExpiresAt.IsZero() {
		t.Fatalf("removal record %+v (expires %v), want the watched run removed by the watcher %x/%s", r, rr.ExpiresAt, watcher.RID(), owner)
	}
}

// watcherScene starts node 1 (the watcher: lease TTL 6 s, through wrap's
// store when wrap is set) and node 2 (the watched run, through a store
// that can take its lease away), linked, and returns them with the
// watcher's log and the watched run's descriptor key.
func watcherScene(t *testing.T, wrap func(locstore.Store) locstore.Store) (*fixture, *Node, *Node, *renewBlocker, *syncbuf.Buffer, string) {
	t.Helper()
	f, _, blocker, fast := republishScene(t)
	logs := f.logNode(1)
	var loc locstore.Store = f.loc
	if wrap != nil {
		loc = wrap(f.loc)
	}
	watcher := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, loc, func(c *config.Config) {
		c.Lease.RenewInterval, c.Lease.RenewTimeout, c.Lease.TTL, c.Lease.FencingMargin = time.Second, 500*time.Millisecond, 6*time.Second, time.Second
	})
	watched := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
	if err := watcher.WaitPeers(ctxT(t, 60*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	key, err := record.MeshNodeKey("objects", watched.RID())
	if err != nil {
		t.Fatal(err)
	}
	return f, watcher, watched, blocker, logs, key
}
