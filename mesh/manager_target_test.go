package mesh

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// The target side of remote creation and close (§7, §7.2, §12 Creation):
// commands 47/48/49 are handed to the target's transport handler directly,
// as the transport would after admitting the sending peer, so that every
// command 20 a delivery is answered with can be counted.

// inbox collects the command 20 records one delivery is answered with.
type inbox struct {
	mu    sync.Mutex
	recs  []*router.Record
	first chan *router.Record
}

func (b *inbox) reply(r *router.Record) error {
	b.mu.Lock()
	b.recs = append(b.recs, r)
	n := len(b.recs)
	b.mu.Unlock()
	if n == 1 {
		b.first <- r
	}
	return nil
}

func (b *inbox) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.recs)
}

// answer waits for the delivery's first command 20.
func (b *inbox) answer(t *testing.T) *router.Record {
	t.Helper()
	select {
	case r := <-b.first:
		b.first <- r // keep it for a later look
		if _, ok := r.Body.(*router.Reply); !ok {
			t.Fatalf("answered with %s, not a command 20", r.Command)
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no command 20")
	}
	return nil
}

func peerInfo(n *Node) transport.PeerInfo {
	return transport.PeerInfo{RID: transport.RID(n.run.rid), MeshName: n.cfg.Node.MeshName,
		LifecycleGeneration: n.run.lifecycleGeneration}
}

// deliver hands body to node to's transport handler as sent by from.
func deliver(to, from *Node, body router.Body) *inbox {
	b := &inbox{first: make(chan *router.Record, 1)}
	to.obj.handleRecord(context.Background(), peerInfo(from), router.NewRecord(body, nil, nil), b.reply)
	return b
}

// closeAndCountAnswers closes n — Close waits for every order in flight
// (§11) — and then checks that each delivery got exactly one command 20.
func closeAndCountAnswers(t *testing.T, n *Node, boxes map[string]*inbox) {
	t.Helper()
	closeAndCountAnswersAfter(t, n, boxes, false)
}

// closeAndCountAnswersAfter is closeAndCountAnswers; with leaseLapsed
// Close may also report the shutdown steps its lapsed lease skipped
// (ShutdownIncompleteError with LeaseEnded): whether the gate reopened
// before Close depends on when the next renew ran.
func closeAndCountAnswersAfter(t *testing.T, n *Node, boxes map[string]*inbox, leaseLapsed bool) {
	t.Helper()
	if err := n.Close(ctxT(t, 20*time.Second)); err != nil {
		var inc *ShutdownIncompleteError
		if !leaseLapsed || !errors.As(err, &inc) || inc.LeaseEnded == nil {
			t.Fatalf("Close: %v", err)
		}
	}
	for name, b := range boxes {
		if got := b.count(); got != 1 {
			t.Errorf("%s: %d command 20 answers, want exactly 1", name, got)
		}
	}
}

// storeSnapshot is every authority, capacity, final-result and
// creation-request record of s (key → version and value): what a refused
// order must leave untouched.
func storeSnapshot(t *testing.T, s locstore.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, it := range scanKinds(t, s, record.KindAuthority, authority.KindCapacity, authority.KindCreationTerminal, KindCreationRequest) {
		out[it.Key] = it.Version + "\x00" + string(it.Value)
	}
	return out
}

// scanKinds is every record of the kinds in s.
func scanKinds(t *testing.T, s locstore.Store, kinds ...record.Kind) []locstore.Item {
	t.Helper()
	var out []locstore.Item
	for _, kind := range kinds {
		req := locstore.ScanRequest{Prefix: record.KindPrefix(kind), Limit: 1000}
		for {
			page, err := s.Scan(context.Background(), req)
			if err != nil || page.Expired {
				t.Fatalf("scan %s: %v (expired %v)", kind, err, page.Expired)
			}
			out = append(out, page.Items...)
			if page.Next == "" {
				break
			}
			req.Cursor = page.Next
		}
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed the store: %q", what, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s added %q to the store", what, k)
		}
	}
}

