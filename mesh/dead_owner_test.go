package mesh

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// deadOwnerCluster is a client node 0 and servers 1 and 2 with short
// leases (1.2 s TTL), the reclaim grace given and no background sweep.
func deadOwnerCluster(t *testing.T, loc locstore.Store, grace time.Duration) *cluster {
	t.Helper()
	return newClusterOn(t, newFixture(t), loc, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		fast := fastConfig(cfg.Node.MeshName)
		cfg.Lease = fast.Lease
		cfg.Recovery.ReclaimGrace = grace
		cfg.Recovery.ReclaimSweepInterval = 0
	})
}

// createOn creates counters named prefix-<i> from node 0 until want of
// them are on node host.
func createOn(t *testing.T, c *cluster, prefix string, host, want int) []ActorRef {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	var mine []ActorRef
	for i := 0; len(mine) < want; i++ {
		ref, err := c.m(0).CreateActor(ctx, fmt.Sprintf("%s-%d", prefix, i), testMoverType)
		if err != nil {
			t.Fatal(err)
		}
		if ownerIndex(t, c, record.ObjectActor, ref.ActorID) == host {
			mine = append(mine, ref)
		}
	}
	return mine
}

// waitOwnerGone waits until node 0's Find of ref answers OwnerGoneError.
func waitOwnerGone(t *testing.T, c *cluster, ref ActorRef) *OwnerGoneError {
	t.Helper()
	var gone *OwnerGoneError
	eventually(t, 10*time.Second, "Find to report the owner gone", func() bool {
		_, err := c.m(0).FindActor(ctxT(t, 5*time.Second), ref.ActorID)
		return errors.As(err, &gone)
	})
	return gone
}

// A killed owner's objects (issue 12 "Recover a dead node's objects"):
// once its lease has ended, Find and messages answer OwnerGoneError
// (Unavailable naming the ended owner), never a Ready ref; GetOrCreate
// waits for the reclaim grace, then replaces the record with a new
// generation on a live node; Create does the same; Destroy of the dead
// generation removes it at once; the dead run's slots are released.
func TestDeadOwnerObjects(t *testing.T) {
	t.Run("memory", func(t *testing.T) { runDeadOwnerObjects(t, nil) })
	t.Run("redis", func(t *testing.T) { runDeadOwnerObjects(t, newRedisLocation(t)) })
}

func runDeadOwnerObjects(t *testing.T, loc locstore.Store) {
	const grace = 1500 * time.Millisecond
	c := deadOwnerCluster(t, loc, grace)
	ctx := ctxT(t, 60*time.Second)
	refs := createOn(t, c, "doomed", 2, 3)
	dead := c.nodes[2]
	deadOwner, _ := dead.Owner()
	dead.crash()

	gone := waitOwnerGone(t, c, refs[0])
	if !errors.Is(gone, ErrUnavailable) || gone.Owner != deadOwner || string(gone.NodeRID) != string(dead.RID()) {
		t.Fatalf("find: %v, want Unavailable naming owner %s on node %x", gone, deadOwner, dead.RID())
	}
	err := c.m(0).SendActor(ctx, refs[0], []byte("one"))
	if !errors.As(err, &gone) {
		t.Fatalf("send to a dead owner's actor: %v, want OwnerGoneError", err)
	}

	// GetOrCreate inside the grace: Unavailable with the time left; after
	// it, a new generation on the live server.
	_, err = c.m(0).GetOrCreateActor(ctx, refs[0].ActorID, testMoverType)
	if !errors.As(err, &gone) || gone.ReclaimableIn <= 0 || gone.ReclaimableIn > grace {
		t.Fatalf("GetOrCreate inside the grace: %v, want OwnerGoneError with the time left", err)
	}
	time.Sleep(gone.ReclaimableIn)
	res, err := c.m(0).GetOrCreateActor(ctx, refs[0].ActorID, testMoverType)
	if err != nil || res.Outcome != Created || res.Ref.ObjectGeneration <= refs[0].ObjectGeneration ||
		ownerIndex(t, c, record.ObjectActor, refs[0].ActorID) != 1 {
		t.Fatalf("GetOrCreate after the grace: %+v, %v; want a new generation created on node 1", res, err)
	}
	if got, err := c.m(0).RequestActor(ctx, res.Ref, []byte("count")); err != nil || string(got) != "count:0" {
		t.Fatalf("the new generation: %q, %v (its state starts afresh)", got, err)
	}

	// Create: the grace has passed for this owner too.
	cref, err := c.m(0).CreateActor(ctx, refs[1].ActorID, testMoverType)
	if err != nil || cref.ObjectGeneration <= refs[1].ObjectGeneration {
		t.Fatalf("Create over a dead owner's record: %+v, %v", cref, err)
	}

	// Destroy of the dead generation removes it without waiting.
	closed, err := c.m(0).Destroy(ctx, refs[2])
	if err != nil || !closed {
		t.Fatalf("Destroy of a dead owner's actor: %v, %v; want closed", closed, err)
	}
	if row := rowOf(t, c, record.ObjectActor, refs[2].ActorID); row.Found {
		t.Fatal("record still there after Destroy")
	}
	// Every slot of the dead run went back.
	id := authority.CounterID{Node: authority.Node{MeshName: dead.cfg.Node.MeshName, RoutingID: dead.run.rid,
		LifecycleGeneration: dead.run.lifecycleGeneration}, Class: authority.SlotActors}
	rows, err := authority.ReadCounters(ctx, c.nodes[0].loc, []authority.CounterID{id})
	if err != nil || rows[0].Usage != (authority.Usage{}) || rows[0].Found {
		t.Errorf("the dead run's actor slots: %+v, %v; want none (and no rows)", rows, err)
	}
}

