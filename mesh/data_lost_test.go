package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/marker"
	"github.com/meshnode/meshnode/mesh/record"
)

// Store data loss (issue 12 "Detect store data loss"): when the namespace
// is emptied under running nodes (FLUSHALL), every node stops new work for
// good — it reports "store data lost", publishes nothing more and issues no
// generation — instead of starting the store's generations again from 1.
func TestStoreDataLostStopsNodes(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "before-the-flush", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	flushNamespace(t, c)
	for i, n := range c.nodes {
		eventually(t, 10*time.Second, "the node to stop on the data loss", func() bool {
			return n.State() == record.StateError
		})
		if err := n.lease.Gate().Admit(); !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("node %d admits new work after the loss: %v", i, err)
		}
		if err := n.LeaseLost(); !errors.Is(err, locstore.ErrDataLost) {
			t.Errorf("node %d stopped for %v, want store data lost", i, err)
		}
		// /readyz says what only a restart fixes, not just "node is error".
		if err := n.Ready(); !errors.Is(err, locstore.ErrDataLost) || !strings.Contains(err.Error(), "restart this process") {
			t.Errorf("node %d readiness after the loss: %v", i, err)
		}
	}
	if _, err := c.m(0).CreateActor(ctx, "after-the-flush", testActorType); err == nil {
		t.Fatal("a creation succeeded on a node that saw its store's data lost")
	}
	if _, err := c.m(0).FindActor(ctx, ref.ActorID); err == nil {
		t.Fatal("the lost record was found")
	}
	// Nothing was written back: no lease, no counter restarted at 1.
	if rr, err := c.f.loc.Read(context.Background(), marker.Key); err != nil || rr.Found {
		t.Errorf("marker after the loss: found %v, %v (nobody should have rewritten it)", rr.Found, err)
	}
}

// Only the marker vanished (the leases were renewed meanwhile, as after a
// flush followed by fast renewals): the marker check alone stops the nodes.
func TestStoreDataLostByMarker(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.f.loc.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(marker.Key)}}); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.nodes {
		eventually(t, 10*time.Second, "the node to stop on the lost marker", func() bool {
			return n.State() == record.StateError
		})
		if err := n.LeaseLost(); !errors.Is(err, locstore.ErrDataLost) {
			t.Errorf("node %d stopped for %v, want store data lost", i, err)
		}
	}
}