// reservedOrder does what the source (node 0 of c) does before it sends
// 47/49 (§7; docs/OBJECTS.md §3 steps 4–5): it stores the creation request
// and reserves id on the one serving node, node 1. It returns the order the
// source would send.
func reservedOrder(t *testing.T, c *cluster, kind record.ObjectKind, id, stableType, body string) createOrder {
	t.Helper()
	ctx := ctxT(t, 10*time.Second)
	src, tgt := c.nodes[0], c.nodes[1]
	o := src.obj
	_, storeNow, err := o.readAuthorityAt(ctx, kind, id)
	if err != nil {
		t.Fatal(err)
	}
	call := &createCall{mode: modeCreate, kind: kind, id: id, callerID: id, stableType: stableType, mesh: "objects",
		body: []byte(body), deadline: time.Now().Add(time.Minute), storeDeadline: storeNow.Add(time.Minute)}
	call.op = authority.OperationRef{SourceRoutingID: src.run.rid, SourceRunGeneration: src.run.lifecycleGeneration,
		OperationID: NewOperationID()}
	call.content = encodeCreationRequest(modeCreate, kind, id, stableType, call.body)
	call.sha = sha256.Sum256(call.content)
	call.contentKey = creationRequestKey(call.op)
	retention, err := contentRetention(call)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := o.place(ctx, placeRequest{kind: kind, stableType: stableType, mesh: "objects"})
	if err != nil || c.indexOf(cand.node.RoutingID) != 1 {
		t.Fatalf("place: %v, %v", cand.node, err)
	}
	rsv := "rsv-" + id
	res, err := o.exec.Reserve(ctx, authority.ReserveRequest{
		Object: authority.Object{ID: id, Kind: kind, StableType: stableType},
		Target: authority.Target{Node: cand.node, Owner: cand.owner, Limits: cand.limits},
		Creation: record.PendingCreation{ReservationID: rsv, RequestContentReference: call.contentKey,
			RequestSHA256: call.sha, RequestEncodedSize: len(call.content)},
		Content: &authority.CreationContent{Value: call.content, Retention: retention},
	})
	if err != nil {
		t.Fatal(err)
	}
	return createOrder{kind: kind, id: id, stableType: stableType, op: call.op, reservationID: rsv, version: res.Version,
		objGen: uint64(res.Plan.Record.ObjectGeneration), ownerGen: uint64(res.Plan.Record.AuthorityOwnerGeneration),
		deadline: call.storeDeadline, sourceRID: src.run.rid, sourceGen: src.run.lifecycleGeneration,
		targetRID: tgt.run.rid, targetGen: tgt.run.lifecycleGeneration, targetOwner: cand.owner,
		delta: bundleSlots(kind, stableType), meshName: "objects"}
}

// createBody is the command 47/49 carrying ord (createOrderFromWire's
// inverse).
func createBody(ord createOrder, corr uint64) router.Body {
	fence := router.ObjectReservationFence{ReservationID: ord.reservationID, ExpectedStoreVersion: ord.version,
		ObjectGeneration: ord.objGen, AuthorityOwnerGeneration: ord.ownerGen, TargetNodeRID: ord.targetRID,
		TargetNodeGeneration: ord.targetGen, TargetOwnerID: ord.targetOwner.ID,
		TargetOwnerLeaseGeneration: ord.targetOwner.LeaseGeneration, PendingCapacityDelta: ord.delta}
	op, dl := opIDOf(ord.op.OperationID), uint64(ord.deadline.UnixMilli())
	if ord.kind == record.ObjectActor {
		return &router.ActorCreate{Correlation: corr, Operation: op, SourceNodeRID: ord.sourceRID,
			SourceNodeGeneration: ord.sourceGen, ActorID: ord.id, StableType: ord.stableType, Reservation: fence, DeadlineUnixMs: dl}
	}
	return &router.UserSpotCreate{Correlation: corr, Operation: op, SourceNodeRID: ord.sourceRID,
		SourceNodeGeneration: ord.sourceGen, SpotID: ord.id, StableType: ord.stableType, Reservation: fence, DeadlineUnixMs: dl}
}

func wantFailure(t *testing.T, what string, r *router.Record, res router.TerminalResult, code router.FrameworkErrorCode) {
	t.Helper()
	rep := r.Body.(*router.Reply)
	if rep.Result != res || rep.FailureCode != code {
		t.Errorf("%s: answered %s/%s, want %s/%s", what, rep.Result, rep.FailureCode, res, code)
	}
}

