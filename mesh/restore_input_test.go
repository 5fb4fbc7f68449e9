package mesh

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
)

// What the target of a move does with the records of the chunked Restore
// path (40, 52, 53, 54, 55) it is sent: the failure each refusal and each
// assembly failure is answered with, a conflicting retransmission, records
// from a peer other than the source. Each test states the rule it checks.
// Written in review (work-hR2, d49a178 and 38c984a), failing on the code
// of 2026-12-07 before the fixes next to them.

// restorePrep is a Restore request (40) for id that node src sends node
// dst under binding b, declaring d. Nothing in the store names it: the
// checks before the assembly opens do not read the store.
func restorePrep(c *cluster, src, dst int, b chunk.Binding, id string, d chunk.Declaration) *router.RelocationPrepare {
	return &router.RelocationPrepare{Correlation: 11, Binding: b.Wire(),
		Object: router.RelocationObject{Kind: wireKind(record.ObjectActor), ObjectID: id, StableType: failPreserveType,
			ObjectGeneration: 1, ExpectedAuthorityOwnerGeneration: 1},
		TargetNodeRID: c.nodes[dst].RID(), TargetNodeGeneration: c.nodes[dst].run.lifecycleGeneration,
		TotalLength: d.Length, ChunkCount: d.Count, CRC32C: d.CRC32C,
		DeadlineUnixMs: uint64(time.Now().Add(time.Minute).UnixMilli())}
}

// bindingFrom is a binding whose source fence is node src's run.
func bindingFrom(c *cluster, src int, low uint64) chunk.Binding {
	owner, lg := c.nodes[src].Owner()
	return chunk.Binding{Relocation: router.RelocationID{High: 0x5eed, Low: low}, TargetAttempt: 1,
		Source: chunk.SourceFence{OwnerID: owner, LeaseGeneration: lg, NodeRID: string(c.nodes[src].RID()),
			NodeGeneration: c.nodes[src].run.lifecycleGeneration}}
}

// failureOf is the failure a delivery was answered with at once (the
// handler's own answer), or fails the test.
func failureOf(t *testing.T, box *inbox) *router.RelocationReady {
	t.Helper()
	if n := box.count(); n != 1 {
		t.Fatalf("the Restore was answered %d times when its handler returned, want 1", n)
	}
	r := <-box.first
	ready, ok := r.Body.(*router.RelocationReady)
	if !ok || ready.Outcome != router.RelocationFailed {
		t.Fatalf("answered %s %+v, want a failed 53", r.Command, r.Body)
	}
	return ready
}

// docs/RESTORE-PAYLOAD.md §9: a Restore the registry refuses is answered
// with the failure its error maps to — ErrTooLarge / ErrCapacity: 6
// capacity; ErrAborted (the source's cancel came first): 8 cancelled. The
// target answers each of them 2 lengthMismatch.
func TestRestoreRefusalFailureCodes(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	const src, dst = 1, 2
	reg := c.nodes[dst].obj.chunks

	t.Run("declared length above MaxPayload", func(t *testing.T) {
		d := chunk.Declaration{Length: 2 * chunk.DefaultMaxPayload, Count: chunk.MaxChunkCount, CRC32C: 1}
		b := bindingFrom(c, src, 1)
		ready := failureOf(t, deliver(c.nodes[dst], c.nodes[src], restorePrep(c, src, dst, b, "rv-big", d)))
		if ready.Failure != router.RelocationFailureCapacity {
			t.Errorf("answered %s (%s), want capacity", ready.Failure, ready.Detail)
		}
	})

	t.Run("assembly budget exhausted", func(t *testing.T) {
		// Fill MaxInFlight with declarations only (nothing is allocated
		// before a chunk arrives).
		var fill []chunk.Binding
		for i := uint64(0); ; i++ {
			b := bindingFrom(c, src, 100+i)
			if _, err := reg.Begin(b, chunk.Declaration{Length: chunk.DefaultMaxPayload, Count: 16, CRC32C: 1}); err != nil {
				break
			}
			fill = append(fill, b)
		}
		defer func() {
			for _, b := range fill {
				reg.Abort(b)
			}
		}()
		b := bindingFrom(c, src, 2)
		ready := failureOf(t, deliver(c.nodes[dst], c.nodes[src], restorePrep(c, src, dst, b, "rv-cap", chunk.Declaration{Length: 1024, Count: 1, CRC32C: 1})))
		if ready.Failure != router.RelocationFailureCapacity {
			t.Errorf("answered %s (%s), want capacity", ready.Failure, ready.Detail)
		}
	})

	t.Run("cancelled before the Restore arrived", func(t *testing.T) {
		b := bindingFrom(c, src, 3)
		deliver(c.nodes[dst], c.nodes[src], &router.RelocationCancel{Binding: b.Wire()})
		ready := failureOf(t, deliver(c.nodes[dst], c.nodes[src], restorePrep(c, src, dst, b, "rv-cancel", chunk.Declaration{Length: 1024, Count: 1, CRC32C: 1})))
		if ready.Failure != router.RelocationFailureCancelled {
			t.Errorf("answered %s (%s), want cancelled", ready.Failure, ready.Detail)
		}
	})
}

