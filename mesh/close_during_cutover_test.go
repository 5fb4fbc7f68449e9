package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
)

// A node closes while one of its objects is past its cutover: the target
// has the object restored and relayed, and is about to run its owner CAS.
// The source's Close must not remove the object's record from under the
// target: the move was handed over (§9.4: after relay-ready the source
// never takes it back), so the object ends up owned by the target. Before,
// the source took its unconfirmed release for a release, reopened the
// object, and its shutdown sweep deleted the record the target was
// committing: the object was gone.
func TestCloseDuringCutoverLeavesTheObjectToTheTarget(t *testing.T) {
	c := hostCluster(t, nil)
	ctx := ctxT(t, 60*time.Second)
	_, mine := createUntil(t, ctx, c, "closecut", 1, 1)
	ref := mine[0]
	dst := 2
	atCAS, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepTargetCAS {
			once.Do(func() { close(atCAS) })
			<-release
		}
	}})
	moving := relocateAsync(ctx, c, 1, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	select {
	case <-atCAS:
	case <-time.After(10 * time.Second):
		t.Fatal("target never reached its owner CAS")
	}
	closed := make(chan error, 1)
	go func() { closed <- c.nodes[1].Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Logf("source Close: %v", err)
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("source Close did not return")
	}
	close(release)
	o := <-moving
	if o.err != nil || o.res.Outcome != NotMoved || o.res.Reason != relocation.ReasonLeftToTarget.String() {
		t.Fatalf("source move: %v (%s), %v; want notMoved (leftToTarget): the source stopped before it saw the commit", o.res.Outcome, o.res.Reason, o.err)
	}
	time.Sleep(500 * time.Millisecond)
	row := rowOf(t, c, record.ObjectActor, ref.ActorID)
	if !row.Found {
		t.Fatalf("%s: record gone: the source's shutdown sweep deleted the record of an object its target was committing; the object is lost", ref.ActorID)
	}
	if got := c.indexOf(row.Record.Allocation.Descriptor.RoutingID); got != dst {
		t.Fatalf("%s: the record names node %d, want the target %d", ref.ActorID, got, dst)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("state")); err != nil {
		t.Fatalf("%s after the move: %v", ref.ActorID, err)
	}
}
