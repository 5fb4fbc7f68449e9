package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/relocstore"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	"github.com/meshnode/meshnode/spot"
)

// meshName is the mesh every node of the walkthrough joins.
const meshName = "inventory"

// walk holds the walkthrough's nodes: front is a client (it creates and
// messages but hosts nothing), east and west are servers hosting objects.
type walk struct {
	w                 io.Writer
	front, east, west *mesh.Node
	drained           *mesh.Node // closed by step 8
}

// run is the walkthrough. It returns an error as soon as a call fails or a
// check does not hold.
func run(ctx context.Context, out io.Writer) (err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w := &syncWriter{w: out}
	reg, err := newRegistry()
	if err != nil {
		return err
	}

	// One Location Store and one Relocation Store for the whole mesh. A
	// memory store lives in this process only, so the nodes must share one
	// instance; in production each node opens the configured Redis
	// providers itself.
	loc, err := locmemory.New()
	if err != nil {
		return err
	}
	defer loc.Close()
	reloc, err := relmemory.New()
	if err != nil {
		return err
	}
	defer reloc.Close()

	k := &walk{w: w}
	say := k.say
	say("1. start three nodes of mesh %q on loopback, sharing the memory stores", meshName)
	// A client node registers no factories: it only creates and messages.
	if k.front, err = startNode(ctx, "front", config.RoleClient, spot.NewRegistry(), loc, reloc, w); err != nil {
		return err
	}
	// Close is safe to call twice (a drained node is already closed): this
	// covers the early returns; the normal path closes them in step 9.
	defer k.closeAll()
	if k.east, err = startNode(ctx, "east", config.RoleServer, reg, loc, reloc, w); err != nil {
		return err
	}
	if k.west, err = startNode(ctx, "west", config.RoleServer, reg, loc, reloc, w); err != nil {
		return err
	}
	for _, n := range k.nodes() {
		say("   %-5s serving at %s", k.name(n.RID()), n.Endpoint())
	}

	steps := []struct {
		title string
		do    func(context.Context) error
	}{
		{"2. wait until every node has discovered and admitted the others", k.waitForPeers},
		{"3. create stock actors through the front node (a client: they land on east or west)", k.create},
		{"4. message them", k.message},
		{"5. hold stock with a timer, relocate the actor, check its state and timer moved with it", k.relocate},
		{"6. send to a cart Instance Spot that does not exist yet", k.instance},
		{"7. errors to match with errors.Is", k.showErrors},
		{"8. drain the node that owns sku:apple: its actors move, then it stops", k.drain},
		{"9. close the other nodes", k.closeNodes},
	}
	for _, s := range steps {
		say("\n%s", s.title)
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.title, err)
		}
	}
	say("\nall checks passed")
	return nil
}