// The namespace goes back in time under running nodes, as when Sentinel
// fails over to a replica that missed the master's last writes: every key
// is older, the namespace marker included, so the marker check sees
// nothing. Each node's next write draws a commit sequence number its
// earlier writes had already reached (locstore/redis rollback watch), and
// the node stops as for any data loss instead of building on reissued
// versions and generations. Each node has a Store of its own, as separate
// processes do.
func TestStoreRollbackStopsNodes(t *testing.T) {
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	f := newFixture(t)
	c := newClusterWith(t, f, func(int) locstore.Store {
		s, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns,
			OperationTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.m(0).CreateActor(ctx, "before-the-snapshot", testActorType); err != nil {
		t.Fatal(err)
	}
	older := testredis.TakeSnapshot(t, addr, "{"+ns+"}:")
	if _, err := c.m(1).CreateActor(ctx, "lost-by-the-failover", testActorType); err != nil {
		t.Fatal(err)
	}
	// Both nodes renew (every 500 ms) past the snapshot before it comes back.
	time.Sleep(1500 * time.Millisecond)
	testredis.RollBack(t, addr, older)
	for i, n := range c.nodes {
		// Its lease may first look lost in the ordinary way (the renew
		// finds an older version of its own row); the first write that
		// draws a sequence number tells the data loss.
		eventually(t, 10*time.Second, "the node to stop on the rollback", func() bool {
			return n.State() == record.StateError && errors.Is(n.LeaseLost(), locstore.ErrDataLost)
		})
		lost := n.LeaseLost()
		if !errors.Is(lost, locstore.ErrDataLost) || !strings.Contains(lost.Error(), "went back in time") {
			t.Errorf("node %d stopped for %v, want the store gone back in time", i, lost)
		}
		if err := n.Ready(); !errors.Is(err, locstore.ErrDataLost) || !strings.Contains(err.Error(), "restart this process") {
			t.Errorf("node %d readiness after the rollback: %v", i, err)
		}
	}
	if _, err := c.m(0).CreateActor(ctx, "after-the-rollback", testActorType); err == nil {
		t.Fatal("a creation succeeded on a node whose store went back in time")
	}
}

// meshnode_store_replicas_behind: 1 while the Location Store's writes go on
// without the replica_acks replicas (a master without a replica), 0 while
// they keep up, absent for a store whose writes do not wait.
func TestReplicasBehindMetric(t *testing.T) {
	lonely := testredis.NewServer(t)
	master := testredis.NewServer(t)
	testredis.NewReplica(t, master)
	for _, tc := range []struct {
		name   string
		addr   string
		acks   int
		want   float64
		absent bool
	}{
		{"no replica", lonely.Addr, 1, 1, false},
		{"one replica", master.Addr, 1, 0, false},
		{"writes do not wait", master.Addr, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testredis.Namespace(t)
			f := newFixture(t)
			c := newClusterWith(t, f, func(int) locstore.Store {
				s, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{tc.addr}, Namespace: ns,
					OperationTimeout: 5 * time.Second, ReplicaAcks: tc.acks, ReplicaAckTimeout: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}, 1, nil)
			got, found := metricSample(t, c.nodes[0].Gatherer(), "meshnode_store_replicas_behind", "store", "location")
			if found == tc.absent || (found && got != tc.want) {
				t.Fatalf("meshnode_store_replicas_behind{store=location} = %v (found %v), want %v (absent %v)", got, found, tc.want, tc.absent)
			}
			// The same in /v1/status (what ctl status prints).
			st := c.nodes[0].adminStatus().Stores
			if tc.absent != (len(st) == 0) || (!tc.absent && (st[0].Store != "location" || st[0].Behind != (tc.want == 1))) {
				t.Fatalf("status stores = %+v", st)
			}
		})
	}
}

// A drain (SIGTERM) of a node whose owner lease ended for good moves
// nothing, and each object's outcome says why: the store lost its data, or
// another run took the routing id over. Before, the drain looked at the
// mesh first: after a Redis restarted empty it found no serving node
// (every node had stopped on the loss) and reported each object as "drain:
// no other serving node" — 20 WARN lines and a summary blaming the mesh (an
// operator try-out).
func TestDrainOfALeaseEndedForGoodSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, c *cluster, n *Node)
		is   error  // LeaseLost wraps it
		want string // in each object's reason
	}{
		{"store data lost", func(t *testing.T, c *cluster, _ *Node) { flushNamespace(t, c) },
			locstore.ErrDataLost, "the Location Store lost its data"},
		{"routing id taken over", func(t *testing.T, _ *cluster, n *Node) {
			n.lease.Fail(fmt.Errorf("republish: %w", &directory.RoutingIDInUseError{MeshName: n.cfg.Node.MeshName,
				RoutingID: n.run.rid, OwnerID: "another-run"}))
		}, directory.ErrRoutingIDInUse, "another run took its routing id over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, clientRole0)
			ctx := ctxT(t, 60*time.Second)
			mine := createOn(t, c, "ended-"+strings.ReplaceAll(tc.name, " ", "-"), 1, 3)
			leaving := c.nodes[1]
			tc.end(t, c, leaving)
			eventually(t, 10*time.Second, "the lease to end for good", func() bool {
				return errors.Is(leaving.LeaseLost(), tc.is)
			})
			res, _ := leaving.Drain(ctx, HostRelocateOptions{})
			if len(res.Objects) != len(mine) {
				t.Fatalf("drain result lists %d objects, want %d: %+v", len(res.Objects), len(mine), res.Objects)
			}
			for _, o := range res.Objects {
				if o.Outcome != hostmove.NotStarted || !strings.Contains(o.Reason, tc.want) {
					t.Errorf("%s: %s %q, want notStarted saying %q", o.Object.ID, o.Outcome, o.Reason, tc.want)
				}
			}
		})
	}
}

