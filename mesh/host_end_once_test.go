package mesh

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// A host command whose move overran its deadline is abandoned and ends
// ForceStopped; the abandoned move finishing while the Progress callback
// is still handling the end must not report the end a second time (it did).
func TestHostRelocateReportsTheEndOnce(t *testing.T) {
	defer func(d time.Duration) { hostOverrun = d }(hostOverrun)
	hostOverrun = 200 * time.Millisecond
	c := hostCluster(t, nil)
	ctx := ctxT(t, 30*time.Second)
	_, _ = createUntil(t, ctx, c, "endonce", 1, 2)
	release := blockFirstCutover(c, 1)
	var once sync.Once
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	var ends atomic.Int32
	res, err := c.nodes[1].Relocate(dctx, HostRelocateOptions{MaxConcurrent: 1, Progress: func(p HostProgress) {
		if p.End == hostmove.Open {
			return
		}
		if ends.Add(1) == 1 {
			once.Do(func() { close(release) }) // the abandoned move goes on and finishes now
			time.Sleep(1500 * time.Millisecond)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("end %s progress %+v", res.End, res.Progress)
	if n := ends.Load(); n != 1 {
		t.Fatalf("the end was reported %d times, want once", n)
	}
}
