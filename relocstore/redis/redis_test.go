package redis_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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

// A Redis at its maxmemory refuses the store's writes; the error says so
// and what to do (the relocation store does not claim nothing was written:
// its Put is a pipeline), and writes work again once memory is raised.
func TestPutRefusedByRedisSaysWhy(t *testing.T) {
	srv := testredis.NewServer(t)
	s := newStore(t, relocredis.Options{Addrs: []string{srv.Addr}})
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer raw.Close()
	ctx := t.Context()
	if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(ctx, "ref-1", []byte("payload"), time.Minute)
	if !errors.Is(err, relocstore.ErrUnavailable) || !strings.Contains(err.Error(), "raise maxmemory") {
		t.Fatalf("Put at maxmemory: %v; want the refusal and its fix", err)
	}
	t.Log(err)
	if err := raw.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "ref-1", []byte("payload"), time.Minute); err != nil {
		t.Fatalf("Put once memory was raised: %v", err)
	}
}
