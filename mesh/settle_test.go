package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
)

// lostResultStore loses the result of the next write that touches key (it
// applies the write first when apply is set) and then fails every call
// for outage: the executor's re-read cannot decide, so the operation's
// outcome is unknown (authority.ErrOutcomeUnknown).
type lostResultStore struct {
	locstore.Store
	key    atomic.Pointer[string]
	skip   atomic.Int32 // writes of key that go through before the one that loses its result
	apply  bool
	outage time.Duration
	down   atomic.Bool
	lost   atomic.Int32
}

var errLostResult = fmt.Errorf("%w: connection reset (test)", locstore.ErrUnavailable)

func (s *lostResultStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if s.down.Load() {
		return locstore.WriteResult{}, errLostResult
	}
	if key := s.key.Load(); key != nil {
		for _, m := range req.Mutations {
			if m.Key == *key && s.skip.Add(-1) >= 0 {
				break
			}
			if m.Key == *key && s.key.CompareAndSwap(key, nil) {
				return s.loseResult(ctx, req)
			}
		}
	}
	return s.Store.Write(ctx, req)
}

// loseResult applies req when apply is set, then loses its result and
// goes silent for outage.
func (s *lostResultStore) loseResult(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if s.apply {
		if _, err := s.Store.Write(ctx, req); err != nil {
			return locstore.WriteResult{}, err
		}
	}
	s.lost.Add(1)
	s.down.Store(true)
	time.AfterFunc(s.outage, func() { s.down.Store(false) })
	return locstore.WriteResult{}, errLostResult
}

func (s *lostResultStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if s.down.Load() {
		return locstore.ReadResult{}, errLostResult
	}
	return s.Store.Read(ctx, key)
}

func (s *lostResultStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	if s.down.Load() {
		return nil, errLostResult
	}
	return locstore.ReadMany(ctx, s.Store, keys)
}

// lostResultCluster is a client node 0 and a server node 1 whose store
// loses the result of a write when told (lose), applying it when apply is
// set, then stays silent for 300 ms.
func lostResultCluster(t *testing.T, apply bool) (*lostResultStore, *cluster, context.Context) {
	t.Helper()
	s := &lostResultStore{apply: apply, outage: 300 * time.Millisecond}
	c := clusterWithStore1(t, 2, func(inner locstore.Store) locstore.Store { s.Store = inner; return s }, nil)
	return s, c, ctxT(t, 20*time.Second)
}

// lose makes node 1's next write of the Actor id's authority record lose
// its result.
func (s *lostResultStore) lose(t *testing.T, id string) { s.loseAfter(t, record.IdentityActor, id, 0) }

// loseAfter lets skip writes of the authority record of (kind, id) through
// on node 1 and loses the result of the next one.
func (s *lostResultStore) loseAfter(t *testing.T, kind record.IdentityKind, id string, skip int32) {
	t.Helper()
	key, err := record.AuthorityKey(kind, id)
	if err != nil {
		t.Fatal(err)
	}
	s.skip.Store(skip)
	s.key.Store(&key)
}

// A Commit that applied but whose result was lost, with the store silent
// long enough that the executor's re-read fails, is decided by a later
// read: the instance runs and the creator is told Created. Before, the
// target closed the instance and answered a failure: the record said
// Ready on node 1 with nothing hosted there (a Create then said "already
// exists", every message "not found", for good).
func TestCreateWhoseCommitOutcomeIsUnknown(t *testing.T) {
	s, c, ctx := lostResultCluster(t, true)
	const id = "unknown-commit"
	s.lose(t, id) // the Reserve writes it on node 0's store; node 1's next write of it is the Commit
	ref, err := c.m(0).CreateActor(ctx, id, demoapp.CounterType)
	if err != nil {
		t.Fatalf("CreateActor: %v", err)
	}
	if s.lost.Load() != 1 {
		t.Fatalf("%d writes lost, want the Commit's", s.lost.Load())
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("inc")); err != nil {
		t.Fatal(err)
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "1" {
		t.Fatalf("get = %q, %v; want 1 from the instance on node 1", got, err)
	}
}

// The same with a Commit that did not apply: the instance goes, the
// reservation is returned, and the creation ends as a failure of that node
// — no instance left held, no Creating record left behind.
func TestCreateWhoseCommitDidNotApply(t *testing.T) {
	s, c, ctx := lostResultCluster(t, false)
	base := c.nodes[1].ObjectStats().Hosted // the Entry Spot
	const id = "unapplied-commit"
	s.lose(t, id)
	_, err := c.m(0).CreateActor(ctx, id, demoapp.CounterType)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CreateActor = %v, want ErrUnavailable (the only server failed)", err)
	}
	if n := c.nodes[1].ObjectStats().Hosted - base; n != 0 {
		t.Fatalf("node 1 hosts %d more objects, want none", n)
	}
	if row := rowOf(t, c, record.ObjectActor, id); row.Found {
		t.Fatalf("record left behind: %+v", row.Record.Allocation)
	}
	// And the Id can be created once the store answers.
	for end := time.Now().Add(5 * time.Second); s.down.Load() && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.m(0).CreateActor(ctx, id, demoapp.CounterType); err != nil {
		t.Fatalf("CreateActor again: %v", err)
	}
}

