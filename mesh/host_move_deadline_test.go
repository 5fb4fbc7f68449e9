package mesh

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// answeringObj answers every request; it has no Relocated callback (the
// tests here once used a zero stuckRelocatedObj, whose Relocated
// dereferenced its nil Once: a recovered panic logged as ERROR).
type answeringObj struct{}

func (answeringObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Request {
		return t.Reply(nil)
	}
	return nil
}

// slowRestore's Restore takes restoreTakes (or until its ctx ends): a
// target building a large state, as a large payload over a slow link
// takes long to arrive.
type slowRestore struct {
	takes time.Duration
	calls atomic.Int32
}

func (a *slowRestore) Snapshot(spot.Handler) ([]byte, error) { return []byte("state"), nil }

func (a *slowRestore) Restore(ctx context.Context, _ spot.CreateRequest, _ []byte) (spot.Handler, error) {
	a.calls.Add(1)
	select {
	case <-time.After(a.takes):
		return &answeringObj{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Found by review L (2026-12-07, night; fixed the same night: only the
// source's wait for the application is bounded, waitingForApp). f8397f2
// bounded each whole move of a host Relocate or drain by
// relocation.deadline, not only by the command's deadline. A move that
// legitimately takes longer —
// a large PreserveState payload over a slow link, a slow Restore
// (maxRestoreWait's comment: a 256 MiB payload at 1 MiB/s takes some four
// minutes, which a host command's 5 min deadline allowed) — now fails on
// every target it is offered (each one receiving the whole payload again,
// up to hostMoveTries) and ends Failed, although the command had time to
// spare; in a drain the shutdown then removed the object with its state.
// Raising shutdown_deadline or the command's deadline no longer helped:
// only relocation.deadline, which also sets every single move's default. Here:
// relocation.deadline 1 s, a Restore that takes 1.5 s, a command with 30 s.
func TestHostRelocateMovesAnObjectThatTakesLongerThanTheMoveDeadline(t *testing.T) {
	adapter := &slowRestore{takes: 1500 * time.Millisecond}
	ref, res := hostRelocateOne(t, "slow-restore", adapter, time.Second)
	for _, o := range res.Objects {
		if o.Object.ID == ref.ActorID && o.Outcome != hostmove.Moved {
			t.Errorf("%s: %s %q after %d targets (%d Restores); want moved: the command had %v left", o.Object.ID, o.Outcome, o.Reason,
				o.Targets, adapter.calls.Load(), 30*time.Second-res.Took)
		}
	}
}

// stoppingSnapshot's SnapshotContext runs until its context ends, then
// stops (a slow copy that can be told to stop); it counts its calls.
type stoppingSnapshot struct{ calls atomic.Int32 }

func (a *stoppingSnapshot) Snapshot(spot.Handler) ([]byte, error) {
	return nil, errors.New("the plain Snapshot was called")
}

func (a *stoppingSnapshot) SnapshotContext(ctx context.Context, _ spot.Handler) ([]byte, error) {
	a.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (a *stoppingSnapshot) Restore(context.Context, spot.CreateRequest, []byte) (spot.Handler, error) {
	return &answeringObj{}, nil
}

// A host move that reaches the bound of its wait for the application (a
// Snapshot slower than relocation.deadline, which stops when told) ends
// Failed after that one target: the slowness is the object's, and offering
// it to other targets (retryElsewhere, as for a slow target) made each of
// them cost another relocation.deadline.
func TestHostMoveSlowInItsSnapshotIsNotOfferedElsewhere(t *testing.T) {
	adapter := &stoppingSnapshot{}
	_, res := hostRelocateOne(t, "slow-snapshot", adapter, 500*time.Millisecond)
	if res.End != hostmove.Completed || len(res.Objects) != 1 {
		t.Fatalf("host command: %s, %d objects; want completed, 1", res.End, len(res.Objects))
	}
	o := res.Objects[0]
	if o.Outcome != hostmove.Failed || o.Targets != 1 || adapter.calls.Load() != 1 {
		t.Fatalf("%s: %s %q after %d targets, %d snapshot calls; want failed after 1 (the object's slowness, not a target's)",
			o.Object.ID, o.Outcome, o.Reason, o.Targets, adapter.calls.Load())
	}
}

// hostRelocateOne starts a client node 0 and three servers whose
// relocation.deadline is moveDeadline, with the PreserveStateWith Actor
// type "test."+id using adapter registered, creates the Actor id and
// relocates its node under a 30 s command; it returns the Actor and the
// command's result.
func hostRelocateOne(t *testing.T, id string, adapter spot.SnapshotAdapter, moveDeadline time.Duration) (ActorRef, HostRelocationResult) {
	t.Helper()
	f := newFixture(t)
	typ := "test." + id
	if err := f.reg.Register(spot.Factory{StableType: typ, Kind: spot.KindActor, Policy: spot.PolicyPreserveState, Snapshot: adapter,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return &answeringObj{}, nil }}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 4, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Relocation.Deadline = moveDeadline
	})
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, id, typ)
	if err != nil {
		t.Fatal(err)
	}
	src := ownerIndex(t, c, record.ObjectActor, ref.ActorID)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := c.nodes[src].Relocate(rctx, HostRelocateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ref, res
}

// refusingRestore's Restore always fails: every target refuses the move.
type refusingRestore struct{ calls atomic.Int32 }

func (a *refusingRestore) Snapshot(spot.Handler) ([]byte, error) { return []byte("state"), nil }

func (a *refusingRestore) Restore(context.Context, spot.CreateRequest, []byte) (spot.Handler, error) {
	a.calls.Add(1)
	return nil, errors.New("refused by the test")
}

// A host move that fails on every other server reports the nodes it was
// offered to: two of a three-server mesh. Until 2026-12-07 (review L) each
// retry counted one more target before it looked for one, and the last,
// which found no node left, made it "3 targets".
func TestHostMoveCountsTheTargetsItWasOfferedTo(t *testing.T) {
	adapter := &refusingRestore{}
	_, res := hostRelocateOne(t, "refused-everywhere", adapter, 30*time.Second)
	if len(res.Objects) != 1 {
		t.Fatalf("%d objects, want 1", len(res.Objects))
	}
	o := res.Objects[0]
	if o.Outcome != hostmove.Failed || o.Targets != 2 || adapter.calls.Load() != 2 {
		t.Fatalf("%s: %s %q after %d targets, %d Restores; want failed after the 2 other servers", o.Object.ID, o.Outcome, o.Reason,
			o.Targets, adapter.calls.Load())
	}
}
