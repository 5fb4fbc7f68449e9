package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/router/transport"
)

// barrierScene is seqCluster with node 0's log kept, and its discovery
// list made to lag: it shows every run live, as a list does until the next
// discovery round (here every 100 ms: the lag is made to last).
func barrierScene(t *testing.T) (*cluster, context.Context, *syncbuf.Buffer) {
	t.Helper()
	f := newFixture(t)
	registerSeqType(t, f)
	logs := new(syncbuf.Buffer)
	f.logTo = func(i int) io.Writer {
		if i == 0 {
			return logs
		}
		return nil
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	c.nodes[0].obj.listedLook = func(follow.Ready) bool { return true }
	return c, ctxT(t, 60*time.Second), logs
}

// routeSwitchWarns are the WARN lines about route switches in logs.
func routeSwitchWarns(logs *syncbuf.Buffer) []string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "route switch") {
			out = append(out, line)
		}
	}
	return out
}

// A previous owner that stops cleanly (Close) while a route switch's
// barrier to it is pending: its transport closes with the barrier unread,
// the barrier's request fails as the link ends, and the sender's discovery
// list still shows the run live (it does until its next round). Its
// descriptor, removed by the stop before the transport closed, tells the
// stop from a stall: the switch goes ahead without a WARN and is not
// counted as timed out (barrierPrevStopped). Before, it was a lost link —
// "the link to the previous owner ended before it answered the barrier …
// what this node sent it before may arrive after later messages", counted
// in RouteBarriersTimedOut — for every object whose barrier met a clean
// stop within a discovery round.
func TestRouteSwitchToAPreviousOwnerThatStopsCleanly(t *testing.T) {
	c, ctx, logs := barrierScene(t)
	ref, src, _ := movedAfterOne(t, ctx, c, "barrier-stop")
	sender := c.nodes[0].obj
	// The barrier is not cut for want of progress while the previous
	// owner stops.
	sender.barrierEvery = time.Minute
	barrierSent := make(chan struct{}, 1)
	sender.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepSenderBarrier {
			barrierSent <- struct{}{}
		}
	}})

	// The previous owner's reader holds message 2 while passing it on: the
	// barrier behind it stays unread.
	held, release := holdFirstPassOn(c.nodes[src], ref.ActorID)
	defer release()
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the previous owner never passed message 2 on")
	}
	sender.cache.Drop(follow.Key{Kind: follow.KindActor, ID: ref.ActorID})
	done := make(chan error, 1)
	go func() { done <- c.m(0).SendActor(ctx, ref, []byte("s:n0:3")) }()
	select {
	case <-barrierSent:
	case err := <-done:
		t.Fatalf("message 3 was sent without a barrier (err %v)", err)
	case <-ctx.Done():
		t.Fatal("no barrier was sent")
	}

	// The previous owner stops cleanly with the barrier pending; its Close
	// ends once its reader is released (below).
	closed := make(chan error, 1)
	go func() { closed <- c.nodes[src].Close(context.Background()) }()
	if err := <-done; err != nil {
		t.Fatalf("message 3: %v", err)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatalf("close of the previous owner: %v", err)
	}
	// The descriptor really is gone (the verdict's evidence).
	if stopped, err := directory.RunStopped(ctx, c.f.loc, "objects", c.nodes[src].RID(), c.nodes[src].run.lifecycleGeneration); err != nil || !stopped {
		t.Fatalf("previous owner's run stopped per its descriptor: %v, %v", stopped, err)
	}
	s := c.stats(0)
	if s.RouteBarriers != 1 || s.RouteBarriersTimedOut != 0 {
		t.Errorf("route barriers %d (timed out %d), want 1 (0): a clean stop taken for a stall", s.RouteBarriers, s.RouteBarriersTimedOut)
	}
	for _, line := range routeSwitchWarns(logs) {
		t.Errorf("WARN for a clean stop: %s", line)
	}
}

// A barrier that could not be sent because the link to the previous owner
// is down and its last redial got no connection in time says so: "could
// not be re-established", with the dial timeout — not "did not answer the
// barrier in time", as it read before 2026-12-06 (the previous owner was
// never asked). Still counted with the timed-out barriers: its run is
// listed live and may pass on what this node sent it before.
func TestBarrierOverALinkNotReestablishedSaysSo(t *testing.T) {
	c, ctx, logs := barrierScene(t)
	ref, src, _ := movedAfterOne(t, ctx, c, "barrier-redial")
	sender := c.nodes[0].obj
	held, release := holdFirstPassOn(c.nodes[src], ref.ActorID)
	defer release()
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	<-held
	// The barrier meets the link down, its last redial timed out (as the
	// transport refuses a send then: not admitted, wrapping the dial's
	// error).
	var barrier atomic.Bool
	sender.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepSenderBarrier {
			barrier.Store(true)
		}
	}, beforeRemoteSend: func(id string) error {
		if id == ref.ActorID && barrier.CompareAndSwap(true, false) {
			return fmt.Errorf("%w: %s (%w)", transport.ErrNotAdmitted, transport.RID(c.nodes[src].RID()), dialTimedOut(context.DeadlineExceeded))
		}
		return nil
	}})
	sender.cache.Drop(follow.Key{Kind: follow.KindActor, ID: ref.ActorID})
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:3")); err != nil {
		t.Fatalf("message 3: %v", err)
	}
	release()
	if s := c.stats(0); s.RouteBarriers != 1 || s.RouteBarriersTimedOut != 1 {
		t.Errorf("route barriers %d (timed out %d), want 1 (1)", s.RouteBarriers, s.RouteBarriersTimedOut)
	}
	var warn string
	if w := routeSwitchWarns(logs); len(w) == 1 {
		warn = w[0]
	} else {
		t.Errorf("route switch WARNs: %q, want one", w)
	}
	for _, want := range []string{"could not be re-established", "dial_timeout=5s"} {
		if !strings.Contains(warn, want) {
			t.Errorf("route switch WARN %q does not say %q", warn, want)
		}
	}
	if strings.Contains(warn, "did not answer") {
		t.Errorf("route switch WARN %q says the previous owner did not answer: it was never asked", warn)
	}
}

