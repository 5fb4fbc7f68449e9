package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// outageStore fails every call while down, as an unreachable Redis does.
type outageStore struct {
	locstore.Store
	down       atomic.Bool
	writesDown atomic.Bool // reads answered, writes refused (Redis out of memory, or short of replicas)
}

func (s *outageStore) err() error {
	return &locstore.ProviderError{Provider: "test", Op: "call", Err: context.DeadlineExceeded}
}

func (s *outageStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if s.down.Load() {
		return locstore.ReadResult{}, s.err()
	}
	return s.Store.Read(ctx, key)
}

func (s *outageStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if s.down.Load() || s.writesDown.Load() {
		return locstore.WriteResult{}, s.err()
	}
	return s.Store.Write(ctx, req)
}

func (s *outageStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	if s.down.Load() {
		return locstore.ScanPage{}, s.err()
	}
	return s.Store.Scan(ctx, req)
}

// A store outage longer than the owner lease TTL (issue 12 "Ride out store
// outages"): every node loses its lease, refuses work meanwhile, acquires a
// new LeaseGeneration once the store answers, re-adopts its objects and
// serves again — every object answers with the state it had, under a new
// AuthorityOwnerGeneration and the new owner generation.
func TestStoreOutageLongerThanTTLKeepsObjects(t *testing.T) {
	f := newFixture(t)
	st := &outageStore{Store: f.loc}
	c := newClusterOn(t, f, st, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease // TTL 1.2 s
	})
	ctx := ctxT(t, 90*time.Second)
	var refs []ActorRef
	for i := 0; i < 6; i++ {
		ref, err := c.m(0).CreateActor(ctx, fmt.Sprintf("survivor-%d", i), testMoverType)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k <= i; k++ {
			if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
				t.Fatal(err)
			}
		}
		refs = append(refs, ref)
	}
	before := map[string]record.Authority{}
	for _, ref := range refs {
		if got, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil {
			t.Fatal(err)
		} else {
			_ = got
		}
		before[ref.ActorID] = rowOf(t, c, record.ObjectActor, ref.ActorID).Record
	}
	_, gen1 := c.nodes[1].Owner()

	st.down.Store(true)
	eventually(t, 10*time.Second, "every node to stop admitting work", func() bool {
		for _, n := range c.nodes {
			if n.lease.Gate().Admit() == nil {
				return false
			}
		}
		return true
	})
	if _, err := c.m(0).RequestActor(ctx, refs[0], []byte("count")); err == nil {
		t.Error("an object answered while its owner's lease had expired")
	}
	time.Sleep(1500 * time.Millisecond) // past every record's expiry (TTL 1.2 s)
	st.down.Store(false)

	eventually(t, 40*time.Second, "every node to serve again", func() bool {
		for _, n := range c.nodes {
			if n.LeaseLost() != nil || n.lease.Gate().Admit() != nil {
				return false
			}
		}
		return true
	})
	if _, gen := c.nodes[1].Owner(); gen <= gen1 {
		t.Fatalf("node 1 serves under lease generation %d, want above %d", gen, gen1)
	}
	for i, ref := range refs {
		want := fmt.Sprintf("count:%d", i+1)
		var got []byte
		var err error
		eventually(t, 10*time.Second, "the object to answer", func() bool {
			got, err = c.m(0).RequestActor(ctx, ref, []byte("count"))
			return err == nil
		})
		if string(got) != want {
			t.Errorf("%s after the outage: %q, want %q (its state)", ref.ActorID, got, want)
		}
		a := rowOf(t, c, record.ObjectActor, ref.ActorID).Record
		b := before[ref.ActorID]
		if a.ObjectGeneration != b.ObjectGeneration || a.AuthorityOwnerGeneration != b.AuthorityOwnerGeneration+1 ||
			a.OwnerID != b.OwnerID || a.OwnerLeaseGeneration <= b.OwnerLeaseGeneration {
			t.Errorf("%s record %d/%d %s/%d, want the same object and owner id under a later lease generation and AuthorityOwnerGeneration+1 (was %d/%d %s/%d)",
				ref.ActorID, a.ObjectGeneration, a.AuthorityOwnerGeneration, a.OwnerID, a.OwnerLeaseGeneration,
				b.ObjectGeneration, b.AuthorityOwnerGeneration, b.OwnerID, b.OwnerLeaseGeneration)
		}
	}
	// New work is admitted again: a creation after the outage.
	if _, err := c.m(0).CreateActor(ctx, "after-the-outage", testMoverType); err != nil {
		t.Fatalf("creation after the outage: %v", err)
	}
}

