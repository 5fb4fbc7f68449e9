package directory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// publishListScenario is the publish/list path end to end on one store:
// the memory provider and a real Redis run the same steps. Lease expiry is
// driven by revoking records, so no clock is needed.
func publishListScenario(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	la := grantLease(t, s, "owner-a", 1, time.Minute)
	lb := grantLease(t, s, "owner-b", 2, time.Minute)
	a := newNode(t, s, la, "game", []byte{0x0a})
	newNode(t, s, lb, "game", []byte{0x0b})
	newNode(t, s, lb, "other", []byte{0x0c})

	// Replay: Ignored, nothing written.
	if res := mustPublish(t, a.pub, a.desc, directory.Ignored); res.StoredRevision != 1 {
		t.Fatalf("replay %+v", res)
	}
	// Content change: revision 2.
	a.desc.State = record.StateServing
	if res := mustPublish(t, a.pub, a.desc, directory.Published); res.Revision != 2 {
		t.Fatalf("change %+v", res)
	}

	snap, err := directory.List(ctx, s, "game", 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rids(snap)); got != "[game/0a game/0b]" || snap.ChangeNumber != 4 || !snap.Complete {
		t.Fatalf("list %s at change %d (%+v)", got, snap.ChangeNumber, snap)
	}
	for _, e := range snap.Entries {
		if !e.LeaseValid || e.LeaseExpiresAt.IsZero() {
			t.Fatalf("entry %x lease %v %v", e.Descriptor.RoutingID, e.LeaseValid, e.LeaseExpiresAt)
		}
	}
	if snap.Entries[0].Descriptor.DescriptorRevision != 2 || snap.Entries[0].Descriptor.State != record.StateServing {
		t.Fatalf("entry 0a %+v", snap.Entries[0].Descriptor)
	}

	// The planner connects to b only (a is self).
	p, err := directory.NewPlanner(directory.PlannerConfig{MeshName: "game", Self: []byte{0x0a}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	acts, err := p.Observe(0, snap)
	if err != nil || formatActions(acts) != "connect 0b new peer" {
		t.Fatalf("Observe = %s, %v", formatActions(acts), err)
	}

	// A second run claiming b's routing id while b lives: refused.
	lc := grantLease(t, s, "owner-c", 3, time.Minute)
	pc := newPublisher(t, s, lc, nil, "game", []byte{0x0b})
	if _, err := pc.Publish(ctx, descriptor("game", []byte{0x0b}, "tcp://c:1")); !errors.Is(err, directory.ErrRoutingIDInUse) {
		t.Fatalf("claim of a live routing id = %v", err)
	}
	// b's lease goes: it is listed but not valid, the planner drops it, and
	// the new run takes the routing id over.
	lb.revoke()
	snap, err = directory.List(ctx, s, "game", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Entries[1].LeaseValid {
		t.Fatal("revoked lease still valid")
	}
	if acts, _ := p.Observe(time.Second, snap); formatActions(acts) != "disconnect 0b lease not valid" {
		t.Fatalf("after revoke: %s", formatActions(acts))
	}
	res, err := pc.Publish(ctx, descriptor("game", []byte{0x0b}, "tcp://c:1"))
	if err != nil || !res.Takeover || res.PreviousOwnerID != "owner-b" {
		t.Fatalf("takeover = %+v, %v", res, err)
	}
	snap, err = directory.List(ctx, s, "game", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if acts, _ := p.Observe(2*time.Second, snap); formatActions(acts) != "connect 0b new peer" {
		t.Fatalf("after takeover: %s", formatActions(acts))
	}
	if in, _ := p.Wanted([]byte{0x0b}); in.OwnerID != "owner-c" || in.Endpoint != "tcp://c:1" {
		t.Fatalf("intent %+v", in)
	}
}

func TestScenarioMemory(t *testing.T) {
	mem, _ := newMem(t)
	publishListScenario(t, mem)
}

// redisStore opens locstore/redis on the test's Redis, closed at cleanup.
func redisStore(t *testing.T) locstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := locredis.New(ctx, locredis.Options{Addrs: []string{testredis.Addr(t)}, Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestScenarioRedis(t *testing.T) { publishListScenario(t, redisStore(t)) }

// trackerScenario runs the Tracker against a full List on one store, step
// by step: the first round, an unchanged round (one read), a node joining,
// a node stopping (descriptor stopped, then its lease released), with
// watching on. Its lists and verdicts must equal List's at every step.
func trackerScenario(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	la := grantLease(t, s, "owner-a", 1, time.Minute)
	lb := grantLease(t, s, "owner-b", 2, time.Minute)
	newNode(t, s, la, "game", []byte{0x0a})
	b := newNode(t, s, lb, "game", []byte{0x0b})
	tr := &directory.Tracker{Store: s, PageSize: 1, Self: []byte{0x0a}, Linked: func([]byte, uint64) bool { return true }}
	step := func(name string, wantReads int) {
		t.Helper()
		got, st, err := tr.Round(ctx, "game")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		full, err := directory.List(ctx, s, "game", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rids(got)) != fmt.Sprint(rids(full)) || fmt.Sprint(valid(got)) != fmt.Sprint(valid(full)) || !got.Complete {
			t.Fatalf("%s: tracker %v %v, List %v %v", name, rids(got), valid(got), rids(full), valid(full))
		}
		if wantReads >= 0 && st.Reads() != wantReads {
			t.Fatalf("%s: %d reads (%+v), want %d", name, st.Reads(), st, wantReads)
		}
	}
	step("first round", -1)
	step("unchanged", 1)
	lc := grantLease(t, s, "owner-c", 3, time.Minute)
	newNode(t, s, lc, "game", []byte{0x0c})
	step("joined", -1)
	d := b.desc
	d.State = record.StateStopped
	mustPublish(t, b.pub, d, directory.Published)
	lb.revoke()
	step("stopped", -1)
	step("unchanged again", 1)
}

func TestTrackerScenarioMemory(t *testing.T) {
	mem, _ := newMem(t)
	trackerScenario(t, mem)
}

func TestTrackerScenarioRedis(t *testing.T) { trackerScenario(t, redisStore(t)) }
