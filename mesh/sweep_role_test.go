package mesh

import (
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
)

// Only server nodes run the background reclaim sweep. Its shards are
// shared out among the serving server nodes (sweepPosition); a client,
// not among them, got no share of its own and so scanned every row of
// every shard each interval — and reclaimed dead owners' objects itself
// (an operator try-out: "reclaim sweep … scanned=120 dead_owner=65
// reclaimed=65" on a client node; every client added a full scan of the
// authority rows per interval).
func TestOnlyServersSweep(t *testing.T) {
	f := newFixture(t)
	clientLog := f.logNode(0)
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		fast := fastConfig(cfg.Node.MeshName)
		cfg.Lease = fast.Lease
		cfg.Recovery.ReclaimGrace = 100 * time.Millisecond
		cfg.Recovery.ReclaimSweepInterval = 100 * time.Millisecond
	})
	doomed := createOn(t, c, "swept", 2, 3)
	c.nodes[2].crash()
	eventually(t, 20*time.Second, "the server's sweep to reclaim the dead server's records", func() bool {
		for _, ref := range doomed {
			if rowOf(t, c, record.ObjectActor, ref.ActorID).Found {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // a few more sweep intervals
	if strings.Contains(clientLog.String(), "reclaim") {
		t.Fatalf("the client node swept:\n%s", clientLog.String())
	}
}