// A Delete that applied but whose result was lost is decided by a later
// read: the instance ends. Before, it was reopened and kept running with
// no record (its slots freed), reachable through cached routes.
func TestDestroyWhoseDeleteOutcomeIsUnknown(t *testing.T) {
	s, c, ctx := lostResultCluster(t, true)
	const id = "unknown-delete"
	base := c.nodes[1].ObjectStats().Hosted // the Entry Spot
	ref, err := c.m(0).CreateActor(ctx, id, demoapp.CounterType)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.nodes[1].ObjectStats().Hosted - base; n != 1 {
		t.Fatalf("node 1 hosts %d more objects, want 1", n)
	}
	s.lose(t, id)
	destroyed, err := c.m(0).Destroy(ctx, ref)
	if err != nil || !destroyed {
		t.Fatalf("Destroy = %v, %v; want true once a read shows the record gone", destroyed, err)
	}
	if s.lost.Load() != 1 {
		t.Fatalf("%d writes lost, want the Delete's", s.lost.Load())
	}
	if n := c.nodes[1].ObjectStats().Hosted - base; n != 0 {
		t.Fatalf("node 1 still hosts the object after its record was deleted (%d more than before)", n)
	}
}

// A factory's rejection recorded by an Abort whose result was lost is
// decided by a read too: the record gone means the rejection (and its
// stored final result) applied, and the creator is told Rejected — not a
// failure before the factory, after which it would run the factory again
// elsewhere although a final result is stored.
func TestRejectionWhoseAbortOutcomeIsUnknown(t *testing.T) {
	s, c, ctx := lostResultCluster(t, true)
	const id = "unknown-rejection"
	s.lose(t, id)
	_, err := c.m(0).CreateActor(ctx, id, testActorType, WithBody([]byte("decline:not today")))
	if !errors.Is(err, ErrRejected) || s.lost.Load() != 1 {
		t.Fatalf("CreateActor = %v (%d writes lost); want the rejection", err, s.lost.Load())
	}
	if runs := c.probe.runCount(id); runs != 1 {
		t.Fatalf("the factory ran %d times, want once", runs)
	}
}

// An Instance Spot's cold activation whose Commit applied but whose result
// was lost: the instance, its first message queued, is held until a read
// decides, then runs and answers. Before, it was dropped while its record
// said Ready on node 1, and every message to it spun on "not found" until
// its deadline.
func TestInstanceActivationWhoseCommitOutcomeIsUnknown(t *testing.T) {
	s, c, ctx := lostResultCluster(t, true)
	const id = "unknown-activation"
	s.loseAfter(t, record.IdentitySpot, id, 1) // the Reserve goes through, the Commit's result is lost
	got, err := c.m(0).RequestInstance(ctx, id, []byte("whoami"))
	if err != nil || string(got) != id {
		t.Fatalf("first message answered %q, %v; want %q", got, err, id)
	}
	if s.lost.Load() != 1 {
		t.Fatalf("%d writes lost, want the Commit's", s.lost.Load())
	}
	if got, err := c.m(0).RequestInstance(ctx, id, []byte("whoami")); err != nil || string(got) != id {
		t.Fatalf("second message answered %q, %v", got, err)
	}
	if n := c.probe.runCount(id); n != 1 {
		t.Fatalf("factory ran %d times, want once", n)
	}
}