// The background sweep reclaims a dead owner's objects after the grace,
// and only those.
func TestReclaimSweep(t *testing.T) {
	c := deadOwnerCluster(t, nil, 200*time.Millisecond)
	ctx := ctxT(t, 30*time.Second)
	doomed := createOn(t, c, "swept", 2, 2)
	kept := createOn(t, c, "kept", 1, 2)
	c.nodes[2].crash()
	waitOwnerGone(t, c, doomed[0])
	reclaimed := 0
	eventually(t, 10*time.Second, "the sweep to reclaim the dead owner's records", func() bool {
		r, err := c.nodes[1].reclaimSweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reclaimed += r.Reclaimed
		return r.DeadOwner == 0
	})
	if reclaimed < len(doomed) {
		t.Errorf("the sweep reclaimed %d records, want at least %d", reclaimed, len(doomed))
	}
	for _, ref := range doomed {
		if rowOf(t, c, record.ObjectActor, ref.ActorID).Found {
			t.Errorf("%s not reclaimed", ref.ActorID)
		}
	}
	for _, ref := range kept {
		if _, err := c.m(0).FindActor(ctx, ref.ActorID); err != nil {
			t.Errorf("%s of a live owner: %v", ref.ActorID, err)
		}
	}
}

var authBase = record.KindPrefix(record.KindAuthority)

// In a mesh of more than sweepShardAll serving nodes every authority key
// shard is swept by exactly sweepShardCopies distinct nodes; in a smaller
// one (or for a node not listed) every node sweeps everything. Relocation
// reservation keys are shared out the same way.
func TestSweepPrefixes(t *testing.T) {
	for _, n := range []int{1, 3, 16} {
		if p := sweepPrefixes(authBase, 0, n); p != nil {
			t.Fatalf("%d nodes: prefixes %v, want every key", n, len(p))
		}
	}
	if p := sweepPrefixes(authBase, -1, 40); p != nil {
		t.Fatal("a node not listed must sweep everything")
	}
	for _, n := range []int{17, 40, 256, 1000} {
		count := map[string]int{}
		total := 0
		for self := 0; self < n; self++ {
			for _, p := range sweepPrefixes(authBase, self, n) {
				count[p]++
				total++
			}
		}
		if len(count) != sweepShards {
			t.Fatalf("%d nodes: %d shards covered, want %d", n, len(count), sweepShards)
		}
		for p, c := range count {
			if c != sweepShardCopies {
				t.Fatalf("%d nodes: shard %s swept by %d nodes, want %d", n, p, c, sweepShardCopies)
			}
		}
		if total != sweepShards*sweepShardCopies {
			t.Fatalf("%d nodes: %d assignments", n, total)
		}
	}
	// A key lands in exactly one shard prefix, swept by sweepShardCopies nodes.
	authKey, _ := authority.Object{ID: "x", Kind: record.ObjectActor}.Key()
	resKey, _ := authority.ReservationKey([16]byte{1, 2, 3})
	for _, c := range []struct{ base, key string }{
		{authBase, authKey},
		{record.KindPrefix(authority.KindRelocationReservation), resKey},
	} {
		hits := 0
		for self := 0; self < 40; self++ {
			for _, p := range sweepPrefixes(c.base, self, 40) {
				if strings.HasPrefix(c.key, p) {
					hits++
				}
			}
		}
		if hits != sweepShardCopies {
			t.Fatalf("key %s matched %d node prefixes, want %d", c.key, hits, sweepShardCopies)
		}
	}
}

