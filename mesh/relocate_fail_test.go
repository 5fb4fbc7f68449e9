package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// The failure points of a move (spec §9.1 failure table, §9.4, §10, §12
// "Relocation Space And Stages"), each on real nodes over loopback: node 0
// is a client, nodes 1 and 2 are servers, and every object moves between
// the two servers. Every test also checks "never two owners": the store
// names exactly the expected owner and at most one node hosts the object.

// Types of the failure tests' factories: their instances record the bodies
// they run, in order.
const (
	failPreserveType = "test.fail-preserve"
	failRecreateType = "test.fail-recreate"
	failSpotType     = "test.fail-spot"
)

var errInjected = errors.New("injected target failure")

// failCtl drives the failure tests' factories. A blocked id makes the next
// snapshot Restore or factory run of that id (on any node) wait for the
// test, then fail with the block's error or go on.
type failCtl struct {
	mu       sync.Mutex
	objs     map[string]*recObj // id → its latest instance (any node)
	blocks   map[string]*runBlock
	restores map[string]int // id → snapshot Restore calls
}

type runBlock struct {
	started chan struct{} // closed when the blocked run began
	release chan struct{} // closed by the test
	err     error         // what the run then returns
	deaf    bool          // the run ignores its context (application code that does not return)
}

func newFailCtl() *failCtl {
	return &failCtl{objs: map[string]*recObj{}, blocks: map[string]*runBlock{}, restores: map[string]int{}}
}

// block makes the next Restore / factory run of id wait for release, then
// fail with err (nil: go on).
func (c *failCtl) block(id string, err error) *runBlock {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := &runBlock{started: make(chan struct{}), release: make(chan struct{}), err: err}
	c.blocks[id] = b
	return b
}

func (c *failCtl) wait(ctx context.Context, id string) error {
	c.mu.Lock()
	b := c.blocks[id]
	delete(c.blocks, id)
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	close(b.started)
	if b.deaf {
		<-b.release
		return b.err
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.err
}

func (c *failCtl) open(id string, log []string) *recObj {
	o := &recObj{log: log}
	c.mu.Lock()
	c.objs[id] = o
	c.mu.Unlock()
	return o
}

// ran is what the latest instance of id ran, in order.
func (c *failCtl) ran(id string) []string {
	c.mu.Lock()
	o := c.objs[id]
	c.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.log...)
}

func (c *failCtl) restoreCount(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restores[id]
}

func (c *failCtl) newFn(ctx context.Context, req spot.CreateRequest) (spot.Handler, error) {
	if err := c.wait(ctx, req.ID); err != nil {
		return nil, err
	}
	return c.open(req.ID, nil), nil
}

// failSnapshot is the snapshot adapter of the failure tests' types.
type failSnapshot struct{ c *failCtl }

func (a failSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	o := h.(*recObj)
	o.mu.Lock()
	defer o.mu.Unlock()
	return json.Marshal(o.log)
}

func (a failSnapshot) Restore(ctx context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	a.c.mu.Lock()
	a.c.restores[req.ID]++
	a.c.mu.Unlock()
	if err := a.c.wait(ctx, req.ID); err != nil {
		return nil, err
	}
	var log []string
	if err := json.Unmarshal(state, &log); err != nil {
		return nil, err
	}
	return a.c.open(req.ID, log), nil
}

// recObj records every body it runs; "list" answers the record so far.
type recObj struct {
	mu  sync.Mutex
	log []string
	// gate, when set, is called with each message's body before it is
	// recorded (a test holding a turn).
	gate func(body string)
}

