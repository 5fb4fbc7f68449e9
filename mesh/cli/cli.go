// Package cli is the meshnode command line: subcommand dispatch for run,
// demo, ctl, wire and version. It is a library entry point so that an
// application that registers its own factories can ship its own binary with
// the same commands (cli.Main from its main package).
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/meshnode/meshnode/internal/buildinfo"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command ran and failed
	ExitUsage = 2 // bad usage, or a command that has no body yet
)

// command is one entry of a command table: the top-level commands, and the
// subcommands of a group such as ctl (ctl.go) or wire.
type command struct {
	name    string
	summary string // one line in the group's command list
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// group is a command made of subcommands ("meshnode", "meshnode ctl").
// Every group behaves the same: without arguments it prints its usage to
// stderr and exits 2; "help", -h and --help print it to stdout and exit 0;
// "help <command> [<subcommand>]" is "<command> [<subcommand>] --help"; an
// unknown command is named, with
// a hint to --help, and exits 2.
type group struct {
	name     string // full name, e.g. "meshnode ctl"
	synopsis string // what follows the name on the usage line
	intro    string // optional text after the usage line
	commands []command
}

func (g group) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s %s\n", g.name, g.synopsis)
	if g.intro != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(g.intro, "\n"))
	}
	fmt.Fprintln(w, "\nCommands:")
	width := 0
	for _, c := range g.commands {
		width = max(width, len(c.name))
	}
	for _, c := range g.commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> --help' for a command's usage.\n", g.name)
}

func (g group) find(name string) (command, bool) {
	for _, c := range g.commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func (g group) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		g.usage(stderr)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "--help":
		g.usage(stdout)
		return ExitOK
	case "help":
		if len(args) == 1 {
			g.usage(stdout)
			return ExitOK
		}
		if c, ok := g.find(args[1]); ok {
			// "help ctl status" is "ctl status --help" (until 2026-12-07
			// the ctl command list, "status" ignored).
			return c.run(ctx, append(append([]string{}, args[2:]...), "--help"), stdout, stderr)
		}
		return usageError(stderr, g.name, "help: unknown command %q", args[1])
	}
	if c, ok := g.find(args[0]); ok {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	if strings.HasPrefix(args[0], "-") {
		return usageError(stderr, g.name, "a command comes before any flag, got %q", args[0])
	}
	return usageError(stderr, g.name, "unknown command %q", args[0])
}

func mainGroup() group {
	return group{
		name:     "meshnode",
		synopsis: "<command> [arguments]",
		commands: []command{
			{"run", "run one mesh node from a YAML file and/or MESHNODE_ environment", runNode},
			{"demo", "run three nodes in one process on loopback with the memory stores", runDemo},
			{"ctl", "operator tools: " + strings.Join(ctlNames(), ", "), runCtl},
			{"wire", "wire tools: decode <hex>", runWire},
			{"version", "print the version", runVersion},
		},
	}
}

// Main runs the command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return mainGroup().run(ctx, args, stdout, stderr)
}

const versionUsage = `usage: meshnode version

Prints the version of this binary and the Go version it was built with.`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode version")
	if code, done := parseFlags(fs, args, helpText(fs, versionUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintf(stdout, "meshnode %s\n", buildinfo.Read())
	return ExitOK
}