// A sweep with shares looks only at the rows under its prefixes.
func TestReclaimSweepOnlyItsShards(t *testing.T) {
	c := deadOwnerCluster(t, nil, 0)
	ctx := ctxT(t, 30*time.Second)
	shard := func(ref ActorRef) string {
		k, _ := authority.Object{ID: ref.ActorID, Kind: record.ObjectActor}.Key()
		return k[:len(record.KindPrefix(record.KindAuthority))+2]
	}
	// Two objects of the doomed node in different shards (4 make a tie
	// all but impossible: 1 in 256³).
	all := createOn(t, c, "shard", 2, 4)
	doomed := []ActorRef{all[0]}
	for _, ref := range all[1:] {
		if shard(ref) != shard(all[0]) {
			doomed = append(doomed, ref)
			break
		}
	}
	if len(doomed) != 2 {
		t.Fatal("four objects hashed into one shard")
	}
	c.nodes[2].crash()
	waitOwnerGone(t, c, doomed[0])
	n := c.nodes[1]
	r := reclaimer{loc: n.loc, exec: n.obj.exec, log: n.log, why: "test", admit: n.lease.Gate().Admit,
		shares: func(base string) []string {
			if base == authBase {
				return []string{shard(doomed[0])}
			}
			return nil
		}}
	eventually(t, 10*time.Second, "the first object's shard to be reclaimed", func() bool {
		if _, err := r.run(ctx, "", ""); err != nil {
			t.Fatal(err)
		}
		return !rowOf(t, c, record.ObjectActor, doomed[0].ActorID).Found
	})
	if !rowOf(t, c, record.ObjectActor, doomed[1].ActorID).Found {
		t.Fatal("a row outside the sweep's shards was reclaimed")
	}
}

