package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
)

// outageMesh is three `meshnode run` servers and the client on a Redis of
// their own, with 12 counters that received sequence-numbered sends.
func outageMesh(t *testing.T) (*rollMesh, *testredis.Server, []mesh.ActorRef, *incSender, context.Context) {
	t.Helper()
	srv := testredis.NewServer(t)
	r := startRollMeshOn(t, srv.Addr, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	m := r.client.Manager()
	refs := createCounters(t, ctx, m, "outage-", 12)
	snd := startIncSender(ctx, m, refs)
	time.Sleep(300 * time.Millisecond)
	if err := snd.wait(); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, ctx, m, snd)
	return r, srv, refs, snd, ctx
}

// waitRecovered waits until every server has recovered its lost lease
// (objects re-adopted) and the client sees every server serving again.
func (r *rollMesh) waitRecovered(t *testing.T) {
	t.Helper()
	for _, p := range r.procs {
		waitUntil(t, 30*time.Second, p.name+" to recover its lease", func() bool {
			return p.seen("owner lease recovered after its loss: objects re-adopted under the new lease generation")
		}, r.procs...)
	}
	waitUntil(t, 30*time.Second, "the client to see every server serving again", func() bool {
		for _, rid := range r.rids {
			if _, ok := servingRun(r.client, rid); !ok {
				return false
			}
		}
		return true
	}, r.procs...)
}

// sendMore sends another round of sequence numbers after snd's and checks
// every counter again: the mesh takes new work after the recovery.
func sendMore(t *testing.T, ctx context.Context, r *rollMesh, snd *incSender) {
	t.Helper()
	m := r.client.Manager()
	for i, ref := range snd.refs {
		for k := 0; k < 3; k++ {
			if err := snd.send(ctx, ref, snd.accepted[i]+1); err != nil {
				t.Fatalf("send after the recovery: %v", err)
			}
			snd.accepted[i]++
		}
	}
	checkCounters(t, ctx, m, snd)
}

// Redis unreachable for longer than the owner lease TTL (issue 12 "Ride
// out store outages", as seen: every node became a zombie refusing all
// work until restarted): every node loses its lease, then reacquires it,
// re-adopts its counters and serves again; every counter keeps exactly the
// sends it had accepted, and takes new ones.
func TestMultiProcessRedisOutageLongerThanTTL(t *testing.T) {
	r, srv, _, snd, ctx := outageMesh(t)
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // TTL 2 s (nodeEnv)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	r.waitRecovered(t)
	checkCounters(t, ctx, r.client.Manager(), snd)
	sendMore(t, ctx, r, snd)
}

// Redis at its maxmemory (noeviction policy) refuses every write while a
// client streams sends to twelve counters: a
// creation fails at once with the refusal and what to do about it (before,
// it waited out its deadline and said the target had not answered), every
// node logs the refused lease renewal with the same advice, and loses its
// lease after the TTL; once maxmemory is raised every node reacquires its
// lease and re-adopts its counters with their state, and the mesh takes
// sends and creations again.
func TestMultiProcessRedisOutOfMemory(t *testing.T) {
	r, srv, refs, before, ctx := outageMesh(t)
	raw := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer raw.Close()
	m := r.client.Manager()
	// Sends stream throughout: those refused while the leases are out are
	// retried, and every one accepted must land once, in order.
	snd := continueIncSender(ctx, m, refs, before.accepted)
	time.Sleep(200 * time.Millisecond)
	if err := raw.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := m.CreateActor(cctx, "oom-new", demoapp.CounterType)
	cancel()
	if !errors.Is(err, mesh.ErrUnavailable) || errors.Is(err, mesh.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "raise maxmemory") {
		t.Fatalf("creation while Redis refuses writes: %v; want the refusal and its fix", err)
	}
	t.Logf("creation while Redis refuses writes: %v", err)
	for _, p := range r.procs {
		waitUntil(t, 10*time.Second, p.name+" to log the refused renewal", func() bool {
			return p.seenWith("owner lease renew failed; deadline not extended", "err", "raise maxmemory")
		}, r.procs...)
	}
	time.Sleep(3 * time.Second) // past the TTL (2 s, nodeEnv): every lease lapses
	if err := raw.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	r.waitRecovered(t)
	if err := snd.wait(); err != nil {
		t.Fatalf("sending through the refusals: %v (refused %v)", err, snd.refused)
	}
	total := checkCounters(t, ctx, m, snd)
	t.Logf("%d sends accepted and counted once, in order; refused meanwhile and retried: %v", total, snd.refused)
	sendMore(t, ctx, r, snd)
	if _, err := m.CreateActor(ctx, "oom-new", demoapp.CounterType); err != nil {
		t.Fatalf("creation once Redis takes writes again: %v", err)
	}
}

// A node paused (SIGSTOP) past its TTL and continued (SIGCONT): it lost
// its lease, reacquires it and keeps its counters with their state (the
// others did not reclaim them: the reclaim grace, 1 minute, had not
// passed).
func TestMultiProcessPausedNodeRecovers(t *testing.T) {
	r, _, _, snd, ctx := outageMesh(t)
	p := r.procs[1]
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // TTL 2 s
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, p.name+" to recover its lease", func() bool {
		return p.seen("owner lease recovered after its loss: objects re-adopted under the new lease generation")
	}, r.procs...)
	waitUntil(t, 30*time.Second, "the client to see it serving again", func() bool {
		_, ok := servingRun(r.client, r.rids[1])
		return ok
	}, r.procs...)
	checkCounters(t, ctx, r.client.Manager(), snd)
	sendMore(t, ctx, r, snd)
}

