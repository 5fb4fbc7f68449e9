package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

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

func ctlLocate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshnode ctl locate"
	fs := newFlagSet(name)
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, locateUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() != 2 {
		return usageError(stderr, name, "want <actor|spot> <Id>")
	}
	kind, id := record.IdentityKind(fs.Arg(0)), fs.Arg(1)
	if kind != record.IdentityActor && kind != record.IdentitySpot {
		return usageError(stderr, name, "object kind %q: want actor or spot (every Spot kind is \"spot\")", fs.Arg(0))
	}
	if err := record.ValidateObjectID(id); err != nil {
		return usageError(stderr, name, "%v", err)
	}
	st, log, code := ctlStore(ctx, fs, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	e, found, err := query.Reader{Store: st, Logger: log}.Locate(ctx, kind, id)
	switch {
	case errors.Is(err, query.ErrInvalidArgument):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	case err != nil:
		return storeFailed(stderr, name, err)
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
	fs := newFlagSet(name)
	kind := fs.String("kind", "", "object kind: actor, userSpot or instanceSpot (required)")
	stableType := fs.String("type", "", "only this stable type (exact)")
	meshName := fs.String("mesh", "", "only objects placed in this mesh")
	limit := fs.Int("limit", 100, "entries per page, 1..1000")
	all := fs.Bool("all", false, "follow continuations and print every page")
	cont := fs.String("continue", "", "continuation token printed by the previous page")
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, listUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(stderr, name, "unexpected argument %q", fs.Arg(0))
	}
	if *kind == "" {
		return usageError(stderr, name, "--kind is required (actor, userSpot or instanceSpot)")
	}
	if *all && *cont != "" {
		// --all reads a listing from its first page; a continuation prints
		// the one page after it (together they printed the rest with a
		// total that left out the pages before the token).
		return usageError(stderr, name, "--all and --continue exclude each other: --all prints every page from the first, --continue the page after the token")
	}
	req := query.ListRequest{
		Kind: record.ObjectKind(*kind), StableType: *stableType, MeshName: *meshName,
		Limit: *limit, Continuation: *cont,
	}
	// A bad request is a usage error whatever the store does: checked
	// before the store is opened (an unreachable store hid it).
	if err := req.Validate(); err != nil {
		return usageError(stderr, name, "%v", err)
	}
	st, log, code := ctlStore(ctx, fs, stderr)
	if st == nil {
		return code
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
	return storeFailed(stderr, name, fmt.Errorf("%w%s", err, incomplete))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
