package mesh

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// handoverScene is a move of a failPreserveType Actor from node src to node
// dst, on a client (node 0) and three servers, whose record comes to name
// the third server, other, while the move holds or has relayed what its
// senders sent: the owner the move did not make (a recovery after the
// source's owner lease ended, without its checks).
type handoverScene struct {
	c                *cluster
	ctl              *failCtl
	ctx              context.Context
	ref              ActorRef
	src, dst, other  int
	block            *runBlock // the target's Restore, blocked until released
	cancel           func()    // cancels the move
	moving           <-chan relocateOutcome
	atCAS            <-chan struct{} // the target reached its owner CAS (held there)
	freeCAS          func()
	adopted          *recObj // the instance the owner the record names runs
	releaseOnce      func()
	queuedAtSource   func() int
	forwardedAtStart uint64
}

// newHandoverScene starts the move with the target's Restore blocked (the
// source holds the object before relay-ready) and its owner CAS held.
func newHandoverScene(t *testing.T, id string) *handoverScene {
	t.Helper()
	f := newFixture(t)
	c, ctl := failClusterOf(t, f, f.loc, 4)
	s := &handoverScene{c: c, ctl: ctl, ctx: ctxT(t, 90*time.Second)}
	s.ref = recorder(t, s.ctx, c, id, failPreserveType, "a")
	s.src = ownerIndex(t, c, record.ObjectActor, id)
	var others []int
	for i := 1; i < 4; i++ {
		if i != s.src {
			others = append(others, i)
		}
	}
	s.dst, s.other = others[0], others[1]
	s.atCAS, s.freeCAS = holdTargetCAS(t, c, id, s.dst)
	s.block = ctl.block(id, nil)
	var released bool
	s.releaseOnce = func() {
		if !released {
			released = true
			close(s.block.release)
		}
	}
	t.Cleanup(s.releaseOnce)
	mctx, cancel := context.WithCancel(s.ctx)
	t.Cleanup(cancel)
	s.cancel = cancel
	s.forwardedAtStart = c.nodes[s.src].ObjectStats().FollowForwarded
	s.moving = relocateAsync(mctx, c, s.src, s.dst, record.ObjectActor, id, s.ref.ObjectGeneration)
	waitClosed(t, s.block.started, "the target's Restore to start")
	s.queuedAtSource = func() int {
		o := c.nodes[s.src].obj
		o.mu.Lock()
		h := o.hosted[spot.Key{ID: id}]
		o.mu.Unlock()
		if h == nil {
			return -1
		}
		return h.obj.Queued()
	}
	return s
}

// relay lets the target's Restore go on: relay-ready, the relay of the
// hold, the cutover; the target then waits at its owner CAS.
func (s *handoverScene) relay(t *testing.T) {
	t.Helper()
	s.releaseOnce()
	waitClosed(t, s.atCAS, "the target's owner CAS")
}

// adopt hosts a fresh instance of the Actor on node other and rewrites its
// record to name other under the next AuthorityOwnerGeneration.
func (s *handoverScene) adopt(t *testing.T) {
	t.Helper()
	row := rowOf(t, s.c, record.ObjectActor, s.ref.ActorID)
	n := s.c.nodes[s.other]
	o := n.obj
	s.adopted = &recObj{}
	obj, err := o.rt.Open(spot.Spec{Key: spot.Key{ID: s.ref.ActorID}, Kind: spot.KindActor, StableType: failPreserveType,
		Generation: s.ref.ObjectGeneration, Handler: gated{h: s.adopted, gate: n.lease.Gate()}})
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.hosted[spot.Key{ID: s.ref.ActorID}] = &hosted{obj: obj, kind: record.ObjectActor, stableType: failPreserveType,
		objectGeneration: s.ref.ObjectGeneration, ownerGeneration: uint64(row.Record.AuthorityOwnerGeneration) + 1, state: hostServing}
	o.mu.Unlock()
	if err := recordOnTarget(s.c, s.ref.ActorID, s.other); err != nil {
		t.Fatal(err)
	}
}

// ended waits for the move's end, which must be NotMoved (ownerChanged),
// and lets the target's owner CAS go (it cannot apply).
func (s *handoverScene) ended(t *testing.T) {
	t.Helper()
	res := outcomeOf(t, s.moving)
	s.freeCAS()
	if res.Outcome == Moved || res.Reason != relocation.ReasonOwnerChanged.String() {
		t.Fatalf("move whose record came to name another owner: %v (%s), want notMoved (%s)", res.Outcome, res.Reason, relocation.ReasonOwnerChanged)
	}
	notHostedOn(t, s.c, s.ref, s.src)
}

