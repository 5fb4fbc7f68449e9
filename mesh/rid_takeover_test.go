package mesh

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/directory"
)

// A node that did not run past its lease TTL (paused, cut off) while
// another process took its routing id over finds, once it reacquires a
// lease, that its descriptor cannot be republished: the mesh routes the id
// to the other run. It says so once, ends its lease for good (its objects'
// records become reclaimable) and its readiness names the cause. Before,
// it retried the republish every ~64 ms for good, a WARN line each, while
// holding objects nobody could reach.
func TestRoutingIDTakenOverWhileAwayEndsTheOldRun(t *testing.T) {
	f, _, blocker, fast := republishScene(t)
	logs := f.logNode(1)
	old := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, blocker, fast)
	leaseKey := blocker.loseLeaseOf(t, old) // the old run's lease writes do not land
	f.logTo = nil
	// Another process with the same routing id starts and takes the
	// descriptor over (the old run's lease has expired in the store).
	eventually(t, 20*time.Second, "the old run's lease record to expire", func() bool {
		rr, err := f.loc.Read(t.Context(), leaseKey)
		return err == nil && !rr.Found
	})
	startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	blocker.blocked.Store(nil) // the old run comes back
	eventually(t, 20*time.Second, "the old run to see its routing id taken over", func() bool {
		return errors.Is(old.LeaseLost(), directory.ErrRoutingIDInUse)
	})
	time.Sleep(500 * time.Millisecond) // a retry loop would log on
	if err := old.Ready(); err == nil || !strings.Contains(err.Error(), "routing id was taken over") {
		t.Fatalf("readiness of the old run: %v", err)
	}
	if n := strings.Count(logs.String(), "descriptor not republished"); n > 1 {
		t.Fatalf("the old run logged %d republish retries", n)
	}
	if !errors.Is(old.LeaseLost(), directory.ErrRoutingIDInUse) {
		t.Fatalf("the old run's lease came back: %v", old.LeaseLost())
	}
}
