package mesh

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// stuckSnapshot's Snapshot does not return until released: an adapter
// that waits on something (a lock its own goroutine holds, a slow call).
// Once released it returns at once, so a later move goes through.
type stuckSnapshot struct {
	started, release chan struct{}
	once, freed      *sync.Once
}

func newStuckSnapshot() stuckSnapshot {
	return stuckSnapshot{started: make(chan struct{}), release: make(chan struct{}), once: &sync.Once{}, freed: &sync.Once{}}
}

// free lets Snapshot return (once; deferred by every test that uses it).
func (a stuckSnapshot) free() { a.freed.Do(func() { close(a.release) }) }

func (a stuckSnapshot) Snapshot(spot.Handler) ([]byte, error) {
	a.once.Do(func() { close(a.started) })
	<-a.release
	return []byte("0"), nil
}

func (a stuckSnapshot) Restore(context.Context, spot.CreateRequest, []byte) (spot.Handler, error) {
	return &blockingObj{started: make(chan struct{}), release: make(chan struct{})}, nil
}

// stuckSnapshotCluster registers blockingType with adapter, starts three
// nodes (edit applied) and creates the Actor id; it returns the cluster,
// the object's ref, the move's source and target.
func stuckSnapshotCluster(t *testing.T, adapter spot.SnapshotAdapter, id string, edit func(int, *config.Config)) (*cluster, ActorRef, int, int) {
	t.Helper()
	f := newFixture(t)
	obj := &blockingObj{started: make(chan struct{}), release: make(chan struct{})}
	if err := f.reg.Register(spot.Factory{StableType: blockingType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
		Snapshot: adapter,
		New:      func(context.Context, spot.CreateRequest) (spot.Handler, error) { return obj, nil }}); err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		edit = clientRole0
	}
	c := newClusterOn(t, f, nil, 3, edit)
	ref, err := c.m(0).CreateActor(ctxT(t, 60*time.Second), id, blockingType)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, id)
	return c, ref, src, dst
}

// heldHere reports the object's host state on node i and whether its
// dispatch is held, with what waits in its mailbox.
func heldHere(c *cluster, i int, key spot.Key) (state hostState, held bool, queued int) {
	o := c.nodes[i].obj
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.hosted[key]
	if h == nil || h.obj == nil {
		return 0, false, -1
	}
	return h.state, h.obj.Held(), h.obj.Queued()
}

// moveWithStuckSnapshot moves ref from src to dst under a 300 ms deadline
// while adapter's Snapshot does not return, and returns the move's result
// once Snapshot was called; it fails the test when the move waits for
// Snapshot instead.
func moveWithStuckSnapshot(t *testing.T, c *cluster, adapter stuckSnapshot, ref ActorRef, src, dst int) RelocationResult {
	t.Helper()
	mctx, cancel := context.WithTimeout(ctxT(t, 60*time.Second), 300*time.Millisecond)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	waitClosed(t, adapter.started, "Snapshot to be called")
	select {
	case o := <-moving:
		if o.err != nil {
			t.Fatalf("RelocateActor: %v", o.err)
		}
		return o.res
	case <-time.After(20 * time.Second):
		t.Fatal("the move did not end at its deadline (300 ms) while Snapshot ran: it waited for Snapshot")
	}
	return RelocationResult{}
}

// stuckMoveQueued creates the Actor id, moves it under a 300 ms deadline
// while its adapter's Snapshot does not return (the move must end
// NotMoved, deadlineExceeded, with the store unchanged and no reservation
// left), then sends it "add" and waits for that in the object's mailbox on
// its source. The caller frees the adapter.
func stuckMoveQueued(t *testing.T, adapter stuckSnapshot, id string) (c *cluster, ref ActorRef, src, dst int, before authority.AuthorityRow) {
	t.Helper()
	c, ref, src, dst = stuckSnapshotCluster(t, adapter, id, nil)
	before = rowOf(t, c, record.ObjectActor, id)
	res := moveWithStuckSnapshot(t, c, adapter, ref, src, dst)
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonDeadline.String() {
		t.Fatalf("outcome %v (%s: %s), want notMoved (deadlineExceeded)", res.Outcome, res.Reason, res.Detail)
	}
	sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
	if _, rsv := capacityOf(t, c.f.loc); rsv != 0 {
		t.Fatalf("%d relocation reservations left", rsv)
	}
	if err := c.m(0).SendActor(ctxT(t, 60*time.Second), ref, []byte("add")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the message in the object's mailbox", func() bool {
		_, _, q := heldHere(c, src, spot.Key{ID: id})
		return q == 1
	})
	return c, ref, src, dst, before
}

// A move whose snapshot adapter's Snapshot does not return ends at the
// move's deadline, NotMoved (deadlineExceeded), as a move of an object
// stuck in a turn does (TestMoveOfAnObjectInALongTurnEndsAtItsDeadline).
// The object stays this node's, and held — no turn runs while Snapshot may
// still read the handler: a message sent meanwhile waits in its mailbox.
// Until 2026-12-07 the move (and a drain, a host Relocate) waited for
// Snapshot without bound (this test had the build tag knownopen).
func TestMoveWithAStuckSnapshotEndsAtItsDeadline(t *testing.T) {
	adapter := newStuckSnapshot()
	defer adapter.free()
	c, ref, src, dst, _ := stuckMoveQueued(t, adapter, "stuck-snap")
	if st, held, q := heldHere(c, src, spot.Key{ID: "stuck-snap"}); st != hostMoving || !held || q != 1 {
		t.Fatalf("while Snapshot is still in its call the object is %s, held %v, %d queued; want moving, held, 1 (no turn ran)", st, held, q)
	}
	// Another move waits for the call too (as Destroy/Close: ErrMoving).
	if _, err := c.nodes[src].Manager().RelocateActor(ctxT(t, 60*time.Second), ref, ToNode(c.nodes[dst].run.rid)); !errors.Is(err, ErrMoving) {
		t.Fatalf("a move while the late Snapshot runs: %v, want ErrMoving", err)
	}
}