// ran is what the adopted instance ran, once a last one-way message the
// source node sends after the move's end has arrived: it goes on the
// source's ordered link to that owner behind what the move handed over,
// so nothing handed over comes after it.
func (s *handoverScene) ran(t *testing.T) []string {
	t.Helper()
	if err := s.c.m(s.src).SendActor(s.ctx, s.ref, []byte("last")); err != nil {
		t.Fatal(err)
	}
	var got []string
	eventually(t, 20*time.Second, "the last message at the owner the record names", func() bool {
		s.adopted.mu.Lock()
		defer s.adopted.mu.Unlock()
		got = append(got[:0], s.adopted.log...)
		return slices.Contains(got, "last")
	})
	if got[len(got)-1] != "last" {
		t.Fatalf("the owner the record names ran %v: something after the last message", got)
	}
	return got[:len(got)-1]
}

// The one-way messages a move took in — held before relay-ready, or
// relayed to a target that then cannot commit, and passed on to it after
// the cutover — follow the object to the owner its record names when that
// is an owner the move did not make, in each sender's order, exactly once.
// Before, the source dropped them: their Sends had returned nil. (The
// relayed case also ended Moved: a record naming a third node read as the
// target's commit while the source awaited it.)
func TestOwnerChangedHandsTheMovesOneWayMessagesToTheOwnerNamed(t *testing.T) {
	for _, relayed := range []bool{false, true} {
		name := map[bool]string{false: "held before relay-ready", true: "relayed and passed on after the cutover"}[relayed]
		t.Run(name, func(t *testing.T) {
			s := newHandoverScene(t, fmt.Sprintf("handover-oneway-%t", relayed))
			var want []string
			send := func(round string) {
				for i := 1; i <= 3; i++ {
					for _, from := range []int{0, s.src} { // a client's cached route; the source's own sender
						body := fmt.Sprintf("%s-n%d-%d", round, from, i)
						if err := s.c.m(from).SendActor(s.ctx, s.ref, []byte(body)); err != nil {
							t.Fatal(err)
						}
						want = append(want, body)
					}
				}
			}
			send("held")
			eventually(t, 20*time.Second, "the messages in the source's hold", func() bool { return s.queuedAtSource() == len(want) })
			if relayed {
				s.relay(t)
				send("after")
				eventually(t, 20*time.Second, "the source to pass the client's messages on", func() bool {
					return s.c.nodes[s.src].ObjectStats().FollowForwarded-s.forwardedAtStart >= 3
				})
			}
			s.adopt(t)
			if !relayed {
				s.cancel()
			}
			s.ended(t)
			got := s.ran(t)
			sendersOrder(t, got, want, 0, s.src)
			if len(got) != len(want) {
				t.Fatalf("the owner the record names ran %v, want each of %v once", got, want)
			}
		})
	}
}

// The requests a move took in — from a client and from a caller on the
// source node — are answered, and run exactly once, when its record comes
// to name an owner the move did not make: those it still held are passed
// on to that owner and answered there; those it had relayed to a target
// that cannot have run them are refused as not run (the object moved), and
// the requester's send goes to the owner the store names.
// Before, the held ones were answered ErrClosed, and the relayed ones — the
// move read as Moved — waited for the target's failure.
func TestOwnerChangedHandsTheMovesRequestsToTheOwnerNamed(t *testing.T) {
	for _, relayed := range []bool{false, true} {
		name := map[bool]string{false: "held before relay-ready", true: "relayed"}[relayed]
		t.Run(name, func(t *testing.T) {
			s := newHandoverScene(t, fmt.Sprintf("handover-requests-%t", relayed))
			var want []string
			answers := make(chan error, 3)
			for i := 1; i <= 3; i++ {
				body := fmt.Sprintf("r%d", i)
				want = append(want, body)
				from := []int{0, s.src}[i%2] // a client; a caller on the source node itself
				go func() {
					got, err := s.c.m(from).RequestActor(s.ctx, s.ref, []byte(body))
					if err == nil && string(got) != "ok" {
						err = fmt.Errorf("answer %q", got)
					}
					answers <- err
				}()
				// One at a time, so that they queue in this order.
				eventually(t, 20*time.Second, "the request in the source's hold", func() bool { return s.queuedAtSource() == i })
			}
			if relayed {
				s.relay(t)
			}
			s.adopt(t)
			if !relayed {
				s.cancel()
			}
			res := outcomeOf(t, s.moving)
			if res.Outcome == Moved || res.Reason != relocation.ReasonOwnerChanged.String() {
				t.Fatalf("move whose record came to name another owner: %v (%s), want notMoved (%s)", res.Outcome, res.Reason, relocation.ReasonOwnerChanged)
			}
			for range want {
				select {
				case err := <-answers:
					if err != nil {
						t.Fatalf("a request the move took in: %v", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("a request the move took in was never answered")
				}
			}
			s.freeCAS() // only now: the target, which cannot commit, answers nothing first
			got := s.ran(t)
			if !relayed && !slices.Equal(got, want) {
				t.Fatalf("the owner the record names ran %v, want %v", got, want)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("the owner the record names ran %v, want each of %v once", got, want)
			}
		})
	}
}