// startNode starts one node of the mesh. Real applications load the
// configuration with config.Load (YAML file, MESHNODE_ environment, flags)
// and let Start open the configured stores.
func startNode(ctx context.Context, name string, role config.ObjectRole, reg *spot.Registry,
	loc locstore.Store, reloc relocstore.Store, logTo io.Writer) (*mesh.Node, error) {
	cfg := config.Default()
	cfg.Node.MeshName = meshName
	cfg.Node.ObjectRole = role
	cfg.Node.Endpoint = "tcp://127.0.0.1:0" // any free port; peers learn the bound one
	// The stores themselves are passed in Options, but validation still
	// reads the providers: a server with PreserveState or Instance Spot
	// factories needs a Relocation Store (spec §2).
	cfg.LocationStore.Provider = config.ProviderMemory
	cfg.RelocationStore.Provider = config.ProviderMemory
	cfg.Log.Level = config.LogWarn
	cfg.ShutdownDeadline = 10 * time.Second
	n, err := mesh.Start(ctx, mesh.Options{
		Config:     cfg,
		Factories:  reg,
		Location:   loc,
		Relocation: reloc,
		Logger:     cfg.Logger(logTo).With("node", name),
		// Discovery runs every lease renew interval (5 s) by default; a
		// shorter one lets a drained node leave sooner (its senders notice
		// it leaving within one round).
		DiscoveryInterval: 200 * time.Millisecond,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return n, nil
}

// waitForPeers: Start returns once this node serves, before it has met
// any peer. Until discovery has found the others and their links are
// admitted, placement sees no server (a create from front fails with
// ErrUnavailable) and a message to an object on a peer fails with
// ErrUnavailable wrapping transport.ErrUnknownPeer (no link yet) or
// transport.ErrNotAdmitted (the handshake is not done).
func (k *walk) waitForPeers(ctx context.Context) error {
	nodes := k.nodes()
	// Each node ran its first discovery round inside Start, before the
	// nodes started after it existed; one more round now sees them all
	// instead of waiting for the next tick.
	for _, n := range nodes {
		if err := n.Discover(ctx); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := n.WaitPeers(ctx, len(nodes)-1); err != nil {
			return fmt.Errorf("%s: %w", k.name(n.RID()), err)
		}
		k.say("   %-5s has admitted links to %d peers", k.name(n.RID()), len(n.Peers()))
	}
	return nil
}

func (k *walk) create(ctx context.Context) error {
	m := k.front.Manager()
	apple, err := m.CreateActor(ctx, "sku:apple", StockType, mesh.WithBody([]byte("12")))
	if err != nil {
		return err
	}
	k.say("   front CreateActor(sku:apple, 12 on hand)      -> generation %d on %s", apple.ObjectGeneration, k.name(apple.NodeRID))
	pear, err := m.GetOrCreateActor(ctx, "sku:pear", StockType, mesh.WithBody([]byte("5")))
	if err != nil {
		return err
	}
	k.say("   front GetOrCreateActor(sku:pear, 5 on hand)   -> %s, generation %d on %s", pear.Outcome, pear.Ref.ObjectGeneration, k.name(pear.Ref.NodeRID))
	again, err := k.west.Manager().GetOrCreateActor(ctx, "sku:pear", StockType)
	if err != nil {
		return err
	}
	k.say("   west  GetOrCreateActor(sku:pear) again        -> %s, generation %d", again.Outcome, again.Ref.ObjectGeneration)
	if err := check(again.Outcome == mesh.Existing && again.Ref.ObjectGeneration == pear.Ref.ObjectGeneration,
		"the second GetOrCreateActor found the same pear"); err != nil {
		return err
	}
	return check(k.isServer(apple.NodeRID) && k.isServer(pear.Ref.NodeRID), "both actors are hosted by a server node")
}

func (k *walk) message(ctx context.Context) error {
	m := k.front.Manager()
	// A ref names the object and its generation; where it lives is looked
	// up for every message (route cache, then the Location Store).
	apple, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	if err := m.SendActor(ctx, apple, []byte("add 8")); err != nil {
		return err
	}
	k.say("   front SendActor(sku:apple, \"add 8\")")
	// One sender's messages to one object run in the order sent, so this
	// request runs after the send above.
	got, err := m.RequestActor(ctx, apple, []byte("get"))
	if err != nil {
		return err
	}
	k.say("   front RequestActor(sku:apple, \"get\")          -> %s", got)
	if err := checkStatus(got, status{OnHand: 20, Available: 20}); err != nil {
		return err
	}
	// Any node can message any object; a client node too.
	got, err = k.east.Manager().RequestActor(ctx, apple, []byte("get"))
	if err != nil {
		return err
	}
	k.say("   east  RequestActor(sku:apple, \"get\")          -> %s", got)
	return checkStatus(got, status{OnHand: 20, Available: 20})
}

func (k *walk) relocate(ctx context.Context) error {
	m := k.front.Manager()
	apple, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	hold1, err := m.RequestActor(ctx, apple, []byte("reserve 3 1s"))
	if err != nil {
		return err
	}
	k.say("   front RequestActor(sku:apple, \"reserve 3 1s\") -> %s (a timer releases it after 1s)", hold1)
	hold2, err := m.RequestActor(ctx, apple, []byte("reserve 2 1h"))
	if err != nil {
		return err
	}
	k.say("   front RequestActor(sku:apple, \"reserve 2 1h\") -> %s", hold2)
	got, err := m.RequestActor(ctx, apple, []byte("get"))
	if err != nil {
		return err
	}
	k.say("   front RequestActor(sku:apple, \"get\")          -> %s", got)
	if err := checkStatus(got, status{OnHand: 20, Held: 5, Available: 15}); err != nil {
		return err
	}

	owner, target := k.serverOf(apple.NodeRID), k.otherServer(apple.NodeRID)
	// A move is started on the object's owner; any other node is refused.
	_, err = m.RelocateActor(ctx, apple, mesh.ToNode(target.RID()))
	k.say("   front RelocateActor(sku:apple)                -> %v", err)
	if err := check(errors.Is(err, mesh.ErrInvalidOperation), "a move started off the owner node is ErrInvalidOperation"); err != nil {
		return err
	}
	res, err := owner.Manager().RelocateActor(ctx, apple, mesh.ToNode(target.RID()))
	if err != nil {
		return err
	}
	k.say("   %-5s RelocateActor(sku:apple, ToNode(%s))   -> %s to %s in %v, %d bytes of state, confirmed %v",
		k.name(owner.RID()), k.name(target.RID()), res.Outcome, k.name(res.TargetNodeRID),
		res.Timings.Total.Round(time.Millisecond), res.PayloadBytes, res.Confirmed)
	if err := check(res.Outcome == mesh.Moved, "the actor moved (reason if not: %q)", res.Reason); err != nil {
		return err
	}
	now, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	k.say("   front FindActor(sku:apple)                    -> generation %d on %s", now.ObjectGeneration, k.name(now.NodeRID))
	if err := check(bytes.Equal(now.NodeRID, target.RID()) && now.ObjectGeneration == apple.ObjectGeneration,
		"the actor is on %s with its generation unchanged (the old ref still works)", k.name(target.RID())); err != nil {
		return err
	}

	// The holds are application state: the snapshot carried them.
	got, err = m.RequestActor(ctx, apple, []byte("confirm "+string(hold2)))
	if err != nil {
		return err
	}
	k.say("   front RequestActor(sku:apple, \"confirm %s\")  -> %s", hold2, got)
	if err := check(string(got) == "ok", "%s was still held after the move", hold2); err != nil {
		return err
	}
	got, err = m.RequestActor(ctx, apple, []byte("get"))
	if err != nil {
		return err
	}
	k.say("   front RequestActor(sku:apple, \"get\")          -> %s", got)
	st, err := parseStatus(got)
	if err != nil {
		return err
	}
	if err := check(st.OnHand == 18 && st.Moves == 1, "18 on hand and one arrival (Relocated ran once)"); err != nil {
		return err
	}
	// hold-1's timer moved too, with its remaining time; it fires on the
	// new owner. (Should the move have taken longer than 1s, it fired
	// before: the end state is the same.)
	for st.Held != 0 {
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("%s never released: %w", hold1, err)
		}
		if got, err = m.RequestActor(ctx, apple, []byte("get")); err != nil {
			return err
		}
		if st, err = parseStatus(got); err != nil {
			return err
		}
	}
	k.say("   after the hold timer fired on %s, \"get\"        -> %s", k.name(target.RID()), got)
	return checkStatus(got, status{OnHand: 18, Available: 18, Moves: 1})
}

func (k *walk) instance(ctx context.Context) error {
	m := k.front.Manager()
	_, err := m.FindInstance(ctx, "cart:alice")
	k.say("   front FindInstance(cart:alice)                -> %v", err)
	if err := check(errors.Is(err, mesh.ErrNotFound), "no cart yet"); err != nil {
		return err
	}
	// The first message creates the cart on a server offering the type
	// and is the first thing it runs. It is a request here so that the
	// cart is Ready before anything else is sent: while an activation is
	// still being recorded, a second message (even from the same sender)
	// can race it and create the cart itself, running first.
	got, err := m.RequestInstance(ctx, "cart:alice", []byte("add sku:apple 2"))
	if err != nil {
		return err
	}
	k.say("   front RequestInstance(cart:alice, \"add sku:apple 2\") -> %s", got)
	if err := check(string(got) == "sku:apple=2", "the first message created the cart and ran in it"); err != nil {
		return err
	}
	// Once it exists, messages to it take the usual route and one
	// sender's messages run in the order sent.
	east := k.east.Manager()
	if err := east.SendInstance(ctx, "cart:alice", []byte("add sku:pear 1")); err != nil {
		return err
	}
	k.say("   east  SendInstance(cart:alice, \"add sku:pear 1\")")
	got, err = east.RequestInstance(ctx, "cart:alice", []byte("show"), mesh.InstanceType(CartType))
	if err != nil {
		return err
	}
	k.say("   east  RequestInstance(cart:alice, \"show\")     -> %s", got)
	if err := check(string(got) == "sku:apple=2 sku:pear=1", "the cart counted both messages"); err != nil {
		return err
	}
	ref, err := m.FindInstance(ctx, "cart:alice")
	if err != nil {
		return err
	}
	var activated uint64
	for _, n := range k.nodes() {
		activated += n.ObjectStats().InstancesActivated
	}
	k.say("   cart:alice lives on %s; cold activations in the mesh: %d", k.name(ref.NodeRID), activated)
	return check(activated == 1, "one activation for one cart")
}

func (k *walk) showErrors(ctx context.Context) error {
	m := k.front.Manager()
	apple, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	_, err = m.FindActor(ctx, "sku:durian")
	k.say("   FindActor(sku:durian)                  -> %v", err)
	if err := check(errors.Is(err, mesh.ErrNotFound), "ErrNotFound"); err != nil {
		return err
	}
	_, err = m.CreateActor(ctx, "sku:apple", StockType)
	k.say("   CreateActor(sku:apple) again           -> %v", err)
	if err := check(errors.Is(err, mesh.ErrAlreadyExists), "ErrAlreadyExists"); err != nil {
		return err
	}
	_, err = m.CreateActor(ctx, "sku:kiwi", StockType, mesh.WithBody([]byte("lots")))
	k.say("   CreateActor(sku:kiwi, \"lots\")          -> %v", err)
	var rejected *mesh.RejectedError
	if err := check(errors.Is(err, mesh.ErrRejected) && errors.As(err, &rejected), "ErrRejected (*RejectedError)"); err != nil {
		return err
	}
	_, err = m.FindSpot(ctx, "cart:alice")
	k.say("   FindSpot(cart:alice), a User Spot find -> %v", err)
	if err := check(errors.Is(err, mesh.ErrTypeMismatch), "ErrTypeMismatch: cart:alice is an Instance Spot"); err != nil {
		return err
	}
	_, err = m.RequestActor(ctx, apple, []byte("teleport"))
	k.say("   RequestActor(sku:apple, \"teleport\")    -> %v", err)
	return check(errors.Is(err, mesh.ErrRequestFailed), "ErrRequestFailed: the handler returned an error")
}

func (k *walk) drain(ctx context.Context) error {
	m := k.front.Manager()
	apple, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	cart, err := m.FindInstance(ctx, "cart:alice")
	if err != nil {
		return err
	}
	leaving, staying := k.serverOf(apple.NodeRID), k.otherServer(apple.NodeRID)
	// Drain publishes draining (nothing new is placed there), moves every
	// Actor and User Spot to the other serving nodes, waits until senders
	// have switched to the new owners, then closes the node (§11).
	res, err := leaving.Drain(ctx, mesh.HostRelocateOptions{})
	k.drained = leaving
	p := res.Progress
	k.say("   %s Drain -> %s: %d moved, %d skipped, %d failed, %d not started in %v; close: %v",
		k.name(leaving.RID()), res.End, p.Moved, p.Skipped, p.Failed, p.NotStarted, res.Took.Round(time.Millisecond), err)
	if err != nil {
		return err
	}
	// What is skipped is the Instance Spots (a cart): a drain does not
	// move them (below).
	if err := check(p.Moved >= 1 && p.Failed == 0 && p.NotStarted == 0, "every actor of %s moved", k.name(leaving.RID())); err != nil {
		return err
	}
	// Routes cached before the drain name a node that has stopped: the
	// first call may be refused as unavailable before the sender reads
	// the new owner. "get" is safe to repeat.
	var got []byte
	err = retry(ctx, func() (err error) {
		got, err = m.RequestActor(ctx, apple, []byte("get"))
		return err
	})
	if err != nil {
		return err
	}
	now, err := m.FindActor(ctx, "sku:apple")
	if err != nil {
		return err
	}
	k.say("   sku:apple is on %s now: %s", k.name(now.NodeRID), got)
	if err := check(bytes.Equal(now.NodeRID, staying.RID()), "sku:apple moved to %s", k.name(staying.RID())); err != nil {
		return err
	}
	if err := checkStatus(got, status{OnHand: 18, Available: 18, Moves: 2}); err != nil {
		return err
	}

	// Instance Spots are not moved by a drain: a cart on the drained node
	// ended with it, and the next message to its id starts a new one.
	_, err = m.FindInstance(ctx, "cart:alice")
	if bytes.Equal(cart.NodeRID, leaving.RID()) {
		k.say("   cart:alice was on %s: Instance Spots do not move, so it is gone (%v)", k.name(leaving.RID()), err)
		return check(errors.Is(err, mesh.ErrNotFound), "the drained node's cart is gone")
	}
	k.say("   cart:alice was on %s and is still there (find: %v)", k.name(cart.NodeRID), err)
	return err
}

func (k *walk) closeNodes(ctx context.Context) error {
	// Close stops accepting work, answers queued requests, removes the
	// objects this node still owns from the Location Store (their state
	// is gone: drain first to keep them), publishes stopped and releases
	// the owner lease.
	var errs []error
	for _, n := range []*mesh.Node{k.west, k.east, k.front} {
		if n == k.drained {
			continue
		}
		err := n.Close(ctx)
		k.say("   %-5s Close -> %v", k.name(n.RID()), err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closeAll closes every started node (a no-op for closed ones).
func (k *walk) closeAll() {
	for _, n := range k.nodes() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = n.Close(ctx)
		cancel()
	}
}

func (k *walk) say(format string, args ...any) { fmt.Fprintf(k.w, format+"\n", args...) }

// nodes returns the nodes started so far.
func (k *walk) nodes() []*mesh.Node {
	var out []*mesh.Node
	for _, n := range []*mesh.Node{k.front, k.east, k.west} {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// name returns the walkthrough's name of the node with routing id rid.
func (k *walk) name(rid []byte) string {
	switch {
	case k.front != nil && bytes.Equal(rid, k.front.RID()):
		return "front"
	case k.east != nil && bytes.Equal(rid, k.east.RID()):
		return "east"
	case k.west != nil && bytes.Equal(rid, k.west.RID()):
		return "west"
	}
	return fmt.Sprintf("%x", rid)
}

func (k *walk) isServer(rid []byte) bool {
	return bytes.Equal(rid, k.east.RID()) || bytes.Equal(rid, k.west.RID())
}

// serverOf returns the server node with routing id rid (east otherwise).
func (k *walk) serverOf(rid []byte) *mesh.Node {
	if bytes.Equal(rid, k.west.RID()) {
		return k.west
	}
	return k.east
}

// otherServer returns the server that is not rid.
func (k *walk) otherServer(rid []byte) *mesh.Node {
	if bytes.Equal(rid, k.west.RID()) {
		return k.east
	}
	return k.west
}

// status is a parsed stock "get" reply.
type status struct{ OnHand, Held, Available, Moves int }

func parseStatus(b []byte) (status, error) {
	var s status
	if _, err := fmt.Sscanf(string(b), "on_hand=%d held=%d available=%d moves=%d", &s.OnHand, &s.Held, &s.Available, &s.Moves); err != nil {
		return s, fmt.Errorf("stock reply %q: %w", b, err)
	}
	return s, nil
}

func checkStatus(b []byte, want status) error {
	got, err := parseStatus(b)
	if err != nil {
		return err
	}
	return check(got == want, "stock is %+v, want %+v", got, want)
}

// check returns an error naming what should have held.
func check(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf("check failed: "+format, args...)
}

// retry repeats an idempotent call while the mesh settles after a move:
// ErrUnavailable or ErrMoving may answer a sender whose cached route names
// the old owner. Only idempotent calls may be repeated this way: a request
// refused as unavailable because its link went down may have run.
func retry(ctx context.Context, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil || attempt == 20 || !(errors.Is(err, mesh.ErrUnavailable) || errors.Is(err, mesh.ErrMoving)) {
			return err
		}
		if serr := sleep(ctx, 50*time.Millisecond); serr != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