func (o *recObj) Receive(t *spot.Turn, env spot.Envelope) error {
	o.mu.Lock()
	gate := o.gate
	o.mu.Unlock()
	if gate != nil {
		gate(string(env.Body))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if string(env.Body) == "list" {
		return t.Reply([]byte(strings.Join(o.log, ",")))
	}
	o.log = append(o.log, string(env.Body))
	if env.Kind == spot.Request {
		return t.Reply([]byte("ok"))
	}
	return nil
}

// failCluster starts a client (node 0) and two servers on loc with the
// failure tests' factories.
func failCluster(t *testing.T, f *fixture, loc locstore.Store) (*cluster, *failCtl) {
	t.Helper()
	return failClusterOf(t, f, loc, 3)
}

// failClusterOf is failCluster with count nodes: a client and count-1
// servers.
func failClusterOf(t *testing.T, f *fixture, loc locstore.Store, count int) (*cluster, *failCtl) {
	t.Helper()
	return failClusterWith(t, f, loc, count, clientRole0)
}

// failClusterWith is failClusterOf with edit (clientRole0 or one that calls
// it) applied to each node's configuration before it starts.
func failClusterWith(t *testing.T, f *fixture, loc locstore.Store, count int, edit func(i int, cfg *config.Config)) (*cluster, *failCtl) {
	t.Helper()
	ctl := registerFailTypes(t, f)
	return newClusterOn(t, f, loc, count, edit), ctl
}

// registerFailTypes registers the failure tests' factories in f's registry
// and returns what drives them.
func registerFailTypes(t *testing.T, f *fixture) *failCtl {
	t.Helper()
	ctl := newFailCtl()
	for _, fac := range []spot.Factory{
		{StableType: failPreserveType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState, Snapshot: failSnapshot{ctl}, New: ctl.newFn},
		{StableType: failRecreateType, Kind: spot.KindActor, Policy: spot.PolicyRecreate, New: ctl.newFn},
		{StableType: failSpotType, Kind: spot.KindUserSpot, Policy: spot.PolicyPreserveState, Snapshot: failSnapshot{ctl}, New: ctl.newFn},
	} {
		if err := f.reg.Register(fac); err != nil {
			t.Fatal(err)
		}
	}
	return ctl
}

// onFailStores runs fn with the fixture's memory Location Store, then with
// a real Redis one; wrap (nil: none) wraps the store the nodes use.
func onFailStores(t *testing.T, fn func(t *testing.T, f *fixture, loc locstore.Store)) {
	t.Run("memory", func(t *testing.T) { f := newFixture(t); fn(t, f, f.loc) })
	t.Run("redis", func(t *testing.T) { fn(t, newFixture(t), newRedisLocation(t)) })
}

// movePair is the server owning id and the other server.
func movePair(t *testing.T, c *cluster, kind record.ObjectKind, id string) (src, dst int) {
	t.Helper()
	src = ownerIndex(t, c, kind, id)
	if src != 1 && src != 2 {
		t.Fatalf("%s is owned by node %d, not a server", id, src)
	}
	return src, 3 - src
}

// checkOwners is "never two owners": the store names node owner under
// AuthorityOwnerGeneration ownerGen, and node host (-1: none) is the only
// node hosting id, serving.
func checkOwners(t *testing.T, c *cluster, kind record.ObjectKind, id string, owner int, ownerGen record.Generation, host int) {
	t.Helper()
	row := rowOf(t, c, kind, id)
	if !row.Found {
		t.Fatalf("%s has no record", id)
	}
	if got := c.indexOf(row.Record.Allocation.Descriptor.RoutingID); got != owner || row.Record.AuthorityOwnerGeneration != ownerGen ||
		row.Record.OwnerID != c.nodes[owner].run.ownerID {
		t.Fatalf("the store names node %d (owner %s) at AuthorityOwnerGeneration %d, want node %d at %d", got, row.Record.OwnerID,
			row.Record.AuthorityOwnerGeneration, owner, ownerGen)
	}
	key := spot.Key{Spot: kind != record.ObjectActor, ID: id}
	if host >= 0 {
		// A source reports Moved once the store names the target; the
		// target opens dispatch right after its CAS returns.
		waitUntil(t, fmt.Sprintf("node %d to serve %s", host, id), func() bool {
			state, ok := c.nodes[host].obj.stateOf(key)
			return ok && state == hostServing
		})
	}
	for i, n := range c.nodes {
		state, ok := n.obj.stateOf(key)
		switch {
		case i == host && (!ok || state != hostServing):
			t.Fatalf("node %d should host %s serving (hosted %v)", i, id, ok)
		case i != host && ok:
			t.Fatalf("node %d also hosts %s (%s): two owners", i, id, state)
		}
	}
}

// sameOwnership checks that after keeps before's owner, generations and
// allocation (a move that did not happen, §9.4 step 5).
func sameOwnership(t *testing.T, before, after authority.AuthorityRow) {
	t.Helper()
	b, a := before.Record, after.Record
	if !after.Found || a.OwnerID != b.OwnerID || a.OwnerLeaseGeneration != b.OwnerLeaseGeneration ||
		a.ObjectGeneration != b.ObjectGeneration || a.AuthorityOwnerGeneration != b.AuthorityOwnerGeneration ||
		string(a.Allocation.Descriptor.RoutingID) != string(b.Allocation.Descriptor.RoutingID) ||
		a.Allocation.DescriptorLifecycleGeneration != b.Allocation.DescriptorLifecycleGeneration || a.Allocation.State != b.Allocation.State {
		t.Fatalf("ownership changed: %+v -> %+v", b, a)
	}
}

// capacityOf is the count of every stored capacity row in s (by key) and
// the number of relocation reservation rows.
func capacityOf(t *testing.T, s locstore.Store) (map[string]int, int) {
	t.Helper()
	out := map[string]int{}
	for _, it := range scanKinds(t, s, authority.KindCapacity) {
		_, _, n, err := authority.DecodeCapacity(it.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[it.Key] = n
	}
	return out, len(scanKinds(t, s, authority.KindRelocationReservation))
}

// arrivalEnd is how one target attempt ended (testHooks.arrivalEnded).
type arrivalEnd struct {
	id      string
	state   relocation.TargetState
	failure relocation.TargetFailure
}

// watchArrivals reports every attempt that ends on node n.
func watchArrivals(h *testHooks) <-chan arrivalEnd {
	ch := make(chan arrivalEnd, 16)
	h.arrivalEnded = func(id string, st relocation.TargetState, f relocation.TargetFailure) {
		ch <- arrivalEnd{id, st, f}
	}
	return ch
}

func waitEnd(t *testing.T, ch <-chan arrivalEnd, id string) arrivalEnd {
	t.Helper()
	for {
		select {
		case e := <-ch:
			if e.id == id {
				return e
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no target attempt for %s ended", id)
		}
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

type relocateOutcome struct {
	res RelocationResult
	err error
}

// relocateAsync starts a move of (kind, id, gen) from node src to node dst.
func relocateAsync(ctx context.Context, c *cluster, src, dst int, kind record.ObjectKind, id string, gen uint64) <-chan relocateOutcome {
	ch := make(chan relocateOutcome, 1)
	go func() {
		var o relocateOutcome
		to := ToNode(c.nodes[dst].RID())
		if kind == record.ObjectActor {
			o.res, o.err = c.m(src).RelocateActor(ctx, ActorRef{ActorID: id, ObjectGeneration: gen}, to)
		} else {
			o.res, o.err = c.m(src).RelocateSpot(ctx, SpotRef{SpotID: id, ObjectGeneration: gen}, to)
		}
		ch <- o
	}()
	return ch
}

func outcomeOf(t *testing.T, ch <-chan relocateOutcome) RelocationResult {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("RelocateActor: %v", o.err)
		}
		return o.res
	case <-time.After(60 * time.Second):
		t.Fatal("RelocateActor did not return")
	}
	return RelocationResult{}
}

// recorder creates an Actor of a failure test type from the client and
// has it run the requests bodies, in order.
func recorder(t *testing.T, ctx context.Context, c *cluster, id, typ string, bodies ...string) ActorRef {
	t.Helper()
	ref, err := c.m(0).CreateActor(ctx, id, typ)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if _, err := c.m(0).RequestActor(ctx, ref, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	return ref
}

// wantRan checks what the Actor ref ran, in order (its "list" answer).
func wantRan(t *testing.T, ctx context.Context, c *cluster, ref ActorRef, want string) {
	t.Helper()
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("list")); err != nil || string(got) != want {
		t.Fatalf("%s ran %q, %v; want %q", ref.ActorID, got, err, want)
	}
}

// corruptChunk makes node n's source stream corrupt one byte of chunk 0 of
// id's Restore payload; held is closed when the stream reached it (the
// object captured and in its ingress hold) and the chunk waits for release.
func corruptChunk(h *testHooks, id string) (held, release chan struct{}) {
	held, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.restoreChunk = func(oid string, _ chunk.Binding, index int, data []byte) []byte {
		if oid != id || index != 0 {
			return data
		}
		once.Do(func() { close(held) })
		<-release
		bad := append([]byte(nil), data...)
		bad[len(bad)/2] ^= 0x5a
		return bad
	}
	return held, release
}

// §9.1 "Target explicitly fails after Captured and before the relay-ready
// reply is accepted" and "Assembled payload's checksum mismatch", with
// §9.4: the move is NotMoved (targetFailed); the source keeps the object,
// and what arrived during the move (the ingress hold) runs there afterwards
// in original order; the authority row keeps owner and generations; the
// reservation is released, so every capacity counter is back where it was;
// the target hosts nothing and never restored from the bad payload.
func TestRelocationTargetFailsBeforeRelayReady(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		c, ctl := failCluster(t, f, loc)
		tests := []struct {
			name, typ string
			// arm injects the failure for id moving src→dst; held is
			// closed once the source holds the object mid-move, release
			// lets the failure happen.
			arm  func(id string, src, dst int) (held <-chan struct{}, release func())
			want relocation.TargetFailure
		}{
			{"snapshot Restore fails", failPreserveType, func(id string, _, _ int) (<-chan struct{}, func()) {
				b := ctl.block(id, errInjected)
				return b.started, func() { close(b.release) }
			}, relocation.TgtFailRestore},
			{"factory fails (RecreateOnRelocation)", failRecreateType, func(id string, _, _ int) (<-chan struct{}, func()) {
				b := ctl.block(id, errInjected)
				return b.started, func() { close(b.release) }
			}, relocation.TgtFailRestore},
			{"checksum corrupted in flight", failPreserveType, func(id string, src, _ int) (<-chan struct{}, func()) {
				h := &testHooks{}
				held, release := corruptChunk(h, id)
				c.nodes[src].obj.hooks.Store(h)
				return held, func() { close(release) }
			}, relocation.TgtFailAssembly},
		}
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx := ctxT(t, 60*time.Second)
				id := fmt.Sprintf("tf-%d", i)
				ref := recorder(t, ctx, c, id, tc.typ, "pre-1", "pre-2", "pre-3")
				src, dst := movePair(t, c, record.ObjectActor, id)
				hooks := &testHooks{}
				ends := watchArrivals(hooks)
				c.nodes[dst].obj.hooks.Store(hooks)
				defer c.nodes[src].obj.hooks.Store(nil)
				defer c.nodes[dst].obj.hooks.Store(nil)
				before := rowOf(t, c, record.ObjectActor, id)
				capBefore, rsvBefore := capacityOf(t, loc)
				checksumsBefore := c.nodes[dst].obj.chunks.Stats().FailedChecksum
				held, release := tc.arm(id, src, dst)
				moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
				waitClosed(t, held, "the move to hold the object")
				// Messages during the move: they enter the source's
				// ingress hold and run nowhere yet.
				delivered := c.nodes[src].ObjectStats().Delivered
				for _, b := range []string{"mid-1", "mid-2", "mid-3", "mid-4"} {
					if err := c.m(0).SendActor(ctx, ref, []byte(b)); err != nil {
						t.Fatal(err)
					}
				}
				asked := make(chan error, 1)
				go func() {
					got, err := c.m(0).RequestActor(ctx, ref, []byte("mid-5"))
					if err == nil && string(got) != "ok" {
						err = fmt.Errorf("answered %q", got)
					}
					asked <- err
				}()
				eventually(t, 10*time.Second, "the messages to reach the source's hold", func() bool {
					return c.nodes[src].ObjectStats().Delivered >= delivered+5
				})
				if got := strings.Join(ctl.ran(id), ","); got != "pre-1,pre-2,pre-3" {
					t.Fatalf("ran during the move: %q", got)
				}
				release()
				res := outcomeOf(t, moving)
				if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetFailed.String() {
					t.Fatalf("outcome %v (%s), want notMoved (targetFailed)", res.Outcome, res.Reason)
				}
				// The detail names the target's failure.
				if !strings.Contains(res.Detail, tc.want.String()) {
					t.Fatalf("detail %q does not name the target's failure %s", res.Detail, tc.want)
				}
				if e := waitEnd(t, ends, id); e.state != relocation.TgtFailed || e.failure != tc.want {
					t.Fatalf("the target attempt ended %s/%s, want failed/%s", e.state, e.failure, tc.want)
				}
				if err := <-asked; err != nil {
					t.Fatalf("request sent during the move: %v", err)
				}
				wantRan(t, ctx, c, ref, "pre-1,pre-2,pre-3,mid-1,mid-2,mid-3,mid-4,mid-5")
				sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
				capAfter, rsvAfter := capacityOf(t, loc)
				if fmt.Sprint(capAfter) != fmt.Sprint(capBefore) || rsvAfter != rsvBefore {
					t.Fatalf("capacity %v (%d reservations) -> %v (%d)", capBefore, rsvBefore, capAfter, rsvAfter)
				}
				checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
				if tc.want == relocation.TgtFailAssembly {
					if n := c.nodes[dst].obj.chunks.Stats().FailedChecksum; n != checksumsBefore+1 {
						t.Fatalf("checksum failures on the target %d -> %d", checksumsBefore, n)
					}
					if n := ctl.restoreCount(id); n != 0 {
						t.Fatalf("restored %d times from a corrupted payload", n)
					}
				}
			})
		}
	})
}

