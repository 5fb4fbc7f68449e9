package mesh

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A drain waiting for a host command that ends must not lose the flag to
// a host Relocate called in between (review, 2026-12-07). Before, the
// drain's wait saw no command, a new Relocate took the flag before the
// drain's second try, and the drain listed every object NotStarted and
// ran the shutdown under that Relocate, whose objects not yet moved were
// removed with their state. Now a Relocate called while a drain waits is
// refused (a drain is stopping the node), and a drain that still finds a
// command running waits for it again.
func TestDrainKeepsTheFlagFromARelocateCalledWhileItWaits(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "window", 1, 6)
	n := c.nodes[1]
	atSecure, releaseFirst, drainWaits := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var first, waits, awaited sync.Once
	second := make(chan error, 1)
	var secondHolds atomic.Bool
	n.obj.hooks.Store(&testHooks{relocationStep: func(_, step string) {
		switch step {
		case stepSourceSecure:
			first.Do(func() { close(atSecure); <-releaseFirst })
			if secondHolds.Load() {
				// The second Relocate's moves: held until the node stops.
				<-n.obj.halt.Done()
			}
		case stepDrainAwait:
			waits.Do(func() { close(drainWaits) })
		case stepDrainAwaited:
			awaited.Do(func() {
				// The first command ended; a Relocate called now, before
				// the drain tries again.
				go func() {
					_, err := n.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1})
					second <- err
				}()
				for {
					if p := n.obj.hostCmd.Load(); p != nil && *p == cmdRelocate {
						secondHolds.Store(true)
						return // it took the flag
					}
					select {
					case err := <-second:
						second <- err
						return // refused
					case <-time.After(time.Millisecond):
					}
				}
			})
		}
	}})
	// The first command, stopped after its first move began: its objects
	// stay here.
	stop := make(chan struct{})
	firstDone := make(chan HostRelocationResult, 1)
	go func() {
		res, _ := n.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1, Stop: stop})
		firstDone <- res
	}()
	<-atSecure
	drained := make(chan HostRelocationResult, 1)
	go func() {
		res, _ := n.Drain(ctx, HostRelocateOptions{})
		drained <- res
	}()
	<-drainWaits
	close(stop)
	close(releaseFirst)
	f := <-firstDone
	res := <-drained
	t.Logf("first relocate: %s %+v; drain: %s %+v; second relocate: %v", f.End, f.Progress, res.End, res.Progress, <-second)
	wantMovedOffStoppedNode(t, c, mine, 1)
	if res.Progress.NotStarted != 0 {
		t.Errorf("the drain listed %d objects not started", res.Progress.NotStarted)
	}
}
