package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/router/transport/curve"
)

// A mesh whose nodes run CURVE (docs/OPERATIONS.md "Link security"):
// nodes derive their RIDs from their keys, admit each other, and a
// creation, messages and a relocation work across encrypted links.
func TestMeshOverCurve(t *testing.T) {
	const nodes = 3
	pairs := make([]curve.KeyPair, nodes)
	allowed := make([]string, nodes)
	for i := range pairs {
		kp, err := curve.GenerateKeyPair(nil)
		if err != nil {
			t.Fatal(err)
		}
		pairs[i], allowed[i] = kp, kp.Public.String()
	}
	c := newCluster(t, nodes, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Node.RoutingID = "" // derived from the key
		cfg.Transport.Curve = config.CurveConfig{Enabled: true, SecretKey: pairs[i].Secret.String(), AllowedKeys: allowed}
	})
	for i, n := range c.nodes {
		if got, want := n.RID(), transport.CurveRID(pairs[i].Public); string(got) != string(want) {
			t.Fatalf("node %d RID %x, want %x (derived from its key)", i, got, want)
		}
	}
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "sealed", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:3" {
		t.Fatalf("over CURVE: %q, %v", got, err)
	}
	// A move: Restore stream, cutover and the owner change over CURVE.
	src := ownerIndex(t, c, record.ObjectActor, "sealed")
	res, err := c.m(src).RelocateActor(ctx, ref)
	if err != nil || res.Outcome != Moved {
		t.Fatalf("relocation over CURVE: %+v, %v", res, err)
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:3" {
		t.Fatalf("after the move: %q, %v", got, err)
	}
}
