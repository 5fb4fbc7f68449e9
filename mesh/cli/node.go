package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/stores"
	"github.com/meshnode/meshnode/relocstore"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	"github.com/meshnode/meshnode/spot"
)

// Factories is the registry the stock commands run nodes with. An
// application embedding cli.Main registers its own factories here (or in
// spot.Default before calling Main with a nil Factories).
var Factories *spot.Registry

// Started, when set, is called by `run` with the node it started, once
// mesh.Start returned and before run waits for its stop signal: an
// application embedding cli.Main keeps n.Manager() for its handlers, which
// reach other objects through it (docs/EMBEDDING.md §12). The node already
// serves when it is called, so a handler may run before it: the pointer a
// factory's closure holds is nil until then. It must return promptly; run
// stops the node itself (drain, §11) on the signal.
var Started func(n *mesh.Node)

func registry() (*spot.Registry, error) {
	if Factories != nil {
		return Factories, nil
	}
	r := spot.NewRegistry()
	if err := demoapp.Register(r); err != nil {
		return nil, err
	}
	if err := demoapp.RegisterInstances(r); err != nil {
		return nil, err
	}
	for _, f := range spot.Default.All() {
		if err := r.Register(f); err != nil {
			return nil, err
		}
	}
	return r, nil
}

const runUsage = `usage: meshnode run [--config FILE] [config flags]

Runs one mesh node until SIGINT, SIGTERM or SIGHUP (a closed terminal; under
nohup SIGHUP stays ignored). On the signal a server node first moves its
objects to the other serving nodes (relocation.drain_on_shutdown, default
true; --relocation.drain_on_shutdown=false turns it off), then stops (§11)
within shutdown_deadline. A second signal during the drain stops it where it
is and shuts down at once: the objects not moved yet are removed with their
state. A signal while the node still starts (waiting for a crashed run of the
same routing id to lose its lease, or for the Location Store) ends the start:
exit 1, with a line saying what the start was at. Configuration comes from the YAML
file (--config or MESHNODE_CONFIG), then MESHNODE_ environment variables,
then flags; see docs/OPERATIONS.md and docs/node.example.yaml.`

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode run")
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, runUsage, true), stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	defer survivePipeReaderGone()()
	cfg, err := config.LoadFlagSet(fs, config.LoadOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "meshnode run: %v\n", err)
		return ExitUsage
	}
	reg, err := registry()
	if err != nil {
		fmt.Fprintf(stderr, "meshnode run: factories: %v\n", err)
		return ExitError
	}
	if cfg.Node.ObjectRole != config.RoleServer {
		// Only a server hosts objects (§2). The stock binary's demo
		// factories are its own, not the operator's: a client or none node
		// simply runs without them instead of failing validation.
		reg = spot.NewRegistry()
	}
	log := cfg.Logger(stderr)
	node, code := startNode(ctx, mesh.Options{Config: cfg, Factories: reg, Logger: log}, stderr)
	if node == nil {
		return code
	}
	if Started != nil {
		Started(node)
	}
	fmt.Fprintf(stdout, "meshnode: node %x serving at %s (mesh %q)\n", node.RID(), node.Endpoint(), cfg.Node.MeshName)
	if addr := node.AdminAddr(); addr != "" {
		fmt.Fprintf(stdout, "meshnode: admin listener on http://%s\n", addr)
	}
	select {
	case <-ctx.Done():
	case <-node.Done():
		return adminStopped(node, stdout, stderr)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownDeadline)
	defer cancel()
	drain := cfg.Relocation.DrainOnShutdown && cfg.Node.ObjectRole == config.RoleServer
	stop := make(chan struct{})
	owner, _ := node.Owner()
	nodeLog := log.With("mesh", cfg.Node.MeshName, "rid", hex.EncodeToString(node.RID()), "owner", owner,
		"gen", node.LifecycleGeneration()) // the keys of the node's own lines
	defer secondSignal(ctx, nodeLog, drain, stop)()
	if drain {
		// Keep the objects alive: move them to the other serving nodes
		// first (docs/OPERATIONS.md "Drain and rolling restarts").
		var res mesh.HostRelocationResult
		res, err = node.Drain(closeCtx, mesh.HostRelocateOptions{Stop: stop})
		fmt.Fprintln(stdout, drainedLine(res))
	} else {
		err = node.Close(closeCtx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "meshnode run: shutdown: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// startAbandon bounds how long `run` waits, after a stop signal during the
// start, for the start to end. Every wait of the start ends with the
// signal's context; a call to a store that does not answer (paused,
// overloaded) may not, and would hold the process for the store's whole
// operation timeout.
const startAbandon = time.Second

// startNode starts the node (mesh.Start) and returns it, or nil and the
// exit status when it did not start. A stop signal during the start ends
// it: the line says so and what the start was at (a wait for a crashed
// run's lease, for the store), exit 1, at once — or after startAbandon, or
// a second signal, when the start does not end with the signal; then the
// start is abandoned (anything it wrote expires: the owner lease by its
// TTL). Until 2026-12-07 run waited for a store that did not answer for
// its whole operation timeout, and said "i/o timeout" or blamed the
// crashed run, never the signal (an operator try-out).
func startNode(ctx context.Context, opts mesh.Options, stderr io.Writer) (*mesh.Node, int) {
	type started struct {
		node *mesh.Node
		err  error
	}
	res := make(chan started, 1)
	go func() {
		n, err := mesh.Start(ctx, opts)
		res <- started{n, err}
	}()
	var s started
	select {
	case s = <-res:
	case <-ctx.Done():
		var repeated <-chan struct{}
		if w, ok := ctx.Value(signalsKey{}).(*signalWatch); ok {
			repeated = w.repeated
		}
		t := time.NewTimer(startAbandon)
		defer t.Stop()
		select {
		case s = <-res:
		case <-t.C:
			fmt.Fprintf(stderr, "meshnode run: %v while starting: the node did not start; its start did not end within %v "+
				"of the signal (a Location Store that does not answer?) and is abandoned: an owner lease it may have taken expires by itself (lease.ttl)\n",
				context.Cause(ctx), startAbandon)
			return nil, ExitError
		case <-repeated:
			fmt.Fprintf(stderr, "meshnode run: %v while starting, then a second signal: the node did not start; its start is abandoned: "+
				"an owner lease it may have taken expires by itself (lease.ttl)\n", context.Cause(ctx))
			return nil, ExitError
		}
	}
	switch {
	case s.err == nil:
		// Started, even if a signal came at its end: run's shutdown
		// follows at once.
		return s.node, ExitOK
	case errors.Is(s.err, config.ErrInvalid):
		fmt.Fprintf(stderr, "meshnode run: %v\n", s.err)
		return nil, ExitUsage
	case ctx.Err() != nil:
		at := strings.TrimPrefix(s.err.Error(), mesh.ErrStartup.Error()+": ")
		fmt.Fprintf(stderr, "meshnode run: %v while starting: the node did not start (the start was at: %s)\n", context.Cause(ctx), at)
		return nil, ExitError
	}
	fmt.Fprintf(stderr, "meshnode run: %v\n", s.err)
	return nil, ExitError
}

// adminStopped is how run ends when the node stopped from its admin
// listener (POST /v1/relocate with drain): the drain already ran the
// orderly shutdown, and Close returns its result — an incomplete one (a
// store outage, a lease that ended: *mesh.ShutdownIncompleteError) is
// printed and exits 1, as after a signal's drain. Until 2026-12-06 it
// exited 0 without looking.
func adminStopped(node interface{ Close(context.Context) error }, stdout, stderr io.Writer) int {
	fmt.Fprintln(stdout, "meshnode: node stopped (drained through the admin listener)")
	if err := node.Close(context.Background()); err != nil {
		fmt.Fprintf(stderr, "meshnode run: shutdown: %v\n", err)
		return ExitError
	}
	return ExitOK
}

const demoUsage = `usage: meshnode demo [--nodes N] [--redis host:port] [--log-level LEVEL] [--timeout D]

Starts N (default 3) nodes in this process on loopback TCP with the
in-memory Location and Relocation Stores, waits until every node has
discovered and admitted every other, prints the topology, then creates
counter Actors and chat-room User Spots through the Manager of different
nodes (placement spreads them by weight), exchanges sends and requests
across the nodes, prints who owns what and every reply, destroys and closes
some objects. Every node then sends to session Instance Spots that do not
exist yet (the first message activates each, once). With two or more nodes
it then moves objects while messages flow: three counters hop from owner to
owner while a sender streams increments and reads to them, and one chat
room moves with a timer pending; it prints the moves (latency, relayed and
passed-on messages, the longest request) and checks that every increment
accepted was counted exactly once and that the room restarted empty with
its queue and timer. Then it drains the last node while the others stream
sequence-numbered sends to 240 counters, and checks that none was lost,
duplicated or reordered. A failed check exits non-zero. Finally it shuts
the nodes down in order.

With --redis host:port the nodes use the Redis providers of that server
instead, under a fresh namespace per run (printed), to try the same on
the production store.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode demo")
	count := fs.Int("nodes", 3, "number of nodes, 1..64")
	level := fs.String("log-level", "warn", "log level of the nodes (debug, info, warn, error)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long the nodes may take to find each other")
	redisAddr := fs.String("redis", "", "use the Redis providers at host:port (a fresh namespace per run) instead of the memory stores")
	if code, done := parseFlags(fs, args, helpText(fs, demoUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	if *count < 1 || *count > 64 {
		return usageError(stderr, fs.Name(), "invalid value %d for --nodes: want 1..64", *count)
	}
	if *timeout <= 0 {
		// Until 2026-12-07 it started the nodes, then failed their first
		// discovery round at once (exit 1, "context deadline exceeded").
		return usageError(stderr, fs.Name(), "invalid value %v for --timeout: want a positive duration (e.g. 30s)", *timeout)
	}
	if !config.ValidLevel(*level) {
		// A usage error, not a failure of the first node's start (exit 1
		// after "starting N nodes", until 2026-12-06).
		return usageError(stderr, fs.Name(), "invalid value %q for --log-level: want debug, info, warn or error", *level)
	}
	if err := demo(ctx, demoOptions{count: *count, level: *level, timeout: *timeout, redis: *redisAddr}, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "meshnode demo: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// demoOptions are the demo's command-line settings.
type demoOptions struct {
	count   int
	level   string
	timeout time.Duration
	redis   string // host:port of a Redis server; "" = the memory stores
}

func demo(ctx context.Context, o demoOptions, stdout, stderr io.Writer) error {
	count, timeout := o.count, o.timeout
	reg, err := registry()
	if err != nil {
		return err
	}
	logCfg := config.LogConfig{Format: config.LogText, Level: o.level}
	log := config.NewLogger(logCfg, stderr)
	loc, reloc, locCfg, relCfg, what, err := demoStores(ctx, o.redis, log)
	if err != nil {
		return err
	}
	defer loc.Close()
	defer reloc.Close()

	fmt.Fprintf(stdout, "meshnode demo: starting %d nodes on loopback (%s, mesh %q)\n", count, what, "demo")
	nodes := make([]*mesh.Node, 0, count)
	defer func() {
		for i := len(nodes) - 1; i >= 0; i-- {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := nodes[i].Close(cctx); err != nil {
				fmt.Fprintf(stderr, "meshnode demo: close node %d: %v\n", i+1, err)
			}
			cancel()
		}
	}()
	for i := 0; i < count; i++ {
		cfg := config.Default()
		cfg.Node.MeshName = "demo"
		cfg.Node.Endpoint = "tcp://127.0.0.1:0"
		cfg.LocationStore, cfg.RelocationStore = locCfg, relCfg
		cfg.Log = logCfg
		n, err := mesh.Start(ctx, mesh.Options{Config: cfg, Factories: reg, Location: loc, Relocation: reloc,
			Logger: log.With("node", i+1), DiscoveryInterval: 500 * time.Millisecond})
		if err != nil {
			return fmt.Errorf("start node %d: %w", i+1, err)
		}
		nodes = append(nodes, n)
		owner, gen := n.Owner()
		fmt.Fprintf(stdout, "  node %d: rid %x  endpoint %s  owner %s  lease generation %d\n", i+1, n.RID(), n.Endpoint(), owner, gen)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, n := range nodes {
		if err := n.Discover(wctx); err != nil {
			return fmt.Errorf("node %d discovery: %w", i+1, err)
		}
	}
	for i, n := range nodes {
		if err := n.WaitPeers(wctx, count-1); err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	fmt.Fprintf(stdout, "\nevery node discovered and admitted the other %d\n\n", count-1)
	if err := nodes[0].Discover(wctx); err != nil {
		return err
	}
	snap, _ := nodes[0].LastSnapshot()
	if err := directory.RenderTable(stdout, directory.Rows(snap)); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "admitted links (row node -> column node):")
	printLinks(stdout, nodes)
	counters, rooms, err := demoObjects(wctx, nodes, stdout)
	if err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	if err := demoInstances(wctx, nodes, stdout); err != nil {
		return fmt.Errorf("instance spots: %w", err)
	}
	if err := demoMoves(wctx, nodes, counters, rooms, stdout); err != nil {
		return fmt.Errorf("moves: %w", err)
	}
	if err := demoDrain(ctx, nodes, stdout); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	fmt.Fprintln(stdout, "\nshutting down (draining, stopped, lease released, descriptor removed)")
	return nil
}

// demoStores opens the stores the demo's nodes share: the embedded
// default, one in-memory pair registered in configuration like any
// provider (§2), or — with addr — the Redis providers under a namespace of
// their own, so that a run never meets an earlier run's records.
func demoStores(ctx context.Context, addr string, log *slog.Logger) (loc locstore.Store, reloc relocstore.Store, locCfg, relCfg config.StoreConfig, what string, err error) {
	def := config.Default()
	locCfg, relCfg = def.LocationStore, def.RelocationStore
	if addr == "" {
		if loc, err = locmemory.New(locmemory.WithLogger(log)); err != nil {
			return
		}
		if reloc, err = relmemory.New(); err != nil {
			loc.Close()
			return
		}
		locCfg.Provider, relCfg.Provider = config.ProviderMemory, config.ProviderMemory
		return loc, reloc, locCfg, relCfg, "memory stores", nil
	}
	var suffix [4]byte
	if _, err = rand.Read(suffix[:]); err != nil {
		return
	}
	ns := "meshnode-demo-" + hex.EncodeToString(suffix[:])
	locCfg.Provider, relCfg.Provider = config.ProviderRedis, config.ProviderRedis
	locCfg.Redis.Addrs, relCfg.Redis.Addrs = []string{addr}, []string{addr}
	locCfg.Redis.Namespace, relCfg.Redis.Namespace = ns, ns+"-reloc"
	if loc, err = stores.OpenLocation(ctx, locCfg, log); err != nil {
		return nil, nil, locCfg, relCfg, "", fmt.Errorf("redis at %s: %w", addr, err)
	}
	if reloc, err = stores.OpenRelocation(ctx, relCfg, log); err != nil {
		loc.Close()
		return nil, nil, locCfg, relCfg, "", fmt.Errorf("redis at %s: %w", addr, err)
	}
	return loc, reloc, locCfg, relCfg, fmt.Sprintf("Redis at %s, namespace %s", addr, ns), nil
}

// demoObjects creates demo objects through the Managers of the nodes in
// turn and exchanges messages with them; everything printed is what the
// calls returned. It returns the counters and rooms still open at the end
// (the first of each is destroyed / closed here).
func demoObjects(ctx context.Context, nodes []*mesh.Node, w io.Writer) ([]mesh.ActorRef, []mesh.SpotRef, error) {
	nodeOf := func(rid []byte) string { return nodeName(nodes, rid) }
	mgr := func(i int) *mesh.Manager { return nodes[i%len(nodes)].Manager() }

	fmt.Fprintln(w, "\nobjects (created through the Manager of the node named; placed by weight among serving nodes):")
	var counters []mesh.ActorRef
	for i := 0; i < 2*len(nodes); i++ {
		id := fmt.Sprintf("counter-%d", i+1)
		cr, err := mgr(i).GetOrCreateActor(ctx, id, demoapp.CounterType, mesh.WithBody([]byte(fmt.Sprint(10*(i+1)))))
		if err != nil {
			return nil, nil, fmt.Errorf("create %s: %w", id, err)
		}
		counters = append(counters, cr.Ref)
		fmt.Fprintf(w, "  node %d GetOrCreateActor(%s, %s, initial %d) -> %s, generation %d, owned by %s\n",
			i%len(nodes)+1, id, demoapp.CounterType, 10*(i+1), cr.Outcome, cr.Ref.ObjectGeneration, nodeOf(cr.Ref.NodeRID))
	}
	again, err := mgr(1).GetOrCreateActor(ctx, "counter-1", demoapp.CounterType)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(w, "  node 2 GetOrCreateActor(counter-1) again -> %s, generation %d, owned by %s\n",
		again.Outcome, again.Ref.ObjectGeneration, nodeOf(again.Ref.NodeRID))
	if _, err := mgr(2).CreateActor(ctx, "counter-1", demoapp.CounterType); err != nil {
		fmt.Fprintf(w, "  node 3 CreateActor(counter-1) -> error: %v\n", err)
	}
	var rooms []mesh.SpotRef
	for i := 0; i < len(nodes); i++ {
		ref, err := mgr(i).CreateUserSpot(ctx, demoapp.ChatRoomType)
		if err != nil {
			return nil, nil, fmt.Errorf("create room: %w", err)
		}
		rooms = append(rooms, ref)
		fmt.Fprintf(w, "  node %d CreateUserSpot(%s) -> spot %s, generation %d, owned by %s\n",
			i+1, demoapp.ChatRoomType, ref.SpotID, ref.ObjectGeneration, nodeOf(ref.NodeRID))
	}
	lobby, err := mgr(0).GetOrCreateUserSpot(ctx, "lobby", demoapp.ChatRoomType)
	if err != nil {
		return nil, nil, err
	}
	rooms = append(rooms, lobby.Ref)
	fmt.Fprintf(w, "  node 1 GetOrCreateUserSpot(lobby) -> %s, generation %d, owned by %s\n",
		lobby.Outcome, lobby.Ref.ObjectGeneration, nodeOf(lobby.Ref.NodeRID))

	fmt.Fprintln(w, "\nmessages (one-way sends keep their order per sender, so each sender's own request is a barrier")
	fmt.Fprintln(w, "behind its sends; the value printed is the answer to the last sender's request):")
	for i := range nodes {
		for _, c := range counters {
			if err := mgr(i).SendActor(ctx, c, []byte(fmt.Sprintf("add %d", i+1))); err != nil {
				return nil, nil, fmt.Errorf("node %d send to %s: %w", i+1, c.ActorID, err)
			}
		}
	}
	for _, c := range counters {
		var got []byte
		for i := range nodes {
			if got, err = mgr(i).RequestActor(ctx, c, []byte("get")); err != nil {
				return nil, nil, fmt.Errorf("node %d request %s: %w", i+1, c.ActorID, err)
			}
		}
		fmt.Fprintf(w, "  every node sent \"add <its number>\" to %s (on %s); node %d request \"get\" -> %q\n",
			c.ActorID, nodeOf(c.NodeRID), len(nodes), got)
	}
	for i := range nodes {
		for k, r := range rooms {
			line := fmt.Sprintf("hello from node %d", i+1)
			if err := mgr(i).SendSpot(ctx, r, []byte(line)); err != nil {
				return nil, nil, fmt.Errorf("node %d post to room %d: %w", i+1, k+1, err)
			}
		}
	}
	for _, r := range rooms {
		var got []byte
		for i := range nodes {
			if got, err = mgr(i).RequestSpot(ctx, r, []byte("history")); err != nil {
				return nil, nil, fmt.Errorf("node %d history of %s: %w", i+1, r.SpotID, err)
			}
		}
		fmt.Fprintf(w, "  every node posted to room %s (on %s); node %d request \"history\" -> %q\n",
			r.SpotID, nodeOf(r.NodeRID), len(nodes), got)
	}

	fmt.Fprintln(w, "\nhosting (objects per node, Entry Spot included; route cache hits/misses of the sender side):")
	for i, n := range nodes {
		st := n.ObjectStats()
		fmt.Fprintf(w, "  node %d: hosts %d objects, delivered %d messages, route cache %d hits / %d misses\n",
			i+1, st.Hosted, st.Delivered, st.RouteCacheHits, st.RouteCacheMisses)
	}

	fmt.Fprintln(w, "\nending objects (exact generation only):")
	c := counters[0]
	ok, err := mgr(len(nodes)-1).Destroy(ctx, c)
	fmt.Fprintf(w, "  node %d Destroy(%s generation %d) -> %v, %v\n", len(nodes), c.ActorID, c.ObjectGeneration, ok, err)
	ok, err = mgr(len(nodes)-1).Destroy(ctx, c)
	fmt.Fprintf(w, "  node %d Destroy(%s generation %d) again -> %v, %v\n", len(nodes), c.ActorID, c.ObjectGeneration, ok, err)
	if _, err := mgr(0).FindActor(ctx, c.ActorID); err != nil {
		fmt.Fprintf(w, "  node 1 FindActor(%s) -> %v\n", c.ActorID, err)
	}
	r := rooms[0]
	ok, err = mgr(1).Close(ctx, r)
	fmt.Fprintf(w, "  node 2 Close(room %s on %s) -> %v, %v\n", r.SpotID, nodeOf(r.NodeRID), ok, err)
	if _, err := mgr(0).RequestSpot(ctx, r, []byte("history")); err != nil {
		fmt.Fprintf(w, "  node 1 RequestSpot(closed room) -> %v\n", err)
	}

	// The descriptors' capacity copy, refreshed from the store counters.
	for _, n := range nodes {
		n.RefreshCapacityCopy(ctx)
	}
	if err := nodes[0].Discover(ctx); err != nil {
		return nil, nil, err
	}
	snap, _ := nodes[0].LastSnapshot()
	fmt.Fprintln(w, "\ntopology with the descriptors' capacity copy (active[+reserved]/limit):")
	if err := directory.RenderTable(w, directory.Rows(snap)); err != nil {
		return nil, nil, err
	}
	return counters[1:], rooms[1:], nil
}

// nodeName names the demo node with RoutingId rid ("node 2"), or the rid.
func nodeName(nodes []*mesh.Node, rid []byte) string {
	if i := nodeIndex(nodes, rid); i >= 0 {
		return nodeLabel(i)
	}
	return fmt.Sprintf("rid %x", rid)
}

// nodeLabel names the demo node at index i.
func nodeLabel(i int) string { return fmt.Sprintf("node %d", i+1) }

// nodeIndex is the index of the node with RoutingId rid, or -1.
func nodeIndex(nodes []*mesh.Node, rid []byte) int {
	for i, n := range nodes {
		if bytes.Equal(n.RID(), rid) {
			return i
		}
	}
	return -1
}

func printLinks(w io.Writer, nodes []*mesh.Node) {
	var b strings.Builder
	b.WriteString("        ")
	for j := range nodes {
		fmt.Fprintf(&b, " node%-3d", j+1)
	}
	fmt.Fprintln(w, b.String())
	for i, n := range nodes {
		b.Reset()
		fmt.Fprintf(&b, "node%-3d ", i+1)
		admitted := map[string]bool{}
		for _, p := range n.Peers() {
			admitted[string(p.RID)] = true
		}
		for j, m := range nodes {
			switch {
			case i == j:
				b.WriteString("   -    ")
			case admitted[string(m.RID())]:
				b.WriteString("   yes  ")
			default:
				b.WriteString("   no   ")
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// storeFailed reports a store failure of the ctl command name and returns
// ExitError (ExitUsage for a configuration problem the store's opener
// found). When Redis refused a command for want of an ACL permission,
// it says where the permissions each ctl command needs are listed: the
// Redis text alone ("NOPERM ... 'set' command") does not tell an operator
// who gave ctl a read-only account why a read needs more.
func storeFailed(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if ve := (*config.ValidationError)(nil); errors.As(err, &ve) {
		// Found by the store's opener (a TLS file, a login): a
		// configuration error, as `run` says it (exit 2).
		return ExitUsage
	}
	if redisconn.PermissionDenied(err) { // every Redis version's words
		fmt.Fprintf(stderr, "%s: the Redis account may not run a command this needs; docs/OPERATIONS.md, "+
			"\"A Redis account for ctl\", gives the ACL rule\n", name)
	}
	return ExitError
}

// openLocation opens the configured Location Store for ctl commands. They
// are one-shot tools: the opener leaves out the notices meant for a node's
// start, such as the Redis durability WARN (stores.OneShot), which each
// node logs when it opens the store.
func openLocation(ctx context.Context, cfg config.Config, log *slog.Logger) (locstore.Store, error) {
	switch cfg.LocationStore.Provider {
	case "":
		return nil, errors.New("no location_store.provider configured (use --config or MESHNODE_LOCATION_STORE__PROVIDER)")
	case config.ProviderMemory:
		// A memory store lives inside the process that opened it: ctl
		// would open a fresh, empty one and answer as if the mesh had no
		// nodes and no objects.
		return nil, errors.New("location_store.provider is memory: a memory store exists only inside the process " +
			"that opened it, so ctl cannot read the nodes' store; point ctl at the Redis the nodes use " +
			"(location_store.provider=redis and location_store.redis.addrs)")
	}
	return stores.OpenLocation(stores.OneShot(ctx), cfg.LocationStore, log)
}

// ctlStore is how a ctl command that reads the store gets it, once its
// flags are parsed: the configuration loaded from fs (a bad one is a usage
// error, ExitUsage), its logger, and the Location Store (openLocation; a
// failure is storeFailed's ExitError). st is nil when the command must
// return code; otherwise the caller closes st.
func ctlStore(ctx context.Context, fs *pflag.FlagSet, stderr io.Writer) (st locstore.Store, log *slog.Logger, code int) {
	st, log, _, code = ctlStoreConfig(ctx, fs, stderr)
	return st, log, code
}

// ctlStoreConfig is ctlStore that also returns the configuration loaded.
func ctlStoreConfig(ctx context.Context, fs *pflag.FlagSet, stderr io.Writer) (st locstore.Store, log *slog.Logger, cfg config.Config, code int) {
	cfg, ok := loadToolConfig(fs, stderr)
	if !ok {
		return nil, nil, cfg, ExitUsage
	}
	log = cfg.Logger(stderr)
	st, err := openLocation(ctx, cfg, log)
	if err != nil {
		return nil, nil, cfg, storeFailed(stderr, fs.Name(), err)
	}
	return st, log, cfg, ExitOK
}

// drainedLine is what `meshnode run` prints once a SIGTERM drain is over:
// the moves, and — on the line an operator reads, not only in the log — the
// objects that stayed. Their state is lost either way; whether their
// records are gone depends on the shutdown's sweep (ShutdownSwept).
func drainedLine(res mesh.HostRelocationResult) string {
	if res.OtherDrain {
		return "meshnode: drained by the drain already running (started through the admin listener; its caller got the outcome); this signal's drain had nothing left to move"
	}
	p := res.Progress
	lost := ""
	if n := len(res.NotMoved()); n > 0 {
		switch {
		case res.StoreDataLost:
			lost = fmt.Sprintf("; %d not moved, their state is lost; the Location Store lost its data, and their records with it (docs/OPERATIONS.md, store data lost)", n)
		case res.ShutdownSwept && res.InstanceSpotsNotMoved() == n:
			lost = fmt.Sprintf("; %d Instance Spots removed by the shutdown, as a drain does: each activates again on its next message, with fresh state", n)
		case res.ShutdownSwept:
			lost = fmt.Sprintf("; %d removed by the shutdown, their state is lost (the log says why each stayed)", n)
			if i := res.InstanceSpotsNotMoved(); i > 0 {
				lost += fmt.Sprintf("; %d of them Instance Spots, which activate again on their next message", i)
			}
		default:
			lost = fmt.Sprintf("; %d not moved, their state is lost, and the shutdown could not remove their records: they name this node until the serving nodes reclaim them (docs/OPERATIONS.md \"A node died: its objects\")", n)
		}
	}
	if n := len(res.LeftToTarget()); n > 0 {
		lost += fmt.Sprintf("; %d left to their targets, whose commit this node stopped before seeing (`ctl locate` says where they are)", n)
	}
	return fmt.Sprintf("meshnode: drained: %d moved, %d skipped, %d failed, %d not started (%s in %s)%s",
		p.Moved, p.Skipped, p.Failed, p.NotStarted, res.End, drainTook(res), lost)
}

// drainTook is the drained line's time: the whole drain's, then its parts —
// before the moves (waits for this node's owner lease or a recovering
// peer, publishing draining, the discovery round), the moves, and after
// them (passing messages on until their senders switched). Before
// 2026-12-06 the line showed the moves' time alone: a drain that had
// waited seconds for its lease said it took milliseconds.
func drainTook(res mesh.HostRelocationResult) string {
	r := func(d time.Duration) time.Duration { return max(d, 0).Round(time.Millisecond) }
	s := r(res.Took).String()
	if res.Took <= 0 {
		return s
	}
	return fmt.Sprintf("%s: %s before the moves, %s moving, %s after them", s,
		r(res.BeforeMoves), r(res.MovesTook), r(res.Took-res.BeforeMoves-res.MovesTook))
}
