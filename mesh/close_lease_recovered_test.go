package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// A node told to stop while it recovers its owner lease (reacquired after a
// store outage longer than lease.ttl, its objects being re-adopted, the
// gate still shut) publishes no draining: that needs the gate. The
// recovery then finished while the shutdown waited for object work to
// stop, and republished the descriptor as serving — only a draining
// publish that got out marked the node leaving (drainSaid) — so the other
// nodes placed objects on a node that was stopping, and moved theirs to
// it, until its stopped publish. A closing node's recovery says draining.
func TestLeaseRecoveredWhileClosingDoesNotRepublishServing(t *testing.T) {
	f, hold, blocker, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	src := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	x := createOnNode(t, ctx, client, src, "recovering", 1)[0]
	akey, err := authority.Object{ID: x.ActorID, Kind: record.ObjectActor}.Key()
	if err != nil {
		t.Fatal(err)
	}
	_, before := src.Owner()
	// The re-adoption of x waits in the store until the shutdown is under
	// way.
	hold.key.Store(&akey)
	blocker.loseLeaseOf(t, src)
	blocker.blocked.Store(nil)
	eventually(t, 20*time.Second, "the re-adoption to be under way", func() bool { return hold.held.Load() > 0 })
	if src.lease.Gate().Admit() == nil {
		t.Fatal("setup: the gate reopened before the shutdown")
	}
	var during record.State
	republished := func() bool {
		rr, err := f.loc.Read(ctx, src.pub.Key())
		if err != nil || !rr.Found {
			return false
		}
		d, err := record.DecodeMeshNode(rr.Value)
		if err != nil || uint64(d.LeaseGeneration) == before {
			return false
		}
		during = d.State
		return true
	}
	src.obj.hooks.Store(&testHooks{closeStep: func(step string) {
		if step != closeObjectsStopped {
			return
		}
		close(hold.release)
		deadline := time.Now().Add(20 * time.Second)
		for !republished() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}})
	if err := src.Close(ctx); err != nil {
		t.Logf("Close: %v", err)
	}
	if during == "" {
		t.Fatal("setup: the descriptor was not republished while the node closed")
	}
	if during == record.StateServing {
		t.Fatalf("a closing node's descriptor said %q after its lease was recovered during the shutdown", during)
	}
}
