package mesh

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
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
	f := newFixture(t)
	c, _ := failClusterOf(t, f, f.loc, 3)
	ctx := ctxT(t, 90*time.Second)
	const id = "session-late-relay"
	ref := recorder(t, ctx, c, id, failPreserveType)
	src, dst := movePair(t, c, record.ObjectActor, id)
	from := 0
	if fromSource {
		from = src
	}
	s, err := c.m(from).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Request(ctx, []byte("a")); err != nil { // sequence 1: the binding moves with the Actor
		t.Fatal(err)
	}
	// No slice cuts the Session's wait within the test: only the target's
	// word can switch it (barrierMaxWait, 60 s, is beyond the waits below).
	c.nodes[from].obj.barrierEvery = time.Hour

	hooks := map[int]*testHooks{src: {}, dst: {}, from: {}}
	ends := watchArrivals(hooks[dst])
	atHold, goOn := make(chan struct{}), make(chan struct{})
	var resume sync.Once
	proceed := func() { resume.Do(func() { close(goOn) }) }
	defer proceed() // a failing test must not leave the move blocked
	var lateCommits atomic.Int64
	hooks[dst].relocationStep = func(got, step string) {
		if got == id && step == stepSessionLateCommit {
			lateCommits.Add(1)
		}
	}
	hooks[src].relocationStep = func(got, step string) {
		if got == id && step == stepSourceReady {
			close(atHold)
			<-goOn
		}
	}
	for i, h := range hooks {
		c.nodes[i].obj.hooks.Store(h)
	}

	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atHold, "the source's move held at relay-ready")
	for i := 1; i <= 3; i++ { // into the source's ingress hold
		if err := s.Send(ctx, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if e := waitEnd(t, ends, id); e.state != relocation.TgtOwner {
		t.Fatalf("the target attempt ended %s/%s, want owner (its grace commit)", e.state, e.failure)
	}
	waitUntil(t, "the Session's switch to wait for m3", s.pendingSwitch)
	switches := c.nodes[from].obj.stats.sessionSwitches.Load()
	sent := make(chan error, 1)
	go func() {
		for i := 1; i <= 3; i++ {
			if _, err := s.Request(ctx, []byte(fmt.Sprintf("r%d", i))); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	proceed() // the source relays m1..m3 to the open target
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("the move ended %v (%s), want moved", res.Outcome, res.Reason)
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the Session's switch still waits with m1..m3 at the target (fresh commits sent: %d)", lateCommits.Load())
	}
	if got := c.indexOf(s.Actor().NodeRID); got != dst {
		t.Fatalf("the Session's route is on node %d, want the target %d", got, dst)
	}
	if got := c.nodes[from].obj.stats.sessionSwitches.Load() - switches; got != 1 {
		t.Fatalf("the Session switched %d times, want once", got)
	}
	if lateCommits.Load() == 0 {
		t.Fatal("the target sent no fresh commit for the relay it took in after its commit")
	}
	wantRan(t, ctx, c, ref, "a,m1,m2,m3,r1,r2,r3")
}
