package directory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/lease/leasetest"
	"github.com/meshnode/meshnode/mesh/record"
)

var ridA = []byte{0x00, 0xa1}

func TestPublishRevisionsAndBatch(t *testing.T) {
	mem, _ := newMem(t)
	hs := &hookStore{Store: mem}
	l := grantLease(t, mem, "owner-a", 7, leaseTTL)
	p := newPublisher(t, hs, l, nil, "game", ridA)
	d := descriptor("game", ridA, "tcp://10.0.0.1:5555")

	res := mustPublish(t, p, d, directory.Published)
	if res.Revision != 1 || res.Takeover || res.Attempts != 1 {
		t.Fatalf("first publish %+v", res)
	}
	got, rr := stored(t, mem, p.Key())
	if got.DescriptorRevision != 1 || got.OwnerID != "owner-a" || got.LeaseGeneration != 7 {
		t.Fatalf("stored run/revision: %+v", got)
	}
	if got.UpdatedAt != record.EpochMillisOf(storeBase) {
		t.Fatalf("updatedAt %v, want store time %v", got.UpdatedAt, record.EpochMillisOf(storeBase))
	}
	if !rr.ExpiresAt.IsZero() {
		t.Fatalf("descriptor stored with an expiry %v; descriptors are durable", rr.ExpiresAt)
	}
	if c := counterValue(t, mem); c != 1 {
		t.Fatalf("change counter %d, want 1", c)
	}

	// The batch: fence, counter, journal, descriptor conditions; counter,
	// journal and descriptor puts, durable.
	req := hs.lastWrite
	leaseKey, leaseVersion := l.Fence()
	counterName, _ := record.DescriptorCounter(record.KindMeshNode)
	counterKey, _ := record.CounterKey(counterName)
	journalKey, _ := record.DescriptorJournalKey(record.KindMeshNode)
	wantConds := map[string]locstore.Condition{
		leaseKey:   locstore.IfVersion(leaseKey, leaseVersion),
		counterKey: locstore.IfMissing(counterKey),
		journalKey: locstore.IfMissing(journalKey),
		p.Key():    locstore.IfMissing(p.Key()),
	}
	if len(req.Conditions) != len(wantConds) {
		t.Fatalf("conditions %+v", req.Conditions)
	}
	for _, c := range req.Conditions {
		if w, ok := wantConds[c.Key]; !ok || w != c {
			t.Fatalf("condition %+v, want %+v", c, w)
		}
	}
	if len(req.Mutations) != 3 {
		t.Fatalf("mutations %+v", req.Mutations)
	}
	for _, m := range req.Mutations {
		if m.Kind != locstore.MutPut || m.Retention != 0 || (m.Key != counterKey && m.Key != journalKey && m.Key != p.Key()) {
			t.Fatalf("mutation %s kind %v retention %v", m.Key, m.Kind, m.Retention)
		}
	}

	// Unchanged content: a replay at the same revision, Ignored, nothing
	// written, however often.
	before := dump(t, mem)
	writes := hs.writes.Load()
	for i := 0; i < 3; i++ {
		res = mustPublish(t, p, d, directory.Ignored)
		if res.Revision != 1 || res.StoredRevision != 1 {
			t.Fatalf("replay %d: %+v", i, res)
		}
	}
	if hs.writes.Load() != writes {
		t.Fatal("a replay wrote to the store")
	}
	sameDump(t, before, dump(t, mem))

	// A content change takes the next revision and bumps the counter; the
	// descriptor condition is now its stored version.
	_, rr1 := stored(t, mem, p.Key())
	d.State = record.StateServing
	res = mustPublish(t, p, d, directory.Published)
	if res.Revision != 2 {
		t.Fatalf("changed content published at revision %d, want 2", res.Revision)
	}
	if got, _ := stored(t, mem, p.Key()); got.DescriptorRevision != 2 || got.State != record.StateServing {
		t.Fatalf("stored after change %+v", got)
	}
	if c := counterValue(t, mem); c != 2 {
		t.Fatalf("change counter %d, want 2", c)
	}
	found := false
	for _, c := range hs.lastWrite.Conditions {
		if c.Key == p.Key() {
			found = c == locstore.IfVersion(p.Key(), rr1.Version)
		}
	}
	if !found {
		t.Fatalf("second publish not conditioned on the stored version: %+v", hs.lastWrite.Conditions)
	}
	if p.Revision() != 2 {
		t.Fatalf("Revision() = %d", p.Revision())
	}
	// Going back to the first content is still a change.
	d.State = record.StatePreparing
	if res = mustPublish(t, p, d, directory.Published); res.Revision != 3 {
		t.Fatalf("revision %d, want 3", res.Revision)
	}
}

