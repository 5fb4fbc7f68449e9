package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
	"github.com/meshnode/meshnode/relocstore/storetest"
)

// The whole contract holds when every change waits for a replica (inline
// and staged Puts, Renew, Delete: the script and WAIT share a round trip).
func TestContractWithReplicaAcks(t *testing.T) {
	master := testredis.NewServer(t)
	testredis.NewReplica(t, master)
	storetest.Run(t, storetest.Harness{
		Name: relocredis.ProviderName + "-replica-acks",
		New: func(t *testing.T) relocstore.Store {
			return newStore(t, relocredis.Options{Addrs: []string{master.Addr}, OperationTimeout: 30 * time.Second,
				ReplicaAcks: 1, ReplicaAckTimeout: 5 * time.Second})
		},
		Advance: func(t *testing.T, s relocstore.Store, d time.Duration) {
			relocredis.AdvanceClock(s.(*relocredis.Store), d)
		},
		ExpiryUnit: time.Second,
	})
}

// With the replica paused a change applies on the master but fails with
// ErrNotReplicated once the timeout passed; reading needs no replica.
func TestReplicaAcks(t *testing.T) {
	master := testredis.NewServer(t)
	replica := testredis.NewReplica(t, master)
	const timeout = 300 * time.Millisecond
	s := newStore(t, relocredis.Options{Addrs: []string{master.Addr}, OperationTimeout: 5 * time.Second,
		ReplicaAcks: 1, ReplicaAckTimeout: timeout})
	defer s.Close()
	ctx := context.Background()
	big := make([]byte, 300<<10) // staged, not inline
	for _, p := range [][]byte{[]byte("small"), big} {
		ref := "ref-" + time.Now().Format("150405.000000")
		if _, err := s.Put(ctx, ref+"-ok", p, time.Minute); err != nil {
			t.Fatalf("put %d bytes with the replica up: %v", len(p), err)
		}
		if err := replica.Pause(); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err := s.Put(ctx, ref, p, time.Minute)
		took := time.Since(t0)
		_ = replica.Resume()
		if !errors.Is(err, relocredis.ErrNotReplicated) || !errors.Is(err, relocstore.ErrUnavailable) {
			t.Fatalf("put %d bytes with the replica paused: %v, want ErrNotReplicated", len(p), err)
		}
		if took < timeout {
			t.Fatalf("gave up after %v, before the %v timeout", took, timeout)
		}
		if r, err := s.Read(ctx, ref); err != nil || !r.Found || len(r.Bytes) != len(p) {
			t.Fatalf("read back after the unreplicated put: found %v, %d bytes, %v", r.Found, len(r.Bytes), err)
		}
	}
}
