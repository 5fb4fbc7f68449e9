package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// A node started with the routing id of a run that crashed a moment ago
// (SIGKILL, an OOM kill, and an immediate restart by systemd or
// Kubernetes) waits once for that run's owner lease to end and takes its
// descriptor over; before, it failed ("is published by live owner") until
// a restart happened to come after the lease TTL. A run that is alive
// keeps renewing, and a second start with its routing id still fails.
func TestStartTakesOverTheRoutingIDOfARunThatJustCrashed(t *testing.T) {
	f := newFixture(t)
	cfg := fastConfig("takeover")
	cfg.Node.RoutingID = "0a0a"
	old := f.start(cfg)
	old.crash()
	start := time.Now()
	n := f.start(cfg) // fails the test if Start fails
	if took := time.Since(start); took > cfg.Lease.TTL+2*time.Second {
		t.Errorf("the start took %s; the crashed run's lease ends within %s", took, cfg.Lease.TTL)
	}
	if n.State() != record.StateServing {
		t.Errorf("state %v, want serving", n.State())
	}
}

func TestStartWithTheRoutingIDOfALiveRunFails(t *testing.T) {
	f := newFixture(t)
	cfg := fastConfig("takeover")
	cfg.Node.RoutingID = "0b0b"
	f.start(cfg)
	_, err := Start(context.Background(), Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: 100 * time.Millisecond})
	if !errors.Is(err, directory.ErrRoutingIDInUse) {
		t.Fatalf("Start with a live run's routing id: %v, want ErrRoutingIDInUse", err)
	}
}

// behindClock is a store clock an hour behind this host's.
type behindClock struct{}

func (behindClock) Now() time.Time { return time.Now().Add(-time.Hour) }

// The wait for a crashed run's lease is measured on the store's clock: its
// LeaseExpiresAt is store time. A store whose clock is behind this host's
// (Redis TIME on another machine) made time.Until(LeaseExpiresAt) negative,
// the start retried at once and failed as before the takeover existed.
func TestStartTakesOverWithAStoreClockBehindThisHost(t *testing.T) {
	f := newFixture(t)
	loc, err := locmemory.New(locmemory.WithClock(behindClock{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	f.loc = loc
	cfg := fastConfig("takeover")
	cfg.Node.RoutingID = "0c0c"
	old := f.start(cfg)
	old.crash()
	f.start(cfg) // fails the test if Start fails
}