// Once the Snapshot call that outlived its move returns, its result is
// discarded and the object serves again on its node: what was sent while
// it was held runs, and it can be moved.
func TestObjectWorksAgainAfterItsLateSnapshotReturns(t *testing.T) {
	adapter := newStuckSnapshot()
	defer adapter.free()
	c, ref, src, dst, before := stuckMoveQueued(t, adapter, "late-snap")
	ctx := ctxT(t, 60*time.Second)
	adapter.free()
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "1" {
		t.Fatalf("after the late Snapshot returned: %q, %v; want 1", got, err)
	}
	waitUntil(t, "the object serving again", func() bool {
		st, held, _ := heldHere(c, src, spot.Key{ID: "late-snap"})
		return st == hostServing && !held
	})
	checkOwners(t, c, record.ObjectActor, "late-snap", src, before.Record.AuthorityOwnerGeneration, src)
	res, err := c.nodes[src].Manager().RelocateActor(ctx, ref, ToNode(c.nodes[dst].run.rid))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("a move after the late Snapshot returned: %v (%s: %s), %v; want Moved", res.Outcome, res.Reason, res.Detail, err)
	}
}

// ctxSnapshot implements spot.ContextSnapshotter: SnapshotContext waits
// for its context (a slow copy that can stop) and returns its error; the
// plain Snapshot must not be called.
type ctxSnapshot struct {
	stuckSnapshot
	plain chan struct{}
	ended chan error
}

func (a ctxSnapshot) Snapshot(spot.Handler) ([]byte, error) {
	close(a.plain)
	return nil, errors.New("the plain Snapshot was called")
}

func (a ctxSnapshot) SnapshotContext(ctx context.Context, _ spot.Handler) ([]byte, error) {
	a.once.Do(func() { close(a.started) })
	<-ctx.Done()
	a.ended <- ctx.Err()
	return nil, ctx.Err()
}

// A snapshot adapter that implements spot.ContextSnapshotter is called
// with a context that ends at the move's deadline; the move ends there,
// NotMoved (deadlineExceeded), and the object, its call returned, serves
// on its node. Before, SnapshotContext did not exist (Snapshot had no
// context at all).
func TestContextSnapshotterIsToldTheMovesDeadline(t *testing.T) {
	adapter := ctxSnapshot{stuckSnapshot: newStuckSnapshot(), plain: make(chan struct{}), ended: make(chan error, 1)}
	c, ref, src, dst := stuckSnapshotCluster(t, adapter, "ctx-snap", nil)
	ctx := ctxT(t, 60*time.Second)
	before := rowOf(t, c, record.ObjectActor, "ctx-snap")
	if err := c.m(0).SendActor(ctx, ref, []byte("add")); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err := c.nodes[src].Manager().RelocateActor(mctx, ref, ToNode(c.nodes[dst].run.rid))
	select {
	case <-adapter.plain:
		t.Fatal("the move called Snapshot, not SnapshotContext")
	default:
	}
	if err != nil || res.Outcome != NotMoved || res.Reason != relocation.ReasonDeadline.String() {
		t.Fatalf("RelocateActor: %v (%s: %s), %v; want notMoved (deadlineExceeded)", res.Outcome, res.Reason, res.Detail, err)
	}
	if got := <-adapter.ended; !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("SnapshotContext's context ended with %v, want the move's deadline", got)
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "1" {
		t.Fatalf("after the move: %q, %v; want 1", got, err)
	}
	sameOwnership(t, before, rowOf(t, c, record.ObjectActor, "ctx-snap"))
	checkOwners(t, c, record.ObjectActor, "ctx-snap", src, before.Record.AuthorityOwnerGeneration, src)
}

// closeReturns closes n and returns Close's error; it fails t when Close
// has not returned within 30 s while what ran.
func closeReturns(t *testing.T, n *Node, what string) error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- n.Close(context.Background()) }()
	select {
	case err := <-closed:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Close did not return while %s ran", what)
		return nil
	}
}

// A node's Close while a Snapshot call outlives its move does not wait for
// it past the shutdown's deadline: it reports the call
// (ApplicationStuckError.Calls) and goes on.
func TestCloseDuringALateSnapshotReportsTheCall(t *testing.T) {
	adapter := newStuckSnapshot()
	defer adapter.free()
	c, ref, src, dst := stuckSnapshotCluster(t, adapter, "close-snap", func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.ShutdownDeadline = time.Second
		cfg.Relocation.DrainOnShutdown = false
	})
	if res := moveWithStuckSnapshot(t, c, adapter, ref, src, dst); res.Outcome != NotMoved {
		t.Fatalf("RelocateActor: %v (%s); want notMoved", res.Outcome, res.Reason)
	}
	err := closeReturns(t, c.nodes[src], "a late Snapshot")
	var st *ApplicationStuckError
	if !errors.As(err, &st) || !st.Calls {
		t.Fatalf("Close = %v, want an *ApplicationStuckError reporting a call into the application", err)
	}
	// Named, so that an operator knows whose adapter to look at.
	if want := "Snapshot of actor " + ref.ActorID + " (running "; len(st.InCalls) != 1 || !strings.HasPrefix(st.InCalls[0], want) ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("Close = %v (calls %q), want the call named %q…", err, st.InCalls, want)
	}
}
