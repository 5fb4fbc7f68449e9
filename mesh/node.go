// Package mesh is the MeshNode: one node run's owner lease and admission
// gate, its MeshNode descriptor, discovery of the other nodes of its mesh
// and the transport links to them, and the Manager API (manager.go) over the
// objects it hosts.
//
// A Node is built by Start, which follows the startup order of the spec:
// every configuration problem is reported before a socket or store is
// opened (§2, §5); the owner lease is acquired before anything is published
// (§3.1); the whole descriptor is built and validated before the first
// publish (§4). Close undoes it in the order of §11.
package mesh

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/buildinfo"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/admin"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/marker"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/stores"
	"github.com/meshnode/meshnode/relocstore"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Errors of the node lifecycle.
var (
	// ErrStartup is matched by every startup failure.
	ErrStartup = errors.New("mesh: startup failed")
	// ErrClosed is returned by operations on a closed node.
	ErrClosed = errors.New("mesh: node closed")
)

// Options configure Start.
type Options struct {
	// Config is the node's configuration; Start validates it.
	Config config.Config
	// Factories are the application factories; nil means spot.Default.
	Factories *spot.Registry
	// Location and Relocation, when set, are used instead of opening the
	// configured providers (the one-process demo shares one memory store
	// between its nodes). The node does not close stores it did not open.
	Location   locstore.Store
	Relocation relocstore.Store
	// Logger; nil means Config.Log applied to stderr.
	Logger *slog.Logger
	// DiscoveryInterval is the time between discovery rounds; 0 means the
	// lease renew interval.
	DiscoveryInterval time.Duration

	// afterLease, set by tests, runs in Start once the owner lease is
	// acquired, before the node is built (leaseEvent).
	afterLease func(*Node)
}

// Node is one running MeshNode.
type Node struct {
	// leaving is the node runs the last descriptor list showed draining
	// or stopped (noteLeaving).
	leaving atomic.Pointer[map[leavingRun]bool]

	cfg       config.Config
	log       *slog.Logger
	factories []spot.Factory
	clock     lease.Clock

	loc                locstore.Store
	reloc              relocstore.Store
	ownsLoc, ownsReloc bool
	lease              *lease.Manager
	marker             marker.Marker // the namespace marker seen at start (checkMarker)
	tr                 *transport.Node
	pub                *directory.Publisher
	published          atomic.Bool // a publish succeeded (a failed Start then says stopped: teardown)
	run                hostRun
	leaseGen           atomic.Uint64 // this run's current LeaseGeneration (Owner)
	discoveryEvery     time.Duration
	discoverMu         sync.Mutex // one discovery round at a time
	// deadPending: descriptors of watched runs found without their lease
	// right after a store problem here, looked at again a TTL later, and
	// those whose removal failed, tried again the next round
	// (removeDeadWatched; under discoverMu).
	deadPending    map[string]time.Duration
	discoveryFails discoveryFailures // the current run of failed discovery rounds (under discoverMu)
	planner        *directory.Planner
	// lastSnap is the list the node holds: discovery's last, with the
	// peers' refusals shown (setViewLocked).
	lastSnap directory.Snapshot
	// listed is discovery's last list as read, without the refusals: what
	// every node of the mesh reads alike, for what the nodes must compute
	// the same from (the reclaim sweep's shares, sweepPosition).
	listed directory.Snapshot
	// servedAt: when each other server of this mesh was last listed
	// serving (noteServingLocked) — what a drain asks when none serves now.
	servedAt map[string]servedRun
	// troubleAt: when this node last met a store problem (a failed
	// discovery round, a lease renew failed, the lease expired or lost);
	// troubled once it has (noteStoreTrouble). A drain asks it to tell a
	// peer recovering from a store outage from one that left.
	troubleAt time.Duration
	troubled  bool
	snapSeq   uint64 // counts the lists discovery stored in lastSnap
	// refusals: the peer runs that refused a move as draining or stopped
	// while lastSnap still showed them serving; lastSnap shows them
	// leaving (noteRefusedLeaving, peer_view.go). viewSeq counts the
	// changes of lastSnap: discovery's lists and such refusals (what is
	// derived from it is kept per number: listMemo).
	refusals directory.Refusals
	viewSeq  uint64
	// listSeq mirrors snapSeq for readers that must not take n.mu (a
	// message's admission, under objects.mu, stamps its Session binding).
	listSeq  atomic.Uint64
	snapAt   time.Duration // n.clock time lastSnap was stored
	memo     listMemo      // what is derived from lastSnap (list_memo.go)
	haveSnap bool
	// obj hosts this node's Actors and Spots and serves the Manager
	// (objects.go; the Objects issue).
	obj *objects
	// metrics is the node's Prometheus registry (metrics.go); admin its
	// HTTP admin listener when admin.listen is set (admin_node.go).
	metrics *nodeMetrics
	admin   *admin.Server
	// hostView is the host command running, whatever started it, for
	// the status (host_view.go).
	hostView hostView
	// adminDrain is set while a drain asked through the admin listener
	// runs: the listener then outlives the moves until their result was
	// read (stopAdmin).
	adminDrain atomic.Bool
	// hostClock, when set (tests), replaces time.Now for the durations a
	// host command reports and its waits before the moves (hostNow).
	hostClock func() time.Time
	// tracker is discovery's memory between rounds (Discover);
	// discoveryReads counts its store reads.
	tracker        *directory.Tracker
	discoveryReads discoveryCounters
	// capCopyAt is when the capacity copy was last republished (monotonic;
	// capacity_copy.go).
	capCopyAt time.Duration

	// drainMu orders the publishes that choose between serving and
	// draining: a drain's (or Close's) draining and the republish after a
	// lease recovery, which says draining once drainSaid is set (else it
	// said serving over a drain under way: node_readopt.go).
	drainMu   sync.Mutex
	drainSaid bool // under drainMu

	// leaseEv holds back the owner lease's events until Start has built
	// what they act on (leaseEvent).
	leaseEv leaseEvents
	// dataLost is told (one token) when a Location Store call reported a
	// data loss (observedLocation): the loop checks the marker at once.
	dataLost chan struct{}
	// relistSoon is told (one token) when a peer failed a creation order
	// before its callback: the loop runs a discovery round early (relist).
	relistSoon chan struct{}

	mu         sync.Mutex
	lostErr    error // why the owner lease was lost for good (nil while it holds)
	state      record.State
	descriptor record.MeshNodeDescriptor
	closed     bool
	closeErr   error
	swept      bool // Close's §11 sweep ran to its end: no record names this run
	done       chan struct{}
	// stop ends when Close stops the node's own goroutines (stopNode):
	// a context, so that stopContext needs no goroutine of its own that
	// could outlive Close.
	stop     context.Context
	stopNode context.CancelFunc
	wg       sync.WaitGroup
}

