package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
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
	f, _, blocker, fast := republishScene(t)
	logs := f.logNode(1)
	ctx := ctxT(t, 60*time.Second)
	watcher := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, func(c *config.Config) {
		c.Lease.RenewInterval, c.Lease.RenewTimeout, c.Lease.TTL, c.Lease.FencingMargin = time.Second, 500*time.Millisecond, 6*time.Second, time.Second
	})
	watched := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
	if err := watcher.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	key, err := record.MeshNodeKey("objects", watched.RID())
	if err != nil {
		t.Fatal(err)
	}
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
