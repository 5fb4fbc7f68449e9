package mesh

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// A node whose routing id another run took over ends its lease for good
// (readoptAfterReacquire: lease.Fail with ErrRoutingIDInUse): nothing
// reacquires it. A drain of that node must not wait for the lease to come
// back — it waited noTargetPatience before its discovery round and, once
// the drain also waited for its lease before the moves, noTargetPatience
// again (20 s of a 30 s shutdown deadline for a lease that cannot come
// back).
func TestDrainDoesNotWaitForALeaseEndedForGood(t *testing.T) {
	c := newClusterOn(t, newFixture(t), nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
	})
	ctx := ctxT(t, 60*time.Second)
	createOn(t, c, "ended", 1, 2)
	leaving := c.nodes[1]
	leaving.lease.Fail(fmt.Errorf("republish: %w", &directory.RoutingIDInUseError{MeshName: leaving.cfg.Node.MeshName,
		RoutingID: leaving.run.rid, OwnerID: "another-run"}))
	eventually(t, 5*time.Second, "the lease to end for good", func() bool {
		return errors.Is(leaving.LeaseLost(), directory.ErrRoutingIDInUse)
	})
	// The command's clock runs 20 times as fast: noTargetPatience (10 s)
	// passes in half a second.
	speedUpHostClock(leaving, 20)
	res, _ := leaving.Drain(ctx, HostRelocateOptions{})
	if patience := leaving.noTargetPatience(); res.BeforeMoves >= patience {
		t.Fatalf("the drain waited %v (command clock) before its moves for a lease that cannot come back (patience %v)",
			res.BeforeMoves, patience)
	}
}

// A drain waits for its own lease being recovered at most noTargetPatience
// in all (docs/OPERATIONS.md: "each at most that long"): the second wait,
// before the moves, has only what the first left. Before, a lease that
// did not come back made the drain wait twice.
func TestDrainWaitsForItsOwnLeaseOnce(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	leaving := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	createOnNode(t, ctx, client, leaving, "once", 2)
	owner, _ := leaving.Owner()
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		t.Fatal(err)
	}
	blocker.blocked.Store(&key) // renewals hang: the gate shuts at its deadline and stays shut
	eventually(t, 10*time.Second, "the gate to shut", func() bool { return leaving.lease.Gate().Admit() != nil })
	speedUpHostClock(leaving, 20)
	res, _ := leaving.Drain(ctx, HostRelocateOptions{})
	if patience := leaving.noTargetPatience(); res.BeforeMoves >= patience*3/2 {
		t.Fatalf("the drain waited %v (command clock) before its moves for its own lease: more than once (patience %v)",
			res.BeforeMoves, patience)
	}
}