// Start validates the configuration, opens the stores, acquires the owner
// lease, binds the transport, publishes the descriptor and starts discovery.
// On any failure everything already opened is closed again.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	reg := opts.Factories
	if reg == nil {
		reg = spot.Default
	}
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = cfg.Logger(os.Stderr)
	}
	n := &Node{cfg: cfg, log: log, factories: reg.All(), clock: lease.SystemClock(),
		done: make(chan struct{}), state: record.StatePreparing}
	n.stop, n.stopNode = context.WithCancel(context.Background())
	n.discoveryEvery = opts.DiscoveryInterval
	if n.discoveryEvery <= 0 {
		n.discoveryEvery = cfg.Lease.RenewInterval
	}

	// §2, §5: every configuration problem before any socket or store.
	if err := cfg.Validate(factoryPolicies(n.factories)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	// Redis settings of a store that does not use Redis are valid (a
	// shared file may carry both providers' settings) but likely a
	// forgotten provider: redis — said once per store, before the store
	// opens, so that a node running on a memory store by mistake shows it.
	// Not for a store passed in Options: the node opens nothing then, and
	// the program chose the store itself.
	passed := map[string]bool{"location_store": opts.Location != nil, "relocation_store": opts.Relocation != nil}
	for _, s := range cfg.IgnoredStoreSettings() {
		if !passed[s.Store] {
			log.Warn(s.String(), "store", s.Store, "ignored_keys", s.Keys)
		}
	}
	// A token without a listener protects nothing: likely a forgotten
	// admin.listen (config.UnusedAdminToken says why it is not an error).
	if msg := cfg.UnusedAdminToken(); msg != "" {
		log.Warn(msg)
	}
	// An Instance Spot never moves (a host Relocate skips it, a drain's
	// shutdown removes it, its next message activates it anew): a
	// relocation policy on its factory is never used, its Snapshot adapter
	// never called — likely an application expecting its state to move
	// (developer try-out, 2026-12-08). Said once per type.
	for _, f := range n.factories {
		if f.Kind == spot.KindInstanceSpot && f.Policy != spot.PolicyDisabled {
			log.Warn("factory: an Instance Spot never moves, so its relocation policy is not used (its Snapshot adapter is never called; "+
				"a drain ends it and its next message activates it anew): register it with spot.PolicyDisabled",
				"stable_type", f.StableType, "policy", f.Policy.String())
		}
	}
	defer func() {
		if err != nil {
			n.teardown(context.Background(), nil)
		}
	}()

	if n.loc = opts.Location; n.loc == nil {
		if n.loc, err = stores.OpenLocation(ctx, cfg.LocationStore, log); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStartup, err)
		}
		n.ownsLoc = n.loc != nil
	}
	if n.reloc = opts.Relocation; n.reloc == nil {
		if n.reloc, err = stores.OpenRelocation(ctx, cfg.RelocationStore, log); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStartup, err)
		}
		n.ownsReloc = n.reloc != nil
	}
	if n.loc == nil {
		// Role none without a store: §2 does not require one (Validate
		// passes), but a running node publishes its descriptor and finds
		// its peers there. A configuration error like Validate's (exit 2
		// from meshnode run), naming the key; until 2026-12-06 it was a
		// bare startup failure (exit 1).
		return nil, fmt.Errorf("%w: %w", ErrStartup, &config.ValidationError{Problems: []config.Problem{{
			Key:     "location_store.provider",
			Message: "a running node needs a Location Store whatever its object_role (it publishes its descriptor and finds its peers there); none configured",
		}}})
	}
	// Every store call is timed for /metrics (metrics.go); Close still
	// reaches the provider through the wrapper.
	n.metrics = newNodeMetrics(n)
	n.dataLost = make(chan struct{}, 1)
	n.relistSoon = make(chan struct{}, 1)
	n.loc = observedLocation{Store: n.loc, h: n.metrics.storeCalls, lost: n.dataLost}
	if n.reloc != nil {
		n.reloc = observedRelocation{Store: n.reloc, h: n.metrics.storeCalls}
	}

	// Link security: with CURVE the RID is the public key's (identity and
	// key are bound, router/transport/security.go); Validate has read the
	// key files once already and refused node.routing_id.
	var curveCfg *transport.CurveConfig
	rid := transport.RID(cfg.Node.RoutingIDBytes())
	if cfg.Transport.Curve.Enabled {
		kp, allowed, err := cfg.Transport.Curve.Keys()
		if err != nil {
			return nil, fmt.Errorf("%w: transport.curve: %w", ErrStartup, err)
		}
		curveCfg = &transport.CurveConfig{KeyPair: kp, AllowedKeys: allowed}
		rid = transport.CurveRID(kp.Public)
	}
	if rid == nil {
		if rid, err = transport.NewRandomRID(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStartup, err)
		}
	}
	n.run.rid = rid
	n.log = log.With("mesh", cfg.Node.MeshName, "rid", hex.EncodeToString(rid))

	// The namespace marker first: a node that saw it can later tell that
	// the store lost its data (mesh/marker).
	mk, created, err := marker.Ensure(ctx, n.loc)
	if err != nil {
		return nil, fmt.Errorf("%w: Location Store namespace marker: %w", ErrStartup, err)
	}
	n.marker = mk
	if created {
		n.log.Info("namespace marker written: this is the first node of this Location Store namespace", "marker", mk.ID)
	}

	// §3.1: the host run's (OwnerId, LeaseGeneration) before anything else
	// is written.
	n.lease, err = lease.Acquire(ctx, lease.Config{
		Store: n.loc,
		Timing: lease.Timing{RenewInterval: cfg.Lease.RenewInterval, TTL: cfg.Lease.TTL,
			RenewTimeout: cfg.Lease.RenewTimeout, FencingMargin: cfg.Lease.FencingMargin},
		Clock:   n.clock,
		Logger:  n.log,
		OnEvent: n.leaseEvent,
		// A lost lease is acquired again once the store answers, and the
		// objects still held are re-adopted (node_readopt.go).
		Reacquire: true,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: owner lease: %w", ErrStartup, err)
	}
	if opts.afterLease != nil {
		opts.afterLease(n)
	}
	n.run.ownerID = n.lease.OwnerID()
	n.leaseGen.Store(n.lease.Generation())
	// The lifecycle generation must grow across restarts of one RID: peers
	// refuse a hello whose generation is below the one they admitted (a
	// late hello of a dead run). The LeaseGeneration comes from a durable,
	// store-wide increasing counter and is new for every run, so it is the
	// run's lifecycle generation too; no second counter is needed.
	n.run.lifecycleGeneration = n.leaseGen.Load()
	n.log = n.log.With("owner", n.run.ownerID, "gen", n.run.lifecycleGeneration)
	n.tracker = &directory.Tracker{Store: n.loc, PageSize: locstore.MaxPageItems, Logger: n.log, Self: rid,
		Linked: n.linked}

	// Objects: the spot runtime and the inbound object dispatch exist
	// before the transport, so that its Handler never sees a half-built
	// node (objects.go).
	if n.obj, err = newObjects(n); err != nil {
		return nil, fmt.Errorf("%w: objects: %w", ErrStartup, err)
	}

	n.tr, err = transport.New(transport.Config{
		RID:                 rid,
		Endpoint:            cfg.Node.Endpoint,
		AdvertisedEndpoint:  cfg.Node.AdvertiseEndpoint,
		MeshName:            cfg.Node.MeshName,
		SecurityIdentity:    wireSecurityIdentity(cfg.Node.SecurityIdentity),
		LifecycleGeneration: n.run.lifecycleGeneration,
		DescriptorRevision:  1,
		ProbeInterval:       cfg.Transport.LivenessInterval,
		PeerTimeout:         cfg.Transport.PeerTimeout,
		RequestTimeout:      cfg.Transport.RequestTimeout,
		SendQueueRecords:    cfg.Transport.SendQueueLimit,
		Curve:               curveCfg,
		Capabilities:        protocolCapabilities,
		MaxUnadmitted:       cfg.Transport.MaxUnadmitted,
		MaxPeers:            cfg.Transport.MaxPeers,
		IOBufferBytes:       cfg.Transport.IOBufferBytes,
		Handler:             n.obj.handleRecord, // object commands (objects.go)
		// A stopping target's word after its relay-ready (relocate_stopped.go).
		UnawaitedReady: n.obj.unawaitedReady,
		// The transport adds its own rid, mesh and gen (the owner id is the
		// node's to add: every line of a node names it), and logs every peer
		// event (admitted, down, rejected) itself, once, with the peer's
		// generation: the node installs no OnEvent that would log it again.
		Logger: log.With("owner", n.run.ownerID),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err) // its errors start "transport:"
	}
	n.run.endpoint = n.tr.AdvertisedEndpoint()

	// §4: the whole descriptor, validated, before the first publish.
	if n.descriptor, err = buildDescriptor(cfg, n.factories, n.run, n.leaseGen.Load(), record.StatePreparing); err != nil {
		return nil, err
	}
	if n.pub, err = directory.NewPublisher(directory.PublisherConfig{
		Store: n.loc, Lease: n.lease, Gate: n.lease.Gate(),
		MeshName: cfg.Node.MeshName, RoutingID: rid, Logger: n.log,
	}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	if n.planner, err = directory.NewPlanner(directory.PlannerConfig{
		MeshName: cfg.Node.MeshName, Self: rid, Grace: cfg.StoreFailureGrace,
	}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	// The admin listener binds before the first publish: a taken port
	// fails the start before any descriptor names this run (before, the
	// node published serving, then failed, and its descriptor stayed
	// listed as serving with an expired lease for an hour).
	if err := n.startAdmin(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err) // its errors start "admin:"
	}
	// Everything a lease event acts on exists from here (objects,
	// transport, publisher, logger).
	n.leaseEventsReady()
	if err := n.publishFirst(ctx); err != nil {
		return nil, fmt.Errorf("%w: publish descriptor: %w", ErrStartup, err)
	}
	// A Server node's Entry Spot exists before the node says Serving.
	if err := n.obj.openEntrySpot(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStartup, err)
	}
	if err := n.publish(ctx, record.StateServing); err != nil {
		return nil, fmt.Errorf("%w: publish descriptor: %w", ErrStartup, err)
	}
	n.log.Info("node serving", "endpoint", n.run.endpoint, "lifecycle", n.run.lifecycleGeneration,
		"role", cfg.Node.ObjectRole, "revision", uint64(n.pub.Revision()), "version", buildinfo.Read().String())

	n.wg.Add(1)
	go n.loop()
	return n, nil
}

