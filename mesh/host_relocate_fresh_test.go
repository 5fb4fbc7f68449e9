package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// A host Relocate places on the mesh as it is when the command starts, not
// on the node's last discovery round: a node that joined since (here the
// source's rounds are an hour apart, so it never listed the newcomer) takes
// the objects. Before, every object failed with "no Serving node … other
// than this one" until the next round — met by an operator who relocated a
// node within seconds of starting its peer.
func TestHostRelocateSeesANodeThatJustJoined(t *testing.T) {
	f := newFixture(t)
	p := newProbe()
	registerTestFactories(t, f.reg, p)
	start := func(i int, every time.Duration) *Node {
		return startRoundsApart(t, f, i, every, config.RoleServer, f.loc, nil)
	}
	ctx := ctxT(t, 60*time.Second)
	src := start(0, time.Hour)
	for i := range 5 {
		if _, err := src.Manager().CreateActor(ctx, fmt.Sprintf("fresh-%d", i), testMoverType); err != nil {
			t.Fatal(err)
		}
	}
	dst := start(1, 100*time.Millisecond)
	if err := dst.WaitPeers(ctx, 1); err != nil { // the newcomer linked to the source
		t.Fatal(err)
	}
	res, err := src.Relocate(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Moved != 5 {
		for _, o := range res.NotMoved() {
			t.Logf("%s: %s %s", o.Object.ID, o.Outcome, o.Reason)
		}
		t.Fatalf("moved %d of 5 to the node that just joined", res.Progress.Moved)
	}
	if h := dst.ObjectStats().Hosted; h < 5 {
		t.Fatalf("the newcomer hosts %d objects", h)
	}
}

// A creation whose placement finds nothing on an old descriptor list runs
// one discovery round and places again: a client whose last round predates
// every server (its rounds are an hour apart here) creates on the server
// that started since, instead of failing with ErrUnavailable until its
// next round.
func TestCreationRefreshesAnOldList(t *testing.T) {
	f := newFixture(t)
	p := newProbe()
	registerTestFactories(t, f.reg, p)
	ctx := ctxT(t, 60*time.Second)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, nil)
	server := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, nil)
	if err := server.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(listRefreshAge) // the client's only list is now old enough to refresh
	ref, err := client.Manager().CreateActor(ctx, "late-server", testMoverType)
	if err != nil {
		t.Fatalf("creation with a list older than the only server: %v", err)
	}
	if string(ref.NodeRID) != string(server.RID()) {
		t.Fatalf("placed on %x", ref.NodeRID)
	}
}

// A creation whose Reserve finds the target's lease changed — the target
// lost its lease and reacquired it under a new generation after this
// node's last discovery round (rounds an hour apart here; right after a
// store outage this is every node for a moment) — reads the list again
// and places on the same node run under its new owner lease, instead of
// excluding the run and failing "(1 failed)".
func TestCreationFollowsATargetsNewLease(t *testing.T) {
	f := newFixture(t)
	p := newProbe()
	registerTestFactories(t, f.reg, p)
	blocker := &renewBlocker{Store: f.loc, stop: make(chan struct{})}
	t.Cleanup(func() { blocker.blocked.Store(nil); close(blocker.stop) })
	fast := func(cfg *config.Config) { cfg.Lease = fastConfig(cfg.Node.MeshName).Lease } // TTL 1.2 s
	ctx := ctxT(t, 60*time.Second)
	server := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	if err := client.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if !listsCurrentOwners(client, server) {
		t.Fatal("the client's first list does not show the server")
	}
	// The server's renewals stop until its lease is lost; it reacquires
	// a new generation at once and serves again.
	_, gen := server.Owner()
	blocker.loseLeaseOf(t, server)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the server to serve under a new lease generation", func() bool {
		_, g := server.Owner()
		return g > gen && server.LeaseLost() == nil && server.lease.Gate().Admit() == nil
	})
	if listsCurrentOwners(client, server) {
		t.Fatal("the client's list already shows the new lease: the test needs it stale")
	}
	ref, err := client.Manager().CreateActor(ctx, "after-reacquire", testMoverType)
	if err != nil {
		t.Fatalf("creation on a list that predates the target's new lease: %v", err)
	}
	if string(ref.NodeRID) != string(server.RID()) {
		t.Fatalf("placed on %x", ref.NodeRID)
	}
}

// keyHold holds the writes to one key until released (a node's descriptor
// republish, here).
type keyHold struct {
	locstore.Store
	key     atomic.Pointer[string]
	release chan struct{}
	held    atomic.Int64
}

func (s *keyHold) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if k := s.key.Load(); k != nil {
		for _, m := range req.Mutations {
			if m.Key == *k {
				s.held.Add(1)
				select {
				case <-s.release:
				case <-ctx.Done():
					return locstore.WriteResult{}, ctx.Err()
				}
				break
			}
		}
	}
	return s.Store.Write(ctx, req)
}

// The same, when the creation comes in the moment between the target's
// reacquisition and its descriptor's republish under the new generation:
// the fresh list still names the old lease, whose record now holds the
// newer generation of the same owner. The creation waits (≤ 1 s) for the
// republish instead of excluding the run, and the discovery round it runs
// does not remove the live run's descriptor as a dead one. Seen once in
// .ci/run: "(1 failed)", and the client logged "a watched run lost its
// owner lease while its links were up; its descriptor is removed".
func TestCreationWaitsForATargetsRepublish(t *testing.T) {
	f, hold, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	server := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	if err := client.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	loseLeaseHoldRepublish(t, server, blocker, hold)
	go func() { time.Sleep(300 * time.Millisecond); close(hold.release) }()
	ref, err := client.Manager().CreateActor(ctx, "before-republish", testMoverType)
	if err != nil {
		t.Fatalf("creation before the target republished: %v", err)
	}
	if string(ref.NodeRID) != string(server.RID()) {
		t.Fatalf("placed on %x", ref.NodeRID)
	}
}

