// Package cli is the meshnode command line: subcommand dispatch for run,
// demo, ctl, wire and version. It is a library entry point so that an
// application that registers its own factories can ship its own binary with
// the same commands (cli.Main from its main package).
package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed
	ExitUsage = 2 // bad usage, or a command that has no body yet
)

// Version is set at build time with -ldflags "-X .../mesh/cli.Version=v1.2.3".
var Version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run one mesh node from a YAML file and/or MESHNODE_ environment", runNode},
		{"demo", "run three nodes in one process on loopback with the memory stores", runDemo},
		{"ctl", "operator tools: key, record, topology, locate, list, keygen", runCtl},
		{"wire", "wire tools: decode <hex>", runWire},
		{"version", "print the version", runVersion},
	}
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "meshnode: unknown command %q\n\n", args[0])
	usage(stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: meshnode <command> [arguments]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	v := Version
	goVersion := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	fmt.Fprintf(stdout, "meshnode %s (%s)\n", v, goVersion)
	return ExitOK
}