// AnonymousIdentity is the security identity sent in admission when
// node.security_identity is empty: the wire's admission text is 1..255
// bytes, so "no identity" needs a spelling. Peers still compare it exactly.
const AnonymousIdentity = "anonymous"

func wireSecurityIdentity(s string) string {
	if s == "" {
		return AnonymousIdentity
	}
	return s
}

// publish writes the descriptor with the given state. A replay at an
// unchanged revision is harmless (Ignored).
func (n *Node) publish(ctx context.Context, state record.State) error {
	n.mu.Lock()
	d := n.descriptor
	d.State = state
	n.mu.Unlock()
	res, err := n.pub.Publish(ctx, d)
	if err != nil {
		if n.pub.Exhausted() {
			// §4: past 2^63-1 the host switches to Error and stops publishing.
			n.setState(record.StateError)
		}
		return err
	}
	n.mu.Lock()
	n.state, n.descriptor.State = state, state
	n.mu.Unlock()
	n.published.Store(true)
	if res.Takeover {
		n.log.Info("descriptor taken over from an expired run", "previous_owner", res.PreviousOwnerID,
			"previous_gen", uint64(res.PreviousLeaseGeneration))
	}
	if err := n.tr.SetDescriptorRevision(uint64(res.Revision), nil); err != nil {
		n.log.Warn("transport descriptor revision", "err", err)
	}
	return nil
}

func (n *Node) setState(s record.State) {
	n.mu.Lock()
	n.state = s
	n.mu.Unlock()
}

// leaseEvents are the owner lease's events that came while Start was
// still building the node. The lease's renew loop runs from Acquire on,
// and under load a renew (or its failure) came before Start had set the
// objects and the logger its handler reads: a data race (the race
// detector met it in a CI run), and a reacquisition then would have
// re-adopted through a publisher not yet built. Held events are few: at
// most a couple per renew interval while Start runs.
type leaseEvents struct {
	mu      sync.Mutex
	ready   bool
	pending []lease.Event
}

// leaseEvent is the lease manager's OnEvent: it holds an event back until
// leaseEventsReady, and handles it (onLeaseEvent) after that, in order.
func (n *Node) leaseEvent(ev lease.Event) {
	n.leaseEv.mu.Lock()
	defer n.leaseEv.mu.Unlock()
	if !n.leaseEv.ready {
		n.leaseEv.pending = append(n.leaseEv.pending, ev)
		return
	}
	n.onLeaseEvent(ev)
}

// leaseEventsReady handles the events held back so far, in order, and
// every later one as it comes.
func (n *Node) leaseEventsReady() {
	n.leaseEv.mu.Lock()
	defer n.leaseEv.mu.Unlock()
	n.leaseEv.ready = true
	for _, ev := range n.leaseEv.pending {
		n.onLeaseEvent(ev)
	}
	n.leaseEv.pending = nil
}

