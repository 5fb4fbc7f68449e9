package redis

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
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

// A write waits until the replica has it. With the replica paused, the
// first write waits the timeout and still counts (it applied on the
// master); the Store logs once that it stops waiting, the next writes do
// not wait, and once the replica is back a probe finds it and every write
// waits again.
func TestReplicaAcks(t *testing.T) {
	master := testredis.NewServer(t)
	replica := testredis.NewReplica(t, master)
	ns := testredis.Namespace(t)
	const timeout = 300 * time.Millisecond
	var logs syncbuf.Buffer
	s := openStore(t, master.Addr, ns, func(o *Options) {
		o.ReplicaAcks, o.ReplicaAckTimeout = 1, timeout
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	ctx := context.Background()
	write := func(v string) time.Duration {
		t.Helper()
		t0 := time.Now()
		if _, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte(v))}}); err != nil {
			t.Fatalf("write %s: %v", v, err)
		}
		return time.Since(t0)
	}

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
	if took := write("two"); took < timeout {
		t.Fatalf("the first write with the replica paused took %v, less than the %v it should wait", took, timeout)
	}
	if !s.replicas.Behind() || !strings.Contains(logs.String(), "not acknowledged by enough Redis replicas") {
		t.Fatalf("behind %v after an unacknowledged write; log: %s", s.replicas.Behind(), logs.String())
	}
	if took := write("three"); took >= timeout {
		t.Fatalf("a write while the replicas are behind waited %v", took)
	}
	resume()
	eventually(t, 5*time.Second, func() bool { write("four"); return !s.replicas.Behind() })
	if !strings.Contains(logs.String(), "acknowledge writes again") {
		t.Fatalf("no line about the replicas being back: %s", logs.String())
	}

	// More acknowledgements than replicas: behind at once.
	two := openStore(t, master.Addr, ns, func(o *Options) { o.ReplicaAcks, o.ReplicaAckTimeout = 2, timeout })
	put(t, two, "k2", "x")
	if !two.replicas.Behind() {
		t.Fatal("two acks asked of one replica, and the store is not behind")
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
