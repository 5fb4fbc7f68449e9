package mesh

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// A store that stays down logs one discovery WARN for a run of failed
// rounds, not one per round, and one line when it answers again. Before,
// every round logged the same WARN for as long as the store was away (720
// lines an hour at the default interval, for good after a store lost its
// data).
func TestDiscoveryStoreFailureLogsOncePerEpisode(t *testing.T) {
	f := newFixture(t)
	st := &outageStore{}
	logs := f.logNode(1)
	c := clusterWithStore1On(t, f, 2, func(inner locstore.Store) locstore.Store { st.Store = inner; return st }, nil)
	n := c.nodes[1]
	st.down.Store(true)
	for range 2 * discoveryFailEvery {
		if err := n.Discover(context.Background()); err == nil {
			t.Fatal("a discovery round succeeded against a store that is down")
		}
	}
	n.discoverMu.Lock()
	rounds := n.discoveryFails // the node's own loop may have added a round
	n.discoverMu.Unlock()
	if got, want := strings.Count(logs.String(), "discovery: store failure"), (rounds+discoveryFailEvery-1)/discoveryFailEvery; got != want {
		t.Fatalf("%d discovery failure WARN lines for %d failed rounds, want %d (one per %d)", got, rounds, want, discoveryFailEvery)
	}
	st.down.Store(false)
	eventually(t, 10*time.Second, "a discovery round to succeed", func() bool { return n.Discover(context.Background()) == nil })
	if !strings.Contains(logs.String(), "discovery: the store answers again") {
		t.Fatal("no line said the store answers again")
	}
}
