package mesh

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// mergeCounter counts the one-way messages it ran; "block" waits for the
// test's release first; a request answers the count.
type mergeCounter struct {
	ran     *atomic.Int64
	started chan struct{}
	release chan struct{}
	once    *sync.Once
}

func (c mergeCounter) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Request {
		return t.Reply([]byte(strconv.FormatInt(c.ran.Load(), 10)))
	}
	if string(env.Body) == "block" {
		c.once.Do(func() { close(c.started) })
		<-c.release
		return nil
	}
	c.ran.Add(1)
	return nil
}

// Every message the source accepted into the object before the cutover —
// its captured queue and its ingress hold — is in the target's mailbox
// when it opens (§9.2: "Saved work, pre-boundary relay, and remaining
// temporary work have entered the real execution queue in order"). The
// target restores the captured queue outside the mailbox limit (spot Open
// with Restored); the source's held object accepts up to
// spot.Options.MailboxLimit (65536) arrivals after the capture emptied it,
// so captured + relayed can exceed the limit. Until 2026-12-07 the merge
// Posted the relay, and Post refused the excess (relocate_target.go
// open: ERROR "merged message not queued"; a one-way message lost although
// its Send returned nil); the merge now appends outside the limit.
//
// Here the captured queue holds 3 one-way messages (queued behind a
// blocked turn when the move holds the object) and the ingress hold 65536
// (sent while the move waits after the capture): 65539 accepted, all
// must run on the target.
func TestMergeKeepsEveryAcceptedMessageAcrossTheMailboxLimit(t *testing.T) {
	f := newFixture(t)
	var ran atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	var once, relOnce sync.Once
	let := func() { relOnce.Do(func() { close(release) }) }
	t.Cleanup(let)
	const typ = "test.merge-counter"
	if err := f.reg.Register(spot.Factory{StableType: typ, Kind: spot.KindActor, Policy: spot.PolicyRecreate,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return mergeCounter{ran: &ran, started: started, release: release, once: &once}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 120*time.Second)
	const id = "merge-limit"
	ref, err := c.m(0).CreateActor(ctx, id, typ)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, id)

	atRecord, goOn := make(chan struct{}), make(chan struct{})
	var atOnce, goOnce sync.Once
	proceed := func() { goOnce.Do(func() { close(goOn) }) }
	t.Cleanup(proceed)
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepSourceRecord {
			atOnce.Do(func() { close(atRecord) })
			<-goOn
		}
	}})
	// The target's owner CAS waits until it has taken the cutover: the
	// whole relay is then in its temporary queues and merged at the open
	// (a target committing on its CutoverGrace first merges what came so
	// far and posts the rest as it comes, a late relay).
	key := spot.Key{ID: id}
	cutSeen := func() bool {
		o := c.nodes[dst].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, a := range o.arrivals {
			if a.key == key {
				a.mu.Lock()
				seen := a.cutSeen
				a.mu.Unlock()
				return seen
			}
		}
		return false
	}
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepTargetCAS {
			for !cutSeen() && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
		}
	}})
	ms := c.m(src)
	if err := ms.SendActor(ctx, ref, []byte("block")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, "the blocking turn")
	const captured = 3
	for i := 0; i < captured; i++ {
		if err := ms.SendActor(ctx, ref, []byte("q")); err != nil {
			t.Fatal(err)
		}
	}
	srcObj := func() *spot.Object {
		o := c.nodes[src].obj
		o.mu.Lock()
		defer o.mu.Unlock()
		if h := o.hosted[key]; h != nil {
			return h.obj
		}
		return nil
	}()
	if srcObj == nil {
		t.Fatal("the object is not hosted on its owner")
	}
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	// The move's hold closed dispatch and waits for the blocked turn: the
	// three stay queued and are captured.
	for !srcObj.Held() {
		time.Sleep(time.Millisecond)
	}
	let()
	waitClosed(t, atRecord, "the source's capture")
	const held = 65536 // spot's default MailboxLimit: the held object, emptied by the capture, accepts this many
	for i := 0; i < held; i++ {
		if err := ms.SendActor(ctx, ref, []byte("h")); err != nil {
			t.Fatalf("ingress hold message %d: %v", i, err)
		}
	}
	proceed()
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("move: %v %s", res.Outcome, res.Reason)
	}
	if got := ownerIndex(t, c, record.ObjectActor, id); got != dst {
		t.Fatalf("%s is owned by node %d, want %d", id, got, dst)
	}
	// A last request from the source follows the object on the source's
	// ordered link to the target, behind everything it relayed (also a
	// relay that reached the target after it committed on its
	// CutoverGrace): when it runs, every accepted message has run or was
	// lost. A mailbox still full refuses it (backpressure, not run) and it
	// is asked again.
	var got []byte
	for {
		got, err = ms.RequestActor(ctx, ref, []byte("end"))
		if err == nil {
			break
		}
		if !errors.Is(err, spot.ErrMailboxFull) || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := strconv.Itoa(captured + held); string(got) != want {
		t.Fatalf("the target ran %s one-way messages, the source accepted %s (captured %d + ingress hold %d)",
			got, want, captured, held)
	}
}
