// Command meshnode runs a mesh node, the three-node demo, operator tools
// (ctl) and wire tools. It is deliberately thin: everything lives in the
// library entry point mesh/cli, which applications embedding their own
// factories call the same way.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshnode/meshnode/mesh/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