// One node is cut off from the store past its TTL while the others keep
// running with a short reclaim grace: some of its objects are reclaimed
// and created again elsewhere meanwhile (those it must drop on its return,
// without running anything), the others it re-adopts with their state.
// Never two owners: each object ends on exactly one node.
func TestCutOffNodeDropsWhatWasReclaimed(t *testing.T) {
	c, cut := cutOffCluster(t, newFixture(t), 0)
	ctx := ctxT(t, 90*time.Second)
	mine := createOn(t, c, "cutoff", 1, 4)
	for _, ref := range mine {
		if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "the sends to land", func() bool {
		got, err := c.m(0).RequestActor(ctx, mine[len(mine)-1], []byte("count"))
		return err == nil && string(got) == "count:1"
	})
	cut.down.Store(true)
	// Node 0 sees node 1's objects dead, waits out the grace and recreates
	// the first two (a new generation on node 2, state afresh).
	waitOwnerGone(t, c, mine[0])
	replaced := map[string]ActorRef{}
	for _, ref := range mine[:2] {
		var res ActorCreation
		eventually(t, 10*time.Second, "the dead owner's object to be recreated", func() bool {
			r, err := c.m(0).GetOrCreateActor(ctx, ref.ActorID, testMoverType)
			res = r
			return err == nil
		})
		if res.Outcome != Created || ownerIndex(t, c, record.ObjectActor, ref.ActorID) != 2 {
			t.Fatalf("%s: %+v, want recreated on node 2", ref.ActorID, res)
		}
		replaced[ref.ActorID] = res.Ref
	}
	cut.down.Store(false)
	eventually(t, 40*time.Second, "node 1 to serve again", func() bool {
		return c.nodes[1].LeaseLost() == nil && c.nodes[1].lease.Gate().Admit() == nil
	})
	for _, ref := range mine {
		if r, ok := replaced[ref.ActorID]; ok {
			if _, hosted := c.nodes[1].obj.hostedFor(spot.Key{ID: ref.ActorID}); hosted {
				t.Errorf("%s: node 1 still hosts the copy whose record was reclaimed", ref.ActorID)
			}
			if got, err := c.m(0).RequestActor(ctx, r, []byte("count")); err != nil || string(got) != "count:0" {
				t.Errorf("%s recreated: %q, %v; want the new generation's count:0", ref.ActorID, got, err)
			}
			continue
		}
		var got []byte
		eventually(t, 10*time.Second, "the re-adopted object to answer", func() bool {
			g, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
			got = g
			return err == nil
		})
		if string(got) != "count:1" || ownerIndex(t, c, record.ObjectActor, ref.ActorID) != 1 {
			t.Errorf("%s: %q on node %d, want its state count:1 on node 1", ref.ActorID, got, ownerIndex(t, c, record.ObjectActor, ref.ActorID))
		}
	}
}

