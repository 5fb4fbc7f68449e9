package mesh

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// TestRelayMismatchTellsTheSourceAtOnce: the cutover (54) declares more
// relayed records than reached the target, which had answered relay-ready.
// The target removes what it prepared without sending its owner CAS
// (relay mismatch) and tells the source so, a second 53 failed
// (checksumMismatch, "relay mismatch: …"): the source stops waiting for
// the commit, releases the reservation, reads the record still its own and
// takes the object back (NotMoved: targetLost), serving it again with its
// state. Before, the target told nothing and the source waited for the
// commit until the move's deadline (30 s here), the object answering
// nobody meanwhile: the move then ended without the target's word.
func TestRelayMismatchTellsTheSourceAtOnce(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		registerFailTypes(t, f)
		c := newClusterOn(t, f, loc, 3, clientRole0)
		ctx := ctxT(t, 60*time.Second)
		const id = "mismatched"
		ref := recorder(t, ctx, c, id, failPreserveType, "a")
		src, dst := movePair(t, c, record.ObjectActor, id)
		before := rowOf(t, c, record.ObjectActor, id)

		var told atomic.Bool
		c.nodes[src].obj.hooks.Store(&testHooks{
			cutover: func(oid string, cut *router.RelocationCutover) {
				if oid == id {
					cut.RelayedCount++ // a record the target never got
				}
			},
			relocationStep: func(oid, step string) {
				if oid == id && step == stepSourceTold {
					told.Store(true)
				}
			},
		})
		ended := make(chan relocation.TargetFailure, 1)
		c.nodes[dst].obj.hooks.Store(&testHooks{
			arrivalEnded: func(oid string, _ relocation.TargetState, failure relocation.TargetFailure) {
				if oid == id {
					ended <- failure
				}
			},
		})
		// A deadline far beyond the test's wait for the outcome's cause:
		// only the target's word ends the move's wait early.
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res := outcomeOf(t, relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
		select {
		case got := <-ended:
			if got != relocation.TgtFailRelayMismatch {
				t.Fatalf("the target's attempt failed %s, want %s", got, relocation.TgtFailRelayMismatch)
			}
		case <-ctx.Done():
			t.Fatal("the target's attempt did not end")
		}
		endedOnTheTargetsWord(t, mctx, res, told.Load())
		if _, rsv := capacityOf(t, loc); rsv != 0 {
			t.Fatalf("%d reservations left", rsv)
		}
		after := rowOf(t, c, record.ObjectActor, id)
		sameOwnership(t, before, after)
		checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
		wantRan(t, ctx, c, ref, "a")
	})
}

// TestRelayMismatchWithRelayedMessagesRunsThemOnTheSource is the relay
// mismatch with a relay that carried messages: one-way messages and
// requests sent while the target restored (its Restore held) wait in the
// source's ingress hold, go to the target in the relay after relay-ready,
// and the cutover then declares a count (or CRC-32C) they do not match.
// The target runs none of them and answers none of the relayed requests;
// the source, told at once, takes the object back (NotMoved: targetLost)
// with the relayed messages in it, in the order they came, and runs each
// once, answering each relayed request itself.
func TestRelayMismatchWithRelayedMessagesRunsThemOnTheSource(t *testing.T) {
	for _, row := range []struct {
		name    string
		corrupt func(cut *router.RelocationCutover)
	}{
		{"count", func(cut *router.RelocationCutover) { cut.RelayedCount++ }},
		{"digest", func(cut *router.RelocationCutover) { cut.RelayedCRC32C ^= 1 }},
	} {
		t.Run(row.name, func(t *testing.T) {
			onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
				relayMismatchWithRelayedMessages(t, f, loc, row.corrupt)
			})
		})
	}
}

