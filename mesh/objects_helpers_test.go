package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Test factories: they count their runs per (node, id) and obey commands in
// the creation body, so that each §7 callback outcome can be asked for.
const (
	testActorType = "test.actor"
	testSpotType  = "test.spot"
	testOtherType = "test.other-actor"
	// Movable types: the echo object's send count moves with it
	// (PreserveStateWith) or starts again at 0 (RecreateOnRelocation).
	testMoverType    = "test.mover"
	testRecreateType = "test.recreate"
	testSpotMover    = "test.spot-mover"
	// testInstanceType is the one Instance Spot type of the test nodes.
	testInstanceType = "test.instance"
)

// echoSnapshot is the test snapshot adapter: the echo's send count.
type echoSnapshot struct{ p *probe }

func (a echoSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	e := h.(*echo)
	e.mu.Lock()
	defer e.mu.Unlock()
	return []byte(strconv.Itoa(e.sends)), nil
}

func (a echoSnapshot) Restore(_ context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	n, err := strconv.Atoi(string(state))
	if err != nil {
		return nil, err
	}
	a.p.mu.Lock()
	a.p.restores[req.ID]++
	a.p.mu.Unlock()
	return &echo{p: a.p, sends: n}, nil
}

// probe records what the test factories did.
type probe struct {
	mu       sync.Mutex
	runs     map[string]int // id → factory runs (all nodes)
	restores map[string]int // id → snapshot restores (all nodes)
	// gates holds channels a body "wait:<name>" blocks the factory on.
	gates map[string]chan struct{}
	// failing names the ids whose factory fails, whatever the body (an
	// Instance Spot's factory gets none).
	failing map[string]bool
}

func newProbe() *probe {
	return &probe{runs: map[string]int{}, restores: map[string]int{}, gates: map[string]chan struct{}{}}
}

// fail makes the factory of id fail (on) or work again.
func (p *probe) fail(id string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failing == nil {
		p.failing = map[string]bool{}
	}
	p.failing[id] = on
}

func (p *probe) runCount(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[id]
}

func (p *probe) gate(name string) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.gates[name]
	if !ok {
		ch = make(chan struct{})
		p.gates[name] = ch
	}
	return ch
}