// firstChunk keeps the binding and bytes of the first Restore chunk node
// n's source stream sends for id.
type firstChunk struct {
	mu   sync.Mutex
	b    chunk.Binding
	data []byte
}

func (f *firstChunk) hook(id string) func(string, chunk.Binding, int, []byte) []byte {
	return func(oid string, b chunk.Binding, index int, data []byte) []byte {
		f.mu.Lock()
		defer f.mu.Unlock()
		if oid == id && index == 0 && f.data == nil {
			f.b, f.data = b, append([]byte(nil), data...)
		}
		return data
	}
}

// moveAndSettle moves the Actor ref from src to dst and waits until the
// new owner recorded the move Completed (its progress erased), so that
// the store no longer changes on the move's behalf.
func moveAndSettle(t *testing.T, ctx context.Context, c *cluster, src, dst int, ref ActorRef) RelocationResult {
	t.Helper()
	res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration))
	if res.Outcome != Moved || !res.Confirmed {
		t.Fatalf("move %d→%d: %v (%s), confirmed %v", src, dst, res.Outcome, res.Reason, res.Confirmed)
	}
	waitUntil(t, "relocation progress cleared", func() bool {
		return rowOf(t, c, record.ObjectActor, ref.ActorID).Record.Relocation == nil
	})
	return res
}