// Work accepted before an outage is not lost to it: one-way messages queued
// behind a busy turn when the lease stopped admitting wait (the objects'
// dispatch is held, lease_hold.go) and run once the node has re-adopted
// the object — without the hold they came up while the gate was shut and
// were refused.
func TestOutageKeepsQueuedWork(t *testing.T) {
	f := newFixture(t)
	st := &outageStore{Store: f.loc}
	c := fastLeasePair(t, f, st)
	ctx := ctxT(t, 90*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "queued", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(c.probe.gate("outage")) }) }
	t.Cleanup(release) // a failed test must not leave the turn blocked
	blocked := make(chan error, 1)
	go func() {
		_, err := c.m(0).RequestActor(ctx, ref, []byte("block:outage"))
		blocked <- err
	}()
	time.Sleep(100 * time.Millisecond) // the busy turn runs
	for i := 0; i < 3; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	h, ok := c.nodes[1].obj.hostedFor(spot.Key{ID: ref.ActorID})
	if !ok {
		t.Fatal("the actor is not on node 1")
	}
	st.down.Store(true)
	eventually(t, 10*time.Second, "the object's dispatch to be held for the lease", func() bool { return h.obj.Held() })
	release() // the busy turn ends while the gate is shut
	time.Sleep(1500 * time.Millisecond)
	st.down.Store(false)
	eventually(t, 40*time.Second, "node 1 to serve again", func() bool {
		return c.nodes[1].LeaseLost() == nil && c.nodes[1].lease.Gate().Admit() == nil
	})
	var got []byte
	eventually(t, 10*time.Second, "the actor to answer", func() bool {
		g, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
		got = g
		return err == nil
	})
	if string(got) != "count:3" {
		t.Fatalf("after the outage: %q, want count:3 (the three sends queued before it)", got)
	}
	<-blocked
}

// Messages fenced with the owner combination an object was re-adopted from
// were sent to that same object, here (queued on a link while the node was
// paused, say): after the re-adoption they are admitted, one-way and
// request alike. Before, they were refused as stale routes, and the one-way
// ones dropped without a word — seen as tens of thousands of lost sends
// when a `meshnode run` server SIGSTOPped past its TTL resumed. Other
// earlier combinations stay refused.
func TestReadoptedObjectAdmitsItsEarlierFence(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c, st, ref := outageCluster(t, ctx, "late-mail")
	target := c.nodes[1]
	fence := fenceOf(t, target, ref)
	leaseGen := fence.ExpectedOwnerLeaseGeneration

	st.down.Store(true)
	eventually(t, 10*time.Second, "node 1 to stop admitting work", func() bool { return target.lease.Gate().Admit() != nil })
	time.Sleep(1500 * time.Millisecond) // past the record's expiry (TTL 1.2 s)
	st.down.Store(false)
	eventually(t, 40*time.Second, "node 1 to serve again", func() bool {
		return target.LeaseLost() == nil && target.lease.Gate().Admit() == nil
	})
	if _, gen := target.Owner(); gen <= leaseGen {
		t.Fatalf("lease generation %d after the outage, want above %d", gen, leaseGen)
	}
	// The client may have dropped its link while node 1's lease looked
	// ended; its discovery links again.
	eventually(t, 20*time.Second, "the client's link to node 1", func() bool {
		return c.nodes[0].linked(target.RID(), target.LifecycleGeneration())
	})

	send := func(f router.ActorRouteFence, request bool) *router.Reply {
		return rawActorMessage(t, ctx, c, f, request)
	}
	refused := target.ObjectStats().FenceRefused
	send(fence, false)
	send(fence, false)
	if rep := send(fence, true); rep.Result != router.ResultOK {
		t.Fatalf("request with the fence from before the re-adoption: %s/%s, want OK", rep.Result, rep.FailureCode)
	} // answered "echo:one"; a request is not counted
	other := fence
	other.ExpectedAuthorityOwnerGeneration++ // the generation it has now, with the old lease: never a real route
	send(other, false)
	if rep := send(other, true); rep.Result == router.ResultOK {
		t.Fatal("a request with another earlier combination was admitted")
	}
	if got := target.ObjectStats().FenceRefused - refused; got != 2 {
		t.Fatalf("refused %d, want the 2 with another earlier combination", got)
	}
	got, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
	if err != nil || string(got) != "count:2" {
		t.Fatalf("count = %q, %v; want count:2 (the two sends from before the re-adoption)", got, err)
	}
}