func TestPublishOtherRun(t *testing.T) {
	otherOwner := "owner-old"
	tests := []struct {
		name string
		// setup runs after the other run published and before ours does.
		setup    func(t *testing.T, s locstore.Store, clock *memory.ManualClock, other *testLease)
		takeover bool
	}{
		{name: "other lease valid: routing id in use", setup: func(*testing.T, locstore.Store, *memory.ManualClock, *testLease) {}},
		{name: "other lease present but unreadable: not provably gone", setup: func(t *testing.T, s locstore.Store, _ *memory.ManualClock, other *testLease) {
			res, err := s.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{
				locstore.PutExpiring(other.key, []byte(`{"recordVersion":2}`), leaseTTL)}})
			if err != nil || !res.Applied {
				t.Fatal(err)
			}
		}},
		{name: "other lease missing: takeover", takeover: true, setup: func(t *testing.T, _ locstore.Store, _ *memory.ManualClock, other *testLease) {
			other.revoke()
		}},
		{name: "other lease expired: takeover", takeover: true, setup: func(t *testing.T, _ locstore.Store, clock *memory.ManualClock, _ *testLease) {
			clock.Advance(leaseTTL)
		}},
		// The other run lost its lease and reacquired it (its OwnerId is
		// its own): alive, about to republish — not taken over.
		{name: "other run reacquired its lease: routing id in use", setup: func(t *testing.T, s locstore.Store, _ *memory.ManualClock, other *testLease) {
			putLease(t, s, other.owner, other.gen+1, leaseTTL)
		}},
		{name: "other run's reacquired lease expired: takeover", takeover: true, setup: func(t *testing.T, s locstore.Store, clock *memory.ManualClock, other *testLease) {
			putLease(t, s, other.owner, other.gen+1, leaseTTL)
			clock.Advance(leaseTTL)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, clock := newMem(t)
			other := grantLease(t, mem, otherOwner, 3, leaseTTL)
			po := newPublisher(t, mem, other, nil, "game", ridA)
			mustPublish(t, po, descriptor("game", ridA, "tcp://old:1"), directory.Published)
			// Ours is granted after the setup so that it outlives any
			// clock advance there.
			tt.setup(t, mem, clock, other)
			ours := grantLease(t, mem, "owner-new", 4, leaseTTL)
			p := newPublisher(t, mem, ours, nil, "game", ridA)
			before := dump(t, mem)

			res, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://new:1"))
			if !tt.takeover {
				var inUse *directory.RoutingIDInUseError
				if !errors.Is(err, directory.ErrRoutingIDInUse) || !errors.As(err, &inUse) {
					t.Fatalf("Publish = %+v, %v; want ErrRoutingIDInUse", res, err)
				}
				if inUse.OwnerID != otherOwner || inUse.LeaseGeneration != 3 || inUse.MeshName != "game" || string(inUse.RoutingID) != string(ridA) {
					t.Fatalf("in-use error %+v", inUse)
				}
				sameDump(t, before, dump(t, mem))
				return
			}
			if err != nil || res.Outcome != directory.Published || !res.Takeover ||
				res.PreviousOwnerID != otherOwner || res.PreviousLeaseGeneration != 3 || res.Revision != 1 {
				t.Fatalf("takeover Publish = %+v, %v", res, err)
			}
			got, _ := stored(t, mem, p.Key())
			if got.OwnerID != "owner-new" || got.LeaseGeneration != 4 || got.Endpoint != "tcp://new:1" {
				t.Fatalf("stored after takeover %+v", got)
			}
			if c := counterValue(t, mem); c != 2 {
				t.Fatalf("change counter %d, want 2", c)
			}
			// The old run, publishing again, finds another run's descriptor
			// under a live lease: never an overwrite back.
			after := dump(t, mem)
			d := descriptor("game", ridA, "tcp://old:1")
			d.State = record.StateServing
			if _, err := po.Publish(context.Background(), d); !errors.Is(err, directory.ErrRoutingIDInUse) {
				t.Fatalf("old run Publish = %v, want ErrRoutingIDInUse", err)
			}
			sameDump(t, after, dump(t, mem))
		})
	}
}

