// Command inventory is a small application that embeds meshnode as a
// library: one stock Actor per SKU ("sku:apple") that keeps its state when
// it moves between nodes, and one shopping-cart Instance Spot per customer
// ("cart:alice") that appears on the first message sent to it.
// docs/EMBEDDING.md explains every step it takes.
//
// Without arguments it runs a walkthrough: three nodes of one mesh in this
// process, on loopback TCP with the embedded memory stores. It creates
// objects through one node that land on the others, messages them, holds
// stock with a timer, relocates an actor and checks its state and timer
// came along, sends to a cart that does not exist yet, drains a node and
// shuts everything down. It prints what it does and exits 1 when a check
// fails. `go test ./examples/...` runs the same walkthrough.
//
// With arguments it is meshnode's stock command line with this
// application's factories, e.g.
//
//	go run ./examples/inventory run --config node.yaml
//	go run ./examples/inventory ctl locate actor sku:apple
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/meshnode/meshnode/mesh/cli"
	"github.com/meshnode/meshnode/spot"
)

func main() {
	ctx, stop := cli.SignalContext(context.Background())
	code := 0
	if len(os.Args) > 1 {
		code = serve(ctx, os.Args[1:])
	} else if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "inventory: %v\n", err)
		code = 1
	}
	stop()
	os.Exit(code)
}

// serve runs meshnode's stock commands (run, ctl, wire, version) as this
// application: `run` starts a node that hosts the inventory types instead
// of the demo ones. The stock `demo` command needs the demo's own types and
// is not meant for an application binary.
func serve(ctx context.Context, args []string) int {
	reg, err := newRegistry()
	if err != nil {
		fmt.Fprintf(os.Stderr, "inventory: %v\n", err)
		return cli.ExitError
	}
	cli.Factories = reg
	return cli.Main(ctx, args, os.Stdout, os.Stderr)
}

// newRegistry returns a registry with the application's factories. Every
// server node of the mesh registers the same set; a client node registers
// none (only a server hosts objects, and Start refuses factories on a
// client).
func newRegistry() (*spot.Registry, error) {
	reg := spot.NewRegistry()
	for _, f := range []spot.Factory{stockFactory(), cartFactory()} {
		if err := reg.Register(f); err != nil {
			return nil, fmt.Errorf("register %s: %w", f.StableType, err)
		}
	}
	return reg, nil
}

// syncWriter serialises writes: the walkthrough prints from its own
// goroutine while the nodes' loggers write from theirs.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