// A Creating record whose owner died holds its Id and its slots until
// someone asks for the Id again — after a store outage, its creator's own
// abort may not have reached the store (found in a try-out: four such
// records after Redis was paused past the lease TTL). The sweep returns
// the reservation once the grace has passed; nothing else is touched.
func TestReclaimSweepReturnsAbandonedReservations(t *testing.T) {
	c := deadOwnerCluster(t, nil, 200*time.Millisecond)
	ctx := ctxT(t, 30*time.Second)
	kept := createOn(t, c, "kept", 1, 1)
	dead := c.nodes[2]
	deadNode := authority.Node{MeshName: dead.cfg.Node.MeshName, RoutingID: dead.run.rid, LifecycleGeneration: dead.run.lifecycleGeneration}
	exec, err := authority.NewExecutor(c.f.loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Reserve(ctx, authority.ReserveRequest{
		Object:   authority.Object{ID: "abandoned", Kind: record.ObjectActor, StableType: testMoverType},
		Target:   authority.Target{Node: deadNode, Owner: authority.Owner{ID: dead.run.ownerID, LeaseGeneration: dead.leaseGen.Load()}},
		Creation: record.PendingCreation{ReservationID: "r-abandoned", RequestContentReference: "inline"}}); err != nil {
		t.Fatal(err)
	}
	// A live node's creation in flight (its owner alive) stays.
	live := c.nodes[1]
	liveNode := authority.Node{MeshName: live.cfg.Node.MeshName, RoutingID: live.run.rid, LifecycleGeneration: live.run.lifecycleGeneration}
	if _, err := exec.Reserve(ctx, authority.ReserveRequest{
		Object:   authority.Object{ID: "in-flight", Kind: record.ObjectActor, StableType: testMoverType},
		Target:   authority.Target{Node: liveNode, Owner: authority.Owner{ID: live.run.ownerID, LeaseGeneration: live.leaseGen.Load()}},
		Creation: record.PendingCreation{ReservationID: "r-in-flight", RequestContentReference: "inline"}}); err != nil {
		t.Fatal(err)
	}
	dead.crash()
	var returned []ReclaimedObject
	eventually(t, 10*time.Second, "the sweep to return the abandoned reservation", func() bool {
		r, err := c.nodes[1].reclaimSweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		returned = append(returned, r.Returns...)
		return !rowOf(t, c, record.ObjectActor, "abandoned").Found
	})
	if len(returned) != 1 || returned[0].ID != "abandoned" {
		t.Errorf("returned %+v, want the abandoned creation once", returned)
	}
	rows, err := authority.ReadCounters(ctx, c.f.loc, []authority.CounterID{{Node: deadNode, Class: authority.SlotActors}})
	if err != nil || rows[0].Usage.Reserved != 0 {
		t.Errorf("the dead run's reserved actor slots: %+v, %v; want 0", rows, err)
	}
	if row := rowOf(t, c, record.ObjectActor, "in-flight"); !row.Found || row.Record.Allocation.State != record.AllocationReserved {
		t.Errorf("a live owner's creation in flight: %+v, want its Reserved record kept", row)
	}
	if _, err := c.m(0).FindActor(ctx, kept[0].ActorID); err != nil {
		t.Errorf("%s of a live owner: %v", kept[0].ActorID, err)
	}
}

// partyOf is node n's host run as a relocation party.
func partyOf(n *Node) authority.Party {
	return authority.Party{
		Node:  authority.Node{MeshName: n.cfg.Node.MeshName, RoutingID: n.run.rid, LifecycleGeneration: n.run.lifecycleGeneration},
		Owner: authority.Owner{ID: n.run.ownerID, LeaseGeneration: n.leaseGen.Load()},
	}
}

// secureMove secures room on to for moving ref (hosted by from), as the
// source of a relocation does first, and returns the reservation's row key.
func secureMove(t *testing.T, c *cluster, exec *authority.Executor, ref ActorRef, from, to *Node, id byte) string {
	t.Helper()
	row := rowOf(t, c, record.ObjectActor, ref.ActorID)
	bundle, err := authority.BundleFor(record.ObjectActor, testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	dst := partyOf(to)
	req := authority.CapacityRequest{
		ReservationID: [16]byte{15: id}, Bundle: bundle,
		Object:           authority.Object{ID: ref.ActorID, Kind: record.ObjectActor, StableType: testMoverType},
		ObjectGeneration: uint64(row.Record.ObjectGeneration), AuthorityVersion: row.Version,
		Source: partyOf(from), Target: authority.Target{Node: dst.Node, Owner: dst.Owner},
	}
	if _, err := exec.SecureCapacity(ctxT(t, 10*time.Second), req); err != nil {
		t.Fatal(err)
	}
	key, err := authority.ReservationKey(req.ReservationID)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// A relocation reservation whose source died before its move committed or
// was cancelled is released by the reclaim sweep (after the grace; ctl
// reclaim lists it without waiting): its target's reserved slots come back.
// A live source's reservation is left to its source.
func TestReclaimSweepReleasesADeadSourcesRelocationReservation(t *testing.T) {
	c := deadOwnerCluster(t, nil, 200*time.Millisecond)
	ctx := ctxT(t, 30*time.Second)
	live, dead := c.nodes[1], c.nodes[2]
	exec, err := authority.NewExecutor(c.f.loc)
	if err != nil {
		t.Fatal(err)
	}
	leaving := createOn(t, c, "leaving", 2, 1)[0]
	orphan := secureMove(t, c, exec, leaving, dead, live, 1)
	kept := secureMove(t, c, exec, createOn(t, c, "staying", 1, 1)[0], live, dead, 2)
	liveActors := authority.CounterID{Node: partyOf(live).Node, Class: authority.SlotActors}
	reserved := func() int {
		rows, err := authority.ReadCounters(ctx, c.f.loc, []authority.CounterID{liveActors})
		if err != nil {
			t.Fatal(err)
		}
		return rows[0].Usage.Reserved
	}
	if got := reserved(); got != 1 {
		t.Fatalf("live target's reserved actor slots %d, want the dead source's move's 1", got)
	}
	dead.crash()
	present := func(key string) bool {
		rr, err := c.f.loc.Read(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return rr.Found
	}
	// ctl reclaim --dry-run names it and changes nothing.
	eventually(t, 10*time.Second, "ctl reclaim to see the dead source's reservation", func() bool {
		res, err := ReclaimDeadOwners(ctx, c.f.loc, ReclaimOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Released) == 1 && res.Released[0].ID == leaving.ActorID
	})
	if !present(orphan) {
		t.Fatal("a dry run released the reservation")
	}
	var released []ReleasedReservation
	eventually(t, 10*time.Second, "the sweep to release the dead source's reservation", func() bool {
		res, err := live.reclaimSweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		released = append(released, res.Released...)
		return !present(orphan)
	})
	if len(released) != 1 || released[0].ID != leaving.ActorID || released[0].Bundle.Actors != 1 {
		t.Errorf("released %+v, want the dead source's reservation of %s once", released, leaving.ActorID)
	}
	if got := gathered(t, live, "meshnode_reclaims_total", "what", "relocation_reservation"); got != 1 {
		t.Errorf("meshnode_reclaims_total{what=relocation_reservation} = %v, want 1", got)
	}
	if got := reserved(); got != 0 {
		t.Errorf("live target's reserved actor slots %d after the release, want 0", got)
	}
	if !present(kept) {
		t.Error("a live source's reservation was released")
	}
}

// gathered is the value of the counter name with label = value in n's
// metrics (0 when absent).
func gathered(t *testing.T, n *Node, name, label, value string) float64 {
	t.Helper()
	v, _ := metricSample(t, n.Gatherer(), name, label, value)
	return v
}

// metricSample is the value of the counter or gauge name with label =
// value in g, and whether there is one.
func metricSample(t *testing.T, g prometheus.Gatherer, name, label, value string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true // one of them is absent (0)
				}
			}
		}
	}
	return 0, false
}

