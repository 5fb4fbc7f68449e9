package mesh

import (
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router/transport"
)

// clientAndServer is a client-role node 0 (it creates, hosts nothing) and
// one server node 1: every creation from node 0 crosses the wire.
func clientAndServer(t *testing.T) *cluster {
	return newCluster(t, 2, clientRole0)
}

// §7 "Even if a response is lost, the same request's result must be
// re-checkable": the target creates and records Created, its command 20 is
// lost, the first call ends at its deadline; the same OperationId then reads
// the stored final result, and the factory does not run again.
func TestLostReplySameOperationReadsStoredResult(t *testing.T) {
	c := clientAndServer(t)
	c.nodes[1].obj.hooks.Store(&testHooks{dropCreateReply: func(id string) bool { return id == "lost" }})
	op := NewOperationID()
	short, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := c.m(0).CreateActor(short, "lost", testActorType, WithOperationID(op))
	wantIs(t, err, ErrDeadlineExceeded)

	ctx := ctxT(t, 10*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "lost", testActorType, WithOperationID(op))
	if err != nil {
		t.Fatalf("same OperationId: %v", err)
	}
	found, err := c.m(0).FindActor(ctx, "lost")
	if err != nil || found.ObjectGeneration != ref.ObjectGeneration || string(ref.NodeRID) != string(c.nodes[1].RID()) {
		t.Fatalf("stored result %+v, Find %+v, %v", ref, found, err)
	}
	if n := c.probe.runCount("lost"); n != 1 {
		t.Fatalf("factory ran %d times, want 1", n)
	}
	// Another request under the same OperationId cannot read it.
	_, err = c.m(0).CreateActor(ctx, "lost", testActorType, WithOperationID(op), WithBody([]byte("other")))
	wantIs(t, err, ErrInvalidOperation)
	// A new OperationId is a new request: the object exists.
	_, err = c.m(0).CreateActor(ctx, "lost", testActorType)
	wantIs(t, err, ErrAlreadyExists)
}

// A transport failure after the 49 left (the link drops while the target
// works) is not judged as a failure: the source reads the store until the
// target's batch decides, and returns Created in the same call (§7, §10).
func TestLostReplyRecoveredFromStoreInTheSameCall(t *testing.T) {
	c := clientAndServer(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	c.nodes[1].obj.hooks.Store(&testHooks{beforeFactory: func(id string) error {
		if id == "dropped-link" {
			close(entered)
			<-release
		}
		return nil
	}})
	done := make(chan error, 1)
	var ref ActorRef
	go func() {
		var err error
		ref, err = c.m(0).CreateActor(ctxT(t, 15*time.Second), "dropped-link", testActorType)
		done <- err
	}()
	<-entered
	// The request is in flight: cut node 0's link to node 1.
	if err := c.nodes[0].Transport().Disconnect(transport.RID(c.nodes[1].RID())); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("CreateActor: %v", err)
	}
	if string(ref.NodeRID) != string(c.nodes[1].RID()) || c.probe.runCount("dropped-link") != 1 {
		t.Fatalf("ref %+v, runs %d", ref, c.probe.runCount("dropped-link"))
	}
	if _, err := c.m(0).FindActor(ctxT(t, 5*time.Second), "dropped-link"); err != nil {
		t.Fatal(err)
	}
	if c.nodes[0].ObjectStats().LostAnswersRecovered != 1 {
		t.Fatal("the creation was not decided by reading the store after the lost answer")
	}
}
