package redis_test

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
	"github.com/meshnode/meshnode/relocstore/storetest"
)

func newStore(t *testing.T, opts relocredis.Options) *relocredis.Store {
	t.Helper()
	if len(opts.Addrs) == 0 {
		opts.Addrs = []string{testredis.Addr(t)}
	}
	if opts.Namespace == "" {
		opts.Namespace = testredis.Namespace(t)
	}
	s, err := relocredis.New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Name: relocredis.ProviderName,
		New: func(t *testing.T) relocstore.Store {
			// A generous timeout: the suite moves 64 MiB payloads under -race
			// on a loaded machine and must not see spurious timeouts.
			return newStore(t, relocredis.Options{OperationTimeout: 30 * time.Second})
		},
		Advance: func(t *testing.T, s relocstore.Store, d time.Duration) {
			relocredis.AdvanceClock(s.(*relocredis.Store), d)
		},
		ExpiryUnit: time.Second,
	})
}
