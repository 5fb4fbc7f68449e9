package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/storetest"
)

// The whole contract holds when every write waits for a replica (the
// script call and WAIT share one round trip; NOSCRIPT falls back to EVAL
// in the same way).
func TestContractWithReplicaAcks(t *testing.T) {
	master := testredis.NewServer(t)
	testredis.NewReplica(t, master)
	h := harness()
	h.Name = ProviderName + "-replica-acks"
	h.New = func(t *testing.T) locstore.Store {
		s, err := New(context.Background(), Options{Addrs: []string{master.Addr}, Namespace: testredis.Namespace(t),
			OperationTimeout: 5 * time.Second, ReplicaAcks: 1, ReplicaAckTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	}
	storetest.Run(t, h)
}

// A write waits until the replica has it; with the replica paused it
// fails after the timeout with ErrNotReplicated (an unknown outcome to the
// caller, who re-reads and finds it applied); asking for more replicas than
// there are fails the same way.
func TestReplicaAcks(t *testing.T) {
	master := testredis.NewServer(t)
	replica := testredis.NewReplica(t, master)
	ns := testredis.Namespace(t)
	const timeout = 300 * time.Millisecond
	s := openStore(t, master.Addr, ns, func(o *Options) { o.ReplicaAcks, o.ReplicaAckTimeout = 1, timeout })
	ctx := context.Background()

	v := put(t, s, "k", "one")
	onReplica := rawClient(t, replica.Addr)
	if got, err := onReplica.HGet(ctx, s.prefix+"k:k", "s").Result(); err != nil || got != v {
		t.Fatalf("replica holds version %q (%v) right after the write, want %q", got, err, v)
	}

	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = replica.Resume()
		}
	}
	defer resume()
	t0 := time.Now()
	_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("two"))}})
	took := time.Since(t0)
	if !errors.Is(err, ErrNotReplicated) || !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("write with the replica paused: %v, want ErrNotReplicated as an unavailable store", err)
	}
	if took < timeout {
		t.Fatalf("the write gave up after %v, before the %v timeout", took, timeout)
	}
	// Applied on the master: the caller's re-read finds it.
	if r, err := s.Read(ctx, "k"); err != nil || string(r.Value) != "two" {
		t.Fatalf("re-read after the unreplicated write: %+v %v", r, err)
	}
	resume()
	eventually(t, 5*time.Second, func() bool {
		_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("three"))}})
		return err == nil
	})

	two := openStore(t, master.Addr, ns, func(o *Options) { o.ReplicaAcks, o.ReplicaAckTimeout = 2, timeout })
	if _, err := two.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k2", []byte("x"))}}); !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("two acks asked of one replica: %v, want ErrNotReplicated", err)
	}
	// A Conflict writes nothing and needs no replica.
	res, err := two.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("k")},
		Mutations: []locstore.Mutation{locstore.Put("k", []byte("x"))}})
	if err != nil || res.Applied {
		t.Fatalf("conflicting write: %+v %v, want a Conflict", res, err)
	}
}

func eventually(t *testing.T, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