// createTail reads the result and ObjectGeneration out of a 47/49 answer.
func createTail(t *testing.T, r *router.Record, kind router.MeshOperationKind) (router.CreateResult, uint64) {
	t.Helper()
	rep := r.Body.(*router.Reply)
	if rep.Result != router.ResultOK {
		t.Fatalf("creation answered %s/%s", rep.Result, rep.FailureCode)
	}
	if err := r.ResolveReplyTail(kind); err != nil {
		t.Fatal(err)
	}
	switch tl := rep.Tail.(type) {
	case *router.ActorCreateTail:
		if tl.Actor == nil {
			return tl.Result, 0
		}
		return tl.Result, tl.Actor.ObjectGeneration
	case *router.UserSpotCreateTail:
		return tl.Result, tl.Spot.ObjectGeneration
	}
	t.Fatalf("creation answer tail %T", rep.Tail)
	return 0, 0
}

func opKindOf(kind record.ObjectKind) router.MeshOperationKind {
	if kind == record.ObjectActor {
		return router.OpActorCreate
	}
	return router.OpUserSpotCreate
}

// §12 Creation: "Commands 47/48 verify source and target run generation,
// OperationId, the creation record, StoreVersion, and object generation,
// and command 20's result is returned exactly once." Each fixed field of a
// 49 (Actor) and a 47 (User Spot) is made wrong in turn: the order is
// refused with its typed failure on exactly one command 20, the factory
// does not run and the store does not change. Each wrong order is a
// request of its own (a fresh OperationId, except where the OperationId is
// the wrong field); the expected failure pins the check that refused it.
// The unchanged order is then still accepted (the refusals left the
// reservation as it was).
func TestCreateOrderFenceMismatchRefused(t *testing.T) { onBothStores(t, runCreateOrderFences) }

// clientRole0 makes node 0 a client: it creates and closes, node 1 hosts.
func clientRole0(i int, cfg *config.Config) {
	if i == 0 {
		cfg.Node.ObjectRole = config.RoleClient
	}
}

// onBothStores runs fn on a client and a server node sharing the memory
// Location Store, then sharing a real Redis one.
func onBothStores(t *testing.T, fn func(*testing.T, *cluster)) {
	t.Run("memory", func(t *testing.T) { fn(t, clientAndServer(t)) })
	t.Run("redis", func(t *testing.T) {
		fn(t, newClusterOn(t, newFixture(t), newRedisLocation(t), 2, clientRole0))
	})
}

