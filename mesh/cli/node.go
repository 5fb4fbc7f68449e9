package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/stores"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	"github.com/meshnode/meshnode/spot"
)

// Factories is the registry the stock commands run nodes with. An
// application embedding cli.Main registers its own factories here (or in
// spot.Default before calling Main with a nil Factories).
var Factories *spot.Registry

func registry() (*spot.Registry, error) {
	if Factories != nil {
		return Factories, nil
	}
	r := spot.NewRegistry()
	if err := demoapp.Register(r); err != nil {
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

Runs one mesh node until SIGINT/SIGTERM. Configuration comes from the YAML
file (--config or MESHNODE_CONFIG), then MESHNODE_ environment variables,
then flags; see docs/OPERATIONS.md and docs/node.example.yaml.`

func runNode(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, runUsage); fs.PrintDefaults() }
	config.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "meshnode run: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
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
	node, err := mesh.Start(ctx, mesh.Options{Config: cfg, Factories: reg, Logger: log})
	if err != nil {
		fmt.Fprintf(stderr, "meshnode run: %v\n", err)
		if errors.Is(err, config.ErrInvalid) {
			return ExitUsage
		}
		return ExitError
	}
	fmt.Fprintf(stdout, "meshnode: node %x serving at %s (mesh %q)\n", node.RID(), node.Endpoint(), cfg.Node.MeshName)
	<-ctx.Done()
	closeCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownDeadline)
	defer cancel()
	if err := node.Close(closeCtx); err != nil {
		fmt.Fprintf(stderr, "meshnode run: shutdown: %v\n", err)
		return ExitError
	}
	return ExitOK
}

const demoUsage = `usage: meshnode demo [--nodes N] [--log-level LEVEL]

Starts N (default 3) nodes in this process on loopback TCP with the
in-memory Location and Relocation Stores, waits until every node has
discovered and admitted every other, prints the topology, and shuts them
down in order.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, demoUsage); fs.PrintDefaults() }
	count := fs.Int("nodes", 3, "number of nodes")
	level := fs.String("log-level", "warn", "log level of the nodes (debug, info, warn, error)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long the nodes may take to find each other")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if *count < 1 || *count > 64 {
		fmt.Fprintf(stderr, "meshnode demo: --nodes must be 1..64\n")
		return ExitUsage
	}
	if err := demo(ctx, *count, *level, *timeout, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "meshnode demo: %v\n", err)
		return ExitError
	}
	return ExitOK
}

func demo(ctx context.Context, count int, level string, timeout time.Duration, stdout, stderr io.Writer) error {
	reg, err := registry()
	if err != nil {
		return err
	}
	logCfg := config.LogConfig{Format: config.LogText, Level: level}
	log := config.NewLogger(logCfg, stderr)
	// The embedded default: one in-memory store pair shared by the nodes of
	// this process, registered in configuration like any provider (§2).
	loc, err := locmemory.New(locmemory.WithLogger(log))
	if err != nil {
		return err
	}
	defer loc.Close()
	reloc, err := relmemory.New()
	if err != nil {
		return err
	}
	defer reloc.Close()

	fmt.Fprintf(stdout, "meshnode demo: starting %d nodes on loopback (memory stores, mesh %q)\n", count, "demo")
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
		cfg.LocationStore.Provider = config.ProviderMemory
		cfg.RelocationStore.Provider = config.ProviderMemory
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
	fmt.Fprintln(stdout, "\nshutting down (draining, stopped, lease released)")
	return nil
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

// openLocation opens the configured Location Store for ctl commands.
func openLocation(ctx context.Context, cfg config.Config, log *slog.Logger) (locstore.Store, error) {
	if cfg.LocationStore.Provider == "" {
		return nil, errors.New("no location_store.provider configured (use --config or MESHNODE_LOCATION_STORE__PROVIDER)")
	}
	return stores.OpenLocation(ctx, cfg.LocationStore, log)
}