func (n *Node) onLeaseEvent(ev lease.Event) {
	switch ev.Kind {
	case lease.EventRenewFailed, lease.EventExpired, lease.EventLost:
		n.noteStoreTrouble()
	}
	switch ev.Kind {
	case lease.EventLost:
		// The gate is closed for every §5 target; the objects' work waits
		// (lease_hold.go) for a reacquisition (node_readopt.go). lostErr
		// first: the hold says whether anything can reacquire it.
		n.mu.Lock()
		n.lostErr = ev.Err
		n.mu.Unlock()
		if n.obj != nil {
			n.async(n.obj.holdForLease)
		}
		if errors.Is(ev.Err, locstore.ErrDataLost) {
			n.log.Error("STORE DATA LOST: the Location Store no longer holds what this node wrote (FLUSHALL, "+
				"eviction, a failover to a replica without persistence or one that missed the last writes); the node stops all new work so that no "+
				"generation is issued twice. Its objects' state stays in memory but cannot be served; restart the "+
				"nodes once the store is restored or known empty, and check the Redis settings (docs/store-redis.md)",
				"err", ev.Err)
		} else if errors.Is(ev.Err, directory.ErrRoutingIDInUse) {
			n.log.Warn("owner lease ended: this node's objects cannot be served here any more (another run holds its routing id); "+
				"their records are reclaimed by the other nodes once the lease has expired", "err", ev.Err)
		} else {
			// The lease manager logged the loss (ERROR); this line says
			// what becomes of the objects meanwhile.
			n.log.Warn("owner lease lost: this node's objects keep their state, their queued work and timers wait; "+
				"once a new lease generation is acquired they are re-adopted (those changed meanwhile are dropped)", "err", ev.Err)
		}
		n.setState(record.StateError)
	case lease.EventReacquired:
		gen := ev.Generation
		n.async(func() { n.readoptAfterReacquire(gen) })
	case lease.EventRenewed, lease.EventReconstructed:
		if n.obj != nil && n.obj.leaseHeld() {
			n.async(n.obj.releaseLeaseHold) // the gate reopened after a late renew
		}
	case lease.EventExpired:
		n.log.Warn("admission deadline passed: new work refused until a renew succeeds")
		if n.obj != nil {
			n.async(n.obj.holdForLease)
		}
	}
	// EventRenewFailed is logged by the lease manager (once per run of
	// failures and then every renewFailEvery): a line here repeated each.
}

// loop runs discovery every interval until Close.
func (n *Node) loop() {
	defer n.wg.Done()
	ctx, cancel := n.stopContext()
	defer cancel()
	// Rounds are spread (±10 %) so that a thousand nodes started together
	// do not read the store in the same instant every interval.
	t := time.NewTimer(jittered(n.discoveryEvery))
	defer t.Stop()
	n.Discover(ctx)
	var early relist
	lastSweep, lastDrops := n.clock.Now(), n.clock.Now()
	for round := 0; ; {
		select {
		case <-n.stop.Done():
			early.stop()
			return
		case <-n.dataLost:
			// A store call reported a data loss: the marker check now, not
			// at the next round, stops the node (checkMarker → lease.Fail).
			n.checkMarker(ctx)
			continue
		case <-n.relistSoon:
			if early.ask(time.Now()) {
				n.Discover(ctx)
				early.ran(time.Now())
			}
			continue
		case <-early.due():
			early.fired()
			n.Discover(ctx)
			early.ran(time.Now())
			continue
		case <-t.C:
			round++
			t.Reset(jittered(n.discoveryEvery))
			n.checkMarker(ctx)
			n.Discover(ctx)
			early.ran(time.Now())
			n.refreshCapacityCopy(ctx, false)
			n.obj.exec.ExpireHints() // an idle node lets its last burst's rows go
			now := n.clock.Now()
			n.obj.drops.report(n.log, now-lastDrops)
			lastDrops = now
		}
		if round%reclaimEvery == 0 {
			n.reclaim(ctx)
		}
		// Only servers sweep: the sweep's shards are shared out among the
		// serving server nodes (sweepPosition), so a client or none node
		// would scan every row of every shard each interval.
		if every := n.cfg.Recovery.ReclaimSweepInterval; every > 0 && n.clock.Now()-lastSweep >= every && n.servingState() &&
			n.cfg.Node.ObjectRole == config.RoleServer {
			lastSweep = n.clock.Now()
			if _, err := n.reclaimSweep(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("reclaim sweep of dead owners' objects failed", "err", err)
			}
		}
	}
}

// linked reports an admitted link to that node run (the Tracker trusts
// the list for runs it does not watch while their links are up).
func (n *Node) linked(rid []byte, gen uint64) bool {
	if n.tr == nil {
		return false
	}
	p, ok := n.tr.Peer(transport.RID(rid))
	return ok && p.LifecycleGeneration == gen
}

// removeDeadWatched removes the descriptors of runs this node watches whose
// lease ended while their links stayed up (directory.Tracker): the other
// nodes trust the list for those and learn of it only from the removal.
//
// Right after a store problem here (troubledRecently) the removal waits a
// lease TTL and looks again (ReclaimKey re-reads the lease: a run that has
// reacquired it meanwhile is live and left alone): a store outage longer
// than the TTL ends every run's lease at once, and a watcher that got its
// own lease back first removed a live server still recovering its lease —
// which needs up to a TTL more, its old record having to expire first —
// and every node dropped it until it republished (an operator try-out,
// Redis paused 20 s with a 15 s TTL). A run that lost its lease alone (its
// own store connection failed) is removed at once, as before.
func (n *Node) removeDeadWatched(ctx context.Context) {
	now := n.clock.Now()
	dead := n.tracker.DeadWatched()
	if n.troubledRecently() {
		for _, key := range dead {
			if _, ok := n.deadPending[key]; !ok {
				if n.deadPending == nil {
					n.deadPending = map[string]time.Duration{}
				}
				n.deadPending[key] = now
			}
		}
		dead = nil
	}
	for key, since := range n.deadPending {
		if now-since >= n.cfg.Lease.TTL {
			delete(n.deadPending, key)
			dead = append(dead, key)
		}
	}
	for _, key := range dead {
		// RemovedBy: the batch also keeps a removal record for an hour,
		// so that ctl topology shows the run as removed, not missing;
		// discovery rounds never read it.
		res, err := directory.ReclaimKey(ctx, n.loc, key, directory.ReclaimOptions{Gate: n.lease.Gate(), Logger: n.log,
			MinAge: time.Nanosecond, RemovedBy: &directory.Remover{OwnerID: n.run.ownerID, RoutingID: n.run.rid}})
		if err != nil {
			// Again next round, whatever the links say: this round's
			// planner drops the link to the run (its lease is not valid
			// here any more) and DeadWatched reports only runs still
			// linked, so without this the removal was never tried again
			// and the nodes trusting the list for that run (linked, not
			// watching it) were never told. ReclaimKey reads the
			// descriptor and the lease again: a run that reacquired its
			// lease or republished is left alone.
			if n.deadPending == nil {
				n.deadPending = map[string]time.Duration{}
			}
			n.deadPending[key] = now - n.cfg.Lease.TTL
		}
		switch {
		case err != nil && ctx.Err() == nil:
			n.log.Warn("discovery: descriptor of a run without its lease not removed; trying again next round", "key", key, "err", err)
		case res.Deleted > 0:
			n.log.Warn("discovery: a watched run lost its owner lease while its links were up; its descriptor is removed so that every node stops using it "+
				"(a run cut off from the store, or paused for less than transport.peer_timeout, republishes it once it has a lease again)",
				"key", key)
		}
	}
}