func runCreateOrderFences(t *testing.T, c *cluster) {
	src, tgt := c.nodes[0], c.nodes[1]
	const (
		stale     = router.ResultConflict
		routeGone = router.ResultInvalidState
		invalid   = router.ResultInvalidArgument
	)
	tests := []struct {
		name string
		edit func(*createOrder)
		res  router.TerminalResult
		// actor, spot failure codes
		actorCode, spotCode router.FrameworkErrorCode
	}{
		{"source RID", func(o *createOrder) { o.sourceRID = tgt.run.rid }, routeGone, router.FailNone, router.FailNone},
		{"source run generation", func(o *createOrder) { o.sourceGen++ }, routeGone, router.FailNone, router.FailNone},
		{"target RID", func(o *createOrder) { o.targetRID = src.run.rid }, routeGone, router.FailNone, router.FailNone},
		{"target run generation", func(o *createOrder) { o.targetGen++ }, routeGone, router.FailNone, router.FailNone},
		{"target owner id", func(o *createOrder) { o.targetOwner.ID = src.run.ownerID }, routeGone, router.FailNone, router.FailNone},
		{"target owner lease generation", func(o *createOrder) { o.targetOwner.LeaseGeneration++ }, routeGone, router.FailNone, router.FailNone},
		{"OperationId", func(o *createOrder) { o.op.OperationID[15] ^= 1 }, invalid, router.FailNone, router.FailNone},
		{"object generation", func(o *createOrder) { o.objGen++ }, stale, router.FailActorLocationStale, router.FailSpotGenerationStale},
		{"AuthorityOwnerGeneration", func(o *createOrder) { o.ownerGen++ }, stale, router.FailActorLocationStale, router.FailSpotGenerationStale},
		{"StoreVersion", func(o *createOrder) { o.version += "0" }, stale, router.FailActorLocationStale, router.FailSpotGenerationStale},
		{"reservation id", func(o *createOrder) { o.reservationID += "x" }, stale, router.FailActorLocationStale, router.FailSpotGenerationStale},
		{"pendingCapacityDelta", func(o *createOrder) { o.delta++ }, invalid, router.FailNone, router.FailNone},
		{"stable type", func(o *createOrder) { o.stableType = "test.unknown" }, stale, router.FailActorTypeMismatch, router.FailSpotTypeMismatch},
		{"object id", func(o *createOrder) { o.id += "-other" }, stale, router.FailActorLocationStale, router.FailSpotGenerationStale},
	}
	boxes := map[string]*inbox{}
	for _, kind := range []record.ObjectKind{record.ObjectActor, record.ObjectUserSpot} {
		typ, id := testActorType, "fenced-actor"
		if kind == record.ObjectUserSpot {
			typ, id = testSpotType, "fenced-spot"
		}
		good := reservedOrder(t, c, kind, id, typ, "")
		before := storeSnapshot(t, src.loc)
		cases := tests
		if kind == record.ObjectActor {
			// The same fences on the other command: a 47 naming an Actor's
			// reservation finds no User Spot record of that id.
			cases = append(cases, struct {
				name                string
				edit                func(*createOrder)
				res                 router.TerminalResult
				actorCode, spotCode router.FrameworkErrorCode
			}{"command (47 for an Actor)", func(o *createOrder) { o.kind, o.stableType, o.delta = record.ObjectUserSpot, testSpotType, 2 },
				stale, router.FailSpotGenerationStale, router.FailSpotGenerationStale})
		}
		for i, tc := range cases {
			ord := good
			ord.sourceRID, ord.targetRID = append([]byte(nil), ord.sourceRID...), append([]byte(nil), ord.targetRID...)
			// Each its own request: under the good order's OperationId
			// it would be refused as another order reusing it.
			ord.op.OperationID = NewOperationID()
			if tc.name == "OperationId" {
				ord.op.OperationID = good.op.OperationID
			}
			tc.edit(&ord)
			name := string(kind) + ": " + tc.name
			b := deliver(tgt, src, createBody(ord, uint64(100+i)))
			boxes[name] = b
			code := tc.actorCode
			if kind == record.ObjectUserSpot {
				code = tc.spotCode
			}
			wantFailure(t, name, b.answer(t), tc.res, code)
			if n := c.probe.runCount(id); n != 0 {
				t.Fatalf("%s: the factory ran %d times", name, n)
			}
		}
		sameSnapshot(t, string(kind)+" refused orders", before, storeSnapshot(t, src.loc))
		b := deliver(tgt, src, createBody(good, 99))
		boxes[string(kind)+": unchanged order"] = b
		if res, gen := createTail(t, b.answer(t), opKindOf(kind)); res != router.CreateCreated || gen != good.objGen {
			t.Fatalf("%s: unchanged order answered %v generation %d, want Created %d", kind, res, gen, good.objGen)
		}
		if n := c.probe.runCount(id); n != 1 {
			t.Fatalf("%s: the factory ran %d times, want 1", kind, n)
		}
	}
	closeAndCountAnswers(t, tgt, boxes)
}

// §12 "command 20's result is returned exactly once", for one request
// delivered twice (docs/OBJECTS.md §3 "Duplicate deliveries"): the factory
// runs once; a copy that arrives while the first is still running waits
// for it, one that arrives after it is answered from the target's memory;
// each delivery gets exactly one command 20 and all carry the same result.
// A different order under the same OperationId is refused and changes
// nothing.
func TestCreateOrderDuplicateDelivery(t *testing.T) { onBothStores(t, runCreateOrderDuplicate) }

