package mesh

import (
	"bytes"
	"cmp"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// loseDrainingStore applies node 1's first descriptor write that says
// state (default "draining"), loses its answer, and fails the publisher's
// re-read of the descriptor key that follows: the outcome of that publish
// is unknown to the node although the store took it.
type loseDrainingStore struct {
	locstore.Store
	armed    atomic.Bool
	state    string // the state whose publish loses its answer ("" = draining)
	failRead atomic.Pointer[string]
}

func (s *loseDrainingStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if s.armed.Load() {
		for _, m := range req.Mutations {
			if bytes.HasPrefix([]byte(m.Key), []byte(record.KindPrefix(record.KindMeshNode))) &&
				bytes.Contains(m.Value, []byte(`"`+cmp.Or(s.state, "draining")+`"`)) && s.armed.CompareAndSwap(true, false) {
				if res, err := s.Store.Write(ctx, req); err != nil || !res.Applied {
					return res, err
				}
				k := m.Key
				s.failRead.Store(&k)
				return locstore.WriteResult{}, errLostResult
			}
		}
	}
	return s.Store.Write(ctx, req)
}

func (s *loseDrainingStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if k := s.failRead.Load(); k != nil && *k == key && s.failRead.CompareAndSwap(k, nil) {
		return locstore.ReadResult{}, errLostResult
	}
	return s.Store.Read(ctx, key)
}

func (s *loseDrainingStore) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	return locstore.ReadMany(ctx, s.Store, keys)
}

// A Drain whose `draining` publish applied but whose answer was lost: the
// node still believes it is serving. The discovery loop's capacity copy
// must not republish `serving` over the stored `draining` while the node
// moves its objects away (before, it did: peers placed objects on it and
// relocated to it again for the rest of the drain).
func TestDrainWhoseDrainingAnswerIsLostStaysDraining(t *testing.T) {
	s := &loseDrainingStore{}
	c := clusterWithStore1(t, 3, func(inner locstore.Store) locstore.Store { s.Store = inner; return s }, nil)
	ctx := ctxT(t, 30*time.Second)
	_, mine := createUntil(t, ctx, c, "zzdrain", 1, 2)
	n := c.nodes[1]
	n.RefreshCapacityCopy(ctx) // the copy says what it hosts now
	s.armed.Store(true)
	var during record.State
	_, err := n.Drain(ctx, HostRelocateOptions{beforeStop: func(HostRelocationResult) {
		// What the discovery loop does every round (capacity_copy.go):
		// the objects left, the counters changed.
		n.RefreshCapacityCopy(ctx)
		during = storedState(t, ctx, c.f.loc, n.pub.Key())
	}})
	if err != nil {
		t.Fatalf("Drain: %v", err)
	}
	if s.armed.Load() {
		t.Fatal("setup: the draining publish was not lost")
	}
	if len(mine) == 0 {
		t.Fatal("setup: nothing to move")
	}
	if during != record.StateDraining {
		t.Fatalf("a draining node's descriptor says %q in the store after its capacity copy was republished", during)
	}
}

// Close whose `stopped` publish applied but whose answer was lost: the
// node still removes its descriptor after releasing its lease (ReclaimKey
// decides from what is stored). Before, it removed it only when it believed
// it had published stopped, so the stopped run stayed listed until another
// node's reclaim round (every 120 discovery rounds, ~10 minutes).
func TestCloseWhoseStoppedAnswerIsLostRemovesTheDescriptor(t *testing.T) {
	s := &loseDrainingStore{state: "stopped"}
	c := clusterWithStore1(t, 2, func(inner locstore.Store) locstore.Store { s.Store = inner; return s }, nil)
	ctx := ctxT(t, 30*time.Second)
	n := c.nodes[1]
	s.armed.Store(true)
	if err := n.Close(ctx); err != nil {
		t.Logf("Close: %v", err)
	}
	if s.armed.Load() {
		t.Fatal("setup: the stopped publish was not lost")
	}
	rr, rerr := c.f.loc.Read(ctx, n.pub.Key())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if rr.Found {
		d, _ := record.DecodeMeshNode(rr.Value)
		t.Fatalf("after an orderly Close the descriptor (state %q) is still stored; lease released", d.State)
	}
}

// storedState is the state of the descriptor stored at key ("" after
// reporting an error when there is none or it does not decode).
func storedState(t *testing.T, ctx context.Context, loc locstore.Store, key string) record.State {
	t.Helper()
	rr, err := loc.Read(ctx, key)
	if err != nil || !rr.Found {
		t.Errorf("read descriptor: %v %v", err, rr.Found)
		return ""
	}
	d, err := record.DecodeMeshNode(rr.Value)
	if err != nil {
		t.Error(err)
		return ""
	}
	return d.State
}
