package mesh

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// A server that lost its owner lease while its links stayed up — its store
// connection cut, or paused (SIGSTOP) past lease.ttl — stays in the
// topology: its watcher announces the lease's end (every node stops using
// it) but keeps its descriptor, so `ctl topology` lists it with its lease
// `expired`, as a crashed run's, instead of not at all; no node counts it
// valid for placement or routing meanwhile; and once it has a lease again
// it republishes and serves. Until 2026-12-06 the watcher deleted the
// descriptor, and an operator looking for the paused node found nothing.
func TestALeaselessWatchedRunStaysListedAsExpired(t *testing.T) {
	w := startWatchedScene(t, nil)
	f, watcher, watched, blocker, logs, key := w.f, w.watcher, w.watched, w.blocker, w.logs, w.key
	_, oldGen := watched.Owner()
	blocker.loseLeaseOf(t, watched) // and keeps it from reacquiring
	waitUntil(t, "the watcher to announce the watched run's lease end", func() bool {
		return strings.Contains(logs.String(), "a watched run lost its owner lease while its links were up")
	})
	// The descriptor is kept, as the run published it.
	rr, err := f.loc.Read(context.Background(), key)
	if err != nil || !rr.Found {
		t.Fatalf("the watched run's descriptor is gone (err %v): ctl topology does not list it", err)
	}
	if d, err := record.DecodeMeshNode(rr.Value); err != nil || uint64(d.LeaseGeneration) != oldGen {
		t.Fatalf("stored descriptor %+v (%v), want the run's own under generation %d", d, err, oldGen)
	}
	// ctl topology's list shows it, lease expired.
	snap, err := directory.Lister{Store: f.loc, PageSize: 1000, Logger: slog.New(slog.DiscardHandler)}.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	rid := hex.EncodeToString(watched.RID())
	var row *directory.Row
	for _, r := range directory.Rows(snap) {
		if r.RID == rid {
			row = &r
		}
	}
	if row == nil || row.Lease != "expired" {
		t.Fatalf("ctl topology row of the leaseless run: %+v, want it listed with lease expired", row)
	}
	// The watcher's own list keeps it, not valid: placement and routing
	// do not use it.
	waitUntil(t, "the watcher's list to show the run not valid", func() bool {
		e, ok := entryOf(watcher, watched.RID())
		return ok && !e.LeaseValid
	})
	// Runs again: republishes under its new generation and serves.
	blocker.blocked.Store(nil)
	waitUntil(t, "the watched run to serve again, valid in the watcher's list", func() bool {
		e, ok := entryOf(watcher, watched.RID())
		_, gen := watched.Owner()
		return ok && e.LeaseValid && e.Descriptor.State == record.StateServing && uint64(e.Descriptor.LeaseGeneration) == gen && gen != oldGen
	})
}

// entryOf is the entry of rid in n's last discovery list.
func entryOf(n *Node, rid []byte) (directory.Entry, bool) {
	snap, ok := n.LastSnapshot()
	if !ok {
		return directory.Entry{}, false
	}
	for _, e := range snap.Entries {
		if bytes.Equal(e.Descriptor.RoutingID, rid) {
			return e, true
		}
	}
	return directory.Entry{}, false
}

// watchedScene is a watcher (node 1, its log kept) and the server it
// watches (node 2, whose owner-lease writes blocker can hold back), linked
// to each other; key is the watched run's descriptor key.
type watchedScene struct {
	f                *fixture
	watcher, watched *Node
	blocker          *renewBlocker
	logs             *syncbuf.Buffer
	key              string
}

// startWatchedScene starts a watchedScene, both nodes with fastConfig's
// lease timing and rounds 100 ms apart; watcherEdit, when set, adjusts the
// watcher's configuration after that.
func startWatchedScene(t *testing.T, watcherEdit func(*config.Config)) watchedScene {
	t.Helper()
	f, _, blocker, fast := republishScene(t)
	logs := f.logNode(1)
	edit := fast
	if watcherEdit != nil {
		edit = func(c *config.Config) { fast(c); watcherEdit(c) }
	}
	watcher := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, edit)
	watched := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
	if err := watcher.WaitPeers(ctxT(t, 60*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	key, err := record.MeshNodeKey("objects", watched.RID())
	if err != nil {
		t.Fatal(err)
	}
	return watchedScene{f: f, watcher: watcher, watched: watched, blocker: blocker, logs: logs, key: key}
}