// jittered is d ± 10 %.
func jittered(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}

// async runs f on a goroutine Close waits for, unless the node is closing.
func (n *Node) async(f func()) {
	n.mu.Lock()
	closed := n.closed
	if !closed {
		n.wg.Add(1)
	}
	n.mu.Unlock()
	if !closed {
		go func() { defer n.wg.Done(); f() }()
	}
}

// LeaseLost returns why this run's owner lease was lost for good (nil while
// it holds); errors.Is(err, locstore.ErrDataLost) when the store lost data.
func (n *Node) LeaseLost() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lostErr
}

// checkMarker stops the node's new work for good when the store lost its
// data: the namespace marker it saw at start is gone or replaced. Going on
// would issue LeaseGenerations and ObjectGenerations again from where the
// emptied store restarts them (§3.1, §3.2 forbid reusing one) and serve
// objects whose records no longer exist.
func (n *Node) checkMarker(ctx context.Context) {
	err := marker.Check(ctx, n.loc, n.marker)
	if err == nil || !errors.Is(err, marker.ErrDataLost) {
		return // a store failure says nothing about the data (lease grace)
	}
	n.lease.Fail(err)
}

// stopContext returns a context that ends when the node stops (Close) or
// cancel is called. Until 2026-12-07 a goroutine per context waited for
// either, and ended only after cancel: after Close had returned, for the
// discovery loop's.
func (n *Node) stopContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(n.stop)
}

// servingState reports whether the node publishes serving (not draining,
// stopped or in error).
func (n *Node) servingState() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state == record.StateServing
}

// reclaimEvery is how many discovery rounds pass between two reclaim
// sweeps of dead runs' descriptors (about 10 minutes at the default 5 s).
const reclaimEvery = 120

// reclaim deletes descriptors whose owner lease has been gone for a long
// time (or that say stopped and whose lease is gone), so random RIDs do not
// accumulate (docs/DISCOVERY.md). It is the descriptor's own expiry path;
// the §11 owner sweep never touches them.
//
// Only the descriptors the last discovery round saw without a valid lease
// are looked at (each with one conditional ReclaimKey): no scan of the
// whole namespace and no lease read of the live runs, so the cost follows
// the dead runs, not the mesh size (docs/DISCOVERY.md "Cost at scale").
func (n *Node) reclaim(ctx context.Context) {
	snap, ok := n.LastSnapshot()
	if !ok {
		return
	}
	deleted := 0
	for _, e := range snap.Entries {
		if e.LeaseValid {
			continue
		}
		d := e.Descriptor
		if d.State != record.StateStopped && snap.StoreNow.Sub(d.UpdatedAt.Time()) <= directory.DefaultReclaimAge {
			continue // a crashed run's descriptor stays its MinAge, for operators
		}
		res, err := directory.ReclaimKey(ctx, n.loc, e.Key, directory.ReclaimOptions{Gate: n.lease.Gate(), Logger: n.log})
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("descriptor reclaim failed", "key", e.Key, "err", err)
			}
			return
		}
		deleted += res.Deleted
	}
	if deleted > 0 {
		n.log.Info("reclaimed descriptors of dead runs", "deleted", deleted)
	}
}

// discoveryFailEvery is how many failed discovery rounds in a row share one
// WARN line.
const discoveryFailEvery = 12

// The discovery failure lines of one store outage (a run of failed rounds).
const (
	discoveryFailKeeping = "discovery: store failure, keeping the last complete list"
	discoveryFailStale   = "discovery: store failure, the last list is past store_failure_grace"
)

// discoveryFailures decides the log lines of one run of failed discovery
// rounds: a WARN at its first round; a WARN at the first round past
// store_failure_grace, when it happens (the kept list is stale from then
// on; before 2026-12-06 that was said only at the next reminder, up to
// discoveryFailEvery-1 rounds late); a reminder every discoveryFailEvery
// rounds; never one per round.
type discoveryFailures struct {
	rounds    int                   // failed rounds in a row
	staleSaid bool                  // the round past the grace was logged
	last      directory.GraceStatus // the grace status at the latest failed round
}

// failed counts a failed round and returns the WARN to log for it, if any.
func (d *discoveryFailures) failed(st directory.GraceStatus) (msg string, log bool) {
	d.rounds++
	d.last = st
	switch {
	case !st.InGrace && !d.staleSaid:
		d.staleSaid = true
		return discoveryFailStale, true
	case d.rounds%discoveryFailEvery == 1 && st.InGrace:
		return discoveryFailKeeping, true
	case d.rounds%discoveryFailEvery == 1:
		return discoveryFailStale, true
	}
	return "", false
}

// answered ends the run of failures, returning it (ok false when there was
// none).
func (d *discoveryFailures) answered() (ended discoveryFailures, ok bool) {
	ended, *d = *d, discoveryFailures{}
	return ended, ended.rounds > 0
}

// discoveryRoundBound bounds one discovery round: the renew interval plus
// the time one Location Store call may take — the Redis provider's
// operation_timeout with provider redis, and otherwise lease.renew_timeout,
// the provider-neutral bound of one store call. A location_store.redis.*
// key used to bound the rounds of a memory store too, which a user reading
// the key's name would not expect (config.IgnoredStoreSettings now lists it
// as ignored there).
func discoveryRoundBound(cfg config.Config) time.Duration {
	call := cfg.Lease.RenewTimeout
	if cfg.LocationStore.Provider == config.ProviderRedis {
		call = cfg.LocationStore.Redis.OperationTimeout
	}
	return cfg.Lease.RenewInterval + call
}

