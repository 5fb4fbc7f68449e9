package mesh

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// losingCounterStore answers Conflict (nothing written) to the first n
// writes that move the store-wide ObjectGeneration counter: what a crowd of
// creators on other nodes, each winning the counter first, looks like to
// one creator's Reserve.
type losingCounterStore struct {
	locstore.Store
	left atomic.Int32
	lost atomic.Int32
}

func (s *losingCounterStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	key, _ := record.CounterKey(record.CounterObjectGeneration)
	for _, m := range req.Mutations {
		if m.Key == key && s.left.Add(-1) >= 0 {
			s.lost.Add(1)
			return locstore.WriteResult{Applied: false, StoreNow: time.Now()}, nil
		}
	}
	return s.Store.Write(ctx, req)
}

func (s *losingCounterStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	return locstore.ReadMany(ctx, s.Store, keys)
}

// a Reserve that keeps losing the store-wide ObjectGeneration
// counter to other creators ends with the executor's "rows kept changing"
// ErrConflict, and runCreate takes that for the target's lease having
// changed (mesh/manager_create.go, the ErrConflict case after Reserve): the
// healthy target, which has all its capacity free, is excluded and the
// creation fails with a placement error well before its deadline. §6.1
// (spec) excludes a host run only when "target state or capacity changed";
// contention on a counter is neither, and every Conflict means another
// creation applied, so the creation should go on until its deadline.
func TestReserveLosingTheGenerationCounterDoesNotExcludeTheTarget(t *testing.T) {
	f := newFixture(t)
	ls := &losingCounterStore{Store: f.loc}
	ls.left.Store(authority.DefaultMaxAttempts)
	c := newClusterWith(t, f, func(int) locstore.Store { return ls }, 1, quietLease)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "contended", testActorType)
	if err != nil {
		t.Fatalf("CreateActor after %d lost counter races (the node has free capacity): %v", ls.lost.Load(), err)
	}
	if ref.ObjectGeneration == 0 || c.probe.runCount("contended") != 1 {
		t.Fatalf("ref %+v, factory runs %d", ref, c.probe.runCount("contended"))
	}
}
