package authority

import (
	"context"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
)

// The same scenarios against the production provider on a real
// redis-server (internal/testredis fails, or skips loudly, without one).

func newRedis(t *testing.T) locstore.Store {
	t.Helper()
	s, err := locredis.New(context.Background(), locredis.Options{Addrs: []string{testredis.Addr(t)}, Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestExecutorLifecycleRedis(t *testing.T) { runLifecycle(t, newRedis(t)) }

func TestExecutorCapacityRaceRedis(t *testing.T) { runCapacityRace(t, newRedis(t), 24, 5) }

func TestExecutorSameIDRaceRedis(t *testing.T) { runSameIDRace(t, newRedis(t), 20) }

func TestExecutorRelocationRedis(t *testing.T) { runRelocation(t, newRedis(t)) }

func TestExecutorRelocationCancelRedis(t *testing.T) { runRelocationCancel(t, newRedis(t)) }

func TestExecutorRelocationLostRedis(t *testing.T) {
	runRelocationLost(t, func(t *testing.T) locstore.Store { return newRedis(t) })
}

func TestExecutorOwnerRaceRedis(t *testing.T) { runOwnerRace(t, newRedis(t), 10, 8) }

func TestExecutorTornSnapshotRedis(t *testing.T) { runTornSnapshot(t, newRedis(t)) }

func TestExecutorTornReservationRedis(t *testing.T) { runTornReservation(t, newRedis(t)) }

func TestExecutorLifecycleRedisHinted(t *testing.T) {
	runLifecycle(t, newRedis(t), hinted(&manualNow{}))
}