// While the gate is shut by an expired or lost lease, a one-way message for
// a held object waits in its mailbox instead of being refused (refused, it
// was dropped without anyone hearing of it: ~37,000 of them when a paused
// `meshnode run` server resumed and read what its senders had written
// before they noticed); it runs once the object is re-adopted. A request
// is still refused at once, and nothing runs while the gate is shut.
func TestHeldObjectKeepsOneWayMessagesWhileTheLeaseIsOut(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	c, st, ref := outageCluster(t, ctx, "kept-mail")
	target := c.nodes[1]
	fence := fenceOf(t, target, ref)
	h, _ := target.obj.hostedFor(actorKey("kept-mail"))

	st.down.Store(true)
	eventually(t, 10*time.Second, "node 1 to hold its object", func() bool {
		return target.lease.Gate().Admit() != nil && h.obj.Held()
	})
	refused := target.ObjectStats().FenceRefused
	rawActorMessage(t, ctx, c, fence, false)
	rawActorMessage(t, ctx, c, fence, false)
	if rep := rawActorMessage(t, ctx, c, fence, true); rep.Result == router.ResultOK {
		t.Fatal("a request was admitted while the gate was shut")
	}
	// Queued, not run: the held mailbox keeps them.
	eventually(t, 5*time.Second, "the sends to be held", func() bool { return h.obj.Queued() == 2 })
	if got := target.ObjectStats().FenceRefused - refused; got != 1 {
		t.Fatalf("refused %d while the gate was shut, want only the request", got)
	}

	time.Sleep(1500 * time.Millisecond) // past the record's expiry (TTL 1.2 s): lost, reacquired, re-adopted
	st.down.Store(false)
	eventually(t, 40*time.Second, "node 1 to serve again", func() bool {
		return target.LeaseLost() == nil && target.lease.Gate().Admit() == nil
	})
	var got []byte
	var err error
	eventually(t, 10*time.Second, "the object to answer", func() bool {
		got, err = c.m(0).RequestActor(ctx, ref, []byte("count"))
		return err == nil
	})
	if string(got) != "count:2" {
		t.Fatalf("count = %q, want count:2 (the two sends held while the lease was out)", got)
	}
}