func runCreateOrderDuplicate(t *testing.T, c *cluster) {
	src, tgt := c.nodes[0], c.nodes[1]
	boxes := map[string]*inbox{}
	for _, tc := range []struct {
		kind record.ObjectKind
		typ  string
		body string
		want router.CreateResult
	}{
		{record.ObjectActor, testActorType, "wait:dup-actor", router.CreateCreated},
		{record.ObjectUserSpot, testSpotType, "wait:dup-spot", router.CreateCreated},
		{record.ObjectActor, testActorType, "decline:no", router.CreateRejected},
	} {
		id := "dup-" + string(tc.kind) + "-" + tc.body[:4]
		ord := reservedOrder(t, c, tc.kind, id, tc.typ, tc.body)
		rec := createBody(ord, 7) // the very same record, delivered again
		first := deliver(tgt, src, rec)
		if tc.body[:5] == "wait:" {
			eventually(t, 10*time.Second, "the factory to start", func() bool { return c.probe.runCount(id) == 1 })
		}
		while := deliver(tgt, src, rec)
		if tc.body[:5] == "wait:" {
			close(c.probe.gate(tc.body[5:]))
		}
		after := []*router.Record{first.answer(t), while.answer(t)}
		later := deliver(tgt, src, rec)
		after = append(after, later.answer(t))
		for i, r := range after {
			res, gen := createTail(t, r, opKindOf(tc.kind))
			if res != tc.want || (res != router.CreateRejected && gen != ord.objGen) {
				t.Fatalf("%s delivery %d answered %v generation %d, want %v %d", id, i, res, gen, tc.want, ord.objGen)
			}
		}
		if n := c.probe.runCount(id); n != 1 {
			t.Fatalf("%s: the factory ran %d times for one request delivered three times", id, n)
		}
		// Another order under the same OperationId (another reservation).
		before := storeSnapshot(t, src.loc)
		other := ord
		other.reservationID += "-other"
		reuse := deliver(tgt, src, createBody(other, 8))
		wantFailure(t, id+" reused OperationId", reuse.answer(t), router.ResultInvalidArgument, router.FailNone)
		sameSnapshot(t, id+" reused OperationId", before, storeSnapshot(t, src.loc))
		for name, b := range map[string]*inbox{"first": first, "while running": while, "after": later, "reused": reuse} {
			boxes[id+" "+name] = b
		}
	}
	closeAndCountAnswers(t, tgt, boxes)
}

// leaseBlocker refuses every write to one owner-lease key while set: that
// host run's renewals fail and its admission deadline passes (§5), while
// every other write goes through.
type leaseBlocker struct {
	locstore.Store
	key atomic.Pointer[string]
}

var errRenewBlocked = &locstore.ProviderError{Provider: "test", Op: "write", Err: errors.New("lease renewal blocked")}

func (s *leaseBlocker) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	if k := s.key.Load(); k != nil {
		for _, m := range req.Mutations {
			if m.Key == *k {
				return locstore.WriteResult{}, errRenewBlocked
			}
		}
	}
	return s.Store.Write(ctx, req)
}

// §5 "no new Store change is made with expired owner eligibility": a
// target whose admission deadline passes after it accepted a creation
// order, and which then fails before the factory, does not return the
// reservation itself (the Abort is a store change of this owner); the
// reservation stays as it was and the failure is answered once.
func TestCreateAbortNotWrittenAfterLeaseLapse(t *testing.T) {
	t.Run("memory", func(t *testing.T) { f := newFixture(t); runAbortAfterLeaseLapse(t, f, f.loc) })
	t.Run("redis", func(t *testing.T) { runAbortAfterLeaseLapse(t, newFixture(t), newRedisLocation(t)) })
}