// Discover runs one discovery round: read the whole descriptor list as one
// same-point-in-time list, check each host's owner lease, and connect to
// (or drop) peers accordingly. During a store failure the last complete
// list and its connection intents are kept and nothing new is connected
// (§10). It returns the round's error, if any.
func (n *Node) Discover(ctx context.Context) error {
	n.discoverMu.Lock()
	defer n.discoverMu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, discoveryRoundBound(n.cfg))
	defer cancel()
	// The Tracker reads only what may have changed since the last round:
	// the change counter always, the list when it moved, a lease when it
	// is new, its descriptor changed or its known expiry came
	// (docs/DISCOVERY.md "Cost at scale").
	snap, st, err := n.tracker.Round(rctx, n.cfg.Node.MeshName)
	n.discoveryReads.add(st)
	now := n.clock.Now()
	if err != nil && ctx.Err() != nil {
		return err // stopping: not a store failure
	}
	if err != nil {
		n.noteStoreTrouble()
		st := n.planner.ObserveFailure(now, err)
		// At the outage's start, when the grace ends, then every
		// discoveryFailEvery rounds: not every round (a store gone for good
		// logged one line every round for as long as the node ran).
		if msg, ok := n.discoveryFails.failed(st); ok {
			n.log.Warn(msg, "err", err, "failed_rounds", n.discoveryFails.rounds, "failing_for", st.Elapsed,
				"in_grace", st.InGrace, "grace_elapsed", st.GraceElapsed)
		}
		return err
	}
	if ended, ok := n.discoveryFails.answered(); ok {
		// The list read now replaces the kept one: current again.
		n.log.Info("discovery: the store answers again; the descriptor list is current again", "failed_rounds", ended.rounds,
			"failing_for", ended.last.Elapsed, "past_grace", ended.staleSaid)
	}
	actions, err := n.planner.Observe(now, snap)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.snapSeq++
	n.listSeq.Store(n.snapSeq)
	n.snapAt = now
	n.setViewLocked(snap, now)
	n.mu.Unlock()
	n.removeDeadWatched(rctx)
	for _, a := range actions {
		peer := transport.RID(a.RoutingID)
		action, reason := a.Kind.String(), a.Reason
		switch a.Kind {
		case directory.Connect:
			err = n.tr.Connect(peer, a.Endpoint)
		case directory.Disconnect:
			err = n.tr.Disconnect(peer)
		case directory.Reconnect:
			if alreadyAdmitted(n.tr, peer, a) {
				// The link redialled the endpoint and admitted the new run
				// before this round saw it (a peer restarted within one
				// round): tearing it down would only drop what is queued
				// on it and fail its pending requests.
				action, reason = "keep", a.Reason+"; the link has already admitted the new run"
				break
			}
			_ = n.tr.Disconnect(peer)
			err = n.tr.Connect(peer, a.Endpoint)
		}
		n.log.Info("discovery", "action", action, "peer", peer.String(), "endpoint", a.Endpoint, "reason", reason)
		if err != nil && !errors.Is(err, transport.ErrUnknownPeer) {
			n.log.Warn("discovery action failed", "action", a.Kind.String(), "peer", peer.String(), "err", err)
		}
	}
	return nil
}

// alreadyAdmitted says whether tr's link to peer is admitted by exactly the
// run a reconnect asks for: same lifecycle generation (store-issued, one
// run's), advertised endpoint and security identity (as admission spells
// it: an empty one is sent as AnonymousIdentity).
func alreadyAdmitted(tr *transport.Node, peer transport.RID, a directory.Action) bool {
	p, ok := tr.Peer(peer)
	return ok && p.LifecycleGeneration == uint64(a.LifecycleGeneration) && p.Endpoint == a.Endpoint &&
		p.SecurityIdentity == wireSecurityIdentity(a.SecurityIdentity)
}

