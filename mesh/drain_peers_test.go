package mesh

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// The last server of a mesh stopped right after the others does not wait
// for them: a node that stopped in order released its lease and removed
// its descriptor, and nothing is recovering. Before, the drain counted any
// server listed serving a moment ago as "recovering its lease" and waited
// noTargetPatience for it (an operator try-out: stopping two servers half
// a second apart, the second exited 15 s later).
func TestDrainDoesNotWaitForAPeerThatStoppedInOrder(t *testing.T) {
	f, _, _, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	logs := f.logNode(1)
	leaving := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	peer := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	createOnNode(t, ctx, client, leaving, "left", 2)
	waitUntil(t, "the leaving node to list its peer serving", func() bool { return len(leaving.recentServers()) == 1 })
	if err := peer.Close(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := leaving.Drain(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= leaving.noTargetPatience()/2 || strings.Contains(logs.String(), "recovering") {
		t.Fatalf("the drain took %v and logged a wait for a recovering peer (%q): the peer had stopped in order",
			took, grepLines(logs.String(), "recovering"))
	}
	if res.Progress.Moved != 0 {
		t.Fatalf("moved %d objects with no other server", res.Progress.Moved)
	}
}

// A drain stops taking objects and publishes draining before it looks for
// targets: that look may wait for a peer recovering its lease, and a node
// still serving meanwhile took objects a peer draining at the same time
// moved in, only for its own shutdown to remove them.
func TestDrainSaysDrainingWhileItWaitsForAPeer(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	f, hold, leaving, mine := recoveringPeerScene(t, ctx, "wait", 2)
	done := drainAsync(ctx, leaving)
	key, err := record.MeshNodeKey("objects", leaving.RID())
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the leaving node to publish draining and refuse new objects while it waits for its peer", func() bool {
		rr, err := f.loc.Read(context.Background(), key)
		if err != nil || !rr.Found {
			return false
		}
		d, err := record.DecodeMeshNode(rr.Value)
		return err == nil && d.State == record.StateDraining && leaving.obj.emptying()
	})
	select {
	case o := <-done:
		t.Fatalf("the drain ended before its peer was back: %+v, %v", o.res.Progress, o.err)
	default:
	}
	close(hold.release)
	o := <-done
	if o.err != nil || o.res.Progress.Moved < len(mine) || len(o.res.NotMoved()) != 0 {
		t.Fatalf("drain: moved %d of %d, not moved %+v, %v", o.res.Progress.Moved, len(mine), o.res.NotMoved(), o.err)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// A host command whose every possible target is leaving (listed draining:
// only a drain publishes it, and it ends in its node's stop) does not wait
// for one to serve again: before, it waited noTargetPatience per command
// (an operator try-out: two servers stopped together, the first one's
// drain failed its objects 12 s later, logging a "passing store or lease
// problem").
func TestHostCommandDoesNotWaitForPeersThatAreLeaving(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 30*time.Second)
	_, mine := createUntil(t, ctx, c, "leaving", 1, 3)
	for _, i := range []int{2, 3} {
		if err := c.nodes[i].publish(ctx, record.StateDraining); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.nodes[1].Discover(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.nodes[1].Relocate(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= c.nodes[1].noTargetPatience()/2 {
		t.Fatalf("the command took %v waiting for peers that are draining", took)
	}
	if res.Progress.Moved != 0 || len(res.NotMoved()) < len(mine) {
		t.Fatalf("moved %d, not moved %d (want all %d failed: no node to take them)", res.Progress.Moved, len(res.NotMoved()), len(mine))
	}
}

// A host command whose other servers stopped in order (published stopped,
// released their lease, removed their descriptor) does not wait for them
// to serve again: they are leaving, like a peer listed draining. Before,
// a move waited for a target (targetPatience) whenever a server was
// listed serving a moment ago and was no longer listed at all.
func TestHostCommandDoesNotWaitForPeersThatStoppedInOrder(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c, logs, mine := threeServers(t, ctx, "stopped", 3)
	for _, i := range []int{2, 3} {
		if err := c.nodes[i].Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.nodes[1].Discover(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.nodes[1].Relocate(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if waited := grepLines(logs.String(), "no node can take it now"); len(waited) > 0 {
		t.Fatalf("the moves waited for peers that had stopped in order: %q", waited)
	}
	if res.Progress.Moved != 0 || len(res.NotMoved()) < len(mine) {
		t.Fatalf("moved %d, not moved %d (want all %d failed: no node to take them)", res.Progress.Moved, len(res.NotMoved()), len(mine))
	}
}

// threeServers starts a client (node 0) and three servers, node 1 logging
// into logs, creates want seqType Actors on node 1 (mine) and returns once
// node 1 lists the two other servers serving.
func threeServers(t *testing.T, ctx context.Context, prefix string, want int) (c *cluster, logs *syncbuf.Buffer, mine []ActorRef) {
	t.Helper()
	f := newFixture(t)
	registerSeqType(t, f)
	logs = f.logNode(1)
	c = newClusterOn(t, f, nil, 4, clientRole0)
	_, mine = createUntil(t, ctx, c, prefix, 1, want)
	waitUntil(t, "node 1 to list its peers serving", func() bool { return len(c.nodes[1].recentServers()) == 2 })
	return c, logs, mine
}

// A drain of a node whose only object is still being created (its factory
// running: not hosted yet) waits for a recovering peer like a node that
// hosts objects: the creation lands, the drain lists it (relist) and moves
// it once the peer serves again. Before, the node counted as empty, did not
// wait, found no other serving node and shut down: the creation that
// landed meanwhile was removed with the node, or failed.
func TestDrainWithACreationUnderWayWaitsForARecoveringPeer(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	p := newProbe()
	leaving, logs, republish := recoveringPeerAlone(t, ctx, p)
	var landed sync.Once
	land := func() { landed.Do(func() { close(p.gate("under-way")) }) }
	defer land()
	created := make(chan error, 1)
	go func() {
		_, err := leaving.Manager().CreateActor(ctx, "under-way", testMoverType, WithBody([]byte("wait:under-way")))
		created <- err
	}()
	waitUntil(t, "the creation under way on the leaving node", func() bool {
		select {
		case err := <-created:
			t.Fatalf("the creation ended before its factory was let go: %v", err)
		default:
		}
		return leaving.obj.arrivalsUnderWay() == 1
	})
	done := drainAsync(ctx, leaving)
	waitUntil(t, "the drain to wait for its recovering peer", func() bool {
		select {
		case o := <-done:
			t.Fatalf("the drain ended without waiting for its recovering peer, a creation under way: %+v, %v", o.res.Progress, o.err)
		default:
		}
		return strings.Contains(logs.String(), "some are recovering their owner lease; waiting")
	})
	land()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	republish()
	o := <-done
	if o.err != nil || o.res.Progress.Moved != 1 || len(o.res.NotMoved()) != 0 {
		t.Fatalf("drain: moved %d, not moved %+v, %v", o.res.Progress.Moved, o.res.NotMoved(), o.err)
	}
}

// A drain waiting for a recovering peer that does not come back in time
// keeps the shutdown's reserve before its deadline, like its moves: the
// wait (noTargetPatience, 10 s at least) ran to the drain's deadline when
// shutdown_deadline was shorter (5 s here), and Close got an expired
// context — no owner sweep, no stopped publish, the lease not released
// (an incomplete shutdown). Now the objects stay unmoved and the shutdown
// completes.
func TestDrainWaitForARecoveringPeerKeepsTheShutdownReserve(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	_, hold, leaving, mine := recoveringPeerScene(t, ctx, "reserve", 1)
	defer close(hold.release) // the peer does not serve again during the drain
	if patience := leaving.noTargetPatience(); patience < leaving.cfg.ShutdownDeadline {
		t.Fatalf("test set-up: patience %v not beyond shutdown_deadline %v", patience, leaving.cfg.ShutdownDeadline)
	}
	res, err := leaving.Drain(ctx, HostRelocateOptions{})
	if err != nil {
		t.Fatalf("the drain's shutdown: %v", err)
	}
	if res.Progress.Moved != 0 || len(res.NotMoved()) != len(mine) {
		t.Fatalf("moved %d, not moved %d of %d", res.Progress.Moved, len(res.NotMoved()), len(mine))
	}
}

// A drain of a node with nothing to hand over does not wait for a peer
// recovering its lease: an empty node, and one hosting only Instance Spots
// (a drain never moves them: the shutdown removes them and each activates
// again on its next message, docs/INSTANCE-SPOTS.md). Before, the last
// server of a mesh SIGTERMed right after a pause of its own (its recent
// store trouble made every peer gone from the list "maybe recovering")
// waited the whole patience for peers that had stopped in order (an
// operator try-out, 10 s); and until 2026-12-07 any hosted object counted,
// Instance Spots included.
func TestDrainWithNothingToMoveDoesNotWaitForARecoveringPeer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		instance bool // the node hosts an Instance Spot
	}{{"empty", false}, {"only Instance Spots", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			leaving, logs, _ := recoveringPeerAlone(t, ctx, newProbe())
			if tc.instance {
				if _, err := leaving.Manager().RequestInstance(ctx, "room", []byte("hello"), InstanceType(testInstanceType)); err != nil {
					t.Fatal(err)
				}
				if _, ok := leaving.obj.hostedFor(spot.Key{Spot: true, ID: "room"}); !ok {
					t.Fatal("the Instance Spot is not hosted on the leaving node")
				}
				// The answer comes before the activation has ended (its
				// first message's end is recorded after it): until then it
				// is a creation under way, which a drain does wait for (a
				// CI run on a loaded machine drained in that window).
				eventually(t, 10*time.Second, "the activation to end", func() bool { return !leaving.obj.holdsObjects() })
			}
			res, err := leaving.Drain(ctx, HostRelocateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(logs.String(), "recovering") {
				t.Fatalf("the drain waited for a recovering peer: %q", grepLines(logs.String(), "recovering"))
			}
			if res.Progress.Moved != 0 {
				t.Fatalf("moved %d objects", res.Progress.Moved)
			}
		})
	}
}

// recoveringPeerAlone starts a server (node 1, logging into logs: the one
// to drain) and its only peer (node 2), which then loses its owner lease,
// reacquires it and waits to republish its descriptor until republish: the
// leaving node lists no other server serving, one recovering.
func recoveringPeerAlone(t *testing.T, ctx context.Context, p *probe) (leaving *Node, logs *syncbuf.Buffer, republish func()) {
	t.Helper()
	f, hold, blocker, fast := republishSceneWith(t, p)
	logs = f.logNode(1)
	leaving = startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	peer := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, blocker, fast)
	if err := leaving.WaitPeers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the leaving node to list its peer serving", func() bool { return len(leaving.recentServers()) == 1 })
	loseLeaseHoldRepublish(t, peer, blocker, hold)
	var once sync.Once
	republish = func() { once.Do(func() { close(hold.release) }) }
	t.Cleanup(republish)
	if serving, recovering, err := leaving.peersNow(ctx); err != nil || serving != 0 || recovering == 0 {
		t.Fatalf("the scene has no recovering peer (serving %d, recovering %d, %v)", serving, recovering, err)
	}
	return leaving, logs, republish
}

// drainOutcome is what a Drain returned.
type drainOutcome struct {
	res HostRelocationResult
	err error
}

// drainAsync drains n on a goroutine; its outcome comes on the channel.
func drainAsync(ctx context.Context, n *Node) <-chan drainOutcome {
	done := make(chan drainOutcome, 1)
	go func() {
		res, err := n.Drain(ctx, HostRelocateOptions{})
		done <- drainOutcome{res, err}
	}()
	return done
}
