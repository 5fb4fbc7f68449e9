package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/activation"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/relocstore"
	"github.com/meshnode/meshnode/spot"
)

// instanceCluster: node 0 a client (no factories), nodes 1..count-1 servers
// offering the one Instance Spot type testInstanceType.
func instanceCluster(t *testing.T, redis bool, count int) *cluster {
	f := newFixture(t)
	if redis {
		return newClusterOn(t, f, newRedisLocation(t), count, clientRole0)
	}
	return newClusterOn(t, f, nil, count, clientRole0)
}

// instanceRow reads the authority record of an Instance Spot id.
func (c *cluster) instanceRecord(t *testing.T, id string) (record.Authority, bool) {
	t.Helper()
	row, err := c.nodes[0].obj.readAuthority(context.Background(), record.ObjectInstanceSpot, id)
	if err != nil {
		t.Fatal(err)
	}
	return row.Record, row.Found
}

// payloadGone reports whether no activation payload of id is left in the
// Relocation Store (the reference of op from node src).
func (c *cluster) payloadGone(t *testing.T, ref string) bool {
	t.Helper()
	rr, err := c.f.reloc.Read(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return !rr.Found
}

// hostOf is the index of the node hosting Instance Spot id, or -1.
func (c *cluster) instanceHost(id string) int {
	for i, n := range c.nodes {
		if n.obj.hostedInstance(id) {
			return i
		}
	}
	return -1
}

func TestInstanceSpotColdActivation(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			c := instanceCluster(t, store == "redis", 3)
			ctx := ctxT(t, 30*time.Second)

			// §7.1: no record → the chosen target creates the Spot and
			// processes that same message; the type is chosen
			// automatically (one Instance Spot type offered).
			got, err := c.m(0).RequestInstance(ctx, "room-1", []byte("whoami"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "room-1" {
				t.Fatalf("first message answered %q", got)
			}
			a, ok := c.instanceRecord(t, "room-1")
			if !ok || a.Allocation.State != record.AllocationActive || a.Allocation.ObjectKind != record.ObjectInstanceSpot ||
				a.Allocation.StableType != testInstanceType {
				t.Fatalf("record %+v (found %v), want a Ready Instance Spot of %s", a.Allocation, ok, testInstanceType)
			}
			host := c.instanceHost("room-1")
			if host < 1 || c.nodes[host].RID()[0] != a.Allocation.Descriptor.RoutingID[0] {
				t.Fatalf("hosted on node %d, record names %x", host, a.Allocation.Descriptor.RoutingID)
			}
			// The recovery info ends after the first message: record first,
			// then the payload.
			eventually(t, 10*time.Second, "pendingCreation cleared", func() bool {
				a, _ := c.instanceRecord(t, "room-1")
				return a.PendingCreation == nil
			})
			if n := c.probe.runCount("room-1"); n != 1 {
				t.Fatalf("factory ran %d times", n)
			}

			// One-way sends to a Spot that does not exist yet activate it
			// too, and the first of them is counted by the instance.
			if err := c.m(0).SendInstance(ctx, "room-2", []byte("hello"), InstanceType(testInstanceType)); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 4; i++ {
				if err := c.m(i%3).SendInstance(ctx, "room-2", []byte("hello")); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 10*time.Second, "five sends counted", func() bool {
				got, err := c.m(0).RequestInstance(ctx, "room-2", []byte("count"))
				return err == nil && string(got) == "count:5"
			})
			if n := c.probe.runCount("room-2"); n != 1 {
				t.Fatalf("factory ran %d times", n)
			}
			st := c.nodes[1].ObjectStats()
			st2 := c.nodes[2].ObjectStats()
			if st.InstancesActivated+st2.InstancesActivated != 2 {
				t.Fatalf("%d+%d activations, want 2", st.InstancesActivated, st2.InstancesActivated)
			}
		})
	}
}

