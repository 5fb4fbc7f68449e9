package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
)

// ownerIndex is the index of the node the store names as the owner of an
// Actor.
func ownerIndex(t *testing.T, c *cluster, kind record.ObjectKind, id string) int {
	t.Helper()
	row := rowOf(t, c, kind, id)
	if !row.Found {
		t.Fatalf("%s has no record", id)
	}
	return c.indexOf(row.Record.Allocation.Descriptor.RoutingID)
}

// One Actor moves with its state: the send count it had, the queue it had
// not run, and the owner recorded in one CAS with AuthorityOwnerGeneration
// + 1 and the ObjectGeneration kept (§1.3, §8.2).
func TestRelocateActorCarriesState(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "mover-1", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:5" {
		t.Fatalf("before: %q, %v", got, err)
	}
	before := rowOf(t, c, record.ObjectActor, "mover-1")
	src := ownerIndex(t, c, record.ObjectActor, "mover-1")
	res, err := c.m(src).RelocateActor(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Moved || !res.Confirmed {
		t.Fatalf("outcome %v (%s)", res.Outcome, res.Reason)
	}
	after := rowOf(t, c, record.ObjectActor, "mover-1")
	dst := c.indexOf(after.Record.Allocation.Descriptor.RoutingID)
	if dst == src || dst < 1 || !bytes.Equal(res.TargetNodeRID, c.nodes[dst].RID()) {
		t.Fatalf("owner after the move: node %d (source %d, result %x)", dst, src, res.TargetNodeRID)
	}
	if after.Record.ObjectGeneration != before.Record.ObjectGeneration ||
		after.Record.AuthorityOwnerGeneration != before.Record.AuthorityOwnerGeneration+1 {
		t.Fatalf("generations %d/%d -> %d/%d", before.Record.ObjectGeneration, before.Record.AuthorityOwnerGeneration,
			after.Record.ObjectGeneration, after.Record.AuthorityOwnerGeneration)
	}
	if _, ok := c.nodes[src].obj.hostedFor(actorKey("mover-1")); ok {
		t.Fatal("the source still hosts the object")
	}
	// The state moved: the count continues.
	if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
		t.Fatal(err)
	}
	got, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
	if err != nil || string(got) != "count:6" {
		t.Fatalf("after: %q, %v", got, err)
	}
	if n := c.probe.restores["mover-1"]; n != 1 {
		t.Fatalf("restored %d times", n)
	}
	// The move's progress is erased once the target opened (Completed).
	waitUntil(t, "relocation progress cleared", func() bool {
		return rowOf(t, c, record.ObjectActor, "mover-1").Record.Relocation == nil
	})
	t.Logf("timings %+v", res.Timings)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A User Spot moves as a unit with its state (PreserveStateWith).
