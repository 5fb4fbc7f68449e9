package mesh

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// seed reserves (and, when commit, commits) an actor owned by node n.
func seed(t *testing.T, exec *authority.Executor, n *Node, id string, commit bool) {
	t.Helper()
	ctx := context.Background()
	obj := authority.Object{ID: id, Kind: record.ObjectActor, StableType: "demo.counter"}
	owner := authority.Owner{ID: n.run.ownerID, LeaseGeneration: n.leaseGen.Load()}
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
	// Only B's actor slot counter remains (its secured and active rows):
	// A's were returned to zero and removed.
	if n := capacityRows(t, f.loc); n != 2 {
		t.Fatalf("%d capacity rows after the sweep, want B's two", n)
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

// locationStores are the Location Stores the node-level store tests (the §11
// sweep, the §5 gate) run on: the embedded memory store (nil: the fixture's,
// see onEachStore) and a real Redis.
var locationStores = []struct {
	name string
	loc  func(*testing.T) locstore.Store
}{
	{"memory", func(*testing.T) locstore.Store { return nil }},
	{"redis", newRedisLocation},
}

// onEachStore runs body once per store of locationStores, each time on a
// fresh fixture; loc is that store (the fixture's own for "memory").
func onEachStore(t *testing.T, body func(t *testing.T, f *fixture, loc locstore.Store)) {
	for _, st := range locationStores {
		t.Run(st.name, func(t *testing.T) {
			f := newFixture(t)
			loc := st.loc(t)
			if loc == nil {
				loc = f.loc
			}
			body(t, f, loc)
		})
	}
}

// quietNode starts one server node on loc whose discovery — and the
// descriptor capacity-copy refresh that rides on it — runs once at start and
// then not for an hour, so that during the test nothing but what the test
// calls writes rows: a before/after comparison then sees only the sweep.
func quietNode(t *testing.T, f *fixture, loc locstore.Store) *Node {
	t.Helper()
	n, err := Start(context.Background(), Options{Config: objConfig("sweep"), Factories: f.reg, Location: loc,
		Relocation: f.reloc, DiscoveryInterval: time.Hour})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// rawRows is every row under the prefixes as stored: value bytes, version
// and expiry, by key (all pages of one snapshot each).
func rawRows(t *testing.T, s locstore.Store, prefixes ...string) map[string]locstore.Item {
	t.Helper()
	out := map[string]locstore.Item{}
	for _, p := range prefixes {
		cursor := ""
		for {
			page, err := s.Scan(context.Background(), locstore.ScanRequest{Prefix: p, Limit: 1000, Cursor: cursor})
			if err != nil || page.Expired {
				t.Fatalf("scan %q: %v (expired %v)", p, err, page.Expired)
			}
			for _, it := range page.Items {
				out[it.Key] = it
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
	}
	return out
}

// sameRows fails the test unless want and got hold the same keys with the
// same bytes, version and expiry.
func sameRows(t *testing.T, what string, want, got map[string]locstore.Item) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d rows before, %d after", what, len(want), len(got))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: %s deleted", what, k)
		case !bytes.Equal(g.Value, w.Value) || g.Version != w.Version || !g.ExpiresAt.Equal(w.ExpiresAt):
			t.Errorf("%s: %s changed\nbefore: %s (version %s)\n after: %s (version %s)", what, k, w.Value, w.Version, g.Value, g.Version)
		}
	}
}

// setOwnerLeaseGeneration rewrites id's authority row (under its version)
// as owned by the same owner id in another lease generation.
func setOwnerLeaseGeneration(t *testing.T, s locstore.Store, id string, gen uint64) {
	t.Helper()
	rewriteAuthority(t, s, record.ObjectActor, id, func(a *record.Authority) { a.OwnerLeaseGeneration = record.Generation(gen) })
}

// rewriteAuthority rewrites the authority row of kind/id, under the version
// it read, with edit applied.
func rewriteAuthority(t *testing.T, s locstore.Store, kind record.ObjectKind, id string, edit func(*record.Authority)) {
	t.Helper()
	ctx := context.Background()
	key, err := authority.Object{ID: id, Kind: kind}.Key()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := s.Read(ctx, key)
	if err != nil || !rr.Found {
		t.Fatalf("read %s: found %v, %v", id, rr.Found, err)
	}
	a, err := record.DecodeAuthority(rr.Value)
	if err != nil {
		t.Fatal(err)
	}
	edit(&a)
	v, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion(key, rr.Version)},
		Mutations: []locstore.Mutation{locstore.Put(key, v)}})
	if err != nil || !w.Applied {
		t.Fatalf("rewrite %s: applied %v, %v", id, w.Applied, err)
	}
}