func TestPublishOldRunCannotOverwriteTakeover(t *testing.T) {
	mem, _ := newMem(t)
	old := grantLease(t, mem, "owner-old", 1, leaseTTL)
	po := newPublisher(t, mem, old, nil, "game", ridA)
	mustPublish(t, po, descriptor("game", ridA, "tcp://old:1"), directory.Published)
	// The old run's lease disappears (it stalled); the new run takes over.
	old.revoke()
	ours := grantLease(t, mem, "owner-new", 2, leaseTTL)
	mustPublish(t, newPublisher(t, mem, ours, nil, "game", ridA), descriptor("game", ridA, "tcp://new:1"), directory.Published)
	before := dump(t, mem)
	// The stalled run comes back believing it still holds its lease (its
	// fence is stale): it must not publish.
	d := descriptor("game", ridA, "tcp://old:1")
	d.State = record.StateServing
	_, err := po.Publish(context.Background(), d)
	if !errors.Is(err, directory.ErrRoutingIDInUse) && !errors.Is(err, directory.ErrLeaseNotHeld) {
		t.Fatalf("stalled run Publish = %v; want in-use or lease-not-held", err)
	}
	sameDump(t, before, dump(t, mem))
}

func TestPublishRejectsBadDescriptors(t *testing.T) {
	manyCaps := make([]record.ObjectCapability, record.MaxCapabilities+1)
	for i := range manyCaps {
		manyCaps[i] = record.ObjectCapability{ObjectKind: record.ObjectActor, StableType: fmt.Sprintf("T%d", i), Policy: record.PolicyDisabled}
	}
	bigWeights := map[string]int{}
	for i := 0; len(bigWeights)*250 < 1<<20+1000; i++ {
		bigWeights[fmt.Sprintf("%0250d", i)] = 1
	}
	tests := []struct {
		name   string
		mutate func(d *record.MeshNodeDescriptor)
		want   error
		as     func(error) bool
	}{
		{"1,025 capabilities", func(d *record.MeshNodeDescriptor) { d.ObjectCapabilities = manyCaps },
			directory.ErrInvalidDescriptor, func(err error) bool { var e *record.LimitError; return errors.As(err, &e) }},
		{"value over 1 MiB", func(d *record.MeshNodeDescriptor) { d.ChannelWeights = bigWeights },
			directory.ErrInvalidDescriptor, func(err error) bool {
				var e *record.LimitError
				return errors.As(err, &e) && e.What == "value bytes"
			}},
		{"bad field", func(d *record.MeshNodeDescriptor) { d.PlacementWeight = 10001 },
			directory.ErrInvalidDescriptor, func(err error) bool { var e *record.FieldError; return errors.As(err, &e) }},
		{"server without entry spot", func(d *record.MeshNodeDescriptor) { d.ObjectRole = record.RoleServer },
			directory.ErrInvalidDescriptor, func(err error) bool { return errors.Is(err, record.ErrInvalidField) }},
		{"other mesh", func(d *record.MeshNodeDescriptor) { d.MeshName = "other" },
			directory.ErrInvalidArgument, func(error) bool { return true }},
		{"other routing id", func(d *record.MeshNodeDescriptor) { d.RoutingID = []byte{1} },
			directory.ErrInvalidArgument, func(error) bool { return true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, hs, p := hookedPublisher(t)
			d := descriptor("game", ridA, "tcp://a:1")
			tt.mutate(&d)
			_, err := p.Publish(context.Background(), d)
			if !errors.Is(err, tt.want) || !tt.as(err) {
				t.Fatalf("Publish = %v, want %v", err, tt.want)
			}
			if n := hs.writes.Load() + hs.reads.Load(); n != 0 {
				t.Fatalf("%d store calls before validation failed", n)
			}
			// Nothing was consumed: the next valid publish is revision 1.
			if res := mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published); res.Revision != 1 {
				t.Fatalf("revision %d after a refused publish", res.Revision)
			}
		})
	}
}

