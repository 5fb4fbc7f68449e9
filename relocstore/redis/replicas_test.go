package redis_test

import (
	"context"
	"fmt"
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

// With the replica paused, the first change waits the timeout and still
// counts (the master holds it); the next ones do not wait while the
// replicas are behind.
func TestReplicaAcks(t *testing.T) {
	master := testredis.NewServer(t)
	replica := testredis.NewReplica(t, master)
	const timeout = 300 * time.Millisecond
	s := newStore(t, relocredis.Options{Addrs: []string{master.Addr}, OperationTimeout: 5 * time.Second,
		ReplicaAcks: 1, ReplicaAckTimeout: timeout})
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, "ref-ok", []byte("small"), time.Minute); err != nil {
		t.Fatalf("put with the replica up: %v", err)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	big := make([]byte, 300<<10) // staged, not inline
	for i, p := range [][]byte{[]byte("small"), big, []byte("small again")} {
		ref := fmt.Sprintf("ref-%d", i)
		t0 := time.Now()
		if _, err := s.Put(ctx, ref, p, time.Minute); err != nil {
			t.Fatalf("put %d bytes with the replica paused: %v", len(p), err)
		}
		took := time.Since(t0)
		if first := i == 0; first != (took >= timeout) {
			t.Fatalf("put %d (%d bytes) took %v: only the first should wait the %v timeout", i, len(p), took, timeout)
		}
		if r, err := s.Read(ctx, ref); err != nil || !r.Found || len(r.Bytes) != len(p) {
			t.Fatalf("read back: found %v, %d bytes, %v", r.Found, len(r.Bytes), err)
		}
	}
}

// A caller's deadline shorter than ReplicaAckTimeout bounds the replica
// wait of a change too (internal/redisconn.WithinDeadline): with the
// replica paused, a Put under a 200 ms deadline is Stored within it — it
// failed at the deadline with an unknown outcome although the master held
// it, because the client's read of WAIT's reply ran into the deadline.
func TestReplicaWaitWithinTheCallersDeadline(t *testing.T) {
	master := testredis.NewServer(t)
	replica := testredis.NewReplica(t, master)
	s := newStore(t, relocredis.Options{Addrs: []string{master.Addr}, OperationTimeout: 3 * time.Second,
		ReplicaAcks: 1, ReplicaAckTimeout: time.Second})
	defer s.Close()
	if _, err := s.Put(context.Background(), "warm", []byte("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	const budget = 200 * time.Millisecond
	for i, p := range [][]byte{[]byte("small"), make([]byte, 300<<10)} { // inline, then staged
		ref := fmt.Sprintf("ref-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		t0 := time.Now()
		r, err := s.Put(ctx, ref, p, time.Minute)
		took := time.Since(t0)
		cancel()
		if err != nil || r.Outcome != relocstore.Stored || took > budget {
			t.Fatalf("put %d bytes under a %v deadline with the replica paused: %v, %v after %v; want Stored within the deadline",
				len(p), budget, r.Outcome, err, took)
		}
		if rr, err := s.Read(context.Background(), ref); err != nil || !rr.Found || len(rr.Bytes) != len(p) {
			t.Fatalf("read back %s: found %v, %v", ref, rr.Found, err)
		}
	}
}
