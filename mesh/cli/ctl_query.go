package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/query"
	"github.com/meshnode/meshnode/mesh/record"
)

// The §7.4 operational queries: "ctl locate" and "ctl list" (package
// mesh/query does the work; this file is flags and printing).

const locateUsage = `usage: meshnode ctl locate <actor|spot> <Id> [--config FILE] [config flags]

Looks up one object's authority record in the configured Location Store and
prints its location: ID, kind, ObjectGeneration, state (creating | ready |
unavailable), stable type, mesh, node RID, owner (ownerId@leaseGeneration),
AuthorityOwnerGeneration and store key. The answer does not depend on the
mesh this host is configured for.
Exit status: 0 found, 1 no record or a store failure (the message says
which), 2 bad usage.`

const listUsage = `usage: meshnode ctl list --kind <actor|userSpot|instanceSpot> [--type T] [--mesh M]
                        [--limit N] [--all | --continue TOKEN] [--config FILE] [config flags]

Lists authority records of one object kind, one page (at most --limit
entries, 1..1000) at a time, from one store snapshot: no object appears twice
in a listing. Without --all one page is printed, followed by a "continue:"
line when more remain; --all follows the continuations in this process and
prints every page.
A continuation is valid only for the same --kind/--type/--mesh and only while
its snapshot lives (5 minutes by default, judged by the store); with the redis
provider it works from any process on the same store namespace. When the
snapshot expired, list again from the first page.`

// ctlQuery dispatches "ctl locate" and "ctl list" (args[0] is the command).
func ctlQuery(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if args[0] == "locate" {
		return ctlLocate(ctx, args[1:], stdout, stderr)
	}
	return ctlList(ctx, args[1:], stdout, stderr)
}

// parseQueryFlags parses a ctl query's flags; done is set (with the exit
// code) when the command must stop: --help or a flag error.
func parseQueryFlags(fs *pflag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, usage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintln(stdout, usage)
			return ExitOK, true
		}
		// pflag prints nothing itself under ContinueOnError.
		fmt.Fprintf(stderr, "%s: %v\n\n%s\n", fs.Name(), err, usage)
		return ExitUsage, true
	}
	return 0, false
}

func ctlLocate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshnode ctl locate"
	fs := pflag.NewFlagSet("ctl locate", pflag.ContinueOnError)
	config.Flags(fs)
	if code, done := parseQueryFlags(fs, args, locateUsage, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintf(stderr, "%s: want <actor|spot> <Id>\n\n%s\n", name, locateUsage)
		return ExitUsage
	}
	kind, id := record.IdentityKind(fs.Arg(0)), fs.Arg(1)
	if kind != record.IdentityActor && kind != record.IdentitySpot {
		fmt.Fprintf(stderr, "%s: object kind %q: want actor or spot (every Spot kind is \"spot\")\n", name, fs.Arg(0))
		return ExitUsage
	}
	if err := record.ValidateObjectID(id); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	cfg, err := config.LoadFlagSet(fs, config.LoadOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	log := cfg.Logger(stderr)
	st, err := openLocation(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitError
	}
	defer st.Close()
	e, found, err := query.Reader{Store: st, Logger: log}.Locate(ctx, kind, id)
	switch {
	case errors.Is(err, query.ErrInvalidArgument):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitError
	case !found:
		fmt.Fprintf(stderr, "%s: %s %q: no record\n", name, kind, id)
		return ExitError
	}
	if err := query.RenderTable(stdout, []query.Entry{e}); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitError
	}
	return ExitOK
}

func ctlList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshnode ctl list"
	fs := pflag.NewFlagSet("ctl list", pflag.ContinueOnError)
	kind := fs.String("kind", "", "object kind: actor, userSpot or instanceSpot (required)")
	stableType := fs.String("type", "", "only this stable type (exact)")
	meshName := fs.String("mesh", "", "only objects placed in this mesh")
	limit := fs.Int("limit", 100, "entries per page, 1..1000")
	all := fs.Bool("all", false, "follow continuations and print every page")
	cont := fs.String("continue", "", "continuation token printed by the previous page")
	config.Flags(fs)
	if code, done := parseQueryFlags(fs, args, listUsage, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n\n%s\n", name, fs.Arg(0), listUsage)
		return ExitUsage
	}
	if *kind == "" {
		fmt.Fprintf(stderr, "%s: --kind is required (actor, userSpot or instanceSpot)\n\n%s\n", name, listUsage)
		return ExitUsage
	}
	req := query.ListRequest{
		Kind: record.ObjectKind(*kind), StableType: *stableType, MeshName: *meshName,
		Limit: *limit, Continuation: *cont,
	}
	cfg, err := config.LoadFlagSet(fs, config.LoadOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	log := cfg.Logger(stderr)
	st, err := openLocation(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitError
	}
	defer st.Close()
	r := query.Reader{Store: st, Logger: log}
	total, undecodable := 0, 0
	for {
		p, err := r.List(ctx, req)
		if err != nil {
			return listFailed(stderr, name, err, total)
		}
		total += len(p.Entries)
		undecodable += p.Undecodable
		if *all {
			fmt.Fprintf(stdout, "page %d: %d entries\n", p.Number, len(p.Entries))
		}
		if err := query.RenderTable(stdout, p.Entries); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return ExitError
		}
		if p.Next == "" {
			fmt.Fprintf(stdout, "%d entries in %d page(s), complete (snapshot %s)\n", total, p.Number, stamp(p.SnapshotAt))
			break
		}
		if !*all {
			fmt.Fprintf(stdout, "%d entries on page %d, more remain (snapshot %s)\n", len(p.Entries), p.Number, stamp(p.SnapshotAt))
			fmt.Fprintf(stdout, "continue: %s\n", p.Next)
			break
		}
		fmt.Fprintln(stdout)
		req.Continuation = p.Next
	}
	if undecodable > 0 {
		fmt.Fprintf(stderr, "%s: warning: %d unreadable authority record(s) skipped (see the log)\n", name, undecodable)
	}
	return ExitOK
}

// listFailed reports a failed page; shown counts the entries of earlier
// pages already printed (with --all).
func listFailed(stderr io.Writer, name string, err error, shown int) int {
	incomplete := ""
	if shown > 0 {
		incomplete = fmt.Sprintf(" (listing incomplete: %d entries were printed before this page failed)", shown)
	}
	switch {
	case errors.Is(err, query.ErrScanExpired):
		fmt.Fprintf(stderr, "%s: the listing snapshot expired; restart from the first page (run again without --continue, or use --all to read every page in one run)%s\n  (%v)\n", name, incomplete, err)
		return ExitError
	case errors.Is(err, query.ErrInvalidContinuation), errors.Is(err, query.ErrInvalidArgument):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %v%s\n", name, err, incomplete)
	return ExitError
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
