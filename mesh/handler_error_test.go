package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// failingHandler fails every request with the error its id names (a
// handler that looked up another object and returned what it got), and
// counts its runs per id.
type failingHandler struct {
	id   string
	errs map[string]error
	runs *runCounter
}

type runCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *runCounter) add(id string) {
	c.mu.Lock()
	c.n[id]++
	c.mu.Unlock()
}

func (c *runCounter) of(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (h failingHandler) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind != spot.Request {
		return nil
	}
	h.runs.add(h.id)
	return fmt.Errorf("order lookup: %w", h.errs[string(env.Body)])
}

// A request whose handler returns an error wrapping a framework error —
// ErrNotFound, ErrStaleGeneration, ErrMoving, a full mailbox, a deadline —
// ran: the requester gets ErrRequestFailed and nothing else, from a remote
// and from the local node, through RequestActor, a Session and an Instance
// Spot, and the handler runs once. Before, the framework error passed
// through (a remote requester read notFound/actorRouteNotFound on the
// wire), was taken for a refusal of the delivery, and the request was sent
// again: the handler ran twice (a card charged twice).
func TestHandlerErrorIsRequestFailedAndRunsOnce(t *testing.T) {
	errs := map[string]error{"notFound": ErrNotFound, "stale": ErrStaleGeneration, "moving": ErrMoving,
		"mailboxFull": spot.ErrMailboxFull, "deadline": ErrDeadlineExceeded, "unavailable": ErrUnavailable}
	runs := &runCounter{n: map[string]int{}}
	newFn := func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
		return failingHandler{id: req.ID, errs: errs, runs: runs}, nil
	}
	f := newFixture(t)
	for _, fac := range []spot.Factory{
		{StableType: "test.failing", Kind: spot.KindActor, Policy: spot.PolicyDisabled, New: newFn},
		{StableType: "test.failing-instance", Kind: spot.KindInstanceSpot, Policy: spot.PolicyDisabled, New: newFn},
	} {
		if err := f.reg.Register(fac); err != nil {
			t.Fatal(err)
		}
	}
	c := newClusterOn(t, f, nil, 2, clientRole0)
	ctx := ctxT(t, 60*time.Second)
	check := func(t *testing.T, id string, want int, err error) {
		t.Helper()
		if !errors.Is(err, ErrRequestFailed) {
			t.Fatalf("request error %v, want ErrRequestFailed", err)
		}
		for _, e := range errs {
			if errors.Is(err, e) {
				t.Fatalf("request error %v also matches %v: a framework outcome the handler only reported", err, e)
			}
		}
		time.Sleep(50 * time.Millisecond) // a second run would come now
		if n := runs.of(id); n != want {
			t.Fatalf("the handler of %s ran %d times, want %d", id, n, want)
		}
	}
	for name := range errs {
		t.Run(name, func(t *testing.T) {
			for _, from := range []int{0, 1} { // remote, local
				id := fmt.Sprintf("failing-%s-%d", name, from)
				ref, err := c.m(0).CreateActor(ctx, id, "test.failing")
				if err != nil {
					t.Fatal(err)
				}
				_, err = c.m(from).RequestActor(ctx, ref, []byte(name))
				check(t, id, 1, err)
				s, err := c.m(from).BindSession(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				_, err = s.Request(ctx, []byte(name))
				check(t, id, 2, err)
				inst := "instance-" + id
				_, err = c.m(from).RequestInstance(ctx, inst, []byte(name), InstanceType("test.failing-instance"))
				check(t, inst, 1, err)
			}
		})
	}
}