// docs/RESTORE-PAYLOAD.md §9: a chunk whose size does not fit the
// declaration (ErrLength) fails the assembly with 2 lengthMismatch, not 1
// checksumMismatch. The source here sends its only chunk one byte short.
func TestRestoreShortChunkAnsweredLengthMismatch(t *testing.T) {
	f := newFixture(t)
	c, ctl := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "rv-short"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	lengthFailures := c.nodes[dst].obj.chunks.Stats().FailedLength
	c.nodes[src].obj.hooks.Store(&testHooks{restoreChunk: func(oid string, _ chunk.Binding, index int, data []byte) []byte {
		if oid == id && index == 0 {
			return data[:len(data)-1]
		}
		return data
	}})
	defer c.nodes[src].obj.hooks.Store(nil)
	res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
	if res.Outcome != NotMoved {
		t.Fatalf("outcome %v (%s)", res.Outcome, res.Detail)
	}
	if n := c.nodes[dst].obj.chunks.Stats().FailedLength; n != lengthFailures+1 {
		t.Fatalf("length failures on the target %d -> %d", lengthFailures, n)
	}
	if !strings.HasPrefix(res.Detail, router.RelocationFailureLengthMismatch.String()) {
		t.Errorf("the target answered %q, want %s", res.Detail, router.RelocationFailureLengthMismatch)
	}
	if n := ctl.restoreCount(id); n != 0 {
		t.Fatalf("restored %d times", n)
	}
	wantRan(t, ctx, c, ref, "a")
}

// chunkHeldMove is a move of an Actor between two nodes of a failCluster
// whose source holds its first Restore chunk (52) until release: the
// target has registered the arrival and assembles nothing yet.
type chunkHeldMove struct {
	id       string
	ref      ActorRef
	src, dst int
	bind     chunk.Binding // the move's binding
	first    []byte        // the held chunk (the whole payload: one chunk)
	moving   <-chan relocateOutcome
	release  func() // lets the chunk go; the test's cleanup calls it too
}

// holdFirstChunk starts moving id, created here, under moveCtx and returns
// once the source holds its first chunk and the target registered the
// arrival.
func holdFirstChunk(t *testing.T, ctx, moveCtx context.Context, c *cluster, id string) *chunkHeldMove {
	t.Helper()
	m := &chunkHeldMove{id: id, ref: recorder(t, ctx, c, id, failPreserveType, "a")}
	m.src, m.dst = movePair(t, c, record.ObjectActor, id)
	held, release := make(chan struct{}), make(chan struct{})
	var holding, releasing sync.Once
	m.release = func() { releasing.Do(func() { close(release) }) }
	c.nodes[m.src].obj.hooks.Store(&testHooks{restoreChunk: func(oid string, b chunk.Binding, index int, data []byte) []byte {
		if oid == id && index == 0 {
			holding.Do(func() { m.bind, m.first = b, append([]byte(nil), data...); close(held) })
			<-release
		}
		return data
	}})
	t.Cleanup(func() { m.release(); c.nodes[m.src].obj.hooks.Store(nil) })
	m.moving = relocateAsync(moveCtx, c, m.src, m.dst, record.ObjectActor, id, m.ref.ObjectGeneration)
	waitClosed(t, held, "the source to stream its chunks")
	waitUntil(t, "the target to register the arrival", func() bool {
		h, ok := c.nodes[m.dst].obj.hostedFor(actorKey(id))
		return ok && h.state == hostIncoming
	})
	return m
}

// retransmit sends the target, from the source, a second Restore request
// (40) of the held move declaring d.
func (m *chunkHeldMove) retransmit(c *cluster, d chunk.Declaration) *inbox {
	prep := restorePrep(c, m.src, m.dst, m.bind, m.id, d)
	prep.Object.ObjectGeneration = m.ref.ObjectGeneration
	return deliver(c.nodes[m.dst], c.nodes[m.src], prep)
}

// Spec §9.1: "If a different length or checksum arrives for the same
// binding values, the existing assembly state is neither reused nor
// overwritten — it ends as an explicit conflict failure." A second Restore
// (40) of the attempt under way, same binding, other length and CRC-32C,
// must be answered conflict and must end the attempt; the target ignored
// it without any answer and the move committed on the first declaration.
func TestRestoreConflictingRetransmissionEndsAttempt(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	m := holdFirstChunk(t, ctx, ctx, c, "rv-conflict")
	box := m.retransmit(c, chunk.Declaration{Length: uint64(len(m.first)) + 1, Count: 1, CRC32C: router.CRC32C(m.first) ^ 1})
	if n := box.count(); n != 1 {
		t.Errorf("a conflicting Restore for the binding under way was answered %d times, want once (failed, conflict)", n)
	} else if r := (<-box.first).Body.(*router.RelocationReady); r.Outcome != router.RelocationFailed || r.Failure != router.RelocationFailureConflict {
		t.Errorf("a conflicting Restore answered %+v, want failed/conflict", r)
	}
	m.release()
	res := outcomeOf(t, m.moving)
	if res.Outcome != NotMoved {
		t.Errorf("the attempt whose binding was declared twice differently ended %v (%s), want notMoved", res.Outcome, res.Reason)
	}
}