// A request the transport never sent — the link down, its last redial got
// no connection in time — is Unavailable with its cause (the route is
// dropped and the store read again, like any not-sent request), not a
// deadline: before 2026-12-06 any error matching context.DeadlineExceeded
// became ErrDeadlineExceeded with the cause flattened to text, so the
// caller read "deadline exceeded" and the barrier "did not answer in
// time". The request's own deadline stays a deadline.
func TestRequestFailureKeepsANotSentCause(t *testing.T) {
	redial := fmt.Errorf("%w: 0202 (%w)", transport.ErrNotAdmitted, dialTimedOut(context.DeadlineExceeded))
	err := requestFailure("a", redial)
	var dte *transport.DialTimeoutError
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, transport.ErrNotAdmitted) || !errors.As(err, &dte) || errors.Is(err, ErrDeadlineExceeded) {
		t.Errorf("redial timed out: %v; want Unavailable wrapping ErrNotAdmitted and the DialTimeoutError, not ErrDeadlineExceeded", err)
	}
	if !notDelivered(err) {
		t.Errorf("redial timed out: %v not taken for not delivered (the route is kept)", err)
	}
	// Not the caller's deadline: a caller that checks context.DeadlineExceeded
	// first would give up on a message that is safe to repeat.
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("redial timed out: %v matches context.DeadlineExceeded, but no caller's deadline passed", err)
	}
	own := fmt.Errorf("%w: %w: request to 0202", transport.ErrDeadlineExceeded, context.DeadlineExceeded)
	if err := requestFailure("a", own); !errors.Is(err, ErrDeadlineExceeded) {
		t.Errorf("the request's own deadline: %v, want ErrDeadlineExceeded", err)
	}
	if err := requestFailure("a", transport.ErrPeerDown); !errors.Is(err, ErrUnavailable) || !errors.Is(err, transport.ErrPeerDown) {
		t.Errorf("peer down: %v, want Unavailable wrapping ErrPeerDown", err)
	}
}

// A previous owner that passed a sender's message on and then stops
// cleanly before the new owner has read it: the sender's barrier fails as
// the previous owner's transport closes, its descriptor says it stopped,
// and the sender switches at once (barrierPrevStopped) — its next message
// goes straight to the new owner on its own connection. The new owner's
// reader of the previous owner's connection is held here with message 2
// unread. Before 2026-12-06 message 3 was admitted there first (the object
// saw 3 before 2); now the stopping node's last barrier behind what it
// passed on (shutdown_passons.go) keeps its transport up until the new
// owner has taken message 2 in order, so the sender learns of the stop
// only after.
func TestCleanStopKeepsWhatThePreviousOwnerPassedOnAhead(t *testing.T) {
	c, ctx, _ := barrierScene(t)
	ref, src, dst := movedAfterOne(t, ctx, c, "barrier-stop-order")
	sender := c.nodes[0].obj
	sender.barrierEvery = time.Minute // not cut for want of progress meanwhile
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}

	// The new owner's reader of the link from the previous owner stops at
	// the first message passed on (message 2) until released.
	arrived, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	releaseOnce := sync.OnceFunc(func() { close(release) })
	defer releaseOnce()
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepFollowArrive {
			first.Do(func() {
				close(arrived)
				<-release
			})
		}
	}})
	settling := make(chan struct{})
	var settled sync.Once
	c.nodes[src].obj.hooks.Store(&testHooks{closeStep: func(step string) {
		if step == closeSettlePassOns {
			settled.Do(func() { close(settling) })
		}
	}})

	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, arrived, "message 2 passed on to the new owner")
	sender.cache.Drop(key)
	done := make(chan error, 1)
	go func() { done <- c.m(0).SendActor(ctx, ref, []byte("s:n0:3")) }()
	closed := make(chan error, 1)
	go func() { closed <- c.nodes[src].Close(context.Background()) }()
	var sendErr error
	select {
	case <-settling: // the previous owner waits for message 2 to be taken
		releaseOnce()
		sendErr = <-done
	case sendErr = <-done:
		t.Errorf("message 3 went out while the new owner had not read message 2 (err %v)", sendErr)
		// A request behind it on the same connection: message 3 has run
		// when it is answered (and message 2 still waits).
		seqStateOf(t, ctx, c, ref)
	case <-ctx.Done():
		t.Fatal("the previous owner neither waited for message 2 to be read nor let message 3 go")
	}
	releaseOnce()
	if sendErr != nil {
		t.Fatalf("message 3: %v", sendErr)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close of the previous owner: %v", err)
	}
	st := seqStateOf(t, ctx, c, ref)
	if st.Last["n0"] != 3 || st.Gaps != 0 || st.Duplicates != 0 {
		t.Errorf("object saw last %d, %d gaps, %d duplicates (%v); want 3, 0, 0 (in order)", st.Last["n0"], st.Gaps, st.Duplicates, st.Seen)
	}
}
