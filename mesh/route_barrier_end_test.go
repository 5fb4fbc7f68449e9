package mesh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/router/transport"
)

// A barrier that could not be sent because the link to the previous owner
// is down and its last redial got no connection in time says so: "could
// not be re-established", with the dial timeout — not "did not answer the
// barrier in time", as it read before 2026-12-06 (the previous owner was
// never asked). Still counted with the timed-out barriers: its run is
// listed live and may pass on what this node sent it before.
func TestBarrierOverALinkNotReestablishedSaysSo(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	var logs syncbuf.Buffer
	f.logTo = func(i int) io.Writer {
		if i == 0 {
			return &logs
		}
		return nil
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	ref, src, _ := movedAfterOne(t, ctx, c, "barrier-redial")
	sender := c.nodes[0].obj
	sender.listedLook = func(follow.Ready) bool { return true }
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
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "route switch") {
			warn = line
		}
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
	own := fmt.Errorf("%w: %w: request to 0202", transport.ErrDeadlineExceeded, context.DeadlineExceeded)
	if err := requestFailure("a", own); !errors.Is(err, ErrDeadlineExceeded) {
		t.Errorf("the request's own deadline: %v, want ErrDeadlineExceeded", err)
	}
	if err := requestFailure("a", transport.ErrPeerDown); !errors.Is(err, ErrUnavailable) || !errors.Is(err, transport.ErrPeerDown) {
		t.Errorf("peer down: %v, want Unavailable wrapping ErrPeerDown", err)
	}
}