// §9.1 "The target discards, without linking to assembly, any Restore or
// chunk whose values aren't exactly the same, so a late-arriving previous
// attempt's payload never mixes into the current move" and §8.2 / §12 "a
// previous target attempt can't change owner or receive new messages".
// After a move, the old source sends the new owner, on the real transport,
// a late chunk (52) and a late Restore (40) of that move: the chunk is
// discarded (its binding completed), the Restore refused; the store does
// not change, nothing is restored and the object keeps serving there. Once
// the object moved on, the same Restore at the node it left is refused at
// once, without registering a temporary queue for an object that node
// does not own.
func TestRelocationLateAttemptDiscarded(t *testing.T) {
	f := newFixture(t)
	c, ctl := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "late-1"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	gen := rowOf(t, c, record.ObjectActor, id).Record.AuthorityOwnerGeneration
	var first firstChunk
	c.nodes[src].obj.hooks.Store(&testHooks{restoreChunk: first.hook(id)})
	res := moveAndSettle(t, ctx, c, src, dst, ref)
	c.nodes[src].obj.hooks.Store(nil)
	if first.data == nil || len(first.data) != res.PayloadBytes {
		t.Fatalf("kept a chunk of %d bytes, the payload has %d (want one chunk)", len(first.data), res.PayloadBytes)
	}
	prep := &router.RelocationPrepare{Correlation: 7, Binding: first.b.Wire(),
		Object: router.RelocationObject{Kind: wireKind(record.ObjectActor), ObjectID: id, StableType: failPreserveType,
			ObjectGeneration: ref.ObjectGeneration, ExpectedAuthorityOwnerGeneration: uint64(gen)},
		TargetNodeRID: c.nodes[dst].RID(), TargetNodeGeneration: c.nodes[dst].run.lifecycleGeneration,
		TotalLength: uint64(len(first.data)), ChunkCount: 1, CRC32C: router.CRC32C(first.data),
		DeadlineUnixMs: uint64(time.Now().Add(time.Minute).UnixMilli())}
	wantRefused := func(t *testing.T, r *router.Record) {
		t.Helper()
		ready, ok := r.Body.(*router.RelocationReady)
		if !ok || ready.Outcome != router.RelocationFailed || ready.Failure != router.RelocationFailureAuthorityMismatch {
			t.Fatalf("late Restore answered %s %+v, want failed/authorityMismatch", r.Command, r.Body)
		}
	}

	t.Run("at the new owner", func(t *testing.T) {
		before := storeSnapshot(t, f.loc)
		discarded := c.nodes[dst].obj.chunks.Stats().DiscardedBy(chunk.DiscardCompleted)
		peer := transport.RID(c.nodes[dst].RID())
		late := router.NewRecord(&router.RelocationState{Binding: first.b.Wire(), ChunkIndex: 0, Data: first.data}, nil, nil)
		if err := c.nodes[src].tr.SendWait(ctx, peer, late); err != nil {
			t.Fatal(err)
		}
		p := *prep
		p.Correlation = 0 // the transport numbers the request
		resp, err := c.nodes[src].tr.Request(ctx, peer, router.NewRecord(&p, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		wantRefused(t, resp)
		eventually(t, 10*time.Second, "the late chunk to be discarded", func() bool {
			return c.nodes[dst].obj.chunks.Stats().DiscardedBy(chunk.DiscardCompleted) == discarded+1
		})
		sameSnapshot(t, "a late chunk and Restore", before, storeSnapshot(t, f.loc))
		checkOwners(t, c, record.ObjectActor, id, dst, gen+1, dst)
		wantRan(t, ctx, c, ref, "a")
		if n := ctl.restoreCount(id); n != 1 {
			t.Fatalf("restored %d times, want the move's one", n)
		}
	})

	t.Run("at a node the object left", func(t *testing.T) {
		moveAndSettle(t, ctx, c, dst, src, ref)
		hooks := &testHooks{}
		ends := watchArrivals(hooks)
		c.nodes[dst].obj.hooks.Store(hooks)
		defer c.nodes[dst].obj.hooks.Store(nil)
		before := storeSnapshot(t, f.loc)
		box := deliver(c.nodes[dst], c.nodes[src], prep)
		// Refused in the handler itself: no attempt was started.
		if n := box.count(); n != 1 {
			t.Fatalf("the late Restore was answered %d times when its handler returned, want 1", n)
		}
		if _, ok := c.nodes[dst].obj.hostedFor(actorKey(id)); ok {
			t.Fatal("the late Restore registered a temporary queue on a node that does not own the object")
		}
		wantRefused(t, <-box.first)
		sameSnapshot(t, "a late Restore", before, storeSnapshot(t, f.loc))
		checkOwners(t, c, record.ObjectActor, id, src, gen+2, src)
		wantRan(t, ctx, c, ref, "a")
		select {
		case e := <-ends:
			t.Fatalf("the late Restore started a target attempt (ended %s/%s)", e.state, e.failure)
		default:
		}
	})
}

// casFaults makes one object's owner CAS — the NewOwner batch, which puts
// its authority row and deletes the move's reservation row — meet an
// unreachable store (§10).
type casFaults struct {
	locstore.Store
	authKey string

	// reads is held (shared) by a read of authKey for as long as the
	// store serves it, and taken by a batch that applies before it lands:
	// a read that passed the failReads check must not reach the store
	// after the batch (on Redis it could, and see the new owner).
	reads sync.RWMutex

	mu         sync.Mutex
	failWrites int   // NewOwner batches still to fail; -1: every one
	apply      bool  // a failing batch is applied first: only its answer is lost
	failReads  bool  // reads of authKey fail (set by a lost answer)
	failed     int   // NewOwner batches answered with a provider error
	applied    int   // of those, applied
	notApplied error // why the last batch meant to apply did not
}

var errStoreDown = &locstore.ProviderError{Provider: "test", Op: "write", Err: errors.New("store unreachable")}

func (s *casFaults) isNewOwner(req locstore.WriteRequest) bool { return isNewOwnerOf(s.authKey, req) }

// isNewOwnerOf reports whether req is a move's owner CAS of the object
// whose authority key is authKey: it puts the row and consumes the move's
// reservation.
func isNewOwnerOf(authKey string, req locstore.WriteRequest) bool {
	put, del := false, false
	for _, m := range req.Mutations {
		put = put || (m.Kind == locstore.MutPut && m.Key == authKey)
		del = del || (m.Kind == locstore.MutDelete && strings.HasPrefix(m.Key, record.KindPrefix(authority.KindRelocationReservation)))
	}
	return put && del
}

func (s *casFaults) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	s.mu.Lock()
	fail := s.failWrites != 0 && s.isNewOwner(req)
	if fail {
		if s.failWrites > 0 {
			s.failWrites--
		}
		s.failed++
	}
	apply := fail && s.apply
	s.mu.Unlock()
	if apply {
		// Reads fail from before the batch lands: a reader polling the
		// row (the source's confirm) must not see it before the target
		// learns anything. Reads already in flight end first.
		s.reads.Lock()
		s.mu.Lock()
		s.failReads = true
		s.mu.Unlock()
		s.reads.Unlock()
	}
	if !fail {
		return s.Store.Write(ctx, req)
	}
	if apply {
		// The store itself is fine — only the answer is lost — so the
		// batch is not cut short by the caller's per-call deadline on a
		// loaded machine.
		wr, err := s.Store.Write(context.WithoutCancel(ctx), req)
		s.mu.Lock()
		if err == nil && wr.Applied {
			s.applied++
		} else {
			s.notApplied = fmt.Errorf("applied %v, err %v", wr.Applied, err)
		}
		s.mu.Unlock()
	}
	return locstore.WriteResult{}, errStoreDown
}

func (s *casFaults) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	s.reads.RLock()
	defer s.reads.RUnlock()
	s.mu.Lock()
	fail := s.failReads && key == s.authKey
	s.mu.Unlock()
	if fail {
		return locstore.ReadResult{}, errStoreDown
	}
	return s.Store.Read(ctx, key)
}

