package mesh

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// servingRefuser refuses, while refuse is set, the writes of key that
// publish a descriptor saying serving.
type servingRefuser struct {
	locstore.Store
	key     atomic.Pointer[string]
	refuse  atomic.Bool
	refused atomic.Int64
}

func (s *servingRefuser) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	for _, m := range req.Mutations {
		if k := s.key.Load(); k == nil || m.Key != *k {
			continue
		}
		if d, err := record.DecodeMeshNode(m.Value); err == nil && d.State == record.StateServing && s.refuse.Load() {
			s.refused.Add(1)
			return locstore.WriteResult{}, errors.New("servingRefuser: serving publish refused")
		}
	}
	return s.Store.Write(ctx, req)
}

// A drain that begins while the node's republish after a lease recovery
// is still being retried (the store answering again, but not every write
// yet) keeps its descriptor saying draining: before, the re-adoption's
// retry published serving over the drain's draining, and for the rest of
// the drain the other nodes saw a serving node (placing on it, moving
// their own objects to it, waiting for it as a target).
func TestDrainingIsNotOverwrittenByTheRepublishAfterALeaseRecovery(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	logs := f.logNode(1)
	w := &servingRefuser{Store: blocker}
	n := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, w, fast)
	key, err := record.MeshNodeKey("objects", n.RID())
	if err != nil {
		t.Fatal(err)
	}
	w.key.Store(&key)
	w.refuse.Store(true)
	blocker.loseLeaseOf(t, n)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the node to reacquire its lease and fail to republish serving", func() bool {
		return n.lease.Gate().Admit() == nil && w.refused.Load() > 0
	})
	stored := func() record.State {
		rr, err := f.loc.Read(context.Background(), key)
		if err != nil || !rr.Found {
			t.Fatalf("read descriptor: %v, found %v", err, rr.Found)
		}
		d, err := record.DecodeMeshNode(rr.Value)
		if err != nil {
			t.Fatal(err)
		}
		return d.State
	}
	var during record.State
	_, err = n.Drain(ctx, HostRelocateOptions{beforeStop: func(HostRelocationResult) {
		if s := stored(); s != record.StateDraining {
			t.Errorf("the drain's descriptor says %v before the republish retried", s)
		}
		w.refuse.Store(false)
		eventually(t, 20*time.Second, "the republish after the lease recovery to end", func() bool {
			return stored() == record.StateServing || strings.Contains(logs.String(), "descriptor republished after the lease recovery")
		})
		during = stored()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if during != record.StateDraining {
		t.Fatalf("during the drain, after the lease recovery's republish, the descriptor says %v, want draining", during)
	}
}