func runAbortAfterLeaseLapse(t *testing.T, f *fixture, loc locstore.Store) {
	blocker := &leaseBlocker{Store: loc}
	c := newClusterOn(t, f, blocker, 2, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		// A fencing margin wide enough that the owner-lease record is still
		// live in the store for a while after the gate closed: an Abort
		// made in that window would be applied by the store.
		cfg.Lease.TTL = 6 * time.Second
		cfg.Lease.FencingMargin = 3 * time.Second
	})
	src, tgt := c.nodes[0], c.nodes[1]
	ord := reservedOrder(t, c, record.ObjectActor, "lapsed", testActorType, "")
	before := storeSnapshot(t, loc)
	leaseKey, err := record.OwnerLeaseKey(tgt.run.ownerID)
	if err != nil {
		t.Fatal(err)
	}
	tgt.obj.hooks.Store(&testHooks{beforeFactory: func(string) error {
		// The order passed the gate; now the lease lapses before the
		// factory, and the order fails (a framework failure before the
		// callback, which returns the reservation when it still may).
		gate := tgt.lease.Gate()
		closing := gate.Closing()
		blocker.key.Store(&leaseKey)
		select {
		case <-closing:
		case <-time.After(20 * time.Second):
			return errors.New("the admission deadline did not pass")
		}
		if gate.Admit() == nil {
			return errors.New("gate still open")
		}
		return errors.New("failure before the factory")
	}})
	b := deliver(tgt, src, createBody(ord, 5))
	rep := b.answer(t).Body.(*router.Reply)
	if rep.Result == router.ResultOK {
		t.Fatalf("answered ok after a framework failure")
	}
	if n := c.probe.runCount("lapsed"); n != 0 {
		t.Fatalf("the factory ran %d times", n)
	}
	sameSnapshot(t, "a target without owner eligibility", before, storeSnapshot(t, loc))
	if row := rowOf(t, c, record.ObjectActor, "lapsed"); !row.Found || row.Record.Allocation.State != record.AllocationReserved {
		t.Fatalf("reservation not left as it was: %+v", row)
	}
	blocker.key.Store(nil)
	closeAndCountAnswersAfter(t, tgt, map[string]*inbox{"order": b}, true)
}

// spotOnTarget creates a User Spot on node 1 from node 0 and returns its
// ref and the record's fence values.
func spotOnTarget(t *testing.T, c *cluster) (SpotRef, authority.AuthorityRow) {
	t.Helper()
	ref, err := c.m(0).CreateUserSpot(ctxT(t, 20*time.Second), testSpotType)
	if err != nil {
		t.Fatal(err)
	}
	return ref, rowOf(t, c, record.ObjectUserSpot, ref.SpotID)
}

// closeBody is the command 48 node 0 of c sends to close ref on node 1
// under the record row.
func closeBody(c *cluster, ref SpotRef, row authority.AuthorityRow, corr uint64, deadline time.Time) *router.UserSpotClose {
	src, tgt := c.nodes[0], c.nodes[1]
	return &router.UserSpotClose{Correlation: corr, Operation: opIDOf(NewOperationID()), SourceNodeRID: src.run.rid,
		SourceNodeGeneration: src.run.lifecycleGeneration,
		Target: router.UserSpotCloseFence{Spot: router.SpotRef{SpotID: ref.SpotID, ObjectGeneration: ref.ObjectGeneration},
			TargetNodeRID: tgt.run.rid, TargetNodeGeneration: tgt.run.lifecycleGeneration,
			ExpectedAuthorityOwnerGeneration: uint64(row.Record.AuthorityOwnerGeneration), ExpectedStoreVersion: row.Version},
		DeadlineUnixMs: uint64(deadline.UnixMilli())}
}

func closeAnswer(t *testing.T, r *router.Record) bool {
	t.Helper()
	rep := r.Body.(*router.Reply)
	if rep.Result != router.ResultOK {
		t.Fatalf("close answered %s/%s", rep.Result, rep.FailureCode)
	}
	if err := r.ResolveReplyTail(router.OpUserSpotClose); err != nil {
		t.Fatal(err)
	}
	return rep.Tail.(*router.UserSpotCloseTail).Closed
}

// §7.2 command 48 "fixes the source's and target's host run generation,
// operation ID, SpotRef, AuthorityOwnerGeneration, StoreVersion, and
// deadline": each made wrong in turn is refused with its typed failure on
// exactly one command 20 — an expired deadline as timedOut — the store does
// not change and the Spot stays open; the unchanged order then closes it.
func TestCloseOrderFenceMismatchRefused(t *testing.T) { onBothStores(t, runCloseOrderFences) }

