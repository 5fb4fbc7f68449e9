package mesh

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// shutdownOutageStore is a Location Store that does not answer, as a
// stopped Redis, for the shutdown's calls — everything but the owner
// lease's renewals, so that the lease stays valid and the test is about the
// shutdown's own steps. With failFirst > 0 each kind of call (scan, read,
// descriptor or record write, lease delete) fails its first failFirst
// times and then passes: a store back within the deadline, found by the
// retries. With failFirst 0 it stays down.
type shutdownOutageStore struct {
	locstore.Store
	leasePrefix string
	mu          sync.Mutex
	down        bool
	leaseDown   bool // the owner lease's calls fail too (with down): it expires
	failFirst   int
	failed      map[string]int
}

func (s *shutdownOutageStore) fail(kind string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down || s.failFirst > 0 && s.failed[kind] >= s.failFirst {
		return nil
	}
	s.failed[kind]++
	return &locstore.ProviderError{Provider: "test", Op: kind, Err: errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")}
}

func (s *shutdownOutageStore) leaseFails() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaseDown
}

func (s *shutdownOutageStore) failures() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.failed {
		out[k] = v
	}
	return out
}

func (s *shutdownOutageStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	if !strings.HasPrefix(key, s.leasePrefix) || s.leaseFails() {
		if err := s.fail("read"); err != nil {
			return locstore.ReadResult{}, err
		}
	}
	return s.Store.Read(ctx, key)
}

func (s *shutdownOutageStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	if err := s.fail("scan"); err != nil {
		return locstore.ScanPage{}, err
	}
	return s.Store.Scan(ctx, req)
}

func (s *shutdownOutageStore) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	kind := ""
	for _, m := range req.Mutations {
		switch {
		case !strings.HasPrefix(m.Key, s.leasePrefix):
			kind = "write"
		case m.Kind == locstore.MutDelete && kind == "":
			kind = "lease delete" // the release, not a renewal
		case s.leaseFails() && kind == "":
			kind = "lease write"
		}
	}
	if kind != "" {
		if err := s.fail(kind); err != nil {
			return locstore.WriteResult{}, err
		}
	}
	return s.Store.Write(ctx, req)
}

// startOutageNode starts one server node on a shutdownOutageStore with an
// actor hosted, and returns both.
func startOutageNode(t *testing.T, deadline time.Duration) (*Node, *shutdownOutageStore, *fixture) {
	t.Helper()
	f := newFixture(t)
	st := &shutdownOutageStore{Store: f.loc, leasePrefix: record.KindPrefix(record.KindOwnerLease), failed: map[string]int{}}
	c := newClusterOn(t, f, st, 1, func(_ int, cfg *config.Config) {
		cfg.ShutdownDeadline = deadline
		cfg.Relocation.DrainOnShutdown = false
	})
	if _, err := c.m(0).CreateActor(ctxT(t, 30*time.Second), "outlives-the-outage", testMoverType); err != nil {
		t.Fatal(err)
	}
	return c.nodes[0], st, f
}

// storedKeys lists the keys under prefix in the memory store itself.
func storedKeys(t *testing.T, s locstore.Store, prefix string) []string {
	t.Helper()
	page, err := s.Scan(context.Background(), locstore.ScanRequest{Prefix: prefix, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range page.Items {
		keys = append(keys, it.Key)
	}
	return keys
}

// A store that does not answer for a while during a shutdown (Redis
// stopped and started again): each store step — the sweep, the stopped
// publish, the lease release, the descriptor's removal — is retried until
// the store answers, within shutdown_deadline, and the shutdown completes
// as if nothing had happened: no record, no lease, no descriptor left.
// Before, the first failure ended each step: Close returned a multi-line
// "connection refused" error at once and the descriptor stayed for the
// other nodes' reclaim.
func TestShutdownRetriesItsStoreStepsUntilTheStoreAnswers(t *testing.T) {
	n, st, f := startOutageNode(t, time.Minute)
	descKey := n.pub.Key()
	leaseKey, _ := n.lease.Fence()
	st.mu.Lock()
	st.down, st.failFirst = true, 2
	st.mu.Unlock()

	if err := n.Close(context.Background()); err != nil {
		t.Fatalf("Close = %v, want nil once the store answered again", err)
	}
	got := st.failures()
	for _, kind := range []string{"scan", "write", "lease delete"} {
		if got[kind] < st.failFirst {
			t.Errorf("%d failed %s calls, want %d: the outage did not reach that step", got[kind], kind, st.failFirst)
		}
	}
	for _, key := range []string{descKey, leaseKey} {
		if rr, err := f.loc.Read(context.Background(), key); err != nil || rr.Found {
			t.Errorf("%s still stored after the shutdown (err %v)", key, err)
		}
	}
	if keys := storedKeys(t, f.loc, record.KindPrefix(record.KindAuthority)); len(keys) > 0 {
		t.Errorf("authority records left after the shutdown: %v", keys)
	}
	if !n.sweptOnClose() {
		t.Error("sweptOnClose = false after a sweep that completed")
	}
}

// A store that stays down past shutdown_deadline: Close returns once the
// deadline has passed, with one ShutdownIncompleteError — one line naming
// the steps not done and what they leave for the other nodes — not a
// joined multi-line store error.
func TestShutdownWithTheStoreDownEndsWithOneClearError(t *testing.T) {
	n, st, _ := startOutageNode(t, time.Second)
	st.mu.Lock()
	st.down = true
	st.mu.Unlock()

	err := n.Close(context.Background())
	var inc *ShutdownIncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("Close = %v, want a *ShutdownIncompleteError", err)
	}
	if !inc.Deadline {
		t.Error("Deadline = false: the retries should have run until shutdown_deadline")
	}
	want := []string{stepSweep, stepStopped, stepRelease, stepRemoveStopped}
	if strings.Join(inc.NotDone, ",") != strings.Join(want, ",") {
		t.Errorf("NotDone = %q, want %q", inc.NotDone, want)
	}
	msg := err.Error()
	t.Log(msg)
	if strings.Contains(msg, "\n") {
		t.Errorf("the error spans lines:\n%s", msg)
	}
	for _, part := range []string{"did not answer before shutdown_deadline", "not done: owner sweep, publish stopped, release owner lease, remove descriptor",
		"for reclaim by the other nodes", "connection refused"} {
		if !strings.Contains(msg, part) {
			t.Errorf("error %q does not say %q", msg, part)
		}
	}
	if n.sweptOnClose() {
		t.Error("sweptOnClose = true after a sweep that never reached the store")
	}
}