// §7.1 "If multiple targets try at the same time, only the one that
// succeeds runs the factory"; every message is delivered once.
func TestInstanceSpotConcurrentFirstMessages(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			c := instanceCluster(t, store == "redis", 3)
			ctx := ctxT(t, 40*time.Second)
			const calls = 24
			var wg sync.WaitGroup
			errs := make([]error, calls)
			start := make(chan struct{})
			for i := 0; i < calls; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					if i%2 == 0 {
						errs[i] = c.m(i%3).SendInstance(ctx, "hot", []byte("x"))
					} else {
						_, errs[i] = c.m(i%3).RequestInstance(ctx, "hot", []byte("ping"))
					}
				}(i)
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if n := c.probe.runCount("hot"); n != 1 {
				t.Fatalf("factory ran %d times, want 1", n)
			}
			eventually(t, 10*time.Second, "every one-way message counted once", func() bool {
				got, err := c.m(0).RequestInstance(ctx, "hot", []byte("count"))
				return err == nil && string(got) == fmt.Sprintf("count:%d", calls/2)
			})
		})
	}
}

// §7.1 type rules and TypeMismatch, mesh rules, refusals before sending.
func TestInstanceSpotTypeRules(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) { runInstanceTypeRules(t, store == "redis") })
	}
}

func runInstanceTypeRules(t *testing.T, redis bool) {
	c := instanceCluster(t, redis, 2)
	ctx := ctxT(t, 20*time.Second)
	if _, err := c.m(0).GetOrCreateUserSpot(ctx, "user-1", testSpotType); err != nil {
		t.Fatal(err)
	}
	_, err := c.m(0).RequestInstance(ctx, "user-1", []byte("x"))
	wantIs(t, err, ErrTypeMismatch)
	if _, err := c.m(0).RequestInstance(ctx, "inst-1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, err = c.m(0).RequestInstance(ctx, "inst-1", []byte("x"), InstanceType("test.other-instance"))
	wantIs(t, err, ErrTypeMismatch)
	// A type nobody offers: nowhere to place it.
	_, err = c.m(0).RequestInstance(ctx, "inst-2", []byte("x"), InstanceType("test.nobody"))
	wantIs(t, err, ErrUnavailable)
	// Options are checked before anything is sent.
	_, err = c.m(0).RequestInstance(ctx, "inst-3", []byte("x"), InstanceType("a"), InstanceType("b"))
	wantIs(t, err, ErrInvalidOperation)
	_, err = c.m(0).RequestInstance(ctx, "inst-3", make([]byte, MaxInstanceMessage+1))
	wantIs(t, err, ErrInvalidOperation)
	_, err = c.m(0).RequestInstance(ctx, "entry:x", []byte("x"))
	wantIs(t, err, ErrInvalidOperation)
	if _, found := c.instanceRecord(t, "inst-3"); found {
		t.Fatal("a refused call created a record")
	}
	// §7.1 "No record, InMesh specified": a mesh with no live node is
	// NotFound; this node places only in its own mesh.
	_, err = c.m(0).RequestInstance(ctx, "inst-4", []byte("x"), InstanceMesh("no-such-mesh"))
	wantIs(t, err, ErrNotFound)
	got, err := c.m(0).RequestInstance(ctx, "inst-4", []byte("whoami"), InstanceMesh("objects"))
	if err != nil || string(got) != "inst-4" {
		t.Fatalf("own mesh named: %q, %v", got, err)
	}
	// A Ready Spot keeps its mesh whatever the option says (§7.1 "The
	// request option doesn't change the current owner").
	if got, err := c.m(0).RequestInstance(ctx, "inst-4", []byte("whoami"), InstanceMesh("no-such-mesh")); err != nil || string(got) != "inst-4" {
		t.Fatalf("Ready Spot with another mesh named: %q, %v", got, err)
	}
}

// §7.1 "InMesh omitted: NotConfigured if there's no object-role Mesh".
func TestInstanceSpotWithoutObjectRole(t *testing.T) {
	f := newFixture(t)
	cfg := objConfig("objects")
	cfg.Node.ObjectRole = config.RoleNone
	cfg.Node.RoutingID = "0a0a"
	n, err := Start(context.Background(), Options{Config: cfg, Factories: spot.NewRegistry(), Location: f.loc, Relocation: f.reloc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	_, err = n.Manager().RequestInstance(ctxT(t, 5*time.Second), "x", []byte("x"))
	wantIs(t, err, ErrNotConfigured)
}

// §7.1 "Type omitted: NotFound if there are 0; InvalidOperation if there
// are two or more", on real descriptor lists.
func TestInstanceSpotTypeOmitted(t *testing.T) {
	t.Run("none offered", func(t *testing.T) {
		c := instanceCluster(t, false, 2)
		_, err := c.nodes[0].obj.instanceTypeOf(context.Background(), "mesh-without-servers")
		wantIs(t, err, ErrNotFound)
	})
	t.Run("two offered", func(t *testing.T) {
		ctx := ctxT(t, 20*time.Second)
		c := instanceCluster(t, false, 2)
		// A second server offering another Instance Spot type.
		f := c.f
		if err := f.reg.Register(spotFactory("test.instance-b", c.probe)); err != nil {
			t.Fatal(err)
		}
		cfg := objConfig("objects")
		cfg.Node.RoutingID = "0909"
		n, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc, DiscoveryInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		eventually(t, 10*time.Second, "client sees the new server", func() bool {
			_, err := c.nodes[0].obj.instanceTypeOf(ctx, "objects")
			return err != nil
		})
		_, err = c.m(0).RequestInstance(ctx, "amb", []byte("x"))
		wantIs(t, err, ErrInvalidOperation)
		got, err := n.Manager().RequestInstance(ctx, "amb", []byte("whoami"), InstanceType("test.instance-b"))
		if err != nil || string(got) != "amb" {
			t.Fatalf("named type: %q, %v", got, err)
		}
	})
}

// §7.1 restart table, each row, with the activating node crashed at that
// point (in-process: everything stops, nothing is cleaned up, its lease
// expires).
func TestInstanceSpotRecoveryAfterCrash(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) { runInstanceRecovery(t, store == "redis") })
	}
}

