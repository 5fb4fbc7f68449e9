package mesh

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/relocation"
)

// A bound Session whose last messages a stalled source relays only after
// its target committed on its CutoverGrace switches as soon as the target
// took them in. The Session sends m1..m3 one-way while the source's move
// holds between relay-ready and the relay (its ingress hold); the target
// commits on its grace, its command 44 accounting for none of them, and
// the Session's switch waits for m3. Then the move goes on: the source
// relays m1..m3 to the open target — not Message Follow, so no command 50
// — and the target, taking in a relayed Session message after its commit,
// sends that Session a fresh commit of the same move whose
// ReplayedHighWater covers m3: the Session switches at once and r1..r3 run
// after m1..m3. The Session's switch slice is made far longer than
// barrierMaxWait here, so nothing but a command 44 or 50 switches it within
// the test's wait; before 2026-12-07 it sent nothing until one slice
// (12 s) after the source's last barrier-held notice. From a client node
// and from the source node (its messages enter the hold directly).
func TestSessionSwitchesWhenTheLateRelayReachesTheTarget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source bool // the Session is on the source node
	}{
		{"client node", false},
		{"source node", true},
	} {
		t.Run(tc.name, func(t *testing.T) { sessionLateRelay(t, tc.source) })
	}
}

func sessionLateRelay(t *testing.T, fromSource bool) {
	const id = "session-late-relay"
	hm := newHeldMove(t, id, fromSource, clientRole0)
	c, ctx, dst, from := hm.c, hm.ctx, hm.dst, hm.from
	// No slice cuts the Session's wait within the test: only the target's
	// word can switch it (barrierMaxWait, 60 s, is beyond the waits below).
	c.nodes[from].obj.barrierEvery = time.Hour

	g := hm.gate(t)
	hooks := g.hooks
	var lateCommits atomic.Int64
	hooks[dst].relocationStep = func(got, step string) {
		if got == id && step == stepSessionLateCommit {
			lateCommits.Add(1)
		}
	}
	moving := g.moveHeldAtReady(t, hm)
	switches := c.nodes[from].obj.stats.sessionSwitches.Load()
	sent := hm.sendAroundGrace(t, g.ends) // m1..m3 into the source's ingress hold
	g.proceed()                           // the source relays m1..m3 to the open target
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("the move ended %v (%s), want moved", res.Outcome, res.Reason)
	}
	hm.switched(t, sent, "the Session's switch still waits with m1..m3 at the target")
	if got := c.nodes[from].obj.stats.sessionSwitches.Load() - switches; got != 1 {
		t.Fatalf("the Session switched %d times, want once", got)
	}
	// The Session may have switched on the command 50 about m3 before the
	// target's fresh commit went out (a CI run on a loaded machine: the
	// check came first once): it goes out all the same.
	eventually(t, 10*time.Second, "the target to send a fresh commit for the relay it took in after its commit", func() bool {
		return lateCommits.Load() > 0
	})
	wantRan(t, ctx, c, hm.ref, "a,m1,m2,m3,r1,r2,r3")
}

// A target that committed on its grace and stops before the source's
// cutover came ends the late relay with its Close: nothing of it is left
// waiting for barrierMaxWait. Before, its timer kept the closed node
// reachable for a minute after Close (Close says every timer is gone when
// it returns), and the binding stayed in lateRelays.
func TestLateRelayEndsWithTheTargetsClose(t *testing.T) {
	const id = "late-relay-close"
	hm := newHeldMove(t, id, false, clientRole0)
	c, ctx, dst := hm.c, hm.ctx, hm.dst
	g := hm.gate(t)
	moving := g.moveHeldAtReady(t, hm)
	if e := waitEnd(t, g.ends, id); e.state != relocation.TgtOwner {
		t.Fatalf("the target attempt ended %s/%s, want owner (its grace commit)", e.state, e.failure)
	}
	o := c.nodes[dst].obj
	lateRelays := func() int {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.lateRelays)
	}
	if n := lateRelays(); n != 1 {
		t.Fatalf("%d late relays after the grace commit, want 1", n)
	}
	if err := c.nodes[dst].Close(ctx); err != nil {
		t.Logf("target Close: %v", err)
	}
	if n := lateRelays(); n != 0 {
		t.Fatalf("%d late relays left after the target's Close, want none", n)
	}
	g.proceed()
	outcomeOf(t, moving)
}
