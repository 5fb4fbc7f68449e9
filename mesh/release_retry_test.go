package mesh

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
)

// releaseFaults fails, while failing is set, every batch that deletes a
// relocation reservation without naming a new owner: the source's release
// of its target's capacity (§9.4 step 4).
type releaseFaults struct {
	locstore.Store
	mu      sync.Mutex
	failing bool
	failed  int
}

func (s *releaseFaults) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	release := false
	for _, m := range req.Mutations {
		if m.Kind == locstore.MutDelete && strings.HasPrefix(m.Key, record.KindPrefix(authority.KindRelocationReservation)) {
			release = true
		}
		if m.Kind == locstore.MutPut && strings.HasPrefix(m.Key, record.KindPrefix(record.KindAuthority)) {
			release = false
			break
		}
	}
	s.mu.Lock()
	fail := release && s.failing
	if fail {
		s.failed++
	}
	s.mu.Unlock()
	if fail {
		return locstore.WriteResult{}, errStoreDown
	}
	return s.Store.Write(ctx, req)
}

func (s *releaseFaults) set(failing bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = failing
	return s.failed
}

// A reservation release the store does not confirm is retried — the object
// stays held, since reopening without knowing could make two owners — at a
// pace that grows, with one WARN for the episode. The store refusing every
// release at once made the executor retry in a tight loop (256 writes, a
// WARN each, per call), and the move call it again every 50 ms with a WARN
// of its own: a SIGTERM drain on a node whose store had lost its data wrote
// ~4,700 such lines in two minutes.
func TestReleaseRetryIsPacedAndLoggedOnce(t *testing.T) {
	f := newFixture(t)
	var logs syncbuf.Buffer
	f.logTo = func(i int) io.Writer { return &logs }
	faults := &releaseFaults{Store: f.loc}
	c, ctl := failCluster(t, f, faults)
	ctx := ctxT(t, 60*time.Second)
	const id = "release-retry"
	ref := recorder(t, ctx, c, id, failPreserveType, "pre-1")
	src, dst := movePair(t, c, record.ObjectActor, id)
	b := ctl.block(id, errInjected) // the target's Restore fails: the source releases
	faults.set(true)
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, b.started, "the target's Restore to start")
	close(b.release)
	eventually(t, 10*time.Second, "the release to fail", func() bool { return faults.set(true) > 0 })
	time.Sleep(1500 * time.Millisecond)
	attempts := faults.set(false)
	res := outcomeOf(t, moving)
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetFailed.String() {
		t.Fatalf("outcome %v (%s), want notMoved (targetFailed)", res.Outcome, res.Reason)
	}
	wantRan(t, ctx, c, ref, "pre-1")
	warns := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && (strings.Contains(line, "write result lost") || strings.Contains(line, "not confirmed")) {
			warns++
		}
	}
	if warns != 1 {
		t.Fatalf("%d WARN lines for %d failed releases, want 1", warns, attempts)
	}
	// 2 ms doubling to 200 ms: 1.5 s of failures is ~13 attempts.
	if attempts > 16 {
		t.Fatalf("%d release attempts in ~1.5 s: not paced", attempts)
	}
	t.Logf("%d failed release attempts", attempts)
}

// heldRetry: the pause doubles up to heldRetryMax, the first failure is a
// WARN and the rest DEBUG, and a confirmation after failures is an INFO. A
// move whose writes fail at once (the lease gate shut for good after the
// store lost its data) retried every 50 ms with a WARN each time.
func TestHeldRetryPacing(t *testing.T) {
	var logs syncbuf.Buffer
	o := &objects{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), halt: context.Background()}
	r := (&sourceMove{o: o, id: "held"}).heldRetry("reservation release")
	start := time.Now()
	for range 3 {
		if err := r.failed(errStoreDown); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 14*time.Millisecond || r.d != 16*time.Millisecond {
		t.Fatalf("three failures paused %s, next pause %s; want 2+4+8 ms, then 16 ms", took, r.d)
	}
	r.confirmed()
	text := logs.String()
	if strings.Count(text, "level=WARN") != 1 || strings.Count(text, "level=DEBUG") != 2 ||
		!strings.Contains(text, `level=INFO msg="relocation: reservation release confirmed after a store failure" object=held attempts=4`) {
		t.Fatalf("log:\n%s", text)
	}
	halted, cancel := context.WithCancel(context.Background())
	cancel()
	o.halt = halted
	r.d = heldRetryMax - time.Millisecond
	if err := r.failed(errStoreDown); err == nil {
		t.Fatal("a halted node's retry did not stop")
	}
	if r.d != heldRetryMax {
		t.Fatalf("pause grew to %s, want the cap %s", r.d, heldRetryMax)
	}
}
