package mesh

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// failServingStore fails (unapplied) every descriptor write that says
// serving: a store that stops taking writes between a start's two publishes.
type failServingStore struct{ locstore.Store }

func (s failServingStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	for _, m := range req.Mutations {
		if bytes.HasPrefix([]byte(m.Key), []byte(record.KindPrefix(record.KindMeshNode))) &&
			bytes.Contains(m.Value, []byte(`"serving"`)) {
			return locstore.WriteResult{}, errLostResult
		}
	}
	return s.Store.Write(ctx, req)
}

// A start that fails after its preparing publish (the serving publish
// failed) removes its descriptor as an orderly stop does: before, the
// `preparing` row of a run whose lease was released stayed in ctl topology
// for the reclaim age (an hour), as the admin port's failure did before
// TestFailedAdminBindLeavesNoDescriptor.
func TestStartFailingAfterItsFirstPublishLeavesNoDescriptor(t *testing.T) {
	f := newFixture(t)
	cfg := objConfig("objects")
	cfg.Node.RoutingID = "0a0b"
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: failServingStore{f.loc}, Relocation: f.reloc})
	if err == nil {
		_ = n.Close(context.Background())
		t.Fatal("Start succeeded although its serving publish failed")
	}
	if !errors.Is(err, ErrStartup) {
		t.Fatalf("Start: %v, want ErrStartup", err)
	}
	page, err := f.loc.Scan(context.Background(), locstore.ScanRequest{Prefix: record.KindPrefix(record.KindMeshNode), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page.Items {
		d, _ := record.DecodeMeshNode(it.Value)
		t.Fatalf("failed Start left its descriptor behind (state %q)", d.State)
	}
}
