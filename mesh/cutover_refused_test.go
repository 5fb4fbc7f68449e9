package mesh

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// A request refused at a source in its cutover because too many messages
// already wait for cutovers there (cutoverWaitMax) was not delivered: its
// requester reads the store and tries again, within its deadline, whether
// the object is an Actor or a User Spot. The two differed: the Actor's
// refusal went on the wire as invalidState (a stale route: read the store,
// try again), the Spot's as conflict/spotMoving, which its requester
// returned as ErrMoving without trying again — the one refusal, two
// behaviours. Here the retry comes once the cutover is let go and the
// bound is back, and both requests are answered.
func TestRequestRefusedAtAFullCutoverIsTriedAgainForBothKinds(t *testing.T) {
	for _, kind := range []record.ObjectKind{record.ObjectActor, record.ObjectUserSpot} {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t)
			c, _ := failCluster(t, f, f.loc)
			ctx := ctxT(t, 60*time.Second)
			var id string
			var gen uint64
			var request func() ([]byte, error)
			if kind == record.ObjectActor {
				ref := recorder(t, ctx, c, "full-cutover-actor", failPreserveType)
				id, gen = ref.ActorID, ref.ObjectGeneration
				request = func() ([]byte, error) { return c.m(0).RequestActor(ctx, ref, []byte("r")) }
			} else {
				ref, err := c.m(0).CreateUserSpot(ctx, failSpotType)
				if err != nil {
					t.Fatal(err)
				}
				id, gen = ref.SpotID, ref.ObjectGeneration
				request = func() ([]byte, error) { return c.m(0).RequestSpot(ctx, ref, []byte("r")) }
			}
			if _, err := request(); err != nil { // the client's route, cached
				t.Fatal(err)
			}
			src, dst := movePair(t, c, kind, id)
			atCutover, proceed := holdAtStep(t, c, src, id, stepSourceCutover)
			moving := relocateAsync(ctx, c, src, dst, kind, id, gen)
			waitClosed(t, atCutover, "the source's move held in its cutover")

			o := c.nodes[src].obj
			o.mu.Lock()
			o.cutoverWaiting += cutoverWaitMax // full: the next arrival to wait is refused
			o.mu.Unlock()
			var full sync.Once
			unfill := func() {
				full.Do(func() {
					o.mu.Lock()
					o.cutoverWaiting -= cutoverWaitMax
					o.mu.Unlock()
				})
			}
			defer unfill()
			var sends atomic.Int32
			c.nodes[0].obj.hooks.Store(&testHooks{beforeRemoteSend: func(got string) error {
				if got == id && sends.Add(1) == 2 {
					// The retry: the bound is back and the cutover goes on.
					unfill()
					proceed()
				}
				return nil
			}})
			if _, err := request(); err != nil {
				t.Fatalf("request refused at the full cutover (%d sends): %v; want it tried again and answered", sends.Load(), err)
			}
			if n := sends.Load(); n != 2 {
				t.Fatalf("%d sends, want the refused one and the retry", n)
			}
			if res := outcomeOf(t, moving); res.Outcome != Moved {
				t.Fatalf("the move ended %v (%s), want moved", res.Outcome, res.Reason)
			}
		})
	}
}

// holdAtStep holds the first move of id on node at step (its
// relocationStep hook) until release, which is safe to call more than once
// and is called at the test's end; reached is closed once it is held.
func holdAtStep(t *testing.T, c *cluster, node int, id, step string) (reached <-chan struct{}, release func()) {
	at, goOn := make(chan struct{}), make(chan struct{})
	var held, let sync.Once
	release = func() { let.Do(func() { close(goOn) }) }
	t.Cleanup(release)
	c.nodes[node].obj.hooks.Store(&testHooks{relocationStep: func(got, s string) {
		if got == id && s == step {
			held.Do(func() { close(at) })
			<-goOn
		}
	}})
	return at, release
}