func runInstanceRecovery(t *testing.T, redis bool) {
	t.Run("after storing, before Creating: an orphan, a new activation", func(t *testing.T) {
		c := instanceCluster(t, redis, 3)
		ctx := ctxT(t, 40*time.Second)
		// Both servers stop after storing, so whichever is chosen holds.
		r1, r2 := stepBlock(t, c, 1, "orphan", "stored"), stepBlock(t, c, 2, "orphan", "stored")
		if err := c.m(0).SendInstance(ctx, "orphan", []byte("first")); err != nil {
			t.Fatal(err)
		}
		crashed := waitEither(t, r1, r2)
		c.nodes[crashed].crash()
		c.notAdmitted(t, 0, crashed)
		if _, found := c.instanceRecord(t, "orphan"); found {
			t.Fatal("a record exists, though the node stopped before Creating")
		}
		other := 3 - crashed
		c.nodes[other].obj.hooks.Store(nil)
		got, err := c.m(0).RequestInstance(ctx, "orphan", []byte("whoami"))
		if err != nil || string(got) != "orphan" {
			t.Fatalf("next message: %q, %v", got, err)
		}
		// The crashed node's payload is pointed at by nothing: it waits
		// for its retention (24 h), the record names the new payload.
		a, _ := c.instanceRecord(t, "orphan")
		if a.OwnerID == c.nodes[crashed].run.ownerID {
			t.Fatal("the crashed node owns the record")
		}
	})

	t.Run("after Creating, before Ready: the same record is cancelled", func(t *testing.T) {
		c := instanceCluster(t, redis, 3)
		ctx := ctxT(t, 40*time.Second)
		other, _, ref := c.abandonActivation(t, ctx, "half")
		// Waits for the Creating record until its creator's lease ends,
		// then cancels it and activates afresh with this message.
		got, err := c.m(0).RequestInstance(ctx, "half", []byte("count"))
		if err != nil || string(got) != "count:0" {
			t.Fatalf("next message: %q, %v (the cancelled first message must not have run)", got, err)
		}
		if !c.payloadGone(t, ref) {
			t.Fatal("the cancelled activation's payload is still stored")
		}
		total := c.nodes[0].ObjectStats().InstancesCancelled + c.nodes[other].ObjectStats().InstancesCancelled
		if total != 1 {
			t.Fatalf("%d cancellations, want 1", total)
		}
	})

	t.Run("after Ready, before the first message is done: restored from it", func(t *testing.T) {
		c := instanceCluster(t, redis, 3)
		ctx := ctxT(t, 60*time.Second)
		// The first message's turn blocks: Ready, first message not done,
		// when the owner crashes.
		owner, a := c.midFirstMessage(t, ctx, "resume")
		gen := a.ObjectGeneration
		ref := a.PendingCreation.RequestContentReference
		c.nodes[owner].crash()
		close(c.probe.gate("resume")) // the restored turn (and the stale one) may finish
		other := 3 - owner
		c.ownerLeaseEnded(t, other, a)
		// The next message finds the record, its owner gone: the stored
		// first message runs first on the surviving server, then this one.
		got, err := c.m(0).RequestInstance(ctx, "resume", []byte("count"), InstanceType(testInstanceType))
		if err != nil || string(got) != "count:1" {
			t.Fatalf("next message: %q, %v; want count:1 (the restored first message ran before it)", got, err)
		}
		a, _ = c.instanceRecord(t, "resume")
		if a.ObjectGeneration != gen || a.OwnerID != c.nodes[other].run.ownerID {
			t.Fatalf("record gen %d owner %s; want generation %d kept, owner node %d", a.ObjectGeneration, a.OwnerID, gen, other)
		}
		eventually(t, 10*time.Second, "recovery info ended after the restored first message", func() bool {
			a, _ := c.instanceRecord(t, "resume")
			return a.PendingCreation == nil && c.payloadGone(t, ref)
		})
		if n := c.nodes[other].ObjectStats().InstancesRecovered; n != 1 {
			t.Fatalf("%d recoveries, want 1", n)
		}
	})

	t.Run("after Ready, payload lost: DataLost recorded, owner not rolled back", func(t *testing.T) {
		c := instanceCluster(t, redis, 3)
		ctx := ctxT(t, 60*time.Second)
		owner, a := c.midFirstMessage(t, ctx, "lost")
		if err := c.f.reloc.Delete(ctx, a.PendingCreation.RequestContentReference); err != nil {
			t.Fatal(err)
		}
		c.nodes[owner].crash()
		close(c.probe.gate("lost"))
		other := 3 - owner
		c.ownerLeaseEnded(t, other, a)
		got, err := c.m(0).RequestInstance(ctx, "lost", []byte("whoami"))
		if err != nil || string(got) != "lost" {
			t.Fatalf("next message: %q, %v", got, err)
		}
		a, _ = c.instanceRecord(t, "lost")
		var marker objectError
		if err := json.Unmarshal(a.Payload, &marker); err != nil || marker.Error != "dataLost" {
			t.Fatalf("location record payload %q: want a dataLost error", a.Payload)
		}
		if a.PendingCreation != nil || a.OwnerID != c.nodes[other].run.ownerID {
			t.Fatalf("record %+v: want recovery info cleared, owner node %d", a, other)
		}
		if n := c.nodes[other].ObjectStats().InstancesDataLost; n != 1 {
			t.Fatalf("%d DataLost, want 1", n)
		}
	})

	t.Run("corrupt payload: DataLost", func(t *testing.T) {
		c := instanceCluster(t, redis, 3)
		ctx := ctxT(t, 60*time.Second)
		owner, a := c.midFirstMessage(t, ctx, "bent")
		ref := a.PendingCreation.RequestContentReference
		// The surviving server reads other bytes under the reference (a
		// store that corrupted them): the checksum check must catch it.
		c.nodes[owner].crash()
		close(c.probe.gate("bent"))
		other := 3 - owner
		c.ownerLeaseEnded(t, other, a)
		corrupt := relocCorrupting{Store: c.f.reloc, ref: ref}
		c.nodes[other].reloc = corrupt
		got, err := c.m(0).RequestInstance(ctx, "bent", []byte("whoami"))
		if err != nil || string(got) != "bent" {
			t.Fatalf("next message: %q, %v", got, err)
		}
		if n := c.nodes[other].ObjectStats().InstancesDataLost; n != 1 {
			t.Fatalf("%d DataLost, want 1", n)
		}
	})
}

