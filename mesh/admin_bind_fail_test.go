package mesh

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
)

// A node whose admin port is taken fails to start and leaves no descriptor
// behind. Before, it failed only after publishing its descriptor as
// serving, which stayed in ctl topology ("serving", lease expired) for an
// hour, and peers could pick it for a moment.
func TestFailedAdminBindLeavesNoDescriptor(t *testing.T) {
	f := newFixture(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := objConfig("objects")
	cfg.Node.RoutingID = "0909"
	cfg.Admin = config.AdminConfig{Listen: busy.Addr().String()}
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc})
	if err == nil {
		_ = n.Close(context.Background())
		t.Fatal("Start succeeded on a busy admin port")
	}
	page, err := f.loc.Scan(context.Background(), locstore.ScanRequest{Prefix: "mesh-node:", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Items {
		if strings.HasPrefix(it.Key, "mesh-node:") {
			t.Fatalf("failed Start left descriptor %s behind: %s", it.Key, it.Value)
		}
	}
}