func TestRelocateSpotCarriesState(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateUserSpot(ctx, testSpotMover)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := c.m(0).SendSpot(ctx, ref, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	src := ownerIndex(t, c, record.ObjectUserSpot, ref.SpotID)
	dst := 1 + src%2
	res, err := c.m(src).RelocateSpot(ctx, ref, ToNode(c.nodes[dst].RID()))
	if err != nil || res.Outcome != Moved || !res.Confirmed {
		t.Fatalf("move: %+v, %v", res, err)
	}
	if got := ownerIndex(t, c, record.ObjectUserSpot, ref.SpotID); got != dst {
		t.Fatalf("owner %d, want %d", got, dst)
	}
	got, err := c.m(0).RequestSpot(ctx, ref, []byte("count"))
	if err != nil || string(got) != "count:3" {
		t.Fatalf("after the move: %q, %v", got, err)
	}
	if f, err := c.m(0).FindSpot(ctx, ref.SpotID); err != nil || !bytes.Equal(f.NodeRID, c.nodes[dst].RID()) {
		t.Fatalf("Find after the move: %+v, %v", f, err)
	}
}

// RecreateOnRelocation: the queue and timers move, the application state
// does not (§1.3 table). Two sends run before the move; three more wait in
// the queue behind a busy turn while the move starts; on the target a fresh
// instance runs the three.
func TestRelocateRecreateMovesQueueNotState(t *testing.T) {
	for _, tc := range []struct {
		stableType string
		want       string
	}{{testRecreateType, "count:3"}, {testMoverType, "count:5"}} {
		t.Run(tc.stableType, func(t *testing.T) {
			c := newCluster(t, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
			ctx := ctxT(t, 30*time.Second)
			id := "queue-" + tc.stableType
			ref, err := c.m(0).CreateActor(ctx, id, tc.stableType)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := c.m(0).RequestActor(ctx, ref, []byte("count")); err != nil || string(got) != "count:2" {
				t.Fatalf("before: %q, %v", got, err)
			}
			src := ownerIndex(t, c, record.ObjectActor, id)
			h, _ := c.nodes[src].obj.hostedFor(actorKey(id))
			busy := make(chan string, 1)
			go func() {
				got, err := c.m(0).RequestActor(ctx, ref, []byte("block:"+id))
				busy <- fmt.Sprintf("%s %v", got, err)
			}()
			waitUntil(t, "the busy turn", func() bool { return h.obj.Queued() == 0 && c.nodes[src].ObjectStats().Delivered >= 4 })
			for i := 0; i < 3; i++ {
				if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, "three queued", func() bool { return h.obj.Queued() == 3 })
			moved := make(chan RelocationResult, 1)
			go func() {
				res, err := c.m(src).RelocateActor(ctx, ref)
				if err != nil {
					t.Error(err)
				}
				moved <- res
			}()
			// The move holds dispatch and waits for the busy turn; once
			// it holds, let the turn end: the three stay queued.
			waitUntil(t, "the move holds dispatch", h.obj.Held)
			close(c.probe.gate(id))
			if got := <-busy; got != "unblocked <nil>" {
				t.Fatalf("busy request: %s", got)
			}
			res := <-moved
			if res.Outcome != Moved || !res.Confirmed {
				t.Fatalf("move: %+v", res)
			}
			got, err := c.m(0).RequestActor(ctx, ref, []byte("count"))
			if err != nil || string(got) != tc.want {
				t.Fatalf("after the move: %q, %v (want %s)", got, err, tc.want)
			}
		})
	}
}

// A local sender on the node an object just left, while the store still
// names that node (the target's CAS has not landed yet): the message
// follows the object to its new owner instead of failing "not hosted"
// (§7.3 for this node's own senders).
func TestLocalSenderFollowsAMoveInFlight(t *testing.T) {
	c := followCluster(t, 3, 2, nil)
	ctx := ctxT(t, 20*time.Second)
	o := c.create(t, ctx, follow.KindActor, "in-flight")
	// Node 2 hosts it at owner generation 2 (as after the move's CAS)...
	c.arrived(t, 2, o, 2)
	// ...but the store still names node 1 at generation 1, and node 1
	// recorded the move 1 → 2 (the window between cutover and CAS).
	src := c.nodes[1]
	srcOwner, srcLease := src.Owner()
	rewriteAuthority(t, c.f.loc, record.ObjectActor, "in-flight", func(a *record.Authority) {
		a.AuthorityOwnerGeneration = 1
		a.OwnerID, a.OwnerLeaseGeneration = srcOwner, record.Generation(srcLease)
		a.Allocation.Descriptor.RoutingID = src.run.rid
		a.Allocation.DescriptorLifecycleGeneration = record.Generation(src.run.lifecycleGeneration)
	})
	c.moved(t, 1, o, 1, 2, 2)
	for i := 0; i < 2; i++ {
		if _, err := c.message(ctx, 1, o, "one", false); err != nil {
			t.Fatalf("local send during the move: %v", err)
		}
	}
	got, err := c.message(ctx, 1, o, "count", true)
	if err != nil || got != "count:2" {
		t.Fatalf("local request during the move: %q, %v", got, err)
	}
}

// A nil RelocateOption, or ToNode given twice, is ErrInvalidOperation and
// nothing moves, as for a creation's options (§7). Before, a nil option
// panicked in the caller's goroutine and the last ToNode won silently.
func TestRelocateOptionMisuseIsInvalidOperation(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "opts-1", testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	src := ownerIndex(t, c, record.ObjectActor, "opts-1")
	other := 3 - src // the servers are 1 and 2
	for name, opts := range map[string][]RelocateOption{
		"nil option":    {nil},
		"ToNode twice":  {ToNode(c.nodes[other].RID()), ToNode(c.nodes[other].RID())},
		"nil after one": {ToNode(c.nodes[other].RID()), nil},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panicked: %v", name, p)
				}
			}()
			if _, err := c.m(src).RelocateActor(ctx, ref, opts...); !errors.Is(err, ErrInvalidOperation) {
				t.Errorf("%s: %v, want ErrInvalidOperation", name, err)
			}
		}()
	}
	if got := ownerIndex(t, c, record.ObjectActor, "opts-1"); got != src {
		t.Fatalf("the Actor moved to node %d", got)
	}
}