// relocCorrupting answers a read of ref with bytes whose checksum differs.
type relocCorrupting struct {
	relocstore.Store
	ref string
}

func (r relocCorrupting) Read(ctx context.Context, ref string) (relocstore.ReadResult, error) {
	if ref == r.ref {
		return relocstore.ReadResult{Found: true, Bytes: []byte("not the activation"), StoreNow: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}, nil
	}
	return r.Store.Read(ctx, ref)
}

func waitEither(t *testing.T, a, b chan struct{}) int {
	t.Helper()
	select {
	case <-a:
		return 1
	case <-b:
		return 2
	case <-time.After(20 * time.Second):
		t.Fatal("no server reached the step")
	}
	return 0
}

// The activation reference is fixed by the attempt: a check that the
// mesh uses the activation package's reference for what it stores.
func TestInstanceSpotPayloadReference(t *testing.T) {
	ref := activation.Reference(activation.Record{SpotID: "x", SourceRID: []byte{1}, SourceGen: 1, Operation: [16]byte{1}, TargetRID: []byte{2}, TargetGen: 1})
	if len(ref) < len(activationRefPrefix) || ref[:len(activationRefPrefix)] != activationRefPrefix {
		t.Fatalf("reference %q does not start with %q (recovery would not recognise it)", ref, activationRefPrefix)
	}
}