func TestPublishGate(t *testing.T) {
	mem, _ := newMem(t)
	hs := &hookStore{Store: mem}
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	g := &gate{}
	g.close(lease.ErrLeaseExpired)
	p := newPublisher(t, hs, l, g, "game", ridA)
	_, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1"))
	if !errors.Is(err, lease.ErrLeaseExpired) {
		t.Fatalf("Publish with a closed gate = %v", err)
	}
	if hs.writes.Load() != 0 || hs.reads.Load() != 0 {
		t.Fatal("store touched with a closed gate")
	}
	g.open()
	if res := mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published); res.Revision != 1 {
		t.Fatalf("revision %d", res.Revision)
	}
	// A gate closing between the read and the retry stops the retry.
	hs.setWrite(func(n int64, _ locstore.WriteRequest) (bool, error) {
		g.close(lease.ErrLeaseLost)
		bumpCounter(t, mem) // make this write conflict
		return false, nil
	})
	d := descriptor("game", ridA, "tcp://a:2")
	if _, err := p.Publish(context.Background(), d); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Publish = %v, want the gate's ErrLeaseLost on the retry", err)
	}
}

// bumpCounter moves the change counter as another publisher would.
func bumpCounter(t *testing.T, s locstore.Store) {
	t.Helper()
	name, _ := record.DescriptorCounter(record.KindMeshNode)
	key, _ := record.CounterKey(name)
	v, err := record.Counter{Value: counterValue(t, s) + 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, key, v)
}

func TestPublishRevisionExhaustion(t *testing.T) {
	t.Run("LastRevision at 2^63-2", func(t *testing.T) {
		mem, _ := newMem(t)
		l := grantLease(t, mem, "owner-a", 1, leaseTTL)
		p, err := directory.NewPublisher(directory.PublisherConfig{
			Store: mem, Lease: l, Gate: &gate{}, MeshName: "game", RoutingID: ridA,
			LastRevision: record.MaxGeneration - 1, Logger: quiet(),
		})
		if err != nil {
			t.Fatal(err)
		}
		d := descriptor("game", ridA, "tcp://a:1")
		// 2^63-1 itself may be issued (spec §4).
		if res := mustPublish(t, p, d, directory.Published); res.Revision != record.MaxGeneration {
			t.Fatalf("revision %d, want 2^63-1", res.Revision)
		}
		// A replay at 2^63-1 is still fine.
		mustPublish(t, p, d, directory.Ignored)
		checkExhausted(t, mem, p, d)
	})
	t.Run("pre-seeded descriptor of this run at 2^63-1", func(t *testing.T) {
		mem, _ := newMem(t)
		l := grantLease(t, mem, "owner-a", 1, leaseTTL)
		seed := descriptor("game", ridA, "tcp://a:1")
		seed.OwnerID, seed.LeaseGeneration, seed.DescriptorRevision = "owner-a", 1, record.MaxGeneration
		v, err := seed.Encode()
		if err != nil {
			t.Fatal(err)
		}
		key, _ := record.MeshNodeKey("game", ridA)
		put(t, mem, key, v)
		p := newPublisher(t, mem, l, nil, "game", ridA)
		d := descriptor("game", ridA, "tcp://a:1")
		res := mustPublish(t, p, d, directory.Ignored)
		if res.Revision != 1 || res.StoredRevision != record.MaxGeneration {
			t.Fatalf("replay against the seeded descriptor %+v", res)
		}
		checkExhausted(t, mem, p, d)
	})
}

