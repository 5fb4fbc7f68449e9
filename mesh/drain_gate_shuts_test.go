package mesh

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// gateWaitReads holds every Read while armed until node's admission gate
// has shut: a store that stops answering (a Redis pause) for as long as
// the discovery round a drain begins with.
type gateWaitReads struct {
	locstore.Store
	armed atomic.Bool
	node  atomic.Pointer[Node]
}

func (s *gateWaitReads) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if s.armed.Load() {
		for n := s.node.Load(); n != nil && n.lease.Gate().Admit() == nil && ctx.Err() == nil; {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return s.Store.Read(ctx, key)
}

// A SIGTERM that comes while the store does not answer, with the gate still
// open, used to find it shut once the drain's first discovery round had
// waited out the store: every object was handed to the shutdown ("drained:
// 0 moved … N not started") although the lease was only late. The drain
// waits for the gate again before the moves.
func TestDrainWaitsWhenItsGateShutsDuringItsFirstRound(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	slow := &gateWaitReads{Store: blocker}
	ctx := ctxT(t, 60*time.Second)
	leaving := startRoundsApart(t, f, 1, time.Hour, config.RoleServer, slow, fast)
	slow.node.Store(leaving)
	startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	mine := createOnNode(t, ctx, client, leaving, "shut", 3)

	owner, _ := leaving.Owner()
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		t.Fatal(err)
	}
	blocker.blocked.Store(&key) // renewals hang: the gate shuts at its deadline
	slow.armed.Store(true)      // reads hang until then
	go func() {
		for leaving.lease.Gate().Admit() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		slow.armed.Store(false)
		time.Sleep(50 * time.Millisecond)
		blocker.blocked.Store(nil) // the store answers again
	}()
	if leaving.lease.Gate().Admit() != nil {
		t.Fatal("the gate shut before the drain began: the test did not exercise the case")
	}
	res, err := leaving.Drain(ctx, HostRelocateOptions{})
	if res.Progress.Moved < len(mine) || len(res.NotMoved()) != 0 {
		t.Fatalf("drain moved %d (want all %d of its objects), not moved %+v", res.Progress.Moved, len(mine), res.NotMoved())
	}
	if err != nil {
		t.Fatal(err)
	}
}
