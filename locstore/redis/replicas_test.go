package redis

import (
	"context"
	"fmt"
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

// A caller's deadline shorter than replica_ack_timeout bounds the replica
// wait too. WAIT's own timeout is cut to what the caller's deadline leaves
// (less a reserve for the reply), so that with a replica that does not
// acknowledge the write still comes back applied within the deadline —
// what a write whose WAIT timed out is (docs/store-redis.md) — instead of
// the client's read of WAIT's reply running into the deadline: that failed
// a write the master had applied (an unknown outcome, re-read by the
// caller), dropped the connection, and never let the store see that its
// replicas were behind, so every later write with such a deadline failed
// the same way.
func TestReplicaWaitWithinTheCallersDeadline(t *testing.T) {
	master := testredis.NewServer(t)
	replica := testredis.NewReplica(t, master)
	const ackTimeout = time.Second
	s := openStore(t, master.Addr, testredis.Namespace(t), func(o *Options) {
		o.OperationTimeout, o.ReplicaAcks, o.ReplicaAckTimeout = 3*time.Second, 1, ackTimeout
	})
	put(t, s, "warm", "x") // the replica acknowledges: the store waits for it
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Resume() }()
	const budget = 200 * time.Millisecond
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		t0 := time.Now()
		res, err := s.Write(ctx, locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfMissing(fmt.Sprintf("k%d", i))},
			Mutations:  []locstore.Mutation{locstore.Put(fmt.Sprintf("k%d", i), []byte("v"))}})
		took := time.Since(t0)
		cancel()
		if err != nil || !res.Applied {
			t.Fatalf("write %d with a %v deadline and the replica paused: applied %v, %v after %v; want applied within the deadline",
				i, budget, res.Applied, err, took)
		}
		if took > budget {
			t.Fatalf("write %d took %v, past the caller's %v deadline", i, took, budget)
		}
		r, err := s.Read(context.Background(), fmt.Sprintf("k%d", i))
		if err != nil || r.Version != res.Versions[0] {
			t.Fatalf("read back k%d: %+v %v, want version %s", i, r, err, res.Versions[0])
		}
	}
	// A wait cut short judges nothing; one given the whole timeout does.
	if s.replicas.Behind() {
		t.Fatal("writes whose wait the caller's deadline cut short made the store judge its replicas behind")
	}
	put(t, s, "judged", "x")
	if !s.replicas.Behind() {
		t.Fatal("a write that waited the whole timeout unacknowledged left the store not behind")
	}
}