// ownerLeaseEnded waits until node i sees a's owner lease ended (a message
// before that meets an owner that still looks alive: Unavailable).
func (c *cluster) ownerLeaseEnded(t *testing.T, i int, a record.Authority) {
	t.Helper()
	eventually(t, 20*time.Second, "the crashed owner's lease to end", func() bool {
		ended, err := c.nodes[i].obj.ownerEnded(context.Background(), a, true) // as an Instance Spot message sees it
		return err == nil && ended
	})
}

// notAdmitted waits until node i no longer admits node j (crashed).
func (c *cluster) notAdmitted(t *testing.T, i, j int) {
	t.Helper()
	eventually(t, 10*time.Second, "the crashed node's link to drop", func() bool {
		for _, p := range c.nodes[i].Transport().Peers() {
			if string(p.RID) == string(c.nodes[j].RID()) {
				return false
			}
		}
		return true
	})
}

// A node's reclaim sweep restores an Instance Spot whose owner died before
// its first message was recorded done, instead of removing it: nobody has to
// message it again for its first message to run.
func TestInstanceSpotRestoredBySweep(t *testing.T) {
	c := instanceCluster(t, false, 3)
	ctx := ctxT(t, 40*time.Second)
	owner, a := c.midFirstMessage(t, ctx, "swept")
	c.nodes[owner].crash()
	close(c.probe.gate("swept"))
	other := 3 - owner
	c.ownerLeaseEnded(t, other, a)
	res, err := c.nodes[other].reclaimSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 1 || res.Reclaimed != 0 {
		t.Fatalf("sweep %+v: want the Instance Spot resumed, nothing removed", res)
	}
	if !c.nodes[other].HostsInstance("swept") {
		t.Fatal("the sweeping node does not host the restored Spot")
	}
	got, err := c.m(0).RequestInstance(ctx, "swept", []byte("count"))
	if err != nil || string(got) != "count:1" {
		t.Fatalf("count %q, %v: want the restored first message counted", got, err)
	}
}

// midFirstMessage sends a first message to Instance Spot id whose turn
// blocks (until the probe's gate id opens) and waits until the Spot is Ready
// with that message running: the owner node and the record.
func (c *cluster) midFirstMessage(t *testing.T, ctx context.Context, id string) (int, record.Authority) {
	t.Helper()
	if err := c.m(0).SendInstance(ctx, id, []byte("block:"+id)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Ready with the first message running", func() bool {
		a, found := c.instanceRecord(t, id)
		return found && a.Allocation.State == record.AllocationActive && a.PendingCreation != nil && c.instanceHost(id) > 0
	})
	a, _ := c.instanceRecord(t, id)
	return c.instanceHost(id), a
}

// One sender's messages keep their order across an activation: a send
// immediately followed by a request, from a client and from a server node,
// to Spots that do not exist yet — the request always sees the send.
func TestInstanceSpotOrderAcrossActivation(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) { runInstanceOrder(t, store == "redis") })
	}
}

// The race behind the order rule, made certain: the second message finds
// no record and follows the first on the activation route (command 39,
// queued on the activating node), the request finds the record Ready
// (committed, the activation not yet over) and takes the usual route. It
// must still run after the second message: the usual route queues behind
// the id's activations on that node.
func TestInstanceSpotUsualRouteWaitsBehindActivation(t *testing.T) {
	c := instanceCluster(t, false, 3)
	ctx := ctxT(t, 30*time.Second)
	const id = "behind"
	var stored, committed [2]chan struct{}
	release := map[string]chan struct{}{"stored": make(chan struct{}), "committed": make(chan struct{})}
	for i, node := range []int{1, 2} {
		stored[i], committed[i] = make(chan struct{}), make(chan struct{})
		var onceS, onceC sync.Once
		reachedS, reachedC := stored[i], committed[i]
		c.nodes[node].obj.hooks.Store(&testHooks{activationStep: func(got, s string) {
			if got != id {
				return
			}
			switch s {
			case "stored":
				onceS.Do(func() { close(reachedS) })
			case "committed":
				onceC.Do(func() { close(reachedC) })
			default:
				return
			}
			<-release[s]
		}})
	}
	if err := c.m(0).SendInstance(ctx, id, []byte("first")); err != nil {
		t.Fatal(err)
	}
	waitEither(t, stored[0], stored[1])
	// No record yet: the second message follows the first to its node.
	if err := c.m(0).SendInstance(ctx, id, []byte("second")); err != nil {
		t.Fatal(err)
	}
	close(release["stored"])
	waitEither(t, committed[0], committed[1])
	// Ready in the store, the activation still running: the usual route.
	type answer struct {
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		b, err := c.m(0).RequestInstance(ctx, id, []byte("count"))
		got <- answer{b, err}
	}()
	time.Sleep(100 * time.Millisecond) // the request is at the activating node by now
	close(release["committed"])
	a := <-got
	if a.err != nil || string(a.body) != "count:2" {
		t.Fatalf("count %q, %v: want count:2 (the second message before the request)", a.body, a.err)
	}
}