// WaitPeers waits until this node has admitted links to at least count
// peers, or ctx ends, or the node has stopped (ErrClosed).
func (n *Node) WaitPeers(ctx context.Context, count int) error {
	for {
		if len(n.tr.Peers()) >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mesh: %d of %d peers admitted: %w", len(n.tr.Peers()), count, ctx.Err())
		case <-n.Done():
			// A stopped node admits no more peers: until 2026-12-07 this
			// waited for ctx, for ever without a deadline
			// (TestWaitPeersOnAStoppedNodeIsErrClosed).
			return fmt.Errorf("%w: %d of %d peers admitted", ErrClosed, len(n.tr.Peers()), count)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Peers returns the peers this node's links are admitted to.
func (n *Node) Peers() []transport.PeerInfo { return n.tr.Peers() }

// RID returns the node's RoutingId.
func (n *Node) RID() []byte { return append([]byte(nil), n.run.rid...) }

// Endpoint returns the advertised endpoint.
func (n *Node) Endpoint() string { return n.run.endpoint }

// LifecycleGeneration returns this run's lifecycle generation.
func (n *Node) LifecycleGeneration() uint64 { return n.run.lifecycleGeneration }

// Owner returns this run's (OwnerId, LeaseGeneration).
func (n *Node) Owner() (string, uint64) { return n.run.ownerID, n.leaseGen.Load() }

// State returns the node's descriptor state.
func (n *Node) State() record.State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// Gate is the node's admission gate (§5): every new piece of work asks it.
func (n *Node) Gate() *lease.Gate { return n.lease.Gate() }

// Transport exposes the node's transport (for tests and tools).
func (n *Node) Transport() *transport.Node { return n.tr }

// LastSnapshot returns the latest complete descriptor list discovery used.
func (n *Node) LastSnapshot() (directory.Snapshot, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastSnap, n.haveSnap
}

// freshList runs one discovery round, then waits at most linkWait for the
// links to the serving peers of this mesh the round listed for the first
// time (it has just started linking to them; placement uses only admitted
// links). Peers listed before are not waited for: a link to one of them
// that is down (a node killed while its lease runs on) will not come up
// in a moment. It returns the round's store error.
func (n *Node) freshList(ctx context.Context, linkWait time.Duration) error {
	before, _ := n.LastSnapshot()
	listed := make(map[string]bool, len(before.Entries))
	for _, e := range before.Entries {
		if n.servingPeer(e) {
			listed[string(e.Descriptor.RoutingID)] = true
		}
	}
	if err := n.Discover(ctx); err != nil {
		return err
	}
	snap, _ := n.LastSnapshot()
	wctx, cancel := context.WithTimeout(ctx, linkWait)
	defer cancel()
	for _, e := range snap.Entries {
		rid := transport.RID(e.Descriptor.RoutingID)
		if !n.servingPeer(e) || listed[string(rid)] {
			continue
		}
		if _, ok := n.tr.Peer(rid); !ok {
			_, _ = n.tr.WaitAdmitted(wctx, rid) // a link not up by then is not a candidate
		}
	}
	return nil
}

// servingPeer reports whether e is another serving server node of this
// node's mesh with a valid lease: a placement candidate but for its link,
// capacity and type.
func (n *Node) servingPeer(e directory.Entry) bool {
	return servingServer(e, n.cfg.Node.MeshName) && string(e.Descriptor.RoutingID) != string(n.run.rid)
}

// snapshotAge is how long ago (n.clock) discovery stored the last list;
// false when there is none.
func (n *Node) snapshotAge() (time.Duration, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.clock.Now() - n.snapAt, n.haveSnap
}

// lastSnapshotNumbered is LastSnapshot with the list's number, which
// changes whenever the list the node holds changes — discovery replaces
// it, or a peer's refusal shows that peer leaving (noteRefusedLeaving) —
// so that what is derived from a list, like placement's candidate sets, is
// kept per number. It is not a count of discovery rounds (listSeq is).
func (n *Node) lastSnapshotNumbered() (directory.Snapshot, uint64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastSnap, n.viewSeq, n.haveSnap
}

// Done is closed once the node has stopped (Close, or a drain through the
// admin listener, finished).
func (n *Node) Done() <-chan struct{} { return n.done }

// Close shuts the node down in the order of §11: stop accepting work
// (draining), stop discovery, publish stopped, end the cold activations it
// still passes on (endPassOns), release the owner lease, remove the
// stopped descriptor (removeStoppedDescriptor), close the transport and the
// stores the node opened. It completes exactly
// once; later calls return the first result. ctx bounds the store work; when
// it ends first the remaining steps still run (ForceStopped) and every
// goroutine, timer and socket is gone when Close returns. The store steps
// are retried while the store does not answer, within ctx and
// shutdown_deadline; those still undone then are one
// *ShutdownIncompleteError.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		<-n.done
		return n.closeErr
	}
	n.closed = true
	n.mu.Unlock()
	deadline := n.cfg.ShutdownDeadline
	if deadline <= 0 {
		deadline = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var errs []error
	var drainingErr error
	// drainSaid also when the gate is shut and nothing is published here:
	// a lease recovery under way (reacquired, the objects being
	// re-adopted) that ends during the shutdown republishes draining, not
	// serving — the others placed on the stopping node and moved to it
	// until its stopped publish (TestLeaseRecoveredWhileClosingDoesNotRepublishServing).
	// The gate is asked under drainMu, which the recovery's republish
	// holds: either it has republished (the gate is open, draining follows
	// here) or it will say draining.
	n.drainMu.Lock()
	n.drainSaid = true
	if n.lease.Gate().Open() {
		// One try: the stopped publish below supersedes it, and is the
		// one retried while the store does not answer.
		if err := n.publish(ctx, record.StateDraining); err != nil {
			drainingErr = fmt.Errorf("publish draining: %w", err)
		}
	}
	n.drainMu.Unlock()
	// §11: stop accepting object work; orders in flight finish and queued
	// requests are answered while the transport is still up (objects.go).
	// A turn still running when the shutdown's time but the store steps'
	// share is spent (a handler blocked for long) is not waited for: those
	// steps must still run within the deadline.
	turnsCtx, cancelTurns := context.WithTimeout(ctx, turnsWait(ctx, deadline))
	stuck, calls, inCalls := n.obj.stopWithin(turnsCtx)
	cancelTurns()
	if len(stuck) > 0 || calls || len(inCalls) > 0 {
		sort.Strings(stuck)
		e := &ApplicationStuckError{Turns: stuck, Calls: calls, InCalls: inCalls}
		n.log.Error("shutdown: application code had not returned; not waited for", "err", e)
		errs = append(errs, e)
	}
	if h := n.obj.hook().closeStep; h != nil {
		h(closeObjectsStopped)
	}
	n.stopNode()
	n.wg.Wait()
	// §11: sweep this host run's authority rows (never descriptors) while
	// the lease still proves ownership, then publish stopped. Each store
	// step is retried while the store does not answer, within the deadline
	// (retryStoreStep); what stays undone is one ShutdownIncompleteError.
	// A lease that ended before (lost, expired: a store outage longer
	// than lease.ttl) skips them — nothing may be written in this run's
	// name — and that is reported too: it used to be silent, and the
	// process exited 0 with its descriptor and records left.
	var steps shutdownSteps
	swept := false
	if n.lease.Gate().Open() {
		err := n.retryStoreStep(ctx, stepSweep, true, func(ctx context.Context) error {
			_, err := n.sweepAuthority(ctx)
			return err
		})
		if err != nil {
			steps.failed(stepSweep, err)
		} else {
			swept = true
		}
	} else {
		steps.leaseGone(stepSweep, n.leaseEndedReason())
	}
	if n.lease.Gate().Open() {
		err := n.retryStoreStep(ctx, stepStopped, true, func(ctx context.Context) error {
			return n.publish(ctx, record.StateStopped)
		})
		if err != nil {
			steps.failed(stepStopped, fmt.Errorf("publish stopped: %w", err))
		}
	} else {
		steps.leaseGone(stepStopped, n.leaseEndedReason())
		if drainingErr != nil {
			// Neither state got out: the draining failure is the last
			// store error, in the same one line.
			steps.failed(stepStopped, drainingErr)
		}
	}
	if h := n.obj.hook().closeStep; h != nil {
		h(closeStoppedPublished)
	}
	steps.lostRecord = n.lease.LostRecord()
	tdErr := n.teardown(ctx, &steps)
	n.closeErr = errors.Join(append([]error{steps.result(ctx)}, append(errs, tdErr)...)...)
	n.swept = swept // read after done is closed (sweptOnClose)
	if ctx.Err() != nil {
		n.log.Warn("shutdown deadline passed: force-stopped", "err", n.closeErr)
	} else {
		n.log.Info("node stopped")
	}
	close(n.done)
	return n.closeErr
}

// leaseEndedReason is why the owner lease no longer admits writes in this
// run's name: the loss as reported (with its cause) or the gate's reason
// (its local deadline passed without a renewal).
func (n *Node) leaseEndedReason() error {
	if err := n.LeaseLost(); err != nil {
		return err
	}
	if err := n.lease.Gate().Admit(); err != nil {
		return err
	}
	return lease.ErrLeaseExpired // the gate closed and reopened in between
}

// sweptOnClose reports, once Close has returned, whether its §11 sweep
// deleted every authority record of this run: false when it failed or did
// not run (the lease was lost: nothing may be written in this run's name),
// and then the records of what it still held remain until reclaimed.
func (n *Node) sweptOnClose() bool {
	<-n.done
	return n.swept
}

// transportFlushWait bounds how long a stopping node waits for its queued
// records to be written before it closes the transport.
const transportFlushWait = 2 * time.Second

// teardown releases the lease and closes transport and owned stores; it is
// also the cleanup of a failed Start.
//
// steps, set by Close, makes the lease release and the descriptor removal
// retried while the store does not answer (within ctx) and records them
// there when they stay undone; nil (a failed Start) tries each once.
func (n *Node) teardown(ctx context.Context, steps *shutdownSteps) error {
	var errs []error
	n.stopAdmin()
	if n.obj != nil {
		n.obj.stop() // no runtime goroutine outlives a failed Start (objects.go)
		// The cold activations passed on while the node closed end here,
		// under its lease and before its transport closes: what they sent
		// is flushed below (instance_target.go, passOnActivation).
		n.obj.endPassOns(ctx)
	}
	if steps == nil && n.published.Load() && n.lease.Gate().Open() {
		// A start that failed after publishing preparing says stopped
		// before its lease goes (one try), so that the descriptor is
		// removed below as an orderly stop's is; before, the preparing row
		// of a run without a lease stayed an hour
		// (TestStartFailingAfterItsFirstPublishLeavesNoDescriptor).
		pctx, cancel := context.WithTimeout(ctx, n.cfg.Lease.RenewInterval)
		if err := n.publish(pctx, record.StateStopped); err != nil {
			n.log.Warn("failed start: stopped not published; the descriptor stays for the other nodes' reclaim", "err", err)
		}
		cancel()
	}
	if n.lease != nil {
		var wait func(context.Context) error
		if steps != nil {
			pace, said := shutdownPace(), false
			wait = func(ctx context.Context) error {
				if !said {
					said = true
					n.log.Warn("shutdown: the store does not answer; retrying until it does or shutdown_deadline passes",
						"step", stepRelease)
				}
				return pace.sleep(ctx)
			}
		}
		if err := n.lease.ReleaseRetrying(ctx, wait); err != nil {
			if steps != nil {
				steps.failed(stepRelease, fmt.Errorf("release owner lease: %w", err))
				steps.notDone[stepRemoveStopped] = true // only once the lease is gone
			} else {
				errs = append(errs, fmt.Errorf("release lease: %w", err))
			}
		} else if n.pub != nil {
			// Also when the stopped publish's answer was lost: ReclaimKey
			// deletes only a descriptor that says stopped (or is older
			// than MinAge) once the lease is gone.
			n.removeStoppedDescriptor(ctx, steps)
		}
		n.lease.Close()
	}
	if n.tr != nil {
		if steps != nil && n.obj != nil {
			// What this node passed on to new owners is in order there
			// before its links end: a sender learns of this stop only
			// then, and switches (shutdown_passons.go).
			n.obj.settlePassOns(ctx)
		}
		// What this node answered or sent last (a queued request's reply
		// after §11 stopped object work) is still in the links' queues:
		// closing now would drop it.
		fctx, fcancel := context.WithTimeout(ctx, transportFlushWait)
		if err := n.tr.Flush(fctx); err != nil {
			n.log.Warn("transport: records still queued at close are dropped", "err", err)
		}
		fcancel()
		if err := n.tr.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close transport: %w", err))
		}
		if steps != nil && n.obj != nil {
			n.obj.reportLate()
		}
	}
	if n.ownsReloc && n.reloc != nil {
		errs = append(errs, n.reloc.Close())
	}
	if n.ownsLoc && n.loc != nil {
		errs = append(errs, n.loc.Close())
	}
	return errors.Join(errs...)
}

