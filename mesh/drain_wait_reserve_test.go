package mesh

import (
	"context"
	"testing"
	"time"
)

// A drain waiting for the host command running keeps the shutdown's
// reserve before its context's deadline, like its moves (drainMoves): the
// wait's bound was counted from the end of the wait for the node's own
// lease and capped only by the context's deadline — with a caller's
// deadline shorter than shutdown_deadline (or a lease wait before it) the
// wait ran to that deadline, and Close got an expired context.
func TestDrainWaitForACommandKeepsTheShutdownReserve(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	createUntil(t, ctx, c, "reserve", 1, 2)
	n := c.nodes[1]
	atSecure, release := holdMovesAtSecure(n)
	relocated := make(chan struct{})
	go func() {
		defer close(relocated)
		n.Relocate(ctx, HostRelocateOptions{MaxConcurrent: 1})
	}()
	<-atSecure
	const within = 2500 * time.Millisecond
	reserve := drainReserve(n.cfg.ShutdownDeadline)
	if reserve >= within {
		t.Fatalf("test set-up: reserve %v not below %v", reserve, within)
	}
	go func() {
		time.Sleep(within + time.Second) // the command outlives the drain's deadline
		close(release)
	}()
	dctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	res, err := n.Drain(dctx, HostRelocateOptions{})
	<-relocated
	t.Logf("drain: took %v (deadline %v, reserve %v) err=%v", res.Took, within, reserve, err)
	if max := within - reserve + 500*time.Millisecond; res.Took > max {
		t.Fatalf("the drain's wait for the command took %v of its %v: past %v, into the shutdown's reserve of %v", res.Took, within, max, reserve)
	}
}