// listsCurrentOwners reports whether n's descriptor list shows each of
// servers serving with a valid lease under the owner combination it holds
// now.
func listsCurrentOwners(n *Node, servers ...*Node) bool {
	snap, ok := n.LastSnapshot()
	if !ok {
		return false
	}
	for _, s := range servers {
		owner, gen := s.Owner()
		found := false
		for _, e := range snap.Entries {
			d := e.Descriptor
			if string(d.RoutingID) == string(s.RID()) && e.LeaseValid && d.State == record.StateServing &&
				d.OwnerID == owner && uint64(d.LeaseGeneration) == gen {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// outageCluster is a client (node 0) and a server (node 1) on a store that
// can go down, with lease timing fast enough for an outage past the TTL
// (1.2 s), and the test.mover Actor id created on node 1.
func outageCluster(t *testing.T, ctx context.Context, id string) (*cluster, *outageStore, ActorRef) {
	t.Helper()
	f := newFixture(t)
	st := &outageStore{Store: f.loc}
	c := fastLeasePair(t, f, st)
	ref, err := c.m(0).CreateActor(ctx, id, testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	return c, st, ref
}

// fastLeasePair is a client node 0 and a server node 1 on st with a
// 1.2 s lease TTL.
func fastLeasePair(t *testing.T, f *fixture, st locstore.Store) *cluster {
	t.Helper()
	return newClusterOn(t, f, st, 2, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
	})
}

// rawActorMessage sends "one" from node 0 to node 1 under fence f on the
// bare transport: one-way (nil) or as a request (its reply).
func rawActorMessage(t *testing.T, ctx context.Context, c *cluster, f router.ActorRouteFence, request bool) *router.Reply {
	t.Helper()
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("one")}
	to := transport.RID(c.nodes[1].RID())
	if !request {
		if err := c.nodes[0].Transport().Send(ctx, to, router.NewRecord(&router.ActorSend{TargetActor: f}, nil, payload)); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	rec := router.NewRecord(&router.ActorRequest{Operation: opIDOf(NewOperationID()), TargetActor: f}, nil, payload)
	resp, err := c.nodes[0].Transport().Request(ctx, to, rec)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Body.(*router.Reply)
}

// A store that answers reads but refuses writes past the lease TTL (Redis
// out of memory, or refusing writes for want of replicas): the node loses
// its lease, and /readyz says so and that no restart is needed — until the
// store takes writes again and the node serves again by itself.
func TestReadinessNamesAnOrdinaryLeaseLoss(t *testing.T) {
	f := newFixture(t)
	st := &outageStore{Store: f.loc}
	c := newClusterOn(t, f, st, 2, func(i int, cfg *config.Config) {
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease // TTL 1.2 s
	})
	n := c.nodes[1]
	if err := n.Ready(); err != nil {
		t.Fatalf("ready before: %v", err)
	}
	st.writesDown.Store(true)
	eventually(t, 15*time.Second, "the lease to be lost", func() bool { return n.LeaseLost() != nil })
	err := n.Ready()
	if err == nil || !strings.Contains(err.Error(), "owner lease lost") || !strings.Contains(err.Error(), "no restart needed") ||
		errors.Is(err, locstore.ErrDataLost) {
		t.Fatalf("readiness while the lease is lost: %v", err)
	}
	st.writesDown.Store(false)
	eventually(t, 15*time.Second, "the node to be ready again", func() bool { return n.Ready() == nil })
}

// lostReadoptStore is an outageStore that, once armed, loses the result
// of the next write of key (applying it) and fails the read that follows
// (the executor's re-read): the Readopt's outcome is unknown.
type lostReadoptStore struct {
	*outageStore
	key      atomic.Pointer[string]
	failRead atomic.Pointer[string] // the key whose next read fails
	lost     atomic.Int32
}

func (s *lostReadoptStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if key := s.key.Load(); key != nil {
		for _, m := range req.Mutations {
			if m.Key == *key && s.key.CompareAndSwap(key, nil) {
				if _, err := s.outageStore.Write(ctx, req); err != nil {
					return locstore.WriteResult{}, err
				}
				s.lost.Add(1)
				s.failRead.Store(key)
				return locstore.WriteResult{}, s.err()
			}
		}
	}
	return s.outageStore.Write(ctx, req)
}

func (s *lostReadoptStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if k := s.failRead.Load(); k != nil && *k == key && s.failRead.CompareAndSwap(k, nil) {
		return locstore.ReadResult{}, s.err()
	}
	return s.outageStore.Read(ctx, key)
}

// A re-adoption whose Readopt applied but whose result was lost (the
// re-read failing too) is found re-adopted by the next pass, which takes
// the record's fence for the copy here. It kept the fence from before:
// every route to the object was refused as stale, for good.
func TestReadoptWhoseResultWasLostTakesTheRecordsFence(t *testing.T) {
	f := newFixture(t)
	st := &lostReadoptStore{outageStore: &outageStore{Store: f.loc}}
	c := fastLeasePair(t, f, st)
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "lost-readopt", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
		t.Fatal(err)
	}
	target := c.nodes[1]
	st.down.Store(true)
	eventually(t, 10*time.Second, "node 1 to stop admitting work", func() bool { return target.lease.Gate().Admit() != nil })
	time.Sleep(1500 * time.Millisecond) // past the record's expiry (TTL 1.2 s)
	key, err := record.AuthorityKey(record.IdentityActor, ref.ActorID)
	if err != nil {
		t.Fatal(err)
	}
	st.key.Store(&key) // the next write of the record is the Readopt
	st.down.Store(false)
	eventually(t, 40*time.Second, "node 1 to serve again", func() bool {
		return target.LeaseLost() == nil && target.lease.Gate().Admit() == nil
	})
	if st.lost.Load() != 1 {
		t.Fatalf("%d results lost, want the Readopt's", st.lost.Load())
	}
	var got []byte
	eventually(t, 10*time.Second, "the object to answer", func() bool {
		got, err = c.m(0).RequestActor(ctx, ref, []byte("count"))
		return err == nil
	})
	if string(got) != "count:1" {
		t.Fatalf("count = %q, want count:1 (its state)", got)
	}
}

// The end of an Instance Spot's first message is recorded even when the
// gate is shut for a moment as the message's turn ends (a store pause past
// the admission deadline, the lease not lost): it is retried until the gate
// admits. It gave up at once, leaving the recovery info and the payload
// for good — a later death of the node would run the first message again
// (found by a review of the Instance Spot paths).
func TestFirstMessageEndRecordedAfterTheGateReopens(t *testing.T) {
	f := newFixture(t)
	st := &outageStore{Store: f.loc}
	c := fastLeasePair(t, f, st)
	ctx := ctxT(t, 60*time.Second)
	const id = "gate-blink"
	owner, _ := c.midFirstMessage(t, ctx, id)
	st.down.Store(true)
	eventually(t, 10*time.Second, "the owner's gate to shut", func() bool { return c.nodes[owner].lease.Gate().Admit() != nil })
	close(c.probe.gate(id)) // the first message's turn ends while the gate is shut
	time.Sleep(200 * time.Millisecond)
	st.down.Store(false)
	eventually(t, 20*time.Second, "the first message's end to be recorded", func() bool {
		a, found := c.instanceRecord(t, id)
		return found && a.PendingCreation == nil
	})
}

// A node cut off past the reclaim grace finds, when it gets a lease again,
// that the others reclaimed all its objects: it drops them all, and says
// so in at most droppedWarned WARN lines (each naming one object) plus its
// recovery WARN, which counts them all and names the first droppedWarned.
// Before, every dropped object had its WARN and the recovery line named
// them all (an operator try-out: a server SIGSTOPped two minutes, 62
// counters reclaimed, 62 WARN lines and a 1.5 KB line).
func TestReadoptDropsAreLoggedBounded(t *testing.T) {
	f := newFixture(t)
	logs := f.logNode(1)
	c, cut := cutOffCluster(t, f, 200*time.Millisecond)
	const objects = droppedWarned + 5
	mine := createOn(t, c, "manydrops", 1, objects)
	cut.down.Store(true)
	eventually(t, 30*time.Second, "node 2's sweep to reclaim every object of node 1", func() bool {
		for _, ref := range mine {
			if rowOf(t, c, record.ObjectActor, ref.ActorID).Found {
				return false
			}
		}
		return true
	})
	cut.down.Store(false)
	const recovered = "owner lease recovered after its loss"
	eventually(t, 40*time.Second, "node 1 to recover its lease", func() bool {
		return strings.Contains(logs.String(), recovered)
	})
	var warned int
	var summary string
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "dropped an object on re-adoption"):
			warned++
		case strings.Contains(line, recovered):
			summary = line
		}
	}
	wantDrops := fmt.Sprintf("dropped=%d ", len(mine))
	wantMore := fmt.Sprintf("dropped_ids_more=%d", len(mine)-droppedWarned)
	if warned != droppedWarned || !strings.Contains(summary, wantDrops) || !strings.Contains(summary, wantMore) {
		t.Fatalf("%d WARN lines for dropped objects (want %d); recovery line %q, want %q and %q",
			warned, droppedWarned, summary, wantDrops, wantMore)
	}
}

// cutOffCluster starts a client (node 0) and two servers on f, node 1
// through an outageStore the test can cut off, with a short lease (TTL
// 1.2 s), a 100 ms reclaim grace and the given sweep interval (0: none).
func cutOffCluster(t *testing.T, f *fixture, sweep time.Duration) (*cluster, *outageStore) {
	t.Helper()
	cut := &outageStore{Store: f.loc}
	c := newClusterWith(t, f, func(i int) locstore.Store {
		if i == 1 {
			return cut
		}
		return nil
	}, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
		cfg.Recovery.ReclaimGrace = 100 * time.Millisecond
		cfg.Recovery.ReclaimSweepInterval = sweep
	})
	return c, cut
}