// arm makes the owner CAS of Actor id meet the store failures: failWrites
// NewOwner batches fail (-1: every one), each applied first when apply.
func (s *casFaults) arm(t *testing.T, id string, failWrites int, apply bool) {
	t.Helper()
	key, err := authority.Object{ID: id, Kind: record.ObjectActor}.Key()
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authKey, s.failWrites, s.apply, s.failed, s.applied, s.notApplied = key, failWrites, apply, 0, 0, nil
}

func (s *casFaults) counts() (failed, applied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed, s.applied
}

// §10 "If the Framework doesn't receive the result of a Store request, it
// doesn't guess ... On a retryable failure or indeterminate response, the
// target repeats read/CAS with the same source fence and RelocationId.
// Confirming ownership by that specific target converges to success": the
// target's owner CAS meets a store that refuses it a few times, or applies
// it but loses the answer and then every re-read until the target's next
// CAS attempt. The move converges: Moved and Confirmed, the owner changed
// once (AuthorityOwnerGeneration + 1), the state arrived, one owner.
func TestRelocationOwnerCASConverges(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		faults := &casFaults{Store: loc}
		c, _ := failCluster(t, f, faults)
		tests := []struct {
			name       string
			failWrites int
			apply      bool
		}{
			{"refused three times", 3, false},
			{"applied, answer and re-read lost", 1, true},
		}
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				ctx := ctxT(t, 60*time.Second)
				id := fmt.Sprintf("cas-%d", i)
				ref := recorder(t, ctx, c, id, failPreserveType, "a")
				src, dst := movePair(t, c, record.ObjectActor, id)
				gen := rowOf(t, c, record.ObjectActor, id).Record.AuthorityOwnerGeneration
				casCalls := 0
				hooks := &testHooks{relocationStep: func(oid, step string) {
					if oid != id || step != stepTargetCAS {
						return
					}
					faults.mu.Lock()
					defer faults.mu.Unlock()
					if casCalls++; casCalls > 1 {
						faults.failReads = false // the store is back for the retry
					}
				}}
				c.nodes[dst].obj.hooks.Store(hooks)
				defer c.nodes[dst].obj.hooks.Store(nil)
				faults.arm(t, id, tc.failWrites, tc.apply)
				res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
				if res.Outcome != Moved || !res.Confirmed || res.AuthorityOwnerGeneration != uint64(gen)+1 {
					t.Fatalf("outcome %v (%s), confirmed %v, AuthorityOwnerGeneration %d", res.Outcome, res.Reason, res.Confirmed, res.AuthorityOwnerGeneration)
				}
				if tc.apply {
					// The batch that applies runs to its end even when its
					// caller stopped waiting (WithoutCancel above); on a
					// loaded machine it may still be in flight here.
					eventually(t, 10*time.Second, "the applied batch to finish", func() bool {
						_, applied := faults.counts()
						faults.mu.Lock()
						defer faults.mu.Unlock()
						return applied == 1 || faults.notApplied != nil
					})
				}
				failed, applied := faults.counts()
				if failed != tc.failWrites || (tc.apply && applied != 1) {
					t.Fatalf("%d owner CAS batches failed (%d applied; %v), want %d", failed, applied, faults.notApplied, tc.failWrites)
				}
				if tc.apply {
					// The lost answer was decided by the target's next
					// CAS attempt re-reading the row, not by a guess.
					faults.mu.Lock()
					calls := casCalls
					faults.mu.Unlock()
					if calls < 2 {
						t.Fatalf("the owner CAS ran %d times, want a retry after the lost answer", calls)
					}
				}
				checkOwners(t, c, record.ObjectActor, id, dst, gen+1, dst)
				wantRan(t, ctx, c, ref, "a")
				if _, rsv := capacityOf(t, loc); rsv != 0 {
					t.Fatalf("%d reservations left after the move", rsv)
				}
			})
		}
	})
}

// §10 "If target ownership isn't confirmed before Restore validity
// expires, the target records a location_update_failed Error and removes
// the prepared Actor or Spot, temporary queue, and relocation state. It
// neither opens application dispatch ...": the store refuses the target's
// owner CAS until the Restore deadline (the move's deadline). The target
// ends location_update_failed and hosts nothing; the store still names the
// source under the same generations. The source, which accepted
// relay-ready, kept its captured payload; it reads the store, sees itself
// still named, releases the reservation and takes the object back
// (NotMoved, targetLost — the documented deviation from §9.4's last
// paragraph, docs/RELOCATION.md): never two owners, and the object serves
// on from the source with its state.
func TestRelocationOwnerCASUnconfirmedUntilDeadline(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		faults := &casFaults{Store: loc}
		c, _ := failCluster(t, f, faults)
		ctx := ctxT(t, 60*time.Second)
		const id = "cas-deadline"
		ref := recorder(t, ctx, c, id, failPreserveType)
		src, dst := movePair(t, c, record.ObjectActor, id)
		before := rowOf(t, c, record.ObjectActor, id)
		hooks := &testHooks{}
		ends := watchArrivals(hooks)
		c.nodes[dst].obj.hooks.Store(hooks)
		faults.arm(t, id, -1, false)
		mctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		res := outcomeOf(t, relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
		// Both sides hold the same deadline: when the source's release of
		// the reservation lands before the target's deadline timer, the
		// target's next CAS meets the released reservation (conflict);
		// otherwise it decides at its deadline (location_update_failed).
		// Either way it removed everything and dispatched nothing.
		if e := waitEnd(t, ends, id); e.state != relocation.TgtFailed ||
			(e.failure != relocation.TgtFailLocationUpdate && e.failure != relocation.TgtFailConflict) {
			t.Fatalf("the target attempt ended %s/%s, want failed/location_update_failed (or conflict)", e.state, e.failure)
		}
		if res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String() {
			t.Fatalf("the source reported %v (%s), confirmed %v; want notMoved (targetLost)", res.Outcome, res.Reason, res.Confirmed)
		}
		if failed, _ := faults.counts(); failed == 0 {
			t.Fatal("the owner CAS never reached the store")
		}
		faults.mu.Lock()
		faults.failWrites = 0
		faults.mu.Unlock()
		sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
		checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
		if _, rsv := capacityOf(t, loc); rsv != 0 {
			t.Fatalf("%d reservations left after the source took the object back", rsv)
		}
		wantRan(t, ctx, c, ref, "")
	})
}

