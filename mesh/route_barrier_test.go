package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

// seqCluster is a client node 0 and two servers on the memory store, with
// seqType registered.
func seqCluster(t *testing.T) (*cluster, context.Context) {
	t.Helper()
	f := newFixture(t)
	registerSeqType(t, f)
	return newClusterOn(t, f, nil, 3, clientRole0), ctxT(t, 30*time.Second)
}

// movedAfterOne creates a seqType Actor id from node 0, sends it message 1
// as a request (so it has run before the move; node 0 now has that route
// cached and recorded as the one it used) and moves it to the other
// server. It returns the ref and the previous and new owner.
func movedAfterOne(t *testing.T, ctx context.Context, c *cluster, id string) (ref ActorRef, src, dst int) {
	t.Helper()
	ref, err := c.m(0).CreateActor(ctx, id, seqType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("q:n0:1")); err != nil {
		t.Fatal(err)
	}
	src = ownerIndex(t, c, record.ObjectActor, ref.ActorID)
	dst = 3 - src // the other server (1 or 2)
	if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	return ref, src, dst
}

// seqStateOf asks a seqType Actor for its state, from node 0.
func seqStateOf(t *testing.T, ctx context.Context, c *cluster, ref ActorRef) seqState {
	t.Helper()
	got, err := c.m(0).RequestActor(ctx, ref, []byte("state"))
	return decodeSeqState(t, got, err)
}

// decodeSeqState is the sequence Actor's answer to "state".
func decodeSeqState(t *testing.T, got []byte, err error) seqState {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var st seqState
	if err := json.Unmarshal(got, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A sender's order across a route switch (route_barrier.go), step by step:
// message 2 is still being passed on by the previous owner (held there)
// when the sender learns the new route; message 3 must wait for the barrier
// it sends behind message 2, so the object sees 1, 2, 3. Without the
// barrier, message 3 goes straight to the new owner and overtakes 2.
//
// Also when the barrier first meets a full link to the previous owner
// (backpressure: full of this sender's earlier messages): it waits for room
// and queues behind them. Taken for "refused", it let message 3 overtake.
func TestRouteSwitchKeepsSenderOrder(t *testing.T) {
	for _, full := range []int32{0, 3} {
		t.Run(fmt.Sprintf("link full %d times", full), func(t *testing.T) { routeSwitchKeepsSenderOrder(t, full) })
	}
}

func routeSwitchKeepsSenderOrder(t *testing.T, full int32) {
	c, ctx := seqCluster(t)
	ref, src, dst := movedAfterOne(t, ctx, c, "barrier-1")
	send := func(body string) error { return c.m(0).SendActor(ctx, ref, []byte(body)) }

	// The previous owner holds the first message it passes on until
	// released; later ones (the barrier) go through.
	held, release := holdFirstPassOn(c.nodes[src], ref.ActorID)
	barrierSent := make(chan struct{}, 1)
	var fullLeft atomic.Int32 // refusals with backpressure left for the barrier
	c.nodes[0].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepSenderBarrier {
			fullLeft.Store(full)
			barrierSent <- struct{}{}
		}
	}, beforeRemoteSend: func(id string) error {
		if id == ref.ActorID && fullLeft.Add(-1) >= 0 {
			return transport.ErrBackpressure
		}
		return nil
	}})

	// Message 2 on the cached (now stale) route: the previous owner
	// passes it on — and is held doing so.
	if err := send("s:n0:2"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the previous owner never passed message 2 on")
	}
	// The sender learns the new route (its cache entry dropped, as when it
	// ages out) and sends message 3 while message 2 is still held.
	c.nodes[0].obj.cache.Drop(follow.Key{Kind: follow.KindActor, ID: ref.ActorID})
	done := make(chan error, 1)
	go func() { done <- send("s:n0:3") }()
	select {
	case <-barrierSent:
	case err := <-done:
		release()
		t.Fatalf("message 3 was sent without a barrier (err %v)", err)
	case <-ctx.Done():
		release()
		t.Fatal("no barrier was sent")
	}
	// Message 3 waits for the barrier's answer, which comes only after
	// message 2 has been passed on.
	select {
	case err := <-done:
		release()
		t.Fatalf("message 3 went out while message 2 was still held (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("message 3: %v", err)
	}

	st := seqStateOf(t, ctx, c, ref)
	if st.Last["n0"] != 3 || st.Gaps != 0 || st.Duplicates != 0 {
		t.Errorf("object saw last %d, %d gaps, %d duplicates; want 3, 0, 0 (in order)", st.Last["n0"], st.Gaps, st.Duplicates)
	}
	s := c.stats(0)
	if s.RouteBarriers != 1 || s.RouteBarriersTimedOut != 0 {
		t.Errorf("route barriers %d (timed out %d), want 1 (0)", s.RouteBarriers, s.RouteBarriersTimedOut)
	}
	if owner := ownerIndex(t, c, record.ObjectActor, ref.ActorID); owner != dst {
		t.Errorf("owner is node %d, want %d", owner, dst)
	}
}