func checkExhausted(t *testing.T, mem locstore.Store, p *directory.Publisher, d record.MeshNodeDescriptor) {
	t.Helper()
	before := dump(t, mem)
	d.State = record.StateServing
	_, err := p.Publish(context.Background(), d)
	if !errors.Is(err, directory.ErrRevisionExhausted) || !errors.Is(err, record.ErrRevisionExhausted) {
		t.Fatalf("Publish past 2^63-1 = %v", err)
	}
	if !p.Exhausted() {
		t.Fatal("Exhausted() false")
	}
	// Refused for good, even for content already published.
	d.State = record.StatePreparing
	if _, err := p.Publish(context.Background(), d); !errors.Is(err, directory.ErrRevisionExhausted) {
		t.Fatalf("Publish after exhaustion = %v", err)
	}
	sameDump(t, before, dump(t, mem))
}

func TestPublishConflictRetries(t *testing.T) {
	mem, _ := newMem(t)
	hs := &hookStore{Store: mem}
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	p := newPublisher(t, hs, l, nil, "game", ridA)
	hs.setWrite(func(n int64, _ locstore.WriteRequest) (bool, error) {
		if n == 1 {
			bumpCounter(t, mem) // a concurrent publisher of another node
		}
		return false, nil
	})
	res := mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published)
	if res.Attempts != 2 || hs.writes.Load() != 2 || res.Revision != 1 {
		t.Fatalf("after one conflict: %+v, %d writes", res, hs.writes.Load())
	}
	if c := counterValue(t, mem); c != 2 {
		t.Fatalf("counter %d, want 2 (the other publisher's and ours)", c)
	}

	// Always conflicting: gives up with ErrContention, no partial write.
	hs.setWrite(func(int64, locstore.WriteRequest) (bool, error) { bumpCounter(t, mem); return false, nil })
	p2, err := directory.NewPublisher(directory.PublisherConfig{
		Store: hs, Lease: l, Gate: &gate{}, MeshName: "game", RoutingID: []byte{9}, MaxAttempts: 3, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Publish(context.Background(), descriptor("game", []byte{9}, "tcp://b:1")); !errors.Is(err, directory.ErrContention) {
		t.Fatalf("Publish = %v, want ErrContention", err)
	}
	// A cancelled context stops the retries too.
	ctx, cancel := context.WithCancel(context.Background())
	hs.setWrite(func(int64, locstore.WriteRequest) (bool, error) { bumpCounter(t, mem); cancel(); return false, nil })
	if _, err := p2.Publish(ctx, descriptor("game", []byte{9}, "tcp://b:1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Publish = %v, want context.Canceled", err)
	}
}

func TestPublishFence(t *testing.T) {
	t.Run("stale fence version is refreshed from our record", func(t *testing.T) {
		mem, _ := newMem(t)
		hs := &hookStore{Store: mem}
		l := grantLease(t, mem, "owner-a", 1, leaseTTL)
		l.renew(leaseTTL, false) // the manager has not seen this renew's answer
		p := newPublisher(t, hs, l, nil, "game", ridA)
		res := mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published)
		if res.Attempts != 2 {
			t.Fatalf("attempts %d, want 2 (fence conflict, then fresh fence)", res.Attempts)
		}
	})
	t.Run("our record gone", func(t *testing.T) {
		mem, _ := newMem(t)
		l := grantLease(t, mem, "owner-a", 1, leaseTTL)
		l.revoke()
		p := newPublisher(t, mem, l, nil, "game", ridA)
		before := dump(t, mem)
		if _, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1")); !errors.Is(err, directory.ErrLeaseNotHeld) {
			t.Fatalf("Publish = %v, want ErrLeaseNotHeld", err)
		}
		sameDump(t, before, dump(t, mem))
	})
	t.Run("our record expired", func(t *testing.T) {
		mem, clock := newMem(t)
		l := grantLease(t, mem, "owner-a", 1, leaseTTL)
		clock.Advance(leaseTTL)
		p := newPublisher(t, mem, l, nil, "game", ridA)
		if _, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1")); !errors.Is(err, directory.ErrLeaseNotHeld) {
			t.Fatalf("Publish = %v, want ErrLeaseNotHeld", err)
		}
	})
	t.Run("lease manager has no version", func(t *testing.T) {
		mem, _ := newMem(t)
		l := grantLease(t, mem, "owner-a", 1, leaseTTL)
		l.version = ""
		p := newPublisher(t, mem, l, nil, "game", ridA)
		if _, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1")); !errors.Is(err, directory.ErrLeaseNotHeld) {
			t.Fatalf("Publish = %v, want ErrLeaseNotHeld", err)
		}
	})
}