func runInstanceOrder(t *testing.T, redis bool) {
	c := instanceCluster(t, redis, 3)
	ctx := ctxT(t, 60*time.Second)
	for _, from := range []int{0, 1} {
		for i := 0; i < 15; i++ {
			id := fmt.Sprintf("order-%d-%d", from, i)
			if err := c.m(from).SendInstance(ctx, id, []byte("first")); err != nil {
				t.Fatal(err)
			}
			if err := c.m(from).SendInstance(ctx, id, []byte("second")); err != nil {
				t.Fatal(err)
			}
			got, err := c.m(from).RequestInstance(ctx, id, []byte("count"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "count:2" {
				t.Fatalf("%s from node %d: %q, want count:2 (both sends before the request)", id, from, got)
			}
			if n := c.probe.runCount(id); n != 1 {
				t.Fatalf("%s: factory ran %d times", id, n)
			}
		}
	}
}

// A node's sweep cancels an Instance Spot activation whose node died after
// Creating and before Ready, with its stored first message, without anyone
// messaging the Spot again (its reserved slot and Id would otherwise wait
// for that).
func TestSweepCancelsAbandonedInstanceActivation(t *testing.T) {
	c := instanceCluster(t, false, 3)
	ctx := ctxT(t, 40*time.Second)
	other, a, ref := c.abandonActivation(t, ctx, "stuck")
	c.ownerLeaseEnded(t, other, a)
	res, err := c.nodes[other].reclaimSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Returns) != 1 || res.Returns[0].ID != "stuck" || res.Reclaimed != 0 {
		t.Fatalf("sweep %+v: want the activation cancelled, nothing else", res)
	}
	if _, found := c.instanceRecord(t, "stuck"); found {
		t.Fatal("the abandoned activation's record is still there")
	}
	if !c.payloadGone(t, ref) {
		t.Fatal("the cancelled activation's payload is still stored")
	}
}

// stepBlock holds node's activation of id at step until the test ends and
// returns a channel closed once it got there.
func stepBlock(t *testing.T, c *cluster, node int, id, step string) chan struct{} {
	reached := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	c.nodes[node].obj.hooks.Store(&testHooks{activationStep: func(got, s string) {
		if got == id && s == step {
			once.Do(func() { close(reached) })
			<-release
		}
	}})
	t.Cleanup(func() { close(release) })
	return reached
}

// abandonActivation has the first message to Instance Spot id start an
// activation that stops after Creating on whichever server takes it, then
// crashes that server: the surviving server (hooks cleared), the Creating
// record and its stored first message's reference.
func (c *cluster) abandonActivation(t *testing.T, ctx context.Context, id string) (int, record.Authority, string) {
	t.Helper()
	r1, r2 := stepBlock(t, c, 1, id, "reserved"), stepBlock(t, c, 2, id, "reserved")
	if err := c.m(0).SendInstance(ctx, id, []byte("first")); err != nil {
		t.Fatal(err)
	}
	crashed := waitEither(t, r1, r2)
	a, found := c.instanceRecord(t, id)
	if !found || a.Allocation.State != record.AllocationReserved || a.PendingCreation == nil {
		t.Fatalf("record %+v, want Creating with recovery info", a)
	}
	c.nodes[crashed].crash()
	other := 3 - crashed
	c.nodes[other].obj.hooks.Store(nil)
	return other, a, a.PendingCreation.RequestContentReference
}
