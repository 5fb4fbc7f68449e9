package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	"github.com/meshnode/meshnode/spot"
)

// fastConfig is a valid server config with a short lease so that expiry
// tests take seconds: 200ms + 150ms < 1.2s - 300ms (§5).
func fastConfig(mesh string) config.Config {
	cfg := config.Default()
	cfg.Node.MeshName = mesh
	cfg.Node.Endpoint = "tcp://127.0.0.1:0"
	cfg.LocationStore.Provider = config.ProviderMemory
	cfg.RelocationStore.Provider = config.ProviderMemory
	cfg.Lease.RenewInterval = 200 * time.Millisecond
	cfg.Lease.RenewTimeout = 150 * time.Millisecond
	cfg.Lease.TTL = 1200 * time.Millisecond
	cfg.Lease.FencingMargin = 300 * time.Millisecond
	cfg.Log.Level = config.LogWarn
	cfg.ShutdownDeadline = 5 * time.Second
	return cfg
}

type fixture struct {
	t     *testing.T
	loc   *locmemory.Store
	reloc *relmemory.Store
	reg   *spot.Registry
	// logTo, when set, is where newClusterWith's node i logs (text, INFO
	// and up); nil or a nil writer: the default logger.
	logTo func(i int) io.Writer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	loc, err := locmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	reloc, err := relmemory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close(); reloc.Close() })
	reg := spot.NewRegistry()
	if err := demoapp.Register(reg); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, loc: loc, reloc: reloc, reg: reg}
}

// logNode makes node i of the clusters built on f log into the returned
// buffer (the others log as usual).
func (f *fixture) logNode(i int) *syncbuf.Buffer {
	logs := new(syncbuf.Buffer)
	f.logTo = func(j int) io.Writer {
		if j == i {
			return logs
		}
		return nil
	}
	return logs
}

func (f *fixture) start(cfg config.Config) *Node {
	f.t.Helper()
	return f.startOn(cfg, f.loc)
}

// startOn is start with loc as the node's Location Store.
func (f *fixture) startOn(cfg config.Config, loc locstore.Store) *Node {
	f.t.Helper()
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: loc, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond})
	if err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	f.t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

func hasPeer(n *Node, rid []byte) bool {
	for _, p := range n.Peers() {
		if string(p.RID) == string(rid) {
			return true
		}
	}
	return false
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartRejectsBadConfigBeforeAnySocket(t *testing.T) {
	tests := []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"server without location store", func(c *config.Config) { c.LocationStore.Provider = "" }, "location_store.provider"},
		{"recreate factory without relocation store", func(c *config.Config) { c.RelocationStore.Provider = "" }, "relocation_store"},
		{"lease relation violated", func(c *config.Config) { c.Lease.RenewInterval = 10 * time.Second }, "lease"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			cfg := fastConfig("bad")
			tc.edit(&cfg)
			before := runtime.NumGoroutine()
			_, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg})
			if !errors.Is(err, ErrStartup) || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("Start = %v, want ErrStartup wrapping config.ErrInvalid", err)
			}
			if !containsStr(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
			if g := runtime.NumGoroutine(); g > before {
				t.Fatalf("goroutines %d -> %d after a config failure", before, g)
			}
		})
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestDescriptorTooLargeFailsStartupWithoutPublishing(t *testing.T) {
	f := newFixture(t)
	for i := 0; i <= record.MaxCapabilities; i++ { // one more than allowed
		err := f.reg.Register(spot.Factory{StableType: fmt.Sprintf("t%04d", i), Kind: spot.KindActor, Policy: spot.PolicyDisabled,
			New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return nil, nil }})
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := Start(context.Background(), Options{Config: fastConfig("big"), Factories: f.reg, Location: f.loc, Relocation: f.reloc})
	if !errors.Is(err, ErrStartup) || !errors.Is(err, record.ErrLimit) {
		t.Fatalf("Start = %v, want ErrStartup wrapping record.ErrLimit", err)
	}
	page, err := f.loc.Scan(context.Background(), locstore.ScanRequest{Prefix: record.KindPrefix(record.KindMeshNode), Limit: 10})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("descriptors published after a failed startup: %d (%v)", len(page.Items), err)
	}
	// The lease taken during the failed start was released.
	page, err = f.loc.Scan(context.Background(), locstore.ScanRequest{Prefix: record.KindPrefix(record.KindOwnerLease), Limit: 10})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("owner lease left behind after a failed startup: %d (%v)", len(page.Items), err)
	}
}