// §9.1 "A Store commit that succeeds under matching identity fences is
// authoritative regardless of whether the target node it points to is
// still live", §9.4 last paragraph: the target stops after its relay-ready
// answer and before its owner CAS. Stopped by Node.Close, it never commits:
// the store keeps naming the source, and the source, which kept its
// payload, takes the object back (NotMoved, targetLost) and serves it with
// its state. With only its transport gone, its CAS still commits: the
// store names it, it alone hosts the object (unreachable), and the source
// confirms the move.
func TestRelocationTargetStopsBeforeCAS(t *testing.T) {
	tests := []struct {
		name      string
		stop      func(t *testing.T, n *Node)
		committed bool
	}{
		{"node closed", func(t *testing.T, n *Node) {
			if err := n.Close(ctxT(t, 20*time.Second)); err != nil {
				t.Logf("Close: %v", err)
			}
		}, false},
		{"transport closed", func(t *testing.T, n *Node) {
			if err := n.tr.Close(); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c, ctl := failCluster(t, f, f.loc)
			ctx := ctxT(t, 60*time.Second)
			const id = "stopping-target"
			ref := recorder(t, ctx, c, id, failPreserveType, "a")
			src, dst := movePair(t, c, record.ObjectActor, id)
			before := rowOf(t, c, record.ObjectActor, id)
			atCAS, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hooks := &testHooks{relocationStep: func(oid, step string) {
				if oid == id && step == stepTargetCAS {
					once.Do(func() { close(atCAS) })
					<-release
				}
			}}
			ends := watchArrivals(hooks)
			c.nodes[dst].obj.hooks.Store(hooks)
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
			waitClosed(t, atCAS, "the target to reach its owner CAS")
			tc.stop(t, c.nodes[dst])
			close(release)
			res := outcomeOf(t, moving)
			if tc.committed && (res.Outcome != Moved || !res.Confirmed) ||
				!tc.committed && (res.Outcome != NotMoved || res.Reason != relocation.ReasonTargetLost.String()) {
				t.Fatalf("the source reported %v (%s), confirmed %v; want committed=%v", res.Outcome, res.Reason, res.Confirmed, tc.committed)
			}
			if tc.committed {
				checkOwners(t, c, record.ObjectActor, id, dst, before.Record.AuthorityOwnerGeneration+1, dst)
				if got := strings.Join(ctl.ran(id), ","); got != "a" {
					t.Fatalf("the new owner's state: %q", got)
				}
				return
			}
			if e := waitEnd(t, ends, id); e.state != relocation.TgtFailed || e.failure != relocation.TgtFailLocationUpdate {
				t.Fatalf("the target attempt ended %s/%s, want failed/location_update_failed", e.state, e.failure)
			}
			sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
			checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
			if got := strings.Join(ctl.ran(id), ","); got != "a" {
				t.Fatalf("the recovered source's state: %q", got)
			}
		})
	}
}

// §10 with the spec's gap closed (docs/RELOCATION.md §5, "A CAS still in
// flight at the deadline"): the target's owner CAS applies but its answer
// is lost, and every read of the record fails until after the Restore
// deadline. Removing the object at the deadline, as §10 says, would leave
// the store naming a target without it. The target instead stops sending
// CAS and reads until the record decides: once the store answers, it finds
// its CAS applied and opens the object with its state; the source, whose
// reservation release finds the reservation consumed, reports Moved. One
// owner, no state lost.
func TestRelocationOwnerCASAppliedPastDeadline(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		faults := &casFaults{Store: loc}
		l := startLateCAS(t, f, faults, faults, "cas-late")
		time.Sleep(300 * time.Millisecond)
		if failed, applied := faults.counts(); failed != 1 || applied != 1 {
			t.Fatalf("%d owner CAS batches failed (%d applied; %v), want 1 (1)", failed, applied, faults.notApplied)
		}
		l.answerAndCheckMoved(t, faults)
		if _, rsv := capacityOf(t, loc); rsv != 0 {
			t.Fatalf("%d reservations left after the move", rsv)
		}
	})
}

// lateCAS is a move of a recorder Actor whose owner CAS applies with its
// answer lost and every read of the record failing (casFaults), started
// and waited past its deadline (the Restore deadline both sides hold).
type lateCAS struct {
	c      *cluster
	ctx    context.Context
	ref    ActorRef
	dst    int
	gen    record.Generation
	ends   <-chan arrivalEnd
	moving <-chan relocateOutcome
}

// startLateCAS runs the cluster on store (faults, or a wrapper of it),
// creates the recorder Actor id (it ran "a"), and moves it with a 2 s
// deadline, returning once that deadline has passed.
func startLateCAS(t *testing.T, f *fixture, store locstore.Store, faults *casFaults, id string) *lateCAS {
	t.Helper()
	c, _ := failCluster(t, f, store)
	l := &lateCAS{c: c, ctx: ctxT(t, 60*time.Second)}
	l.ref = recorder(t, l.ctx, c, id, failPreserveType, "a")
	var src int
	src, l.dst = movePair(t, c, record.ObjectActor, id)
	l.gen = rowOf(t, c, record.ObjectActor, id).Record.AuthorityOwnerGeneration
	hooks := &testHooks{}
	l.ends = watchArrivals(hooks)
	c.nodes[l.dst].obj.hooks.Store(hooks)
	t.Cleanup(func() { c.nodes[l.dst].obj.hooks.Store(nil) })
	faults.arm(t, id, 1, true)
	mctx, cancel := context.WithTimeout(l.ctx, 2*time.Second)
	t.Cleanup(cancel)
	l.moving = relocateAsync(mctx, c, src, l.dst, record.ObjectActor, id, l.ref.ObjectGeneration)
	<-mctx.Done()
	return l
}