// A route switch needs no barrier when nothing sent on the previous route
// can still be in flight: the previous route was last used longer than
// MessageFollowDuration ago.
func TestRouteSwitchAfterFollowWindowSendsNoBarrier(t *testing.T) {
	c, ctx := seqCluster(t)
	ref, _, _ := movedAfterOne(t, ctx, c, "barrier-2")
	// Age the sender's record of its last route past the follow window
	// (instead of sleeping the ≥ 5 s the window is at least).
	key := follow.Key{Kind: follow.KindActor, ID: ref.ActorID}
	obj := c.nodes[0].obj
	obj.sent.mu.Lock()
	obj.sent.m[key].at -= c.nodes[0].cfg.Routing.MessageFollowDuration + time.Millisecond
	obj.sent.mu.Unlock()
	obj.cache.Drop(key)
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	if s := c.stats(0); s.RouteBarriers != 0 {
		t.Errorf("route barriers %d, want 0 (previous route outside the follow window)", s.RouteBarriers)
	}
	if st := seqStateOf(t, ctx, c, ref); st.Last["n0"] != 2 || st.Gaps != 0 {
		t.Errorf("object saw last %d, %d gaps; want 2, 0", st.Last["n0"], st.Gaps)
	}
}

// holdFirstPassOn makes n hold the first message of object id it passes on
// (Message Follow) until release is called; held closes when it does.
func holdFirstPassOn(n *Node, id string) (held <-chan struct{}, release func()) {
	h, r := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n.obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got != id || step != stepFollowPassOn {
			return
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(h)
			<-r
		}
	}})
	return h, sync.OnceFunc(func() { close(r) })
}