func relayMismatchWithRelayedMessages(t *testing.T, f *fixture, loc locstore.Store, corrupt func(cut *router.RelocationCutover)) {
	ctl := registerFailTypes(t, f)
	c := newClusterOn(t, f, loc, 3, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	const id = "mismatched-relay"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	before := rowOf(t, c, record.ObjectActor, id)
	blk := ctl.block(id, nil) // the target's Restore waits: arrivals go into the source's hold

	var told atomic.Bool
	var relayedCount atomic.Uint64
	var atTarget atomic.Pointer[recObj] // the target's hidden instance
	c.nodes[src].obj.hooks.Store(&testHooks{
		cutover: func(oid string, cut *router.RelocationCutover) {
			if oid == id {
				relayedCount.Store(cut.RelayedCount)
				corrupt(cut)
			}
		},
		relocationStep: func(oid, step string) {
			if oid != id {
				return
			}
			switch step {
			case stepSourceCutover: // relay-ready answered: the target's instance is built
				ctl.mu.Lock()
				atTarget.Store(ctl.objs[id])
				ctl.mu.Unlock()
			case stepSourceTold:
				told.Store(true)
			}
		},
	})
	dstHooks := &testHooks{}
	ends := watchArrivals(dstHooks)
	c.nodes[dst].obj.hooks.Store(dstHooks)
	ctl.mu.Lock()
	first := ctl.objs[id]
	ctl.mu.Unlock()

	key := spot.Key{ID: id}
	queued := func() int {
		o := c.nodes[src].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		if h := o.hosted[key]; h != nil && h.obj != nil && h.obj.Held() {
			return h.obj.Queued()
		}
		return -1
	}
	// A deadline far beyond the test's wait for the outcome: only the
	// target's word ends the move's wait early.
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, blk.started, "the target's Restore")

	// One-way messages and requests, interleaved, each in the source's
	// hold before the next is sent (their order is the hold's).
	type pending struct {
		body string
		ch   chan error
	}
	var want []string
	var reqs []pending
	for i := 1; i <= 4; i++ {
		m := fmt.Sprintf("m%d", i)
		if err := c.m(0).SendActor(ctx, ref, []byte(m)); err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
		waitUntil(t, m+" in the source's hold", func() bool { return queued() == len(want) })
		if i == 4 {
			break
		}
		r := pending{fmt.Sprintf("r%d", i), make(chan error, 1)}
		go func() {
			got, err := c.m(0).RequestActor(ctx, ref, []byte(r.body))
			if err == nil && string(got) != "ok" {
				err = fmt.Errorf("answer %q", got)
			}
			r.ch <- err
		}()
		reqs = append(reqs, r)
		want = append(want, r.body)
		waitUntil(t, r.body+" in the source's hold", func() bool { return queued() == len(want) })
	}
	close(blk.release)

	res := outcomeOf(t, moving)
	if e := waitEnd(t, ends, id); e.state != relocation.TgtFailed || e.failure != relocation.TgtFailRelayMismatch {
		t.Fatalf("the target attempt ended %s/%s, want failed/%s", e.state, e.failure, relocation.TgtFailRelayMismatch)
	}
	if got := relayedCount.Load(); got != uint64(len(want)) {
		t.Fatalf("the cutover declared %d relayed records before the test's change, want %d (the hold)", got, len(want))
	}
	endedOnTheTargetsWord(t, mctx, res, told.Load())
	// "list" queues behind the relayed messages put back into the object.
	wantRan(t, ctx, c, ref, "a,"+strings.Join(want, ","))
	for _, r := range reqs {
		select {
		case err := <-r.ch:
			if err != nil {
				t.Fatalf("%s (relayed) answered %v; the source ran %q", r.body, err, strings.Join(ctl.ran(id), ","))
			}
		case <-ctx.Done():
			t.Fatalf("%s (relayed) not answered", r.body)
		}
	}
	if _, rsv := capacityOf(t, loc); rsv != 0 {
		t.Fatalf("%d reservations left", rsv)
	}
	sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
	checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
	tgt := atTarget.Load()
	if tgt == nil || tgt == first {
		t.Fatal("the target's instance was not seen")
	}
	tgt.mu.Lock()
	ranThere := append([]string(nil), tgt.log...)
	tgt.mu.Unlock()
	if strings.Join(ranThere, ",") != "a" {
		t.Fatalf("the target's instance ran %v after its Restore; want nothing (restored a)", ranThere)
	}
}

// endedOnTheTargetsWord checks a relay mismatch's move outcome: the
// source's wait for the commit ended on the target's word (told), before
// the move's deadline (mctx), NotMoved (targetLost) with the target's
// relay-mismatch detail.
func endedOnTheTargetsWord(t *testing.T, mctx context.Context, res RelocationResult, told bool) {
	t.Helper()
	if !told {
		t.Fatalf("the source's wait for the commit did not end on the target's word (move %v, %s, detail %q)",
			res.Outcome, res.Reason, res.Detail)
	}
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() ||
		!strings.HasPrefix(res.Detail, "checksumMismatch: relay mismatch: ") {
		t.Fatalf("the move ended %v, %s, detail %q; want notMoved, %s, checksumMismatch: relay mismatch: …",
			res.Outcome, res.Reason, res.Detail, relocation.ReasonTargetLost)
	}
	if mctx.Err() != nil {
		t.Fatal("the move ended at its deadline")
	}
}
