package mesh

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/lease"
)

// A lease event that comes while Start is still building the node (the
// renew loop runs from Acquire on) is held back and handled once the node
// is built — not on a node without objects or its run's logger. A renew
// under load came in that window in a CI run: the race detector saw the
// handler read the objects and the logger as Start wrote them.
func TestLeaseEventDuringStartIsHandledOnTheBuiltNode(t *testing.T) {
	f := newFixture(t)
	logs := new(syncbuf.Buffer)
	cfg := fastConfig("m")
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond,
		Logger:            slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		afterLease: func(n *Node) {
			if n.obj != nil {
				t.Error("objects built before the hook: the test no longer checks the window it is for")
			}
			n.leaseEvent(lease.Event{Kind: lease.EventExpired})
		}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	var found bool
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "admission deadline passed") {
			continue
		}
		found = true
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["owner"] != n.run.ownerID {
			t.Errorf("the event was handled before the node was built (its line lacks the run's owner %s): %s", n.run.ownerID, line)
		}
	}
	if !found {
		t.Fatalf("the event held back during Start was never handled; log:\n%s", logs.String())
	}
}
