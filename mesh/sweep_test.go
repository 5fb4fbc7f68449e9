package mesh

import (
	"context"
	"fmt"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// seed reserves (and, when commit, commits) an actor owned by node n.
func seed(t *testing.T, exec *authority.Executor, n *Node, id string, commit bool) {
	t.Helper()
	ctx := context.Background()
	obj := authority.Object{ID: id, Kind: record.ObjectActor, StableType: "demo.counter"}
	owner := authority.Owner{ID: n.run.ownerID, LeaseGeneration: n.run.leaseGeneration}
	res, err := exec.Reserve(ctx, authority.ReserveRequest{
		Object: obj,
		Target: authority.Target{Node: authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid,
			LifecycleGeneration: n.run.lifecycleGeneration}, Owner: owner},
		Creation: record.PendingCreation{ReservationID: "res-" + id, RequestContentReference: "inline"},
	})
	if err != nil {
		t.Fatalf("reserve %s: %v", id, err)
	}
	if commit {
		if _, err := exec.Commit(ctx, authority.CommitRequest{Object: obj, ReservationID: "res-" + id, Owner: owner, IfVersion: res.Version}); err != nil {
			t.Fatalf("commit %s: %v", id, err)
		}
	}
}

func authorityRows(t *testing.T, s locstore.Store) map[string]record.Authority {
	t.Helper()
	out := map[string]record.Authority{}
	page, err := s.Scan(context.Background(), locstore.ScanRequest{Prefix: record.KindPrefix(record.KindAuthority), Limit: 1000})
	if err != nil || page.Next != "" {
		t.Fatalf("scan: %v (next %q)", err, page.Next)
	}
	for _, it := range page.Items {
		a, err := record.DecodeAuthority(it.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[a.ObjectID] = a
	}
	return out
}

func capacityRows(t *testing.T, s locstore.Store) int {
	t.Helper()
	page, err := s.Scan(context.Background(), locstore.ScanRequest{Prefix: record.KindPrefix(authority.KindCapacity), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Items)
}

// §11: Close sweeps exactly this host run's authority rows (Active deleted,
// Reserved aborted, capacity returned in the same batches); another run's
// rows are untouched.
func TestCloseSweepsOnlyThisRunsAuthorityRows(t *testing.T) {
	f := newFixture(t)
	a := f.start(fastConfig("m"))
	b := f.start(fastConfig("m"))
	exec, err := authority.NewExecutor(f.loc)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		seed(t, exec, a, fmt.Sprintf("a-active-%d", i), true)
	}
	seed(t, exec, a, "a-reserved", false)
	seed(t, exec, b, "b-active", true)
	if got := len(authorityRows(t, f.loc)); got != 5 {
		t.Fatalf("seeded %d rows, want 5", got)
	}
	res, err := a.sweepAuthority(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Ours != 4 || res.Deleted != 3 || res.Aborted != 1 || res.Skipped != 0 {
		t.Fatalf("sweep = %+v, want 4 ours: 3 deleted, 1 aborted", res)
	}
	rows := authorityRows(t, f.loc)
	if len(rows) != 1 || rows["b-active"].OwnerID != b.run.ownerID {
		t.Fatalf("rows after sweep: %v", rows)
	}
	// Only B's actor slot counter remains: A's were returned to zero and removed.
	if n := capacityRows(t, f.loc); n != 1 {
		t.Fatalf("%d capacity rows after the sweep, want B's one", n)
	}
	// Close runs the same sweep before releasing the lease.
	seed(t, exec, a, "a-late", true)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows = authorityRows(t, f.loc)
	if _, left := rows["a-late"]; left || len(rows) != 1 {
		t.Fatalf("rows after Close: %v, want only b-active", rows)
	}
}
