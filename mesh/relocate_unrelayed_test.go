package mesh

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router/transport"
)

// Held messages whose relay failed midway (unrelayed) come back into the
// object when the target never commits and the source takes the object
// back (recoverLocal), after the ones relayed. Before, the cutover passed
// them on to the target and forgot them: the target dropped them unrun,
// and four accepted one-way messages were lost.
func TestRecoveredMoveKeepsUnrelayedHeldMessages(t *testing.T) {
	f := newFixture(t)
	faults := &casFaults{Store: f.loc}
	c, ctl := failCluster(t, f, faults)
	ctx := ctxT(t, 60*time.Second)
	const id = "unrelayed-back"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	blk := ctl.block(id, nil) // the target's Restore waits: relay-ready too, arrivals go into the source's hold
	built, release := blk.started, blk.release
	hooks := &testHooks{}
	ends := watchArrivals(hooks)
	c.nodes[dst].obj.hooks.Store(hooks)
	c.nodes[src].obj.hooks.Store(&testHooks{relaySend: func(got string, index int) error {
		if got == id && index >= 1 {
			return fmt.Errorf("%w: link broke (test)", transport.ErrPeerDown)
		}
		return nil
	}})
	faults.arm(t, id, -1, false) // the target's owner CAS fails until the deadline
	mctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, built, "the target's hidden instance")
	for i := 1; i <= 5; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // let them reach the source's hold
	close(release)
	res := outcomeOf(t, moving)
	e := waitEnd(t, ends, id)
	if e.state != relocation.TgtFailed {
		t.Fatalf("the target attempt ended %s/%s, want failed", e.state, e.failure)
	}
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() {
		t.Fatalf("the source reported %v (%s); want notMoved (targetLost)", res.Outcome, res.Reason)
	}
	faults.mu.Lock()
	faults.failWrites = 0
	faults.mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	got, err := c.m(0).RequestActor(ctx, ref, []byte("list"))
	if err != nil || string(got) != "a,m1,m2,m3,m4,m5" {
		t.Fatalf("recovered object ran %q, %v; want a,m1,m2,m3,m4,m5 (five accepted one-way messages)", got, err)
	}
}

// One-way messages the source passes on to the target after the cutover
// (Message Follow), from a client node and from the source node itself,
// come back into the object, each once and in its sender's order, when the
// target never commits and the source takes the object back. Before, the
// target dropped them unrun with its failed attempt: accepted messages
// lost although the object lived on.
func TestRecoveredMoveKeepsMessagesPassedOnAfterTheCutover(t *testing.T) {
	f := newFixture(t)
	faults := &casFaults{Store: f.loc}
	c, _ := failCluster(t, f, faults)
	ctx := ctxT(t, 60*time.Second)
	const id = "passed-on-back"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	hooks := &testHooks{}
	ends := watchArrivals(hooks)
	c.nodes[dst].obj.hooks.Store(hooks)
	atConfirm, goOn := make(chan struct{}), make(chan struct{})
	var resume sync.Once
	proceed := func() { resume.Do(func() { close(goOn) }) }
	defer proceed() // a failing test must not leave the move blocked
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got == id && step == stepSourceConfirm {
			close(atConfirm)
			<-goOn
		}
	}})
	faults.arm(t, id, -1, false) // the target's owner CAS fails until the deadline
	mctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, atConfirm, "the source's cutover")
	before := c.nodes[src].ObjectStats().FollowForwarded
	var want []string
	for i := 1; i <= 3; i++ {
		for _, from := range []int{0, src} { // a client's cached route; the source's own sender
			body := fmt.Sprintf("n%d-%d", from, i)
			if err := c.m(from).SendActor(ctx, ref, []byte(body)); err != nil {
				t.Fatal(err)
			}
			want = append(want, body)
		}
	}
	waitUntil(t, "the source to pass the client's messages on", func() bool {
		return c.nodes[src].ObjectStats().FollowForwarded-before >= 3 // its own go along the recorded move directly
	})
	proceed()
	res := outcomeOf(t, moving)
	if e := waitEnd(t, ends, id); e.state != relocation.TgtFailed {
		t.Fatalf("the target attempt ended %s/%s, want failed", e.state, e.failure)
	}
	if res.Outcome != NotMoved {
		t.Fatalf("the source reported %v (%s); want notMoved", res.Outcome, res.Reason)
	}
	faults.mu.Lock()
	faults.failWrites = 0
	faults.mu.Unlock()
	got, err := c.m(0).RequestActor(ctx, ref, []byte("list"))
	if err != nil {
		t.Fatal(err)
	}
	ran := strings.Split(string(got), ",")
	if len(ran) != 1+len(want) || ran[0] != "a" {
		t.Fatalf("the object ran %q; want a, then %v", got, want)
	}
	sendersOrder(t, ran, want, 0, src)
}

// sendersOrder checks that the messages of each sender node in froms —
// those whose body holds "n<from>-" — ran in the order it sent them.
func sendersOrder(t *testing.T, ran, sent []string, froms ...int) {
	t.Helper()
	of := func(list []string, from int) []string {
		mark := fmt.Sprintf("n%d-", from)
		return slices.DeleteFunc(slices.Clone(list), func(b string) bool { return !strings.Contains(b, mark) })
	}
	for _, from := range froms {
		if mine, theirs := of(ran, from), of(sent, from); !slices.Equal(mine, theirs) {
			t.Errorf("node %d's messages ran as %v, sent as %v (all ran: %v)", from, mine, theirs, ran)
		}
	}
}
