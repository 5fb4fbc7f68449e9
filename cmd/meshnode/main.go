// Command meshnode runs a mesh node, the three-node demo, operator tools
// (ctl) and wire tools. It is deliberately thin: everything lives in the
// library entry point mesh/cli, which applications embedding their own
// factories call the same way.
package main

import (
	"context"
	"os"

	"github.com/meshnode/meshnode/mesh/cli"
)

func main() {
	// The first SIGINT/SIGTERM/SIGHUP cancels ctx (run drains and stops); a later
	// one stops a drain where it is (cli.SignalContext says why not
	// signal.NotifyContext).
	ctx, stop := cli.SignalContext(context.Background())
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
