// Package storetest is the shared contract suite of the Location Store SPI
// (package locstore). Every provider (memory, redis, ...) runs the same
// functions against a factory of fresh, isolated stores, so that the
// framework can rely on one behaviour whatever the provider.
package storetest

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// Harness gives the suite a fresh, empty, isolated store per subtest.
type Harness struct {
	Name string // "memory", "redis"
	// New returns a store on a fresh isolated namespace. The suite closes it
	// via t.Cleanup.
	New func(t *testing.T) locstore.Store
	// Advance moves the provider clock forward by d (memory: fake clock;
	// redis: time.Sleep).
	Advance func(t *testing.T, s locstore.Store, d time.Duration)
	// ExpiryUnit is the smallest retention the suite should use for expiry
	// tests (memory: 1s with a fake clock; redis: ~300ms real time).
	ExpiryUnit time.Duration
}

// Run runs the contract suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	t.Fatalf("storetest.Run: suite body being written")
}

// RunStress runs the model-checked concurrency stress test against h.
func RunStress(t *testing.T, h Harness) {
	t.Helper()
	t.Fatalf("storetest.RunStress: suite body being written")
}