func TestPublishLostAnswers(t *testing.T) {
	t.Run("applied, answer lost: confirmed by re-read", func(t *testing.T) {
		mem, hs, p := hookedPublisher(t)
		hs.setWrite(func(n int64, _ locstore.WriteRequest) (bool, error) {
			if n == 1 {
				return true, errReset
			}
			return false, nil
		})
		res := mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published)
		if hs.writes.Load() != 1 || res.Revision != 1 || counterValue(t, mem) != 1 {
			t.Fatalf("%+v after %d writes, counter %d", res, hs.writes.Load(), counterValue(t, mem))
		}
	})
	t.Run("not applied: retried", func(t *testing.T) {
		mem, hs, p := hookedPublisher(t)
		hs.setWrite(func(n int64, _ locstore.WriteRequest) (bool, error) {
			if n == 1 {
				return false, errReset
			}
			return false, nil
		})
		res := mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published)
		if hs.writes.Load() != 2 || res.Attempts != 2 || counterValue(t, mem) != 1 {
			t.Fatalf("%+v after %d writes, counter %d", res, hs.writes.Load(), counterValue(t, mem))
		}
	})
	// Writes that fail while reads answer end the publish with the store's
	// error, not "kept conflicting" after maxAttempts tight retries: a
	// lasting refusal (Redis out of memory) at once, any other failure (a
	// read-only replica) after three.
	for _, tc := range []struct {
		name   string
		err    error
		writes int64
	}{
		{"refused by the store", &locstore.ProviderError{Provider: "test", Op: "write", Refused: true, Err: errors.New("OOM command not allowed")}, 1},
		{"writes keep failing", &locstore.ProviderError{Provider: "test", Op: "write", Err: errors.New("READONLY You can't write against a read only replica")}, 3},
	} {
		t.Run(tc.name+": the store's error, not 'kept conflicting'", func(t *testing.T) {
			_, hs, p := hookedPublisher(t)
			hs.setWrite(func(int64, locstore.WriteRequest) (bool, error) { return false, tc.err })
			_, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1"))
			if !errors.Is(err, tc.err) || errors.Is(err, directory.ErrContention) || hs.writes.Load() != tc.writes {
				t.Fatalf("Publish = %v after %d writes; want the store's error after %d", err, hs.writes.Load(), tc.writes)
			}
			hs.setWrite(nil)
			mustPublish(t, p, descriptor("game", ridA, "tcp://a:1"), directory.Published)
		})
	}
	t.Run("store down: error, then the same content replays at the same revision", func(t *testing.T) {
		_, hs, p := hookedPublisher(t)
		d := descriptor("game", ridA, "tcp://a:1")
		mustPublish(t, p, d, directory.Published)
		d.State = record.StateServing
		// The write applies, then the store goes away before answering.
		hs.setWrite(func(int64, locstore.WriteRequest) (bool, error) {
			hs.setRead(func(int64, string) error { return errReset })
			return true, errReset
		})
		_, err := p.Publish(context.Background(), d)
		if !errors.Is(err, locstore.ErrUnavailable) {
			t.Fatalf("Publish with the store down = %v", err)
		}
		hs.setWrite(nil)
		hs.setRead(nil)
		res := mustPublish(t, p, d, directory.Ignored)
		if res.Revision != 2 || res.StoredRevision != 2 {
			t.Fatalf("replay after recovery %+v", res)
		}
	})
}