// removeStoppedDescriptor deletes this run's descriptor after an orderly
// stop: it says `stopped` and the lease is released, so it is of no more
// use to anyone, and left in place it would stay listed (ctl topology) until
// another node's reclaim round. directory.ReclaimKey keeps the §11 rule: the
// delete holds only while the lease is gone. With steps (Close) it is
// retried while the store does not answer, and a failure recorded there;
// either way it only leaves the descriptor for the other nodes' reclaim.
func (n *Node) removeStoppedDescriptor(ctx context.Context, steps *shutdownSteps) {
	if steps != nil && steps.lostRecord == lease.RecordDataLost {
		// The store lost its data: the lease loss already says so, and a
		// store that went back in time refuses every call. Its descriptor,
		// if the store kept it, is not stopped, which ReclaimKey would keep
		// anyway. Until 2026-12-07 the removal was tried: the line added "a
		// store step failed for good" with the loss's text again, and a
		// WARN said "stopped descriptor not removed".
		steps.undone(stepRemoveStopped)
		return
	}
	var res directory.ReclaimResult
	remove := func(ctx context.Context) error {
		var err error
		res, err = directory.ReclaimKey(ctx, n.loc, n.pub.Key(), directory.ReclaimOptions{Logger: n.log})
		return err
	}
	var err error
	if steps != nil {
		err = n.retryStoreStep(ctx, stepRemoveStopped, false, remove)
	} else {
		err = remove(ctx)
	}
	switch {
	case err != nil:
		n.log.Warn("stopped descriptor not removed; the other nodes reclaim it", "err", err)
		if steps != nil {
			steps.failed(stepRemoveStopped, fmt.Errorf("remove descriptor: %w", err))
		}
	case res.Deleted == 1:
		n.log.Info("stopped descriptor removed")
	case res.Young+res.Live > 0 && steps != nil:
		// Still this run's, and not stopped (the lease ended before the
		// stopped publish, or its answer failed): ReclaimKey keeps it as
		// a crashed run's trace, and so does this run (§11: a descriptor
		// goes only by its lease's expiry and the reclaim rule).
		steps.undone(stepRemoveStopped)
	}
}

// leavingRun names a node run by routing id and lifecycle generation.
type leavingRun struct {
	rid string
	gen uint64
}

// noteLeaving records the node runs the list the node holds shows
// draining or stopped, for isLeaving. n.mu is held, so that the map is of
// the list lastSnap holds.
func (n *Node) noteLeaving(snap directory.Snapshot) {
	m := map[leavingRun]bool{}
	for _, e := range snap.Entries {
		d := e.Descriptor
		if directory.Leaving(d.State) {
			m[leavingRun{string(d.RoutingID), uint64(d.LifecycleGeneration)}] = true
		}
	}
	n.leaving.Store(&m)
}

// isLeaving reports whether the list the node holds shows that node run
// draining or stopped (listed so, or it refused a move so): a route to it
// is about to go stale (its objects move away, Drain) and is better
// re-read than used.
func (n *Node) isLeaving(rid []byte, gen uint64) bool {
	m := n.leaving.Load()
	return m != nil && (*m)[leavingRun{string(rid), gen}]
}

// publishFirst publishes the preparing descriptor. Another run of the same
// mesh and routing id whose owner lease is still valid refuses it
// (ErrRoutingIDInUse). When that run crashed a moment ago — a restart right
// after a SIGKILL or an OOM kill — its lease ends within lease.ttl, so the
// start waits for that once and takes the descriptor over, instead of
// failing until an outside restart happens to come late enough. A run that
// is alive renews its lease meanwhile, and the start fails as before.
func (n *Node) publishFirst(ctx context.Context) error {
	err := n.publish(ctx, record.StatePreparing)
	var inUse *directory.RoutingIDInUseError
	if !errors.As(err, &inUse) {
		return err
	}
	// LeaseExpiresAt is store time: what is left of the lease is measured
	// against the store's clock of the same look, not this host's (a store
	// clock behind this one made the wait too short to take over, one far
	// ahead is capped by the TTL).
	left := time.Until(inUse.LeaseExpiresAt)
	if !inUse.StoreNow.IsZero() {
		left = inUse.LeaseExpiresAt.Sub(inUse.StoreNow)
	}
	wait := max(min(left, n.cfg.Lease.TTL), 0) + 500*time.Millisecond
	n.log.Warn("startup: this mesh and routing id are published by another run whose owner lease has not ended; "+
		"waiting once for it to end (a run that crashed a moment ago), then taking over",
		"other_owner", inUse.OwnerID, "other_lease_gen", uint64(inUse.LeaseGeneration),
		"lease_expires", inUse.LeaseExpiresAt, "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return err
	case <-t.C:
	}
	return n.publish(ctx, record.StatePreparing)
}