// A sweep that removes many records of a dead node logs the first
// sweepWarnFirst of them one by one at WARN and counts the rest in one
// WARN. Before, every removal was its own WARN: a node killed with
// thousands of objects made the node sweeping them write thousands of
// lines at once (an operator try-out: 514 in 20 ms).
func TestReclaimSweepLogsAFewRemovalsAndCountsTheRest(t *testing.T) {
	const doomed = sweepWarnFirst + 7
	f := newFixture(t)
	logs := f.logNode(1)
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
		cfg.Recovery.ReclaimGrace = 0
		cfg.Recovery.ReclaimSweepInterval = 0
	})
	ctx := ctxT(t, 60*time.Second)
	refs := createOn(t, c, "many", 2, doomed)
	c.nodes[2].crash()
	waitOwnerGone(t, c, refs[0])
	r, err := c.nodes[1].reclaimSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Reclaimed != doomed {
		t.Fatalf("the sweep reclaimed %d records, want %d", r.Reclaimed, doomed)
	}
	one := grepLines(logs.String(), "reclaimed an object of a dead owner")
	if len(one) != sweepWarnFirst {
		t.Errorf("%d removals logged one by one, want the first %d:\n%s", len(one), sweepWarnFirst, strings.Join(one, "\n"))
	}
	rest := grepLines(logs.String(), "reclaim sweep: more records of dead owners removed")
	want := fmt.Sprintf("not_logged=%d", doomed-sweepWarnFirst)
	if len(rest) != 1 || !strings.Contains(rest[0], "level=WARN") || !strings.Contains(rest[0], want) {
		t.Errorf("the count of the rest: %q, want one WARN with %s", rest, want)
	}
}

// ReclaimDeadOwners (ctl reclaim) returns every removal and logs none of
// them above DEBUG: its caller prints them. Before, each was also a WARN,
// so `ctl reclaim --all` wrote every object twice, on stdout and stderr
// (an operator try-out: 3,429 objects, 6,859 lines).
func TestReclaimDeadOwnersLeavesTheListToItsCaller(t *testing.T) {
	c := deadOwnerCluster(t, nil, time.Hour)
	ctx := ctxT(t, 30*time.Second)
	refs := createOn(t, c, "listed", 2, 3)
	c.nodes[2].crash()
	waitOwnerGone(t, c, refs[0])
	var logs syncbuf.Buffer
	res, err := ReclaimDeadOwners(ctx, c.f.loc, ReclaimOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reclaims) != len(refs) {
		t.Fatalf("reclaimed %+v, want the %d objects of the dead node", res.Reclaims, len(refs))
	}
	if got := grepLines(logs.String(), "reclaimed an object of a dead owner"); len(got) != 0 {
		t.Errorf("each removal logged besides the result its caller prints:\n%s", strings.Join(got, "\n"))
	}
}