// startRoundsApart starts node i of mesh "objects" on f's registry with the
// given role, Location Store and discovery rounds every apart; edit, when
// set, adjusts its configuration.
func startRoundsApart(t *testing.T, f *fixture, i int, every time.Duration, role config.ObjectRole, loc locstore.Store, edit func(*config.Config)) *Node {
	t.Helper()
	cfg := objConfig("objects")
	cfg.Node.RoutingID = fmt.Sprintf("0%d0%d", i+1, i+1)
	cfg.Node.ObjectRole = role
	if edit != nil {
		edit(&cfg)
	}
	opts := Options{Config: cfg, Factories: f.reg, Location: loc, Relocation: f.reloc, DiscoveryInterval: every}
	if f.logTo != nil {
		if w := f.logTo(i); w != nil {
			opts.Logger = slog.New(slog.NewTextHandler(w, nil))
		}
	}
	if role != config.RoleServer {
		opts.Factories = spot.NewRegistry()
	}
	n, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// A drain that finds no other node serving but one recovering its lease
// (reacquired, its descriptor not yet republished under it — every peer
// looks so right after a store outage longer than the lease TTL) waits for
// it to serve again instead of handing every object to the shutdown.
func TestDrainWaitsForAPeerRecoveringItsLease(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	_, hold, leaving, mine := recoveringPeerScene(t, ctx, "stay", 3)
	go func() { time.Sleep(500 * time.Millisecond); close(hold.release) }()
	res, err := leaving.Drain(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Moved < len(mine) || len(res.NotMoved()) != 0 {
		t.Fatalf("drain moved %d (want all %d of its objects), not moved %+v", res.Progress.Moved, len(mine), res.NotMoved())
	}
}

// recoveringPeerScene starts a leaving server (1) with want objects, a
// peer server (2) that has lost its owner lease and reacquired it, its
// republish held in hold until hold.release closes, and a client (0).
func recoveringPeerScene(t *testing.T, ctx context.Context, prefix string, want int) (*fixture, *keyHold, *Node, []ActorRef) {
	t.Helper()
	f, hold, blocker, fast := republishScene(t)
	leaving := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	peer := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	mine := createOnNode(t, ctx, client, leaving, prefix, want)
	loseLeaseHoldRepublish(t, peer, blocker, hold)
	return f, hold, leaving, mine
}

// loseLeaseHoldRepublish makes n lose its owner lease (its renewals are
// blocked until it is lost), lets it reacquire, and holds its republish
// under the new lease in hold until hold.release closes.
func loseLeaseHoldRepublish(t *testing.T, n *Node, blocker *renewBlocker, hold *keyHold) {
	t.Helper()
	_, gen := n.Owner()
	descKey, err := record.MeshNodeKey("objects", n.RID())
	if err != nil {
		t.Fatal(err)
	}
	blocker.loseLeaseOf(t, n)
	hold.key.Store(&descKey) // its republish under the new lease waits
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the node to reacquire and try to republish", func() bool {
		_, g := n.Owner()
		return g > gen && hold.held.Load() > 0
	})
}

// republishScene is a fixture with the test factories, a store that can
// hold one key's writes (hold) under one that can block lease renewals
// (blocker), and the fast lease settings.
func republishScene(t *testing.T) (*fixture, *keyHold, *renewBlocker, func(*config.Config)) {
	t.Helper()
	return republishSceneWith(t, newProbe())
}

// republishSceneWith is republishScene whose test factories are p's.
func republishSceneWith(t *testing.T, p *probe) (*fixture, *keyHold, *renewBlocker, func(*config.Config)) {
	t.Helper()
	f := newFixture(t)
	registerTestFactories(t, f.reg, p)
	hold := &keyHold{Store: f.loc, release: make(chan struct{})}
	blocker := &renewBlocker{Store: hold, stop: make(chan struct{})}
	t.Cleanup(func() { blocker.blocked.Store(nil); close(blocker.stop) })
	return f, hold, blocker, func(cfg *config.Config) { cfg.Lease = fastConfig(cfg.Node.MeshName).Lease }
}

// A drain that starts while this node's own lease is being recovered (lost,
// reacquired, its objects being re-adopted — as right after a store outage)
// waits for its gate to reopen instead of refusing every move.
func TestDrainWaitsForItsOwnLease(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	leaving := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	mine := createOnNode(t, ctx, client, leaving, "own", 3)
	blocker.loseLeaseOf(t, leaving)
	blocker.blocked.Store(nil)
	if leaving.lease.Gate().Admit() == nil {
		t.Fatal("the gate reopened before the drain: the test did not exercise the wait")
	}
	res, err := leaving.Drain(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Progress.Moved < len(mine) || len(res.NotMoved()) != 0 {
		t.Fatalf("drain moved %d (want all %d of its objects), not moved %+v", res.Progress.Moved, len(mine), res.NotMoved())
	}
}

// createOnNode waits until client sees both servers, then creates Actors
// named prefix-<i> from it until want of them are on node on.
func createOnNode(t *testing.T, ctx context.Context, client, on *Node, prefix string, want int) []ActorRef {
	t.Helper()
	if err := client.WaitPeers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var mine []ActorRef
	for i := 0; len(mine) < want; i++ {
		ref, err := client.Manager().CreateActor(ctx, fmt.Sprintf("%s-%d", prefix, i), testMoverType)
		if err != nil {
			t.Fatal(err)
		}
		if string(ref.NodeRID) == string(on.RID()) {
			mine = append(mine, ref)
		}
	}
	return mine
}
