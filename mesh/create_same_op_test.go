package mesh

import (
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// docs/OBJECTS.md (errors table) — "another request under the
// same OperationId" is ErrInvalidOperation and changes nothing. Two
// CreateActor calls with one explicit OperationId for different ids, the
// second made while the first's factory runs (no final result stored yet,
// so both pass the LookupTerminal check): the stored request content is
// keyed by the OperationId alone (creationRequestKey), and the second
// Reserve overwrites it; the final result is keyed by the OperationId too.
// Exactly one of the two may succeed; the other must get
// ErrInvalidOperation, and no Creating record may be left behind.
func TestSameOperationIDForTwoConcurrentRequests(t *testing.T) {
	c := newCluster(t, 1, quietLease)
	ctx := ctxT(t, 30*time.Second)
	op := WithOperationID([16]byte{0: 7, 15: 9})
	gate := c.probe.gate("same-op")
	type res struct {
		ref ActorRef
		err error
	}
	first := make(chan res, 1)
	go func() {
		ref, err := c.m(0).CreateActor(ctx, "same-op-a", testActorType, op, WithBody([]byte("wait:same-op")))
		first <- res{ref, err}
	}()
	waitUntil(t, "the first factory to run", func() bool { return c.probe.runCount("same-op-a") == 1 })
	refB, errB := c.m(0).CreateActor(ctx, "same-op-b", testActorType, op)
	close(gate)
	a := <-first
	t.Logf("first (a): %+v %v; second (b): %+v %v", a.ref, a.err, refB, errB)
	ok := 0
	for name, err := range map[string]error{"a": a.err, "b": errB} {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrInvalidOperation):
		default:
			t.Errorf("%s: %v, want success or ErrInvalidOperation (another request under the same OperationId)", name, err)
		}
	}
	if ok != 1 {
		t.Errorf("%d of the two requests under one OperationId succeeded, want exactly 1", ok)
	}
	for _, id := range []string{"same-op-a", "same-op-b"} {
		if row := rowOf(t, c, record.ObjectActor, id); row.Found && row.Record.Allocation.State == record.AllocationReserved {
			t.Errorf("%s left Creating", id)
		}
	}
}