func runCloseOrderFences(t *testing.T, c *cluster) {
	src, tgt := c.nodes[0], c.nodes[1]
	ref, row := spotOnTarget(t, c)
	soon := time.Now().Add(20 * time.Second)
	tests := []struct {
		name string
		edit func(*router.UserSpotClose)
		res  router.TerminalResult
		code router.FrameworkErrorCode
	}{
		{"source RID", func(b *router.UserSpotClose) { b.SourceNodeRID = tgt.run.rid }, router.ResultInvalidState, router.FailNone},
		{"source run generation", func(b *router.UserSpotClose) { b.SourceNodeGeneration++ }, router.ResultInvalidState, router.FailNone},
		{"target RID", func(b *router.UserSpotClose) { b.Target.TargetNodeRID = src.run.rid }, router.ResultInvalidState, router.FailNone},
		{"target run generation", func(b *router.UserSpotClose) { b.Target.TargetNodeGeneration++ }, router.ResultInvalidState, router.FailNone},
		{"object generation", func(b *router.UserSpotClose) { b.Target.Spot.ObjectGeneration++ }, router.ResultConflict, router.FailSpotGenerationStale},
		{"AuthorityOwnerGeneration", func(b *router.UserSpotClose) { b.Target.ExpectedAuthorityOwnerGeneration++ }, router.ResultInvalidState, router.FailNone},
		{"StoreVersion", func(b *router.UserSpotClose) { b.Target.ExpectedStoreVersion += "0" }, router.ResultInvalidState, router.FailNone},
		{"deadline passed", func(b *router.UserSpotClose) { b.DeadlineUnixMs = uint64(time.Now().Add(-time.Second).UnixMilli()) }, router.ResultTimedOut, router.FailNone},
		{"OperationId zero", func(b *router.UserSpotClose) { b.Operation = router.OperationID{} }, router.ResultInvalidArgument, router.FailNone},
	}
	before := storeSnapshot(t, src.loc)
	boxes := map[string]*inbox{}
	key := spot.Key{Spot: true, ID: ref.SpotID}
	for i, tc := range tests {
		body := closeBody(c, ref, row, uint64(10+i), soon)
		tc.edit(body)
		b := deliver(tgt, src, body)
		boxes[tc.name] = b
		wantFailure(t, tc.name, b.answer(t), tc.res, tc.code)
		if state, ok := tgt.obj.stateOf(key); !ok || state == hostClosing {
			t.Fatalf("%s: the Spot was closed or left closing", tc.name)
		}
	}
	sameSnapshot(t, "refused closes", before, storeSnapshot(t, src.loc))
	// A SpotRef naming no record: §7.2 false, nothing changed.
	missing := closeBody(c, SpotRef{SpotID: "no-such-spot", ObjectGeneration: ref.ObjectGeneration}, row, 30, soon)
	b := deliver(tgt, src, missing)
	boxes["missing"] = b
	if closeAnswer(t, b.answer(t)) {
		t.Fatal("closing a missing Spot answered true")
	}
	sameSnapshot(t, "close of a missing Spot", before, storeSnapshot(t, src.loc))
	b = deliver(tgt, src, closeBody(c, ref, row, 31, soon))
	boxes["unchanged order"] = b
	if !closeAnswer(t, b.answer(t)) {
		t.Fatal("the unchanged order did not close the Spot")
	}
	if rowOf(t, c, record.ObjectUserSpot, ref.SpotID).Found {
		t.Fatal("record left after the close")
	}
	closeAndCountAnswers(t, tgt, boxes)
}

// §7.2 "Command 20 returns the closed result exactly once", for one 48
// delivered three times (docs/OBJECTS.md §7): a copy that arrives while the
// close is still running (the Spot's turn is busy) waits for it, one that
// arrives later is answered from the target's memory; every delivery gets
// exactly one command 20 saying closed, and the Spot is closed once. A
// different 48 under the same OperationId is refused.
func TestCloseOrderDuplicateDelivery(t *testing.T) { onBothStores(t, runCloseOrderDuplicate) }