// FLUSHALL under a running mesh (issue 12 "Store data loss goes
// unnoticed"): every server reports STORE DATA LOST and stops new work for
// good instead of issuing generations again from the emptied store.
func TestMultiProcessFlushAllIsReported(t *testing.T) {
	srv := testredis.NewServer(t)
	r := startRollMeshOn(t, srv.Addr, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := r.client.Manager().CreateActor(ctx, "flushed", demoapp.CounterType); err != nil {
		t.Fatal(err)
	}
	if err := goredis.NewClient(&goredis.Options{Addr: srv.Addr}).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, p := range r.procs {
		p := p
		waitUntil(t, 20*time.Second, p.name+" to report the data loss", func() bool {
			return p.seen("STORE DATA LOST: the Location Store no longer holds what this node wrote (FLUSHALL, " +
				"eviction, a failover to a replica without persistence or one that missed the last writes); the node stops all new work so that no " +
				"generation is issued twice. Its objects' state stays in memory but cannot be served; restart the " +
				"nodes once the store is restored or known empty, and check the Redis settings (docs/store-redis.md)")
		}, r.procs...)
	}
	// Nothing was written back by the nodes that saw the loss: no lease,
	// no descriptor, no counter restarted.
	time.Sleep(2 * time.Second)
	keys, err := goredis.NewClient(&goredis.Options{Addr: srv.Addr}).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(k, "cursor") {
			t.Errorf("key %s written after the data loss", k)
		}
	}
}

// A server paused (SIGSTOP) for almost three peer timeouts while the
// client streams one-way sends as fast as it can, one sender per counter,
// to counters on every server: every send the client's transport accepted
// reaches its counter once and in order. The stream fills the paused
// server's socket buffers and the client's, so the client's link gives the
// silent connection up (its liveness deadline, then the drain's linger)
// with messages the server never acknowledged: it resets the connection
// when nothing is in flight and keeps them, with what was still queued,
// for the server's return (docs/TRANSPORT.md "A receiver stuck for
// several peer timeouts"). The lease TTL is longer than the pause, so the
// server keeps its objects throughout.
func TestMultiProcessPauseOfSeveralPeerTimeoutsLosesNoSend(t *testing.T) {
	t.Run("null", func(t *testing.T) { pauseOfSeveralPeerTimeouts(t, startRollMeshWith) })
	// Over CURVE what a link remembers and sends again is counted in the
	// sealed bytes on the wire, and every new link is a new handshake.
	t.Run("curve", func(t *testing.T) { pauseOfSeveralPeerTimeouts(t, startCurveRollMesh) })
}

func pauseOfSeveralPeerTimeouts(t *testing.T, start func(*testing.T, string, int, []string, ...string) *rollMesh) {
	transport := []string{"MESHNODE_TRANSPORT__PEER_TIMEOUT=1s", "MESHNODE_TRANSPORT__LIVENESS_INTERVAL=250ms"}
	r := start(t, testredis.Addr(t), 3, transport,
		"--transport.peer_timeout=1s", "--transport.liveness_interval=250ms", "--lease.ttl=6s")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	m := r.client.Manager()
	refs := createCounters(t, ctx, m, "pause-", 9)
	// One sender per counter, no pause between sends: each counter's
	// sends stay in order, and together they fill the buffers.
	snd := &incSender{m: m, refs: refs, skip: make([]atomic.Bool, len(refs)), accepted: make([]int64, len(refs)),
		refused: map[string]int{}, sample: map[string]error{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, len(refs))
	for i, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one := &incSender{m: m, refused: map[string]int{}, sample: map[string]error{}}
			for seq := int64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if errs[i] = one.send(ctx, ref, seq); errs[i] != nil {
					return
				}
				snd.accepted[i] = seq
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	p := r.procs[1]
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2800 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sender %d: %v", i, err)
		}
	}
	total := checkCounters(t, ctx, m, snd)
	st := r.client.Transport().Stats()
	logs := r.all[len(r.all)-1] // the client's, collected like a process's
	reset := "transport: gave up a silent connection (reset); the one-way messages the peer never acknowledged are kept for its return"
	t.Logf("%d sends checked; the client's transport: resent %d, unsent %d; silent connections reset %d (nothing in flight %d), given up with messages in flight %d",
		total, st.Resent, st.Unsent, logs.count(reset), logs.count(reset, "why", "nothing in flight"),
		logs.count("transport: gave up a silent connection with one-way messages in flight; they count as delivered, and the connection stays open until the peer acknowledges them"))
	if st.HeldLost != 0 {
		t.Errorf("the client counted %d one-way messages of held give-ups the server never acknowledged", st.HeldLost)
	}
	if st.Unsent != 0 {
		t.Errorf("the client dropped %d one-way messages it had kept", st.Unsent)
	}
}

// createCounters creates n demo counters named prefix0, prefix1, … through m.
func createCounters(t *testing.T, ctx context.Context, m *mesh.Manager, prefix string, n int) []mesh.ActorRef {
	t.Helper()
	refs := make([]mesh.ActorRef, n)
	for i := range refs {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("%s%d", prefix, i), demoapp.CounterType)
		if err != nil {
			t.Fatalf("create counter %d: %v", i, err)
		}
		refs[i] = ref
	}
	return refs
}
