package mesh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// failReadStore fails the first ReadMany that reads key (once armed): a
// creation target's first read, before it has checked the reservation.
type failReadStore struct {
	locstore.Store
	key    atomic.Pointer[string]
	failed atomic.Int32
}

func (s *failReadStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	if key := s.key.Load(); key != nil {
		for _, k := range keys {
			if k == *key && s.key.CompareAndSwap(key, nil) {
				s.failed.Add(1)
				return nil, &locstore.ProviderError{Provider: "test", Op: "read", Err: errors.New("connection reset (test)")}
			}
		}
	}
	return locstore.ReadMany(ctx, s.Store, keys)
}

// A creation's reservation left behind by both sides: the target failed
// before checking it (its read failed, so it did not return it) and the
// creator, whose own return the store refused, stopped before returning
// it. The record is owned by the target's run, which lives on, so neither
// the owner sweep nor the reclaim of a dead owner returns it: it held the
// Id and the target's slots for as long as that run lived (review). Once
// its stored creation request has expired (5 minutes past the deadline;
// deleted here to stand for that) no creation can decide it, and the
// reclaim sweep returns it; while the request is kept it is left alone.
func runAbandonedReservationReturned(t *testing.T, loc locstore.Store) {
	f := newFixture(t)
	inner := storeOf(f, loc)
	src := &refusingStore{Store: inner}
	tgt := &failReadStore{Store: inner}
	c := newClusterWith(t, f, func(i int) locstore.Store {
		if i == 0 {
			return src
		}
		return tgt
	}, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	const id = "abandoned"
	key, err := record.AuthorityKey(record.IdentityActor, id)
	if err != nil {
		t.Fatal(err)
	}
	tgt.key.Store(&key)
	src.onAfter.Store(&key) // the creator's store refuses writes once its Reserve applied
	if _, err := c.m(0).CreateActor(ctx, id, testActorType); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("CreateActor = %v; want ErrUnavailable (the target failed, the reservation could not be returned)", err)
	}
	if tgt.failed.Load() != 1 || src.refused.Load() == 0 {
		t.Fatalf("target reads failed %d, creator writes refused %d: the test did not test the failure", tgt.failed.Load(), src.refused.Load())
	}
	// The creator stops before its store takes writes again.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.nodes[0].Close(sctx); err != nil {
		t.Logf("creator's Close: %v", err)
	}
	src.on.Store(false)
	read := func() (bool, record.Authority) {
		t.Helper()
		row, err := c.nodes[1].obj.readAuthority(ctx, record.ObjectActor, id)
		if err != nil {
			t.Fatal(err)
		}
		return row.Found, row.Record
	}
	found, a := read()
	if !found || a.Allocation.State != record.AllocationReserved || a.PendingCreation == nil {
		t.Fatalf("record: found %v %+v; want the reservation left behind", found, a.Allocation)
	}
	// While its creation request is kept, the creation may still be
	// decided: the sweep leaves it.
	if _, err := c.nodes[1].reclaimSweep(ctx); err != nil {
		t.Fatal(err)
	}
	if found, _ := read(); !found {
		t.Fatal("the sweep returned a reservation whose creation request is still kept")
	}
	if _, err := inner.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.Delete(a.PendingCreation.RequestContentReference)}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.nodes[1].reclaimSweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if found, a := read(); found {
		t.Fatalf("record still there after the sweep (%+v, sweep %+v): the reservation is held for good", a.Allocation, res)
	}
	if len(res.Returns) != 1 || res.Returns[0].ID != id || !res.Returns[0].RequestExpired {
		t.Fatalf("sweep returned %+v; want the reservation of %s", res.Returns, id)
	}
	// The Id and the slots are free again.
	if _, err := c.m(1).CreateActor(ctx, id, testActorType); err != nil {
		t.Fatalf("CreateActor once returned: %v", err)
	}
}

func TestAbandonedReservationReturned(t *testing.T) { runAbandonedReservationReturned(t, nil) }

func TestAbandonedReservationReturnedRedis(t *testing.T) {
	runAbandonedReservationReturned(t, newRedisLocation(t))
}