// answerAndCheckMoved lets the store answer again: the target finds its
// CAS applied and opens the object, the source reports Moved, one owner,
// the state arrived.
func (l *lateCAS) answerAndCheckMoved(t *testing.T, faults *casFaults) {
	t.Helper()
	faults.mu.Lock()
	faults.failReads = false
	faults.mu.Unlock()
	id := l.ref.ActorID
	if e := waitEnd(t, l.ends, id); e.state != relocation.TgtOwner {
		t.Fatalf("the target attempt ended %s/%s, want owner", e.state, e.failure)
	}
	if res := outcomeOf(t, l.moving); res.Outcome != Moved {
		t.Fatalf("the source reported %v (%s); want moved", res.Outcome, res.Reason)
	}
	checkOwners(t, l.c, record.ObjectActor, id, l.dst, l.gen+1, l.dst)
	wantRan(t, l.ctx, l.c, l.ref, "a")
}

// §1.3 table "DisableRelocation cross-node move: Rejected before Capture":
// an Actor and a User Spot of a DisableRelocation type are refused with
// InvalidOperation before anything is held or written — the store is
// byte-identical, no target ran anything — and they keep serving.
func TestRelocationDisabledRefusedBeforeCapture(t *testing.T) {
	onFailStores(t, func(t *testing.T, f *fixture, loc locstore.Store) {
		c, _ := failCluster(t, f, loc)
		ctx := ctxT(t, 60*time.Second)
		aref, err := c.m(0).CreateActor(ctx, "disabled-actor", testActorType)
		if err != nil {
			t.Fatal(err)
		}
		sref, err := c.m(0).CreateUserSpot(ctx, testSpotType)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			kind    record.ObjectKind
			id      string
			gen     uint64
			request func() ([]byte, error)
		}{
			{record.ObjectActor, aref.ActorID, aref.ObjectGeneration, func() ([]byte, error) { return c.m(0).RequestActor(ctx, aref, []byte("whoami")) }},
			{record.ObjectUserSpot, sref.SpotID, sref.ObjectGeneration, func() ([]byte, error) { return c.m(0).RequestSpot(ctx, sref, []byte("whoami")) }},
		} {
			t.Run(string(tc.kind), func(t *testing.T) {
				src, dst := movePair(t, c, tc.kind, tc.id)
				gen := rowOf(t, c, tc.kind, tc.id).Record.AuthorityOwnerGeneration
				before := storeSnapshot(t, loc)
				_, rsvBefore := capacityOf(t, loc)
				o := outcomeOfErr(t, relocateAsync(ctx, c, src, dst, tc.kind, tc.id, tc.gen))
				wantIs(t, o.err, ErrInvalidOperation)
				if o.res.Outcome != 0 {
					t.Fatalf("a refused move reported %v", o.res.Outcome)
				}
				sameSnapshot(t, "a DisableRelocation move", before, storeSnapshot(t, loc))
				if _, rsv := capacityOf(t, loc); rsv != rsvBefore {
					t.Fatalf("reservations %d -> %d", rsvBefore, rsv)
				}
				if n := c.probe.runCount(tc.id); n != 1 {
					t.Fatalf("the factory ran %d times, want the creation's one", n)
				}
				checkOwners(t, c, tc.kind, tc.id, src, gen, src)
				if got, err := tc.request(); err != nil || string(got) != tc.id {
					t.Fatalf("after the refusal: %q, %v", got, err)
				}
			})
		}
	})
}

// outcomeOfErr is outcomeOf for a move expected to be refused.
func outcomeOfErr(t *testing.T, ch <-chan relocateOutcome) relocateOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(60 * time.Second):
		t.Fatal("RelocateActor did not return")
	}
	return relocateOutcome{}
}

// §7.2 "Destroy/Close ... ErrMoving when the object is moving", in each
// window of a move: the source holding the object while the target
// restores; the source relaying its hold before the cutover (the target
// held before its owner CAS, so that the source still owns the record);
// and the target after its owner CAS but before it opened dispatch (the
// record names it, its instance is still hidden). Destroy (Actor) and
// Close (User Spot) from the client and from the source node answer
// ErrMoving and change nothing; once the move finished, the object serves
// on the target and ends normally.
func TestRelocationEndRefusedWhileMoving(t *testing.T) {
	f := newFixture(t)
	c, ctl := failCluster(t, f, f.loc)
	type window struct {
		name string
		// hold starts holding the move of id src→dst in the window and
		// returns a channel closed once it is there, and the release.
		hold func(id string, src, dst int) (<-chan struct{}, func())
	}
	stepHold := func(node int, id string, steps ...string) (<-chan struct{}, func()) {
		reached, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		c.nodes[node].obj.hooks.Store(&testHooks{relocationStep: func(oid, step string) {
			if oid != id {
				return
			}
			for i, s := range steps {
				if s == step {
					if i == 0 {
						once.Do(func() { close(reached) })
					}
					<-release
				}
			}
		}})
		return reached, func() { close(release) }
	}
	windows := []window{
		{"source holding, target restoring", func(id string, _, _ int) (<-chan struct{}, func()) {
			b := ctl.block(id, nil)
			return b.started, func() { close(b.release) }
		}},
		{"source relaying, cutover not sent", func(id string, src, dst int) (<-chan struct{}, func()) {
			_, releaseTarget := stepHold(dst, id, stepTargetCAS)
			reached, releaseSource := stepHold(src, id, stepSourceCutover)
			return reached, func() { releaseSource(); releaseTarget() }
		}},
		{"target committed, dispatch not open", func(id string, _, dst int) (<-chan struct{}, func()) {
			return stepHold(dst, id, stepTargetOpen)
		}},
	}
	for wi, w := range windows {
		for _, kind := range []record.ObjectKind{record.ObjectActor, record.ObjectUserSpot} {
			t.Run(w.name+"/"+string(kind), func(t *testing.T) {
				ctx := ctxT(t, 60*time.Second)
				var id string
				var gen uint64
				var end func(m *Manager) (bool, error)
				var request func() ([]byte, error)
				if kind == record.ObjectActor {
					ref, err := c.m(0).CreateActor(ctx, fmt.Sprintf("moving-%d", wi), failPreserveType)
					if err != nil {
						t.Fatal(err)
					}
					id, gen = ref.ActorID, ref.ObjectGeneration
					end = func(m *Manager) (bool, error) { return m.Destroy(ctx, ref) }
					request = func() ([]byte, error) { return c.m(0).RequestActor(ctx, ref, []byte("list")) }
				} else {
					ref, err := c.m(0).CreateUserSpot(ctx, failSpotType)
					if err != nil {
						t.Fatal(err)
					}
					id, gen = ref.SpotID, ref.ObjectGeneration
					end = func(m *Manager) (bool, error) { return m.Close(ctx, ref) }
					request = func() ([]byte, error) { return c.m(0).RequestSpot(ctx, ref, []byte("list")) }
				}
				src, dst := movePair(t, c, kind, id)
				defer c.nodes[src].obj.hooks.Store(nil)
				defer c.nodes[dst].obj.hooks.Store(nil)
				held, release := w.hold(id, src, dst)
				moving := relocateAsync(ctx, c, src, dst, kind, id, gen)
				waitClosed(t, held, "the move to reach the window")
				before := storeSnapshot(t, f.loc)
				for _, caller := range []int{0, src} {
					closed, err := end(c.m(caller))
					if !errors.Is(err, ErrMoving) || closed {
						release()
						t.Fatalf("end from node %d during the move: %v, %v; want ErrMoving", caller, closed, err)
					}
				}
				sameSnapshot(t, "a refused end", before, storeSnapshot(t, f.loc))
				release()
				if res := outcomeOf(t, moving); res.Outcome != Moved {
					t.Fatalf("the move ended %v (%s)", res.Outcome, res.Reason)
				}
				checkOwners(t, c, kind, id, dst, rowOf(t, c, kind, id).Record.AuthorityOwnerGeneration, dst)
				if _, err := request(); err != nil {
					t.Fatalf("after the move: %v", err)
				}
				if closed, err := end(c.m(0)); err != nil || !closed {
					t.Fatalf("end after the move: %v, %v", closed, err)
				}
				if rowOf(t, c, kind, id).Found {
					t.Fatal("record left after the end")
				}
			})
		}
	}
}