// Spec §9.1: a retransmitted Restore (40) of the attempt under way with the
// same length, count and checksum reuses the assembly: it is not answered
// (the first request is), and the move goes on.
func TestRestoreIdenticalRetransmissionReused(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	m := holdFirstChunk(t, ctx, ctx, c, "rv-same")
	reused := c.nodes[m.dst].obj.chunks.Stats().Reused
	box := m.retransmit(c, chunk.Declaration{Length: uint64(len(m.first)), Count: 1, CRC32C: router.CRC32C(m.first)})
	if n := box.count(); n != 0 {
		t.Errorf("a retransmitted Restore with the first declaration was answered %d times, want none", n)
	}
	if n := c.nodes[m.dst].obj.chunks.Stats().Reused; n != reused+1 {
		t.Errorf("assemblies reused %d -> %d", reused, n)
	}
	m.release()
	if res := outcomeOf(t, m.moving); res.Outcome != Moved {
		t.Errorf("the move ended %v (%s; %s), want moved", res.Outcome, res.Reason, res.Detail)
	}
}

// Spec §1.3 step 4 / §9.1: the Restore request and its chunks travel on
// the source's one ordered connection and are bound by the source fence;
// inboundPrepare refuses a 40 not sent by the node its fence names ("Only
// the source itself streams its Restore"), and a chunk (52) or cancel (55)
// naming the binding was taken from any peer. A third node (here the
// client, node 0) that sends one for a move under way — the binding's
// values are in the Location Store's record, readable by every member —
// broke the move: its chunk was linked to the assembly, its cancel ended
// the attempt. Such a record is discarded, counted, and the move goes on.
func TestRestoreRecordsFromAnotherPeerDiscarded(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	for i, tc := range []struct {
		name string
		body func(b chunk.Binding) router.Body
	}{
		{"chunk", func(b chunk.Binding) router.Body {
			return &router.RelocationState{Binding: b.Wire(), ChunkIndex: 0, Data: []byte("not the source's")}
		}},
		{"cancel", func(b chunk.Binding) router.Body { return &router.RelocationCancel{Binding: b.Wire()} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The move's deadline (its context's): a target that drops the
			// attempt on a cancel answers nothing, and the source waits
			// for it.
			m := holdFirstChunk(t, ctxT(t, 60*time.Second), ctxT(t, 15*time.Second), c, "rv-third-"+tc.name)
			foreign := c.nodes[m.dst].ObjectStats().RestoreRecordsNotFromSource
			deliver(c.nodes[m.dst], c.nodes[0], tc.body(m.bind))
			if n := c.nodes[m.dst].ObjectStats().RestoreRecordsNotFromSource; n != foreign+1 {
				t.Errorf("case %d: records not from the source %d -> %d", i, foreign, n)
			}
			m.release()
			res := outcomeOf(t, m.moving)
			if res.Outcome != Moved {
				t.Errorf("case %d: after a %s naming the move came from node 0 (not the source), the move ended %v (%s; %s), want moved",
					i, tc.name, res.Outcome, res.Reason, res.Detail)
			}
		})
	}
}

// As above for the cutover (54): one from a third node while the target
// awaits the source's — relay-ready answered, the source about to send it
// — is discarded. Taken, one that does not match the relay failed the
// attempt (relay mismatch); one that did would have committed the move
// before the source's relay was in.
func TestRestoreCutoverFromAnotherPeerDiscarded(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "rv-third-cutover"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	var bind router.RelocationBinding
	var foreign, after uint64
	c.nodes[src].obj.hooks.Store(&testHooks{
		restoreChunk: func(oid string, b chunk.Binding, _ int, data []byte) []byte {
			if oid == id {
				bind = b.Wire()
			}
			return data
		},
		relocationStep: func(oid, step string) {
			if oid != id || step != stepSourceCutover {
				return
			}
			// Before the source's own cutover leaves, on its goroutine.
			foreign = c.nodes[dst].ObjectStats().RestoreRecordsNotFromSource
			deliver(c.nodes[dst], c.nodes[0], &router.RelocationCutover{Binding: bind, RelayedCount: 7, RelayedCRC32C: 1})
			after = c.nodes[dst].ObjectStats().RestoreRecordsNotFromSource
		}})
	defer c.nodes[src].obj.hooks.Store(nil)
	res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
	if res.Outcome != Moved {
		t.Errorf("after a cutover naming the move came from node 0 (not the source), the move ended %v (%s; %s), want moved",
			res.Outcome, res.Reason, res.Detail)
	}
	if after != foreign+1 {
		t.Errorf("records not from the source %d -> %d", foreign, after)
	}
}
