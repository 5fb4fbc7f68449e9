package mesh

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/record"
)

// A target whose owner CAS gets no answer for a while (the store down)
// retries it every 50 ms and logs the first failure at WARN, the rest at
// DEBUG: in an operator try-out (Redis stopped 12 s in the middle of a
// drain) a target wrote 1,090 WARN lines in ten seconds for five arrivals.
func TestOwnerCASRetriesLogOneWarning(t *testing.T) {
	f := newFixture(t)
	logs := []*syncbuf.Buffer{nil, new(syncbuf.Buffer), new(syncbuf.Buffer)}
	f.logTo = func(i int) io.Writer {
		if i == 1 || i == 2 {
			return logs[i]
		}
		return nil
	}
	faults := &casFaults{Store: f.loc}
	c, _ := failCluster(t, f, faults)
	ctx := ctxT(t, 60*time.Second)
	const id = "cas-quiet"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	// The first CAS applies with its answer lost, and the reads that
	// would confirm it fail until the target has tried it again and again.
	const attempts = 10
	var tried atomic.Int32
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepTargetCAS && tried.Add(1) == attempts {
			faults.mu.Lock()
			faults.failReads = false
			faults.mu.Unlock()
		}
	}})
	faults.arm(t, id, 1, true)
	res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID()))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move: %v %s, %v", res.Outcome, res.Reason, err)
	}
	if n := tried.Load(); n < attempts {
		t.Fatalf("%d owner CAS attempts, want %d: the test did not exercise the retries", n, attempts)
	}
	warned := 0
	for _, line := range strings.Split(logs[dst].String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "owner CAS answer unknown") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("%d WARN lines for %d owner CAS attempts without an answer, want 1", warned, tried.Load()-1)
	}
}