func (p *probe) newFn(ctx context.Context, req spot.CreateRequest) (spot.Handler, error) {
	p.mu.Lock()
	p.runs[req.ID]++
	failing := p.failing[req.ID]
	p.mu.Unlock()
	if failing {
		return nil, errors.New("factory failing for this id (test)")
	}
	cmd := string(req.Body)
	switch {
	case strings.HasPrefix(cmd, "decline:"):
		return nil, &spot.Declined{Reason: strings.TrimPrefix(cmd, "decline:")}
	case cmd == "panic":
		panic("factory exploded")
	case cmd == "fail":
		return nil, errors.New("factory refused to work")
	case strings.HasPrefix(cmd, "wait:"):
		select {
		case <-p.gate(strings.TrimPrefix(cmd, "wait:")):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &echo{p: p}, nil
}

// echo is the test object: it counts one-way messages and answers requests
// with "echo:<body>", or "count:<n>" for "count", or fails for "boom".
type echo struct {
	p     *probe
	mu    sync.Mutex
	sends int
}

func (e *echo) Receive(t *spot.Turn, env spot.Envelope) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if name, ok := strings.CutPrefix(string(env.Body), "block:"); ok {
		<-e.p.gate(name) // a busy turn: the message waits for the test
		if env.Kind != spot.Request {
			e.sends++
			return nil
		}
		return t.Reply([]byte("unblocked"))
	}
	if env.Kind != spot.Request {
		e.sends++
		return nil
	}
	switch string(env.Body) {
	case "count":
		return t.Reply([]byte(fmt.Sprintf("count:%d", e.sends)))
	case "boom":
		return errors.New("handler boom")
	case "whoami":
		return t.Reply([]byte(t.ID()))
	}
	return t.Reply(append([]byte("echo:"), env.Body...))
}

func registerTestFactories(t *testing.T, reg *spot.Registry, p *probe) {
	t.Helper()
	for _, f := range []spot.Factory{
		{StableType: testActorType, Kind: spot.KindActor, Policy: spot.PolicyDisabled, New: p.newFn},
		{StableType: testOtherType, Kind: spot.KindActor, Policy: spot.PolicyDisabled, New: p.newFn},
		{StableType: testSpotType, Kind: spot.KindUserSpot, Policy: spot.PolicyDisabled, New: p.newFn},
		{StableType: testMoverType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState, Snapshot: echoSnapshot{p}, New: p.newFn},
		{StableType: testRecreateType, Kind: spot.KindActor, Policy: spot.PolicyRecreate, New: p.newFn},
		{StableType: testSpotMover, Kind: spot.KindUserSpot, Policy: spot.PolicyPreserveState, Snapshot: echoSnapshot{p}, New: p.newFn},
		spotFactory(testInstanceType, p),
	} {
		if err := reg.Register(f); err != nil {
			t.Fatal(err)
		}
	}
}

// cluster is count nodes of one mesh sharing the fixture's stores, each
// having discovered and admitted the others.
type cluster struct {
	f     *fixture
	nodes []*Node
	probe *probe
}

// objConfig is fastConfig with a lease long enough that a slow -race run
// never expires it mid-test (the object tests are not about expiry).
func objConfig(mesh string) config.Config {
	cfg := fastConfig(mesh)
	cfg.Lease.RenewInterval = 500 * time.Millisecond
	cfg.Lease.RenewTimeout = 400 * time.Millisecond
	cfg.Lease.TTL = 4 * time.Second
	cfg.Lease.FencingMargin = 1 * time.Second
	return cfg
}

func newCluster(t *testing.T, count int, edit func(i int, c *config.Config)) *cluster {
	t.Helper()
	return newClusterOn(t, newFixture(t), nil, count, edit)
}

// newClusterOn starts the nodes on f's registry with loc as the Location
// Store (nil: f's memory store).
func newClusterOn(t *testing.T, f *fixture, loc locstore.Store, count int, edit func(i int, c *config.Config)) *cluster {
	t.Helper()
	return newClusterWith(t, f, func(int) locstore.Store { return loc }, count, edit)
}

// newClusterWith is newClusterOn with node i's Location Store locFor(i)
// (nil: f's memory store).
func newClusterWith(t *testing.T, f *fixture, locFor func(i int) locstore.Store, count int, edit func(i int, c *config.Config)) *cluster {
	t.Helper()
	p := newProbe()
	registerTestFactories(t, f.reg, p)
	c := &cluster{f: f, probe: p}
	for i := 0; i < count; i++ {
		cfg := objConfig("objects")
		cfg.Node.RoutingID = fmt.Sprintf("0%d0%d", i+1, i+1)
		if edit != nil {
			edit(i, &cfg)
		}
		opts := Options{Config: cfg, Factories: f.reg, Location: f.loc, Relocation: f.reloc, DiscoveryInterval: 100 * time.Millisecond}
		if cfg.Node.ObjectRole != config.RoleServer {
			opts.Factories = spot.NewRegistry() // only a server registers factories (§2)
		}
		if loc := locFor(i); loc != nil {
			opts.Location = loc
		}
		if f.logTo != nil {
			if w := f.logTo(i); w != nil {
				opts.Logger = slog.New(slog.NewTextHandler(w, nil))
			}
		}
		n, err := Start(context.Background(), opts)
		if err != nil {
			t.Fatalf("Start node %d: %v", i, err)
		}
		t.Cleanup(func() { _ = n.Close(context.Background()) })
		c.nodes = append(c.nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		if err := n.WaitPeers(ctx, count-1); err != nil {
			t.Fatal(err)
		}
	}
	// Every node's descriptor list must show every node serving with a
	// valid lease before placement can use it.
	eventually(t, 10*time.Second, "descriptor lists with every node serving", func() bool {
		for _, n := range c.nodes {
			snap, ok := n.LastSnapshot()
			if !ok {
				return false
			}
			serving := 0
			for _, e := range snap.Entries {
				if e.LeaseValid && e.Descriptor.State == record.StateServing && e.Descriptor.MeshName == "objects" {
					serving++
				}
			}
			if serving != count {
				return false
			}
		}
		return true
	})
	return c
}

func (c *cluster) m(i int) *Manager { return c.nodes[i].Manager() }

// indexOf returns the index of the node with rid.
func (c *cluster) indexOf(rid []byte) int {
	for i, n := range c.nodes {
		if string(n.RID()) == string(rid) {
			return i
		}
	}
	return -1
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func actorKey(id string) spot.Key { return spot.Key{ID: id} }

// setMoving puts a hosted object in (or out of) the moving state the
// relocation source sets.
func (o *objects) setMoving(key spot.Key, moving bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h, ok := o.hosted[key]; ok {
		h.state = hostServing
		if moving {
			h.state = hostMoving
		}
	}
}

// stateOf reads a hosted object's state under objects.mu (the relocation
// goroutines write it there; a bare read from a test would race).
func (o *objects) stateOf(key spot.Key) (hostState, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.hosted[key]
	if !ok {
		return 0, false
	}
	return h.state, true
}

// spotFactory is an Instance Spot factory of the echo object.
func spotFactory(stableType string, p *probe) spot.Factory {
	return spot.Factory{StableType: stableType, Kind: spot.KindInstanceSpot, Policy: spot.PolicyDisabled, New: p.newFn}
}
