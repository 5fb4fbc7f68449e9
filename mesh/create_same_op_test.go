package mesh

import (
	"errors"
	"reflect"
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

// OBJECTS §3: one OperationId is one creation. A retry of the same request
// (same OperationId, same request) made while the first call's factory
// still runs waits for that creation and gets its answer: Created with the
// same ref, for a Create and for a GetOrCreate alike. It was
// ErrAlreadyExists for a Create (the retry found the first's Creating
// record), and Existing for a GetOrCreate (review).
func runSameRequestRetryJoinsTheFirst(t *testing.T, c *cluster) {
	for _, mode := range []string{"create", "getOrCreate"} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t, 30*time.Second)
			id := "same-request-" + mode
			op := WithOperationID([16]byte{0: 5, 15: byte(len(mode))})
			body := WithBody([]byte("wait:" + id))
			call := func() (ActorRef, CreateOutcome, error) {
				if mode == "create" {
					ref, err := c.m(0).CreateActor(ctx, id, testActorType, op, body)
					return ref, Created, err
				}
				cr, err := c.m(0).GetOrCreateActor(ctx, id, testActorType, op, body)
				return cr.Ref, cr.Outcome, err
			}
			type res struct {
				ref     ActorRef
				outcome CreateOutcome
				err     error
			}
			first, retry := make(chan res, 1), make(chan res, 1)
			go func() { ref, o, err := call(); first <- res{ref, o, err} }()
			waitUntil(t, "the first factory to run", func() bool { return c.probe.runCount(id) == 1 })
			reads := c.nodes[0].ObjectStats().AuthorityReads
			go func() { ref, o, err := call(); retry <- res{ref, o, err} }()
			// The retry either answered already (the old ErrAlreadyExists)
			// or is reading the record while it waits.
			var r res
			answered := false
			waitUntil(t, "the retry to answer or wait", func() bool {
				select {
				case r = <-retry:
					answered = true
					return true
				default:
					return c.nodes[0].ObjectStats().AuthorityReads >= reads+3
				}
			})
			close(c.probe.gate(id))
			a := <-first
			if !answered {
				r = <-retry
			}
			if a.err != nil || a.outcome != Created {
				t.Fatalf("first call: %+v %v %v; want Created", a.ref, a.outcome, a.err)
			}
			if r.err != nil || !reflect.DeepEqual(r.ref, a.ref) || r.outcome != a.outcome {
				t.Fatalf("retry: %+v %v %v; want the first's answer %+v %v", r.ref, r.outcome, r.err, a.ref, a.outcome)
			}
			if n := c.probe.runCount(id); n != 1 {
				t.Fatalf("the factory ran %d times, want once", n)
			}
		})
	}
}

func TestSameRequestRetryJoinsTheFirst(t *testing.T) {
	onBothStores(t, runSameRequestRetryJoinsTheFirst)
}
