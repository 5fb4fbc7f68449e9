package mesh

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// holdCopyKey marks the context of the capacity copy the test holds.
type holdCopyKey struct{}

// holdCopyStore holds the counter read of a capacity copy made under a
// holdCopyKey context until the node's `draining` descriptor write has
// applied: a copy that was already under way when a drain began.
type holdCopyStore struct {
	locstore.Store
	once     sync.Once
	held     chan struct{} // closed once the copy's counter read waits
	draining chan struct{} // closed once draining was written
	seen     sync.Once
}

func (s *holdCopyStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	if ctx.Value(holdCopyKey{}) != nil {
		s.once.Do(func() { close(s.held) })
		<-s.draining
	}
	return locstore.ReadMany(ctx, s.Store, keys)
}

func (s *holdCopyStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	res, err := s.Store.Write(ctx, req)
	if err == nil && res.Applied {
		for _, m := range req.Mutations {
			if bytes.HasPrefix([]byte(m.Key), []byte(record.KindPrefix(record.KindMeshNode))) &&
				bytes.Contains(m.Value, []byte(`"draining"`)) {
				s.seen.Do(func() { close(s.draining) })
			}
		}
	}
	return res, err
}

// A capacity copy the discovery loop began while the node was serving —
// its counters being read when a Drain published draining — must not
// publish `serving` over the drain's `draining`: the descriptor then said
// serving for the rest of the drain, so the other nodes placed new objects
// on it and moved theirs to it (each refused: the drain is emptying it, and
// the refusal does not say draining), as in the lost-answer case of
// TestDrainWhoseDrainingAnswerIsLostStaysDraining.
func TestCapacityCopyUnderWayWhenADrainBeginsDoesNotSayServing(t *testing.T) {
	s := &holdCopyStore{held: make(chan struct{}), draining: make(chan struct{})}
	c := clusterWithStore1(t, 3, func(inner locstore.Store) locstore.Store { s.Store = inner; return s }, nil)
	ctx := ctxT(t, 30*time.Second)
	_, mine := createUntil(t, ctx, c, "zzcopy", 1, 1)
	if len(mine) == 0 {
		t.Fatal("setup: nothing on node 1")
	}
	n := c.nodes[1]
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		// The loop's refresh, its counters read as the drain begins (the
		// copy differs: the objects created above are not in it yet).
		n.refreshCapacityCopy(context.WithValue(ctx, holdCopyKey{}, true), true)
	}()
	select {
	case <-s.held:
	case <-ctx.Done():
		t.Fatal("setup: the capacity copy never read the counters")
	}
	var during record.State
	_, err := n.Drain(ctx, HostRelocateOptions{beforeStop: func(HostRelocationResult) {
		<-copied
		during = storedState(t, ctx, c.f.loc, n.pub.Key())
	}})
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if during != record.StateDraining {
		t.Fatalf("a draining node's descriptor says %q in the store after a capacity copy under way when the drain began", during)
	}
}