// §9.4 "Cleans up secured target space and the target's in-progress
// chunk-assembly staging", §9.2 "the failed instance is discarded": the
// caller cancels a move while the target's snapshot Restore is still
// running. The move is NotMoved (cancelled), the source serves on, and
// the target, whose attempt was cancelled, leaves nothing behind when the
// Restore returns afterwards: no hidden instance, no staging. The object
// can later move there.
func TestRelocationCancelledWhileTargetRestores(t *testing.T) {
	f := newFixture(t)
	c, ctl := failCluster(t, f, f.loc)
	ctx := ctxT(t, 60*time.Second)
	const id = "cancel-restoring"
	ref := recorder(t, ctx, c, id, failPreserveType, "a")
	src, dst := movePair(t, c, record.ObjectActor, id)
	before := rowOf(t, c, record.ObjectActor, id)
	capBefore, rsvBefore := capacityOf(t, f.loc)
	built := make(chan struct{}, 4)
	hooks := &testHooks{relocationStep: func(oid, step string) {
		if oid == id && step == stepTargetBuilt {
			built <- struct{}{}
		}
	}}
	ends := watchArrivals(hooks)
	c.nodes[dst].obj.hooks.Store(hooks)
	b := ctl.block(id, nil)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	moving := relocateAsync(mctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, b.started, "the target's Restore to start")
	cancel()
	res := outcomeOf(t, moving)
	if res.Outcome != NotMoved || res.Reason != relocation.ReasonCancelled.String() {
		t.Fatalf("outcome %v (%s), want notMoved (cancelled)", res.Outcome, res.Reason)
	}
	if e := waitEnd(t, ends, id); e.state != relocation.TgtCancelled {
		t.Fatalf("the target attempt ended %s/%s, want cancelled", e.state, e.failure)
	}
	close(b.release) // the Restore returns after its attempt ended
	select {
	case <-built:
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled attempt's build did not return")
	}
	if _, ok := c.nodes[dst].obj.rt.Get(actorKey(id)); ok {
		t.Fatal("the cancelled attempt left a hidden instance on the target")
	}
	if st := c.nodes[dst].obj.chunks.Stats(); st.Open != 0 {
		t.Fatalf("%d assemblies left open on the target", st.Open)
	}
	sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
	if capAfter, rsv := capacityOf(t, f.loc); fmt.Sprint(capAfter) != fmt.Sprint(capBefore) || rsv != rsvBefore {
		t.Fatalf("capacity %v (%d reservations) -> %v (%d)", capBefore, rsvBefore, capAfter, rsv)
	}
	checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
	wantRan(t, ctx, c, ref, "a")
	moveAndSettle(t, ctx, c, src, dst, ref)
	checkOwners(t, c, record.ObjectActor, id, dst, before.Record.AuthorityOwnerGeneration+1, dst)
	wantRan(t, ctx, c, ref, "a")
}

// Messages a move took into its ingress hold whose relay failed midway
// (the link to the target broke after relay-ready) follow the object: the
// target commits on the relayed part (the cutover's count), and the source
// passes the rest on once the store names the new owner. They were
// dropped: the sender had been told they were accepted, and the new owner
// never ran them (found by a review of the relocation error paths).
func TestRelayFailureMidwayLosesNoHeldMessage(t *testing.T) {
	c := newCluster(t, 3, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	const id = "relay-midway"
	ref, err := c.m(0).CreateActor(ctx, id, testMoverType)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, id)
	built, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.nodes[dst].obj.hooks.Store(&testHooks{relocationStep: func(got, step string) {
		if got == id && step == stepTargetBuilt {
			once.Do(func() { close(built) })
			<-release // relay-ready waits: the sends below go into the source's hold
		}
	}})
	c.nodes[src].obj.hooks.Store(&testHooks{relaySend: func(got string, index int) error {
		if got == id && index >= 1 {
			return fmt.Errorf("%w: link broke (test)", transport.ErrPeerDown)
		}
		return nil
	}})
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration)
	waitClosed(t, built, "the target's hidden instance")
	const held = 5
	for i := 0; i < held; i++ {
		if err := c.m(0).SendActor(ctx, ref, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	out := <-moving
	if out.err != nil || out.res.Outcome != Moved {
		t.Fatalf("move = %v %q, %v; want Moved", out.res.Outcome, out.res.Reason, out.err)
	}
	var got []byte
	waitUntil(t, "every held message to be counted by the new owner", func() bool {
		got, err = c.m(0).RequestActor(ctx, ref, []byte("count"))
		return err == nil && string(got) == fmt.Sprintf("count:%d", held)
	})
}