func TestThreeNodesDiscoverAdmitAndCloseCleanly(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFixture(t)
	var nodes []*Node
	for i := 0; i < 3; i++ {
		nodes = append(nodes, f.start(fastConfig("m")))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if n.State() != record.StateServing {
			t.Fatalf("state %s, want serving", n.State())
		}
	}
	// A node of another mesh is never a peer. The barrier is a marker node
	// of mesh m started after it: once every node of m admitted the marker,
	// each has run discovery with the other mesh's descriptor already in
	// the store, and a link opened in that round has had its admission.
	other := f.start(fastConfig("other"))
	marker := f.start(fastConfig("m"))
	for _, n := range nodes {
		eventually(t, 10*time.Second, "the marker node to be admitted", func() bool { return hasPeer(n, marker.RID()) })
	}
	for _, n := range append(nodes, marker) {
		if hasPeer(n, other.RID()) {
			t.Fatal("a node connected to a node of another mesh")
		}
		snap, _ := n.LastSnapshot()
		for _, e := range snap.Entries {
			if string(e.Descriptor.RoutingID) == string(other.RID()) {
				t.Fatal("discovery of mesh m listed a node of another mesh")
			}
		}
	}
	if p := other.Peers(); len(p) != 0 {
		t.Fatalf("the node of another mesh has peers: %v", p)
	}
	nodes = append(nodes, marker)
	snap, err := directory.List(ctx, f.loc, "m", 100)
	if err != nil || len(snap.Entries) != 4 {
		t.Fatalf("list: %d entries, %v", len(snap.Entries), err)
	}
	for _, n := range append(nodes, other) {
		if err := n.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := n.Close(ctx); err != nil { // exactly once: the same result again
			t.Fatalf("second Close: %v", err)
		}
	}
	// An orderly Close publishes stopped, releases the lease and then
	// removes the descriptor (it is of no more use): the topology is empty
	// at once, not after the reclaim age.
	snap, err = directory.List(ctx, f.loc, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Entries {
		t.Errorf("after Close: descriptor %x left (state %s, lease valid %v)", e.Descriptor.RoutingID, e.Descriptor.State, e.LeaseValid)
	}
	eventually(t, 5*time.Second, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before+1 })
}

// A node that dies without releasing its lease (kill -9) is dropped by the
// others once its owner lease expires; restarted with the same RID it comes
// back with a new lifecycle generation and LeaseGeneration.
func TestCrashedNodeDroppedAtLeaseExpiryAndReturns(t *testing.T) {
	f := newFixture(t)
	a := f.start(fastConfig("m"))
	cfgB := fastConfig("m")
	cfgB.Node.RoutingID = "0b0b0b"
	b := f.start(cfgB)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := a.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, genB := b.Owner()
	lifeB := b.LifecycleGeneration()
	b.crashLease() // the lease stops renewing; B's sockets stay up
	eventually(t, 5*time.Second, "A to drop B after its lease expired", func() bool { return !hasPeer(a, b.RID()) })
	b.crash()

	b2 := f.start(cfgB)
	_, genB2 := b2.Owner()
	if genB2 == genB || b2.LifecycleGeneration() == lifeB {
		t.Fatalf("restart reused generations: lease %d->%d, lifecycle %d->%d", genB, genB2, lifeB, b2.LifecycleGeneration())
	}
	eventually(t, 5*time.Second, "A to admit the restarted B", func() bool { return hasPeer(a, b2.RID()) })
	for _, p := range a.Peers() {
		if string(p.RID) == string(b2.RID()) && p.LifecycleGeneration != b2.LifecycleGeneration() {
			t.Fatalf("A's link to B presents lifecycle %d, want %d", p.LifecycleGeneration, b2.LifecycleGeneration())
		}
	}
}
