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
	if err := n.Close(ctxT(t, 20*time.Second)); err != nil {
		t.Fatalf("Close: %v", err)
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
	for _, kind := range []record.Kind{record.KindAuthority, authority.KindCapacity, authority.KindCreationTerminal, KindCreationRequest} {
		req := locstore.ScanRequest{Prefix: record.KindPrefix(kind), Limit: 1000}
		for {
			page, err := s.Scan(context.Background(), req)
			if err != nil || page.Expired {
				t.Fatalf("scan %s: %v (expired %v)", kind, err, page.Expired)
			}
			for _, it := range page.Items {
				out[it.Key] = it.Version + "\x00" + string(it.Value)
			}
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
	if err := o.writeContent(ctx, call, storeNow); err != nil {
		t.Fatal(err)
	}
	cand, err := o.place(ctx, kind, stableType, "objects", map[string]exclusion{})
	if err != nil || c.indexOf(cand.node.RoutingID) != 1 {
		t.Fatalf("place: %v, %v", cand.node, err)
	}
	rsv := "rsv-" + id
	res, err := o.exec.Reserve(ctx, authority.ReserveRequest{
		Object: authority.Object{ID: id, Kind: kind, StableType: stableType},
		Target: authority.Target{Node: cand.node, Owner: cand.owner, Limits: cand.limits},
		Creation: record.PendingCreation{ReservationID: rsv, RequestContentReference: call.contentKey,
			RequestSHA256: call.sha, RequestEncodedSize: len(call.content)},
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
	closeAndCountAnswers(t, tgt, map[string]*inbox{"order": b})
}
