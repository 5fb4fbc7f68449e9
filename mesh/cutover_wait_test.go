package mesh

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// One-way messages from another node that reach the previous owner while
// its cutover is under way wait for it and then follow the object, in
// order, however long the cutover takes — and the connection they came on
// goes on meanwhile. They waited on the connection's reader, at most
// cutoverWait (10 s), and were then refused and dropped although their
// sender's Send had returned nil (RELOCATION §9: the object ran "a").
//
// The cutover is held until the client's request to another object on the
// same node, sent on the same connection after the one-way messages, has
// been answered: that reader has then handled them. Held on the reader,
// the first was dropped after 10 s and the second kept the reader past
// transport.peer_timeout, so the peer cut the connection and the request
// failed; waiting off it, they follow the object once the cutover is let go.
func TestOneWayMessagesOutwaitTheCutoverInOrder(t *testing.T) {
	f := newFixture(t)
	c, _ := failCluster(t, f, f.loc)
	ctx := ctxT(t, 90*time.Second)
	const id = "cutover-wait"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	// Another object on the source, reached on the same connection.
	var other ActorRef
	for i := 0; ; i++ {
		if i == 16 {
			t.Fatal("no object placed on the source")
		}
		r := recorder(t, ctx, c, fmt.Sprintf("cutover-other-%d", i), failPreserveType)
		if ownerIndex(t, c, record.ObjectActor, r.ActorID) == src {
			other = r
			break
		}
	}

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let) // a failure must not leave the move (and the cluster's close) waiting
	waited := make(chan struct{}, 8)
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		switch {
		case got == id && step == stepSourceCutover:
			close(reached)
			<-release
		case got == id && step == stepCutoverWait:
			waited <- struct{}{}
		}
	}})
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, reached, "the source's cutover")
	for _, b := range []string{"b", "c"} {
		if err := c.m(0).SendActor(ctx, ref, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.m(0).RequestActor(ctx, other, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// The reader took b and c before that request: they met the cutover.
	if len(waited) == 0 {
		t.Fatal("no message waited for the cutover: the test did not reach its case")
	}
	let()
	if res := outcomeOf(t, moving); res.Outcome != Moved {
		t.Fatalf("move: %v %s", res.Outcome, res.Reason)
	}
	wantRan(t, ctx, c, ref, "a,b,c")
	if got := ownerIndex(t, c, record.ObjectActor, id); got != dst {
		t.Fatalf("%s is owned by node %d, want %d", id, got, dst)
	}
}

// The messages waiting for a cutover off the reader: each peer's for an
// object admitted in order (one meeting a later cutover waits again, the
// others behind it), other peers' apart, and no more than cutoverWaitMax
// waiting on a node (refused with ErrMoving beyond).
func TestCutoverWaitersKeepTheirOrderAndTheirBound(t *testing.T) {
	c := newCluster(t, 1, nil)
	o := c.nodes[0].obj
	var mu sync.Mutex
	var ran []string
	note := func(s string) {
		mu.Lock()
		ran = append(ran, s)
		mu.Unlock()
	}
	obj := spot.Key{ID: "waiting"}
	waiter := func(peer, name string, admits ...<-chan struct{}) (cutoverWaiter, chan error) {
		refused := make(chan error, 1)
		return cutoverWaiter{
			key: cutoverWaitKey{peer: peer, obj: obj},
			admit: func() <-chan struct{} {
				if len(admits) > 0 { // still in a cutover: wait again
					next := admits[0]
					admits = admits[1:]
					return next
				}
				note(name)
				return nil
			},
			refuse: func(err error) { refused <- err },
		}, refused
	}
	first, later := make(chan struct{}), make(chan struct{})
	w1, _ := waiter("p", "p1", later)
	o.waitCutover(w1, first)
	w2, _ := waiter("p", "p2")
	if taken, _ := o.queueBehindCutover(w2); !taken {
		t.Fatal("p2 not queued behind p1")
	}
	w3, _ := waiter("q", "q1")
	if taken, _ := o.queueBehindCutover(w3); taken {
		t.Fatal("another peer's message queued behind p1")
	}

	// The bound, for a new queue and behind an existing one.
	o.mu.Lock()
	held := o.cutoverWaiting
	o.cutoverWaiting = cutoverWaitMax
	o.mu.Unlock()
	for _, tc := range []struct {
		name string
		add  func(cutoverWaiter)
	}{
		{"behind", func(w cutoverWaiter) { o.queueBehindCutover(w) }},
		{"new", func(w cutoverWaiter) { o.waitCutover(w, make(chan struct{})) }},
	} {
		w, refused := waiter("p", "over-"+tc.name)
		if tc.name == "new" {
			w.key.peer = "r"
		}
		tc.add(w)
		select {
		case err := <-refused:
			if !errors.Is(err, ErrMoving) {
				t.Fatalf("%s: refused with %v, want ErrMoving", tc.name, err)
			}
		default:
			t.Fatalf("%s: not refused over cutoverWaitMax", tc.name)
		}
	}
	o.mu.Lock()
	o.cutoverWaiting = held
	o.mu.Unlock()

	close(first) // p1 meets a later cutover: p2 stays behind it
	close(later)
	eventually(t, 10*time.Second, "the queue to empty", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.afterCutover) == 0 && o.cutoverWaiting == 0 && o.cutoverQueues.Load() == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(ran, ","); got != "p1,p2" {
		t.Fatalf("ran %q, want p1,p2", got)
	}
}