func runCloseOrderDuplicate(t *testing.T, c *cluster) {
	src, tgt := c.nodes[0], c.nodes[1]
	ctx := ctxT(t, 20*time.Second)
	ref, row := spotOnTarget(t, c)
	delivered := tgt.ObjectStats().Delivered
	busy := make(chan error, 1)
	go func() { _, err := c.m(0).RequestSpot(ctx, ref, []byte("block:dup-close")); busy <- err }()
	eventually(t, 5*time.Second, "the busy turn to start", func() bool { return tgt.ObjectStats().Delivered > delivered })
	rec := closeBody(c, ref, row, 3, time.Now().Add(20*time.Second))
	first := deliver(tgt, src, rec)
	// The first close deleted the record and now waits for the busy turn.
	eventually(t, 5*time.Second, "the record to go", func() bool { return !rowOf(t, c, record.ObjectUserSpot, ref.SpotID).Found })
	while := deliver(tgt, src, rec)
	close(c.probe.gate("dup-close"))
	if err := <-busy; err != nil {
		t.Fatalf("busy request: %v", err)
	}
	later := deliver(tgt, src, rec)
	for name, b := range map[string]*inbox{"first": first, "while running": while, "after": later} {
		if !closeAnswer(t, b.answer(t)) {
			t.Fatalf("%s delivery answered closed=false", name)
		}
	}
	other := *rec
	other.Target.Spot.SpotID = "another-spot"
	reuse := deliver(tgt, src, &other)
	wantFailure(t, "reused OperationId", reuse.answer(t), router.ResultInvalidArgument, router.FailNone)
	closeAndCountAnswers(t, tgt, map[string]*inbox{"first": first, "while running": while, "after": later, "reused": reuse})
}

// The source's return of a reservation whose 47/49 failed before the
// callback is a store change too: after its lease lapsed the source does not
// write it (§5), and recovery decides later.
func TestSourceAbortNotWrittenAfterLeaseLapse(t *testing.T) {
	t.Run("memory", func(t *testing.T) { f := newFixture(t); runSourceAbortAfterLeaseLapse(t, f, f.loc) })
	t.Run("redis", func(t *testing.T) { runSourceAbortAfterLeaseLapse(t, newFixture(t), newRedisLocation(t)) })
}

func runSourceAbortAfterLeaseLapse(t *testing.T, f *fixture, loc locstore.Store) {
	blocker := &leaseBlocker{Store: loc}
	c := newClusterOn(t, f, blocker, 2, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Lease.TTL = 6 * time.Second
		cfg.Lease.FencingMargin = 3 * time.Second
	})
	src := c.nodes[0]
	ord := reservedOrder(t, c, record.ObjectActor, "src-lapsed", testActorType, "")
	leaseKey, err := record.OwnerLeaseKey(src.run.ownerID)
	if err != nil {
		t.Fatal(err)
	}
	gate := src.lease.Gate()
	closing := gate.Closing()
	blocker.key.Store(&leaseKey)
	select {
	case <-closing:
	case <-time.After(20 * time.Second):
		t.Fatal("the source's admission deadline did not pass")
	}
	before := storeSnapshot(t, loc)
	if err := src.obj.abortIfOurs(&createCall{kind: record.ObjectActor, id: "src-lapsed", stableType: testActorType}, ord); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("abort without owner eligibility = %v, want ErrUnavailable", err)
	}
	sameSnapshot(t, "a source without owner eligibility", before, storeSnapshot(t, loc))
	if row := rowOf(t, c, record.ObjectActor, "src-lapsed"); !row.Found || row.Record.Allocation.State != record.AllocationReserved {
		t.Fatalf("reservation not left as it was: %+v", row)
	}
	blocker.key.Store(nil)
}

// A stopped node forgets the answers it kept for retried creations: their
// timers would otherwise keep the closed node reachable until each
// creation's deadline (seen as heap held by closed meshes in the host
// relocation heap benchmark).
func TestCloseForgetsKeptAnswers(t *testing.T) {
	c := newCluster(t, 2, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	if _, err := c.m(0).CreateActor(ctx, "kept-answer", testActorType); err != nil {
		t.Fatal(err)
	}
	target := c.nodes[1]
	target.obj.mu.Lock()
	kept := len(target.obj.orders)
	target.obj.mu.Unlock()
	if kept == 0 {
		t.Fatal("the target kept no answer: the test does not exercise the timers")
	}
	if err := target.Close(ctx); err != nil {
		t.Fatal(err)
	}
	target.obj.mu.Lock()
	defer target.obj.mu.Unlock()
	if len(target.obj.orders) != 0 {
		t.Fatalf("%d answers still kept (with their timers) after Close", len(target.obj.orders))
	}
}