// TestBarrierVerdict: a barrier whose link to the previous owner ended
// before the answer, while that run is still listed live, is a lost
// barrier (counted and warned, as a timed-out one: a slow previous owner
// whose connection liveness gave up may still pass on what this node sent
// it); a run no longer live passes nothing on (refused, DEBUG). A run that
// stopped cleanly (its descriptor says stopped, or is gone) passed on or
// refused everything before its transport closed: its own verdict, not
// counted — unless this node gave up on it as silent (it may have been
// reading still). A link whose redial got no connection in time was not
// re-established: its own WARN, not "did not answer in time".
func TestBarrierVerdict(t *testing.T) {
	refusedErr := errors.New("refused: object not here")
	silent := fmt.Errorf("%w: %w: no liveness ack from prev within 15s", transport.ErrPeerDown, transport.ErrPeerSilent)
	closed := fmt.Errorf("%w: connection to prev lost: %w", transport.ErrPeerDown, io.EOF)
	for _, tc := range []struct {
		name                    string
		callerDone, barrierDone bool
		err                     error
		live, stopped           bool
		want                    barrierVerdict
		wantAsked, wantRead     bool
	}{
		{name: "answered", want: barrierAnswered},
		{name: "caller gone", callerDone: true, err: context.Canceled, want: barrierAnswered},
		{name: "no progress", barrierDone: true, err: context.Canceled, want: barrierTimedOut},
		{name: "link lost after the cut", barrierDone: true, err: transport.ErrPeerDown, live: true, want: barrierTimedOut},
		{name: "deadline", err: fmt.Errorf("call: %w", context.DeadlineExceeded), want: barrierTimedOut},
		{name: "request deadline", err: deadlineErr("request to a: %v", errors.New("transport: deadline exceeded")), want: barrierTimedOut},
		{name: "link full", err: transport.ErrBackpressure, want: barrierTimedOut},
		{name: "link lost, run live", err: fmt.Errorf("barrier: %w", transport.ErrPeerDown), live: true,
			want: barrierLinkLost, wantAsked: true, wantRead: true},
		{name: "link lost, run gone", err: transport.ErrPeerDown, want: barrierPrevGone, wantAsked: true},
		// The previous owner stopped cleanly while the barrier was pending
		// (its session ended as it closed): its descriptor says stopped, or
		// is gone, though this node's list still shows it.
		{name: "link lost, run stopped", err: closed, live: true, stopped: true,
			want: barrierPrevStopped, wantAsked: true, wantRead: true},
		// This node gave up on it as silent: it may have read on until it
		// closed, whatever its descriptor says by now.
		{name: "link lost by liveness, run stopped", err: silent, live: true, stopped: true,
			want: barrierLinkLost, wantAsked: true},
		// The link was already down when the barrier was to be sent: the
		// transport refuses it as not admitted, wrapping why the link is
		// down — the session's end (ErrPeerDown) until the first redial
		// fails, that redial's error after. Same risk either way.
		{name: "link down before, session's end", err: notAdmitted(fmt.Errorf("%w: connection to prev lost: EOF", transport.ErrPeerDown)),
			live: true, want: barrierLinkLost, wantAsked: true, wantRead: true},
		{name: "link down before, run stopped", err: notAdmitted(closed),
			live: true, stopped: true, want: barrierPrevStopped, wantAsked: true, wantRead: true},
		{name: "link down before, redial failed", err: notAdmitted(errors.New("transport: handshake with tcp://127.0.0.1:7791: i/o timeout")),
			live: true, want: barrierLinkLost, wantAsked: true, wantRead: true},
		{name: "link down before, redial timed out", err: notAdmitted(dialTimedOut(context.DeadlineExceeded)),
			live: true, want: barrierLinkNotRestored, wantAsked: true, wantRead: true},
		// Go's other timeout error of a connect (no context match): the same.
		{name: "link down before, redial timed out (i/o deadline)", err: notAdmitted(dialTimedOut(os.ErrDeadlineExceeded)),
			live: true, want: barrierLinkNotRestored, wantAsked: true, wantRead: true},
		{name: "link down before, redial timed out, run stopped", err: notAdmitted(dialTimedOut(context.DeadlineExceeded)),
			live: true, stopped: true, want: barrierPrevStopped, wantAsked: true, wantRead: true},
		{name: "link down before, redial timed out, run gone", err: notAdmitted(dialTimedOut(context.DeadlineExceeded)),
			want: barrierPrevGone, wantAsked: true},
		{name: "link down before, run gone", err: notAdmitted(errors.New("transport: handshake with tcp://127.0.0.1:7791: EOF")),
			want: barrierPrevGone, wantAsked: true},
		// Nothing listens at prev's endpoint: prev's process is gone, with
		// what it read, and nothing is kept for a later run.
		{name: "link down before, redial refused", err: notAdmitted(refusedDial(t)), live: true, want: barrierPrevGone},
		{name: "no link at all", err: wrapErr(ErrUnavailable, fmt.Errorf("%w: prev", transport.ErrUnknownPeer), "request to a"),
			live: true, want: barrierPrevGone},
		{name: "refused", err: refusedErr, live: true, want: barrierRefused},
		// Prev's node runs as a later run: the send was not made (endedRun).
		{name: "run ended", err: fmt.Errorf("send to a: %w", runMismatch([]byte("prev"), 3, 4)), live: true, want: barrierPrevGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked, read := false, false
			got := barrierVerdictOf(tc.callerDone, tc.barrierDone, tc.err,
				func() bool { asked = true; return tc.live }, func() bool { read = true; return tc.stopped })
			if got != tc.want || asked != tc.wantAsked || read != tc.wantRead {
				t.Fatalf("verdict %d (run asked %v, descriptor read %v), want %d (asked %v, read %v)",
					got, asked, read, tc.want, tc.wantAsked, tc.wantRead)
			}
		})
	}
}

// dialTimedOut is a redial's connect that got no connection within the
// transport's dial timeout, as the transport reports it.
func dialTimedOut(cause error) error {
	return &transport.DialTimeoutError{Endpoint: "tcp://10.0.0.7:7791", Timeout: 5 * time.Second,
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: cause}}
}

// notAdmitted is a barrier's error when the link to prev has no session:
// transport's refusal (Node.session: ErrNotAdmitted wrapping the link's
// last error) as deliverRemote wraps it.
func notAdmitted(last error) error {
	return wrapErr(ErrUnavailable, fmt.Errorf("%w: prev (%w)", transport.ErrNotAdmitted, last), "request to a")
}

// refusedDial is the error of a dial nothing listens at, as the transport
// wraps it (dialDealer).
func refusedDial(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
		t.Fatalf("dial %s: something listens there again", addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	return fmt.Errorf("transport: dial tcp://%s: %w", addr, err)
}
