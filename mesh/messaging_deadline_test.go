package mesh

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// A local Send or Request that meets its object in a source's cutover
// waits for the cutover — but only within the caller's own deadline, and
// not past a cancellation: the call's context deadline is its one deadline
// (docs/OBJECTS.md §2). The wait ignored the context and ended only at
// cutoverWait (10 s), with ErrMoving: a caller whose deadline had passed
// long before got a "moving" error instead of ErrDeadlineExceeded, and a
// cancelled caller was held up to 10 s.
func TestLocalMessageInACutoverKeepsTheCallersDeadline(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 90*time.Second)
	const id = "cutover-deadline"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	// The source's own Manager sends: local delivery, its route resolved
	// before the move.
	if _, err := c.m(src).RequestActor(ctx, ref, []byte("b")); err != nil {
		t.Fatal(err)
	}

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got == id && step == stepSourceCutover {
			close(reached)
			<-release
		}
	}})
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, reached, "the source's cutover")

	// A deadline that passes while the cutover is held.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := c.m(src).RequestActor(dctx, ref, []byte("late-request"))
	cancel()
	if !errors.Is(err, ErrDeadlineExceeded) || errors.Is(err, ErrMoving) {
		t.Fatalf("request past its deadline in a held cutover: %v; want ErrDeadlineExceeded", err)
	}
	dctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.m(src).SendActor(dctx, ref, []byte("late-send"))
	cancel()
	if !errors.Is(err, ErrDeadlineExceeded) || errors.Is(err, ErrMoving) {
		t.Fatalf("send past its deadline in a held cutover: %v; want ErrDeadlineExceeded", err)
	}
	// A cancelled caller is not held there either.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := c.m(src).SendActor(cctx, ref, []byte("cancelled")); err == nil || errors.Is(err, ErrMoving) {
		t.Fatalf("cancelled send in a held cutover: %v; want the cancellation", err)
	}

	let()
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("move: %v %s", res.Outcome, res.Reason)
	}
	// Nothing the calls above gave up on ran.
	wantRan(t, ctx, c, ref, "a,b")
}

// A request without a deadline gets transport.request_timeout as its
// deadline ("deadline of a request that carries none", docs/OPERATIONS.md)
// whether its object is on another node or on the requester's own: before,
// only the remote one did, and a request to a local object whose turn
// never ended waited for good, its waiter and reply slot kept meanwhile.
func TestRequestWithoutDeadlineEndsAtRequestTimeoutLocallyToo(t *testing.T) {
	c := newCluster(t, 2, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Transport.RequestTimeout = time.Second
	})
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "no-deadline", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	gate := c.probe.gate("stuck")
	t.Cleanup(func() { close(gate) })
	for _, tc := range []struct {
		name string
		from int
	}{{"remote", 0}, {"local", 1}} {
		done := make(chan error, 1)
		go func() {
			_, err := c.m(tc.from).RequestActor(context.Background(), ref, []byte("block:stuck"))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrDeadlineExceeded) {
				t.Fatalf("%s request without a deadline to a stuck turn: %v; want ErrDeadlineExceeded", tc.name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s request without a deadline to a stuck turn never ended (request_timeout 1s)", tc.name)
		}
	}
	o := c.nodes[1].obj
	o.mu.Lock()
	left := len(o.waiters)
	o.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d local waiters left after the request ended", left)
	}
}

// A one-way Send whose deadline has passed is ErrDeadlineExceeded (the one
// deadline passed, docs/OBJECTS.md §6), as a Request's is — also when its
// route is cached and only the transport sees the context. It was
// ErrUnavailable (wrapping context.DeadlineExceeded): a caller matching
// ErrDeadlineExceeded, and the calls metric's error label, read an outage.
func TestSendPastItsDeadlineIsDeadlineExceeded(t *testing.T) {
	c := newCluster(t, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "send-late", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("first")); err != nil { // caches the route
		t.Fatal(err)
	}
	late, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	for name, call := range map[string]func() error{
		"send":    func() error { return c.m(0).SendActor(late, ref, []byte("late")) },
		"request": func() error { _, err := c.m(0).RequestActor(late, ref, []byte("late")); return err },
	} {
		if err := call(); !errors.Is(err, ErrDeadlineExceeded) || errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s past its deadline: %v; want ErrDeadlineExceeded", name, err)
		}
	}
}

// bigReplyType answers a request whose body is a decimal n with n bytes.
const bigReplyType = "test.big-reply"

type bigReply struct{}

func (bigReply) Receive(t *spot.Turn, env spot.Envelope) error {
	n, err := strconv.Atoi(string(env.Body))
	if err != nil {
		return err
	}
	return t.Reply(make([]byte, n))
}

// A reply too large for the transport's frame guard (MaxFrameBytes, 64 MiB
// + 64 KiB) cannot reach a requester on another node: the requester is
// answered at once with ErrRequestFailed (the handler ran; its answer
// cannot be carried), not left to wait out its deadline for a reply that
// was dropped with a "reply not sent" warning — and so read as a target
// that never answered. The link goes on.
func TestReplyOverTheFrameLimitFailsTheRequestAtOnce(t *testing.T) {
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: bigReplyType, Kind: spot.KindActor, Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return bigReply{}, nil }}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 2, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "big-reply", bigReplyType)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.m(0).RequestActor(ctx, ref, []byte(strconv.Itoa(65<<20)))
	if !errors.Is(err, ErrRequestFailed) || errors.Is(err, ErrDeadlineExceeded) {
		t.Fatalf("request answered with a %d-byte reply: %v; want ErrRequestFailed", 65<<20, err)
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("3")); err != nil || len(got) != 3 {
		t.Fatalf("small reply after the refused one: %d bytes, %v", len(got), err)
	}
}
