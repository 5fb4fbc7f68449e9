package mesh

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/hostmove"
)

// A cold activation of an Instance Spot that a node accepted just before
// its drain began, and that lands while the drain runs, is accounted for
// in the drain's result: the drain's list stays open until it has landed
// (as for a creation under way), so the Spot is listed — Skipped, an
// Instance Spot — among the objects the shutdown removes. Before, the
// activation was not counted as on its way here: the list closed without
// it, the Spot became Ready after it, and the shutdown's sweep removed it
// with no line of the drain's report or log naming it.
func TestDrainReportsAnInstanceSpotActivatedDuringIt(t *testing.T) {
	c := instanceCluster(t, false, 3)
	ctx := ctxT(t, 60*time.Second)
	const id = "late-session"
	reached := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	for i, node := range []int{1, 2} {
		var once sync.Once
		r := reached[i]
		c.nodes[node].obj.hooks.Store(&testHooks{activationStep: func(got, step string) {
			if got == id && step == "stored" {
				once.Do(func() { close(r) })
				<-release
			}
		}})
	}
	if err := c.m(0).SendInstance(ctx, id, []byte("first")); err != nil {
		t.Fatal(err)
	}
	host := waitEither(t, reached[0], reached[1])
	n := c.nodes[host]
	other := c.nodes[3-host]
	other.obj.hooks.Store(nil)

	// The activation goes on once the drain's host command has ended (the
	// list closed without it), or a second after the drain began when the
	// command waits for it.
	ended := make(chan struct{})
	var endOnce, beganOnce sync.Once
	progress := func(p HostProgress) {
		beganOnce.Do(func() { time.AfterFunc(time.Second, letGo) })
		if p.End != hostmove.Open {
			endOnce.Do(func() { close(ended); letGo() })
		}
	}
	res, err := n.Drain(ctx, HostRelocateOptions{Progress: progress, beforeStop: func(HostRelocationResult) {
		// The shutdown begins once the activation has landed here (it was
		// accepted before the drain: it is not refused).
		eventually(t, 10*time.Second, "the activation landing", func() bool { return n.HostsInstance(id) })
	}})
	t.Logf("drain: %s %+v swept=%v err=%v", res.End, res.Progress, res.ShutdownSwept, err)
	var listed *HostObjectResult
	for i := range res.Objects {
		if res.Objects[i].Object.ID == id {
			listed = &res.Objects[i]
		}
	}
	if listed == nil {
		t.Fatalf("the Instance Spot %s activated on the draining node during its drain is not in the drain's result (%d objects, %d not moved): the shutdown removed it unreported",
			id, len(res.Objects), len(res.NotMoved()))
	}
	if listed.Outcome != hostmove.Skipped || !strings.Contains(listed.Reason, "Instance Spot") {
		t.Fatalf("%s: %s %q, want Skipped as an Instance Spot", id, listed.Outcome, listed.Reason)
	}
	inNotMoved := false
	for _, r := range res.NotMoved() {
		inNotMoved = inNotMoved || r.Object.ID == id
	}
	if !inNotMoved {
		t.Fatalf("%s is not among the objects the shutdown removes (NotMoved)", id)
	}
	if _, found := c.instanceRecord(t, id); found {
		t.Fatalf("the shutdown's sweep left the record of %s", id)
	}
	if res.End != hostmove.Completed {
		t.Fatalf("the drain's host command ended %s, want Completed once the Spot was listed", res.End)
	}
	// Its next message activates it afresh on the serving node (sent from
	// there: the client remembers, for a moment, where it handed the
	// activation).
	if got, err := c.m(3-host).RequestInstance(ctx, id, []byte("count")); err != nil || string(got) != "count:0" || !other.HostsInstance(id) {
		t.Fatalf("after the drain: %q, %v (hosted on the serving node: %v); want count:0 from a fresh activation there", got, err, other.HostsInstance(id))
	}
}