// lostBatchStore loses the result of the next capacity batch once armed
// (a write that puts a relocation reservation), applying it, and then
// fails every call for outage. (It lost the next write of several rows
// until 2026-12-06: a descriptor publish of the capacity copy, made in
// the background after the creation, could come first — a CI run failed
// so.)
type lostBatchStore struct {
	lostResultStore
	armed atomic.Bool
}

// putsReservation reports whether req puts a relocation reservation row.
func putsReservation(req locstore.WriteRequest) bool {
	for _, m := range req.Mutations {
		if m.Kind == locstore.MutPut {
			if _, err := authority.DecodeReservation(m.Value); err == nil {
				return true
			}
		}
	}
	return false
}

func (s *lostBatchStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if putsReservation(req) && !s.down.Load() && s.armed.CompareAndSwap(true, false) {
		return s.loseResult(ctx, req)
	}
	return s.lostResultStore.Write(ctx, req)
}

// A move whose capacity batch applied but whose result was lost, the
// re-read failing too, releases the reservation it may have written. It
// was refused as "capacity" with nothing released: the reservation held
// the target's slot for good while both nodes lived, and the next move to
// that target failed for want of capacity.
func TestMoveWhoseCapacityBatchOutcomeIsUnknown(t *testing.T) {
	f := newFixture(t)
	stores := map[int]*lostBatchStore{}
	c := newClusterWith(t, f, func(i int) locstore.Store {
		stores[i] = &lostBatchStore{lostResultStore: lostResultStore{Store: f.loc, apply: true, outage: 300 * time.Millisecond}}
		return stores[i]
	}, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Node.Limits.Actors = 1 // the target has room for exactly the one move
	})
	ctx := ctxT(t, 30*time.Second)
	const id = "unknown-capacity"
	ref, err := c.m(0).CreateActor(ctx, id, testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, id)
	stores[src].armed.Store(true)
	res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	if err != nil || res.Outcome != NotMoved || res.Reason != relocation.ReasonStoreUnconfirmed.String() {
		t.Fatalf("move = %v %q, %v; want NotMoved storeUnconfirmed", res.Outcome, res.Reason, err)
	}
	if stores[src].lost.Load() != 1 {
		t.Fatalf("%d results lost, want the capacity batch's", stores[src].lost.Load())
	}
	// The reservation was released: the target's one slot is free again.
	waitUntil(t, "the object to move once the store answers", func() bool {
		res, err = c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
		return err == nil && res.Outcome == Moved
	})
}

// A recovery takeover of an Instance Spot (its owner died before its first
// message was done) whose result was lost: the record names this node, the
// rebuild never ran. The next message rebuilds it here from the stored
// first message. Before, nothing ever did while this node lived: every
// message spun on "not found" until its deadline (found by a review).
func TestInstanceTakeoverWhoseResultWasLostIsRebuilt(t *testing.T) {
	f := newFixture(t)
	stores := map[int]*lostResultStore{}
	c := newClusterWith(t, f, func(i int) locstore.Store {
		stores[i] = &lostResultStore{Store: f.loc, apply: true, outage: 300 * time.Millisecond}
		return stores[i]
	}, 3, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	const id = "lost-takeover"
	owner, a := c.midFirstMessage(t, ctx, id)
	c.nodes[owner].crash()
	close(c.probe.gate(id))
	other := 3 - owner
	c.ownerLeaseEnded(t, other, a)
	stores[other].loseAfter(t, record.IdentitySpot, id, 0) // the takeover's result is lost
	var got []byte
	var err error
	eventually(t, 20*time.Second, "the Spot to answer on the surviving server", func() bool {
		got, err = c.m(0).RequestInstance(ctx, id, []byte("count"), InstanceType(testInstanceType))
		return err == nil
	})
	if string(got) != "count:1" {
		t.Fatalf("count = %q; want count:1 (the stored first message ran before it)", got)
	}
	if stores[other].lost.Load() != 1 {
		t.Fatalf("%d results lost, want the takeover's", stores[other].lost.Load())
	}
	if !c.nodes[other].HostsInstance(id) {
		t.Fatal("the surviving server does not host the Spot")
	}
}
