package cli

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// interruptedRun runs `meshnode run` with args until interrupt is called
// back (once), then cancels its context as the first Ctrl-C does, and
// returns the exit code and stderr. A run that does not return after the
// signal fails the test (the guard is a safety net: the store waits below
// are ten minutes, so a run that waits them out is caught whatever the
// machine's speed).
func interruptedRun(t *testing.T, args []string, when func(stderr *syncbuf.Buffer, interrupt func())) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"run"}, args...), &syncbuf.Buffer{}, &stderr)
	}()
	var signalled sync.Once
	go when(&stderr, func() { signalled.Do(func() { cancel(signalError("interrupt signal received")) }) })
	select {
	case code := <-done:
		return code, stderr.String()
	case <-time.After(time.Minute):
		t.Fatalf("meshnode run did not return within a minute of the interrupt:\n%s", stderr.String())
	}
	return 0, ""
}

// Ctrl-C while `meshnode run` starts ends it at once, saying that the
// signal stopped the start and what the start was at, with exit status 1
// (the node did not run). Before: a store that does not answer (paused,
// overloaded) held the process for the whole location_store operation
// timeout, and it then said only "i/o timeout"; during the wait for a
// crashed run's lease the process did exit at once but blamed the "live
// owner", not the signal (an operator try-out).
func TestRunInterruptedWhileStartingRedis(t *testing.T) {
	t.Run("store does not answer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held := make(chan struct{})
		t.Cleanup(func() { close(held); ln.Close() })
		code, errs := interruptedRun(t, []string{"--location_store.provider", "redis", "--location_store.redis.addrs", ln.Addr().String(),
			"--location_store.redis.namespace", "silent", "--location_store.redis.operation_timeout", "10m",
			"--relocation_store.provider", "memory", "--log.level", "warn"},
			func(_ *syncbuf.Buffer, interrupt func()) {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				if _, err := c.Read(make([]byte, 512)); err != nil { // its first command: the node waits for the answer now
					return
				}
				interrupt()
				<-held // never answer; keep it open until the test ends
			})
		if code != ExitError || !strings.Contains(errs, "meshnode run: interrupt signal received while starting: the node did not start") {
			t.Fatalf("exit %d, want 1 and the interruption said\n%s", code, errs)
		}
	})
	t.Run("waiting for a crashed run's lease", func(t *testing.T) {
		st, addr, ns := ctlRedis(t)
		// A run of the same mesh and routing id that crashed a moment ago:
		// its descriptor and its lease, valid for ten minutes.
		rid := []byte{0x0e}
		lease, err := record.OwnerLease{OwnerID: "owner-crashed", LeaseGeneration: 1, AcquiredAt: 1, UpdatedAt: 1}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		leaseKey, _ := record.OwnerLeaseKey("owner-crashed")
		d := ctlDescriptor("m", rid, "owner-crashed")
		v, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		key, _ := record.MeshNodeKey("m", rid)
		if res, err := st.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{
			locstore.PutExpiring(leaseKey, lease, 10*time.Minute), locstore.Put(key, v)}}); err != nil || !res.Applied {
			t.Fatalf("seed: %+v %v", res, err)
		}
		code, errs := interruptedRun(t, []string{"--location_store.provider", "redis", "--location_store.redis.addrs", addr,
			"--location_store.redis.namespace", ns, "--relocation_store.provider", "memory", "--node.mesh_name", "m",
			"--node.routing_id", "0e", "--node.endpoint", "tcp://127.0.0.1:0", "--lease.ttl", "10m", "--log.level", "warn"},
			func(stderr *syncbuf.Buffer, interrupt func()) {
				for !strings.Contains(stderr.String(), "waiting once for it to end") {
					time.Sleep(10 * time.Millisecond)
				}
				interrupt()
			})
		if code != ExitError || !strings.Contains(errs, "meshnode run: interrupt signal received while starting: the node did not start") ||
			!strings.Contains(errs, "published by live owner owner-crashed") {
			t.Fatalf("exit %d, want 1, the interruption said and what the start waited for\n%s", code, errs)
		}
	})
}
