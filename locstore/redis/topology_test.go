package redis

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/storetest"
)

// freeLoopbackPort returns a port that was free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedisProcess runs redis-server with args until the test ends.
func startRedisProcess(t *testing.T, args ...string) {
	t.Helper()
	testredis.Addr(t) // fails or skips loudly, like every Redis test, when no server can run
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server %v: %v", args, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// startClusterNode starts a one-node Redis Cluster owning all 16384 slots.
// It checks the Cluster code path of the provider: go-redis' ClusterClient
// routing of the script calls by their first key, and scripts touching keys
// derived from the namespace hash tag.
func startClusterNode(t *testing.T) string {
	t.Helper()
	port := freeLoopbackPort(t)
	dir := t.TempDir()
	startRedisProcess(t, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf", "--dir", dir,
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	assigned := false
	for {
		if !assigned {
			assigned = c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err() == nil
		}
		if info, err := c.ClusterInfo(ctx).Result(); err == nil && strings.Contains(info, "cluster_state:ok") {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("one-node cluster at %s did not become ready", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterContract(t *testing.T) {
	addr := startClusterNode(t)
	h := harness()
	h.Name = ProviderName + "-cluster"
	h.New = func(t *testing.T) locstore.Store {
		// Two seed addresses make NewUniversalClient build a ClusterClient;
		// both name the same node.
		s, err := New(context.Background(), Options{Addrs: []string{addr, addr}, Namespace: testredis.Namespace(t), OperationTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if _, ok := s.client.(*goredis.ClusterClient); !ok {
			t.Fatalf("client is %T, want a ClusterClient", s.client)
		}
		return s
	}
	storetest.Run(t, h)
}

// TestSentinel reaches the master through a Sentinel (Options.MasterName).
func TestSentinel(t *testing.T) {
	master := testredis.NewServer(t)
	sentinel := testredis.NewSentinel(t, master, "")
	ns := testredis.Namespace(t)
	s := openStore(t, sentinel, ns, func(o *Options) { o.MasterName = "meshmaster" })
	v := put(t, s, "k", "through-sentinel")
	// The record is on the master itself.
	direct := openStore(t, master.Addr, ns, nil)
	r, err := direct.Read(context.Background(), "k")
	if err != nil || !r.Found || r.Version != v || string(r.Value) != "through-sentinel" {
		t.Fatalf("record on the master: %+v %v", r, err)
	}
	if items := scanAll(t, s, "", 10, nil); len(items) != 1 || items[0].Key != "k" {
		t.Fatalf("scan through sentinel: %s", itemsString(items))
	}
}

// Sentinels that require a password of their own (requirepass in
// sentinel.conf): without SentinelPassword the store cannot even learn
// where the master is, and says so; with it, it works.
func TestSentinelWithPassword(t *testing.T) {
	master := testredis.NewServer(t)
	sentinel := testredis.NewSentinel(t, master, "sentinel-secret")
	ns := testredis.Namespace(t)
	_, err := New(context.Background(), Options{Addrs: []string{sentinel}, MasterName: "meshmaster", Namespace: ns,
		OperationTimeout: 3 * time.Second})
	if err == nil || !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("open without the Sentinel password: %v, want a refusal", err)
	}
	t.Logf("without the Sentinel password: %v", err)
	s := openStore(t, sentinel, ns, func(o *Options) { o.MasterName, o.SentinelPassword = "meshmaster", "sentinel-secret" })
	put(t, s, "k", "through-a-locked-sentinel")
	if r, err := s.Read(context.Background(), "k"); err != nil || string(r.Value) != "through-a-locked-sentinel" {
		t.Fatalf("read through the Sentinel: %+v %v", r, err)
	}
}

// A Sentinel failover under a Store: the master is killed, Sentinel
// promotes the replica, and the same Store goes on against the new master
// without being reopened. With replica_acks 1 the write acknowledged before
// the kill is on the promoted replica, at its version.
func TestSentinelFailover(t *testing.T) {
	master := testredis.NewServer(t)
	testredis.NewReplica(t, master)
	sentinel := testredis.NewSentinel(t, master, "",
		"sentinel down-after-milliseconds meshmaster 500", "sentinel failover-timeout meshmaster 5000")
	ns := testredis.Namespace(t)
	s := openStore(t, sentinel, ns, func(o *Options) {
		o.MasterName, o.ReplicaAcks, o.ReplicaAckTimeout = "meshmaster", 1, time.Second
	})
	v := put(t, s, "k", "before the failover")
	if s.ReplicasBehind() {
		t.Fatal("the write before the failover was not acknowledged by the replica")
	}
	master.Stop()
	ctx := context.Background()
	deadline := time.Now().Add(45 * time.Second)
	var err error
	for {
		_, err = s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("after", []byte("x"))}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write went through after the failover: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := s.Read(ctx, "k")
	if err != nil || !r.Found || r.Version != v || string(r.Value) != "before the failover" {
		t.Fatalf("the acknowledged write after the failover: %+v %v, want version %s", r, err, v)
	}
}
