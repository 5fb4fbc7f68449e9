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

// startRedisProcess runs redis-server with args until the test ends (or
// the test kills it).
func startRedisProcess(t *testing.T, args ...string) *exec.Cmd {
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
	return cmd
}

// startClusterNode starts a one-node Redis Cluster owning all 16384 slots.
// It checks the Cluster code path of the provider: go-redis' ClusterClient
// routing of the script calls by their first key, and scripts touching keys
// derived from the namespace hash tag.
func startClusterNode(t *testing.T) string {
	t.Helper()
	addr, _ := startClusterNodeCmd(t)
	return addr
}

// startClusterNodeCmd is startClusterNode, also returning the process.
func startClusterNodeCmd(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	addr, cmd := startBareClusterNode(t)
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
			return addr, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("one-node cluster at %s did not become ready", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startBareClusterNode starts a cluster-enabled redis-server owning no slot.
func startBareClusterNode(t *testing.T) (string, *exec.Cmd) {
	t.Helper()
	port := freeLoopbackPort(t)
	dir := t.TempDir()
	cmd := startRedisProcess(t, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf", "--dir", dir,
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	return "127.0.0.1:" + strconv.Itoa(port), cmd
}

// A Cluster fails over under a Store: the master of the namespace's slot
// dies and its replica takes over. The Store follows at once — it asks the
// client to read the slot map again after a failed call (go-redis does so
// on its own only on MOVED/ASK, or every 60 s), instead of dialling the
// dead master for up to a minute.
func TestClusterFailoverIsFollowedAtOnce(t *testing.T) {
	master, masterCmd := startClusterNodeCmd(t)
	replica, _ := startBareClusterNode(t)
	ctx := context.Background()
	cm := goredis.NewClient(&goredis.Options{Addr: master, MaxRetries: -1})
	defer cm.Close()
	cr := goredis.NewClient(&goredis.Options{Addr: replica, MaxRetries: -1})
	defer cr.Close()
	masterID, err := cm.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatal(err)
	}
	rhost, rport, _ := net.SplitHostPort(replica)
	if err := cm.ClusterMeet(ctx, rhost, rport).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var lastErr error
	defer func() {
		if t.Failed() {
			nodes, _ := cr.ClusterNodes(ctx).Result()
			t.Logf("last CLUSTER REPLICATE error: %v; the replica's view:\n%s", lastErr, nodes)
		}
	}()
	waitFor("the replica to know the master", func() bool {
		lastErr = cr.Do(ctx, "CLUSTER", "REPLICATE", masterID).Err()
		return lastErr == nil
	})
	waitFor("the replica to replicate the master", func() bool {
		info, err := cr.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	s := openStore(t, master, testredis.Namespace(t), func(o *Options) {
		o.Addrs = []string{master, replica}
		o.ReplicaAcks, o.ReplicaAckTimeout = 1, time.Second
	})
	v := put(t, s, "k", "before the failover")

	_ = masterCmd.Process.Kill()
	_ = masterCmd.Wait()
	if err := cr.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor("the replica to take over", func() bool {
		info, err := cr.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	})
	t0 := time.Now()
	deadline := t0.Add(10 * time.Second)
	for {
		_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("after", []byte("x"))}})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Store still fails %v after the takeover (the client's slot map was not read again): %v", time.Since(t0), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("first write through the new master %v after the takeover", time.Since(t0).Round(time.Millisecond))
	if r, err := s.Read(ctx, "k"); err != nil || r.Version != v {
		t.Fatalf("the acknowledged write after the failover: %+v %v, want version %s", r, err, v)
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