// §11: the sweep reclaims only rows matching both this run's owner id and
// its lease generation. Rows of the same owner id in another lease
// generation (Active and Reserved, i.e. both the delete and the abort path)
// are kept byte for byte.
func TestSweepKeepsSameOwnerOtherLeaseGeneration(t *testing.T) {
	onEachStore(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		n := quietNode(t, f, loc)
		store := n.loc
		exec, err := authority.NewExecutor(store)
		if err != nil {
			t.Fatal(err)
		}
		seed(t, exec, n, "this-run", true)
		seed(t, exec, n, "other-gen-active", true)
		seed(t, exec, n, "other-gen-reserved", false)
		_, gen := n.Owner()
		setOwnerLeaseGeneration(t, store, "other-gen-active", gen+1)
		setOwnerLeaseGeneration(t, store, "other-gen-reserved", gen+1)
		before := rawRows(t, store, record.KindPrefix(record.KindAuthority))

		res, err := n.sweepAuthority(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Scanned != 3 || res.Ours != 1 || res.Deleted != 1 || res.Aborted != 0 || res.Skipped != 0 {
			t.Fatalf("sweep = %+v, want 3 scanned, 1 ours deleted", res)
		}
		rows := authorityRows(t, store)
		if _, left := rows["this-run"]; left {
			t.Fatal("this run's row survived the sweep")
		}
		thisRun, err := authority.Object{ID: "this-run", Kind: record.ObjectActor, StableType: "demo.counter"}.Key()
		if err != nil {
			t.Fatal(err)
		}
		delete(before, thisRun)
		sameRows(t, "other lease generation's authority rows", before, rawRows(t, store, record.KindPrefix(record.KindAuthority)))
	})
}

// §11: the owner sweep never touches descriptors, not even those of this
// very host run (its MeshNode descriptor and channel descriptors carrying
// the same owner id and lease generation): every descriptor row is byte
// identical, at the same version, after a sweep that did reclaim rows.
func TestSweepNeverTouchesDescriptors(t *testing.T) {
	onEachStore(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		n := quietNode(t, f, loc)
		store := n.loc
		ctx := context.Background()
		owner, gen := n.Owner()
		cs := record.ClientServerDescriptor{ChannelName: "chat", ServerRoutingID: n.RID(), LifecycleGeneration: record.Generation(n.LifecycleGeneration()),
			DescriptorRevision: 1, Endpoint: "tcp://127.0.0.1:1", Weight: 100, State: record.StateServing,
			OwnerID: owner, LeaseGeneration: record.Generation(gen), UpdatedAt: 1}
		fan := record.FanoutPublisherDescriptor{ChannelName: "prices", PublisherRoutingID: n.RID(), LifecycleGeneration: record.Generation(n.LifecycleGeneration()),
			DescriptorRevision: 1, Endpoint: "tcp://127.0.0.1:2", State: record.StateServing,
			OwnerID: owner, LeaseGeneration: record.Generation(gen), UpdatedAt: 1}
		for _, d := range []interface {
			Preimage() ([]byte, error)
			Encode() ([]byte, error)
		}{cs, fan} {
			pre, err := d.Preimage()
			if err != nil {
				t.Fatal(err)
			}
			v, err := d.Encode()
			if err != nil {
				t.Fatal(err)
			}
			key := record.Key(pre)
			if w, err := store.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing(key)},
				Mutations: []locstore.Mutation{locstore.Put(key, v)}}); err != nil || !w.Applied {
				t.Fatalf("write descriptor: applied %v, %v", w.Applied, err)
			}
		}
		exec, err := authority.NewExecutor(store)
		if err != nil {
			t.Fatal(err)
		}
		seed(t, exec, n, "active", true)
		seed(t, exec, n, "reserved", false)
		descriptors := []string{record.KindPrefix(record.KindMeshNode), record.KindPrefix(record.KindClientServer), record.KindPrefix(record.KindFanoutPublisher)}
		before := rawRows(t, store, descriptors...)
		if len(before) != 3 {
			t.Fatalf("%d descriptor rows before the sweep, want the node's and the two channel descriptors", len(before))
		}

		res, err := n.sweepAuthority(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Ours != 2 || res.Deleted != 1 || res.Aborted != 1 {
			t.Fatalf("sweep = %+v, want 2 ours: 1 deleted, 1 aborted", res)
		}
		sameRows(t, "descriptors", before, rawRows(t, store, descriptors...))
	})
}