func TestPublishStoredValueUnreadable(t *testing.T) {
	tests := map[string][]byte{
		"garbage":         []byte("not json"),
		"unknown version": []byte(`{"recordVersion":2}`),
	}
	other := descriptor("other-mesh", ridA, "tcp://x:1")
	other.OwnerID = "owner-x"
	wrongKey, err := other.Encode()
	if err != nil {
		t.Fatal(err)
	}
	tests["descriptor of another key"] = wrongKey
	for name, value := range tests {
		t.Run(name, func(t *testing.T) {
			mem, _ := newMem(t)
			l := grantLease(t, mem, "owner-a", 1, leaseTTL)
			p := newPublisher(t, mem, l, nil, "game", ridA)
			put(t, mem, p.Key(), value)
			before := dump(t, mem)
			if _, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1")); !errors.Is(err, directory.ErrStoredDescriptor) {
				t.Fatalf("Publish = %v, want ErrStoredDescriptor", err)
			}
			sameDump(t, before, dump(t, mem))
		})
	}
}

func TestPublishSecondPublisherSameRun(t *testing.T) {
	mem, _ := newMem(t)
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	p1 := newPublisher(t, mem, l, nil, "game", ridA)
	d := descriptor("game", ridA, "tcp://a:1")
	mustPublish(t, p1, d, directory.Published)
	d.State = record.StateServing
	mustPublish(t, p1, d, directory.Published) // revision 2

	// A second publisher of the same run starting from scratch finds a
	// later revision: Ignored, then its next publish supersedes it.
	p2 := newPublisher(t, mem, l, nil, "game", ridA)
	d2 := descriptor("game", ridA, "tcp://a:2")
	if res := mustPublish(t, p2, d2, directory.Ignored); res.StoredRevision != 2 {
		t.Fatalf("%+v", res)
	}
	res := mustPublish(t, p2, d2, directory.Published)
	if res.Revision != 3 {
		t.Fatalf("superseding revision %d, want 3", res.Revision)
	}
	if got, _ := stored(t, mem, p2.Key()); got.Endpoint != "tcp://a:2" {
		t.Fatalf("stored %+v", got)
	}
	// The documented way: hand over the revision.
	p3, err := directory.NewPublisher(directory.PublisherConfig{
		Store: mem, Lease: l, Gate: &gate{}, MeshName: "game", RoutingID: ridA, LastRevision: p2.Revision(), Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	d2.State = record.StateDraining
	if res := mustPublish(t, p3, d2, directory.Published); res.Revision != 4 {
		t.Fatalf("revision %d, want 4", res.Revision)
	}
}

func TestNewPublisherArguments(t *testing.T) {
	mem, _ := newMem(t)
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	base := directory.PublisherConfig{Store: mem, Lease: l, Gate: &gate{}, MeshName: "game", RoutingID: ridA}
	tests := map[string]func(c *directory.PublisherConfig){
		"no store":          func(c *directory.PublisherConfig) { c.Store = nil },
		"no lease":          func(c *directory.PublisherConfig) { c.Lease = nil },
		"no gate":           func(c *directory.PublisherConfig) { c.Gate = nil },
		"empty mesh":        func(c *directory.PublisherConfig) { c.MeshName = "" },
		"empty rid":         func(c *directory.PublisherConfig) { c.RoutingID = nil },
		"negative attempts": func(c *directory.PublisherConfig) { c.MaxAttempts = -1 },
		"revision too big":  func(c *directory.PublisherConfig) { c.LastRevision = record.MaxGeneration + 1 },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			c := base
			mutate(&c)
			if _, err := directory.NewPublisher(c); !errors.Is(err, directory.ErrInvalidArgument) {
				t.Fatalf("NewPublisher = %v", err)
			}
		})
	}
	if _, err := directory.NewPublisher(base); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

// TestPublishWithLeaseManager runs the publisher on a real lease manager:
// its Fence and Gate are what the node wires in.
func TestPublishWithLeaseManager(t *testing.T) {
	clock := leasetest.NewManualClock(100 * time.Second)
	sc := clock.StoreClock(storeBase)
	mem, err := memory.New(memory.WithClock(sc), memory.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	m, err := lease.Acquire(context.Background(), lease.Config{Store: mem, Clock: clock, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p, err := directory.NewPublisher(directory.PublisherConfig{
		Store: mem, Lease: m, Gate: m.Gate(), MeshName: "game", RoutingID: ridA, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Publish(context.Background(), descriptor("game", ridA, "tcp://a:1"))
	if err != nil || res.Outcome != directory.Published || res.Attempts != 1 {
		t.Fatalf("Publish = %+v, %v", res, err)
	}
	got, _ := stored(t, mem, p.Key())
	if got.OwnerID != m.OwnerID() || uint64(got.LeaseGeneration) != m.Generation() {
		t.Fatalf("stored run (%s, %d), lease (%s, %d)", got.OwnerID, got.LeaseGeneration, m.OwnerID(), m.Generation())
	}
	snap, err := directory.List(context.Background(), mem, "game", 10)
	if err != nil || len(snap.Entries) != 1 || !snap.Entries[0].LeaseValid {
		t.Fatalf("List = %+v, %v", snap, err)
	}
	// After release the descriptor stays (durable) but is no longer valid,
	// and the gate refuses further publishes.
	if err := m.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	snap, err = directory.List(context.Background(), mem, "game", 10)
	if err != nil || len(snap.Entries) != 1 || snap.Entries[0].LeaseValid {
		t.Fatalf("List after release = %+v, %v", snap, err)
	}
	d := descriptor("game", ridA, "tcp://a:1")
	d.State = record.StateStopped
	if _, err := p.Publish(context.Background(), d); !errors.Is(err, lease.ErrLeaseReleased) {
		t.Fatalf("Publish after release = %v", err)
	}
	if !strings.HasPrefix(p.Key(), "mesh-node:") {
		t.Fatalf("key %q", p.Key())
	}
}

// A run that lost its owner lease and reacquired it (same OwnerId, a newer
// generation) replaces its own older descriptor, while another run with
// the same routing id is refused: the reacquired lease is a live run's.
func TestPublishAfterReacquiringOwnLease(t *testing.T) {
	mem, _ := newMem(t)
	old := grantLease(t, mem, "owner-back", 3, leaseTTL)
	mustPublish(t, newPublisher(t, mem, old, nil, "game", ridA), descriptor("game", ridA, "tcp://back:1"), directory.Published)
	back := grantLease(t, mem, "owner-back", 4, leaseTTL) // the same run, reacquired
	other := grantLease(t, mem, "owner-other", 9, leaseTTL)
	if _, err := newPublisher(t, mem, other, nil, "game", ridA).Publish(context.Background(), descriptor("game", ridA, "tcp://other:1")); !errors.Is(err, directory.ErrRoutingIDInUse) {
		t.Fatalf("another run's Publish = %v, want ErrRoutingIDInUse while the first run's reacquired lease lives", err)
	}
	res, err := newPublisher(t, mem, back, nil, "game", ridA).Publish(context.Background(), descriptor("game", ridA, "tcp://back:1"))
	if err != nil || res.Outcome != directory.Published {
		t.Fatalf("the run's own republish after reacquiring = %+v, %v", res, err)
	}
	// Not a takeover: the node logged one ("taking over from a host run
	// whose lease is gone", naming itself) after every lease recovery.
	if res.Takeover || res.PreviousOwnerID != "owner-back" || res.PreviousLeaseGeneration != 3 {
		t.Fatalf("the run's own republish after reacquiring = %+v, want no takeover, previous generation 3", res)
	}
	if got, _ := stored(t, mem, mustKey(t, "game", ridA)); got.OwnerID != "owner-back" || got.LeaseGeneration != 4 {
		t.Fatalf("stored %+v, want owner-back at generation 4", got)
	}
}
