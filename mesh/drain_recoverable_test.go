package mesh

import (
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
)

// A drain while the owner lease is lost the ordinary way — its renewals
// refused, a reacquisition pending — does not say the lease ended for
// good: LeaseLost is set on every loss (and cleared on re-adoption), and
// only a store data loss or a routing id taken over end it for good.
func TestDrainOfARecoverableLeaseLossDoesNotSayForGood(t *testing.T) {
	f := newFixture(t)
	blocker := &renewBlocker{Store: f.loc, stop: make(chan struct{})}
	t.Cleanup(func() { blocker.blocked.Store(nil); close(blocker.stop) })
	c := newClusterWith(t, f, func(i int) locstore.Store {
		if i == 1 {
			return blocker
		}
		return nil
	}, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease = fastConfig(cfg.Node.MeshName).Lease
	})
	ctx := ctxT(t, 60*time.Second)
	mine := createOn(t, c, "recoverable", 1, 3)
	n := c.nodes[1]
	blocker.loseLeaseOf(t, n)
	if !n.leaseRecoverable() {
		t.Fatalf("test set-up: the loss is not recoverable: %v", n.LeaseLost())
	}
	res, _ := n.Drain(ctx, HostRelocateOptions{})
	if len(res.Objects) != len(mine) {
		t.Fatalf("drain result lists %d objects, want %d", len(res.Objects), len(mine))
	}
	for _, o := range res.Objects {
		if strings.Contains(o.Reason, "ended for good") {
			t.Errorf("%s: %s %q: a lease lost the ordinary way is said to have ended for good", o.Object.ID, o.Outcome, o.Reason)
		}
	}
}