// changeAfterScan is a Location Store whose next Scan once armed runs
// change after it has answered (a row moves on behind the sweep's back).
type changeAfterScan struct {
	locstore.Store
	armed  atomic.Bool
	change func()
}

func (c *changeAfterScan) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	page, err := c.Store.Scan(ctx, req)
	if err == nil && c.armed.CompareAndSwap(true, false) {
		c.change()
	}
	return page, err
}

// The sweep removes its rows in batches; a row changed since the scan makes
// its batch fail, and the batch's rows are then removed one by one. The
// changed row is read again: still this run's (a new payload), it is
// removed under its new version; gone meanwhile, it is skipped. Every other
// row is removed with its capacity.
func TestSweepBatchFallsBackRowByRow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(t *testing.T, exec *authority.Executor, owner authority.Owner, row record.Authority)
		deleted int
		skipped int
	}{
		{"still ours: removed under its new version", func(t *testing.T, exec *authority.Executor, owner authority.Owner, row record.Authority) {
			if _, err := exec.Preserve(context.Background(), authority.PreserveRequest{Object: authority.Object{ID: "a-2", Kind: record.ObjectActor},
				Owner: owner, ObjectGeneration: uint64(row.ObjectGeneration), Payload: authority.SetPayload([]byte("moved on"))}); err != nil {
				t.Errorf("preserve: %v", err)
			}
		}, 4, 0},
		{"gone meanwhile: skipped", func(t *testing.T, exec *authority.Executor, owner authority.Owner, row record.Authority) {
			if _, err := exec.Delete(context.Background(), authority.DeleteRequest{Object: authority.Object{ID: "a-2", Kind: record.ObjectActor},
				Owner: owner, ObjectGeneration: uint64(row.ObjectGeneration)}); err != nil {
				t.Errorf("delete: %v", err)
			}
		}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			exec, err := authority.NewExecutor(f.loc)
			if err != nil {
				t.Fatal(err)
			}
			var owner authority.Owner
			store := &changeAfterScan{Store: f.loc, change: func() { tc.change(t, exec, owner, authorityRows(t, f.loc)["a-2"]) }}
			a, err := Start(context.Background(), Options{Config: fastConfig("m"), Factories: f.reg, Location: store, Relocation: f.reloc,
				DiscoveryInterval: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close(context.Background()) })
			owner = authority.Owner{ID: a.run.ownerID, LeaseGeneration: a.leaseGen.Load()}
			for i := 0; i < 5; i++ {
				seed(t, exec, a, fmt.Sprintf("a-%d", i), i != 4) // four Active, one Reserved
			}
			store.armed.Store(true)
			res, err := a.sweepAuthority(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if res.Ours != 5 || res.Deleted != tc.deleted || res.Aborted != 1 || res.Skipped != tc.skipped {
				t.Fatalf("sweep = %+v, want 5 ours: %d deleted, 1 aborted, %d skipped", res, tc.deleted, tc.skipped)
			}
			if rows := authorityRows(t, f.loc); len(rows) != 0 {
				t.Fatalf("rows after the sweep: %v, want none", rows)
			}
			ids := []authority.CounterID{{Node: authority.Node{MeshName: a.cfg.Node.MeshName, RoutingID: a.run.rid,
				LifecycleGeneration: a.run.lifecycleGeneration}, Class: authority.SlotActors}}
			if got, err := authority.ReadCounters(context.Background(), f.loc, ids); err != nil || got[0].Usage != (authority.Usage{}) {
				t.Fatalf("counter after the sweep: %+v, %v; want empty", got, err)
			}
		})
	}
}
