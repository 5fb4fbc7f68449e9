package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/router/transport"
)

// A peer stopped in order and started again (same RID and endpoint) within
// one discovery round of this node: the link kept redialling the endpoint
// and admitted the new run by itself before the round. The round sees the
// new run's descriptor where it had the old one ("restarted") and must not
// tear down the link it has already admitted to that very run: doing so
// logged a 'peer down … disconnected' for every peer of a node just
// restarted in a rolling restart (operator try-out), dropped the records
// queued on the link and failed its pending requests.
func TestDiscoveryKeepsALinkThatAlreadyAdmittedTheRestartedRun(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "tcp://" + l.Addr().String()
	l.Close()
	bCfg := fastConfig("m")
	bCfg.Node.RoutingID = "0b0b"
	bCfg.Node.Endpoint = endpoint

	// a runs its discovery rounds only when the test calls Discover.
	logs := new(syncbuf.Buffer)
	a, err := Start(ctx, Options{Config: fastConfig("m"), Factories: f.reg, Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	b := f.start(bCfg)
	if err := a.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	rid := transport.RID(b.RID())
	admittedRun := func(gen uint64) (transport.PeerInfo, bool) {
		p, ok := a.tr.Peer(rid)
		return p, ok && p.LifecycleGeneration == gen
	}
	eventually(t, 10*time.Second, "a to admit b", func() bool { _, ok := admittedRun(b.LifecycleGeneration()); return ok })

	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b2 := f.start(bCfg)
	eventually(t, 10*time.Second, "a's link to admit b's new run by itself", func() bool {
		_, ok := admittedRun(b2.LifecycleGeneration())
		return ok
	})
	before, _ := a.tr.Peer(rid)
	if err := a.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("peer=0b0b peer_gen=%d", b2.LifecycleGeneration())
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "transport: peer down") && strings.Contains(line, down) {
			t.Fatalf("the discovery round tore down the link that had admitted b's new run: %s", line)
		}
	}
	after, ok := admittedRun(b2.LifecycleGeneration())
	if !ok || after.Remote != before.Remote {
		t.Fatalf("the discovery round tore down the link that had admitted b's new run: before %s (gen %d), after %s (admitted at gen %d: %v)",
			before.Remote, before.LifecycleGeneration, after.Remote, after.LifecycleGeneration, ok)
	}
}