// flushNamespace deletes every key of c's Location Store namespace, as a
// FLUSHALL (or a Redis restarted without persistence) does.
func flushNamespace(t *testing.T, c *cluster) {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	page, err := c.f.loc.Scan(ctx, locstore.ScanRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var muts []locstore.Mutation
	for _, it := range page.Items {
		muts = append(muts, locstore.Delete(it.Key))
	}
	if len(muts) == 0 {
		t.Fatal("nothing to flush")
	}
	if _, err := c.f.loc.Write(ctx, locstore.WriteRequest{Mutations: muts}); err != nil {
		t.Fatal(err)
	}
}

// After a store data loss the objects' dispatch is stopped for good, and
// the log says so — not that their messages and timers wait, as after an
// ordinary lease loss (an operator try-out: Redis restarted empty; the
// INFO read as if they would run once the lease came back).
func TestDataLossSaysTheObjectsDoNotRunAgain(t *testing.T) {
	f := newFixture(t)
	var logs syncbuf.Buffer
	f.logTo = func(int) io.Writer { return &logs }
	c := newClusterOn(t, f, nil, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	for i := range 4 { // objects on both nodes, most likely
		if _, err := c.m(0).CreateActor(ctx, fmt.Sprintf("held-%d", i), testActorType); err != nil {
			t.Fatal(err)
		}
	}
	flushNamespace(t, c)
	const stopped = "owner lease ended for good: objects' dispatch stopped; their messages and timers do not run here again"
	eventually(t, 10*time.Second, "a node to say its objects' dispatch stopped", func() bool {
		return strings.Contains(logs.String(), stopped)
	})
	if held := "objects' dispatch held; their messages and timers wait"; strings.Contains(logs.String(), held) {
		t.Fatalf("a node logged %q after the data loss:\n%s", held, logs.String())
	}
}

// A node stopped on a store data loss refuses its own sends and requests
// with ErrUnavailable naming the loss. Before, they read the route from the
// emptied store and answered ErrNotFound (`no actor "…"`), which an
// application takes for a destroyed object (an operator try-out: Redis
// restarted empty under a client streaming sends).
func TestDataLossRefusesMessagesSayingSo(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "sent-after-the-loss", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	flushNamespace(t, c)
	eventually(t, 10*time.Second, "node 0 to stop on the data loss", func() bool {
		return errors.Is(c.nodes[0].LeaseLost(), locstore.ErrDataLost)
	})
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"send", func() error { return c.m(0).SendActor(ctx, ref, []byte("x")) }},
		{"request", func() error { _, err := c.m(0).RequestActor(ctx, ref, []byte("count")); return err }},
	} {
		err := tc.call()
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, locstore.ErrDataLost) {
			t.Errorf("%s after the data loss: %v, want ErrUnavailable naming the data loss", tc.name, err)
		}
	}
}

// A store call that reports the store's data loss (the Redis provider's
// rollback watch, on a read as on a write) stops the node at once — the
// marker is checked then, not at the next discovery round or lease renewal
// (here an hour and 20 s away): until then the node's state said serving
// while every call failed.
func TestAStoreCallThatReportsDataLossStopsTheNodeAtOnce(t *testing.T) {
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	loc, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{addr}, Namespace: ns, OperationTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loc.Close() })
	f := newFixture(t)
	cfg := objConfig("objects")
	cfg.Lease.RenewInterval, cfg.Lease.RenewTimeout, cfg.Lease.TTL, cfg.Lease.FencingMargin = 20*time.Second, 2*time.Second, 60*time.Second, 5*time.Second
	n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: loc, Relocation: f.reloc, DiscoveryInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	ctx := ctxT(t, 10*time.Second)
	keys, err := rdb.Keys(ctx, "{"+ns+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("namespace keys: %v %v", keys, err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil { // a store restarted empty
		t.Fatal(err)
	}
	if _, err := n.loc.Read(ctx, "any"); !errors.Is(err, locstore.ErrDataLost) {
		t.Fatalf("read of the emptied store: %v, want ErrDataLost", err)
	}
	eventually(t, 3*time.Second, "the node to stop on the data loss its store reported", func() bool {
		return n.State() == record.StateError && errors.Is(n.LeaseLost(), locstore.ErrDataLost)
	})
}
