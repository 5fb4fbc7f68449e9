package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

const reclaimUsage = `usage: meshnode ctl reclaim <actor|spot> <Id> [--dry-run] [--config FILE] [config flags]
       meshnode ctl reclaim --all [--kind actor|userSpot|instanceSpot] [--dry-run] [--config FILE] [config flags]

Removes the authority records of objects whose owner's lease has ended (the
process that owned them was killed, or lost its lease for good), so that
their Ids can be created again. The state those objects held in the dead
process's memory is lost; this only cleans up their records (and the
capacity slots the dead run held). An object whose owner is alive is never
touched: each removal is one conditional batch that checks the owner's lease
row is still ended and the record unchanged. With --all it also releases the
relocation reservations of moves whose source died before the move committed
or was cancelled, returning the slots they held reserved on the target. Unlike the serving nodes'
background sweep (recovery.reclaim_sweep_interval) it does not wait for
recovery.reclaim_grace: running it is the operator's decision.
--dry-run lists what would be reclaimed and changes nothing.
Exit status: 0 done (also when nothing was dead), 1 a store failure or the
named object does not exist, 2 bad usage.`

func ctlReclaim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "meshnode ctl reclaim"
	fs := newFlagSet(name)
	all := fs.Bool("all", false, "reclaim every dead owner's object")
	kindFlag := fs.String("kind", "", "with --all: only this object kind (actor, userSpot, instanceSpot)")
	dry := fs.Bool("dry-run", false, "list what would be reclaimed; change nothing")
	config.Flags(fs)
	if code, done := parseFlags(fs, args, helpText(fs, reclaimUsage, false), stdout, stderr); done {
		return code
	}
	var opts mesh.ReclaimOptions
	switch {
	case *all && fs.NArg() == 0:
		if *kindFlag != "" {
			k := record.ObjectKind(*kindFlag)
			if k != record.ObjectActor && k != record.ObjectUserSpot && k != record.ObjectInstanceSpot {
				return usageError(stderr, name, "--kind %q: want actor, userSpot or instanceSpot", *kindFlag)
			}
			opts.Kind = k
		}
	case !*all && fs.NArg() == 2 && *kindFlag == "":
		switch record.IdentityKind(fs.Arg(0)) {
		case record.IdentityActor:
			opts.Kind = record.ObjectActor
		case record.IdentitySpot:
			opts.Kind = record.ObjectUserSpot // every Spot kind has the same key
		default:
			return usageError(stderr, name, "object kind %q: want actor or spot", fs.Arg(0))
		}
		opts.ID = fs.Arg(1)
		if err := record.ValidateObjectID(opts.ID); err != nil {
			return usageError(stderr, name, "%v", err)
		}
	default:
		return usageError(stderr, name, "want <actor|spot> <Id>, or --all [--kind K]")
	}
	opts.DryRun = *dry
	st, log, code := ctlStore(ctx, fs, stderr)
	if st == nil {
		return code
	}
	defer st.Close()
	opts.Logger = log
	res, err := mesh.ReclaimDeadOwners(ctx, st, opts)
	verb, returned := "reclaimed", "returned the reservation of"
	if opts.DryRun {
		verb, returned = "would reclaim", "would return the reservation of"
	}
	list := func(objs []mesh.ReclaimedObject, verb, why string) {
		for _, o := range objs {
			fmt.Fprintf(stdout, "%s %s %q (%s, generation %d): owner %s/%d on node %x %s\n",
				verb, o.Kind, o.ID, o.StableType, o.Generation, o.Owner, o.OwnerGen, o.NodeRID, why)
		}
	}
	list(res.Reclaims, verb, "is gone; its state is lost")
	var dead, expired []mesh.ReclaimedObject
	for _, o := range res.Returns {
		if o.RequestExpired {
			expired = append(expired, o)
		} else {
			dead = append(dead, o)
		}
	}
	list(dead, returned, "is gone; its creation was abandoned, nothing was created")
	list(expired, returned, "lives, but the creation request expired without a result; nothing was created")
	released := "released"
	if opts.DryRun {
		released = "would release"
	}
	for _, r := range res.Released {
		fmt.Fprintf(stdout, "%s the relocation reservation %x of %s %q (generation %d): its source owner %s/%d on node %x is gone; %s returned to node %x\n",
			released, r.ReservationID, r.Kind, r.ID, r.Generation, r.Source, r.SourceGen, r.SourceRID, slotsOf(r.Bundle), r.TargetRID)
	}
	fmt.Fprintf(stdout, "%d %s; %d looked at, %d of a dead owner, %d abandoned creations' reservations, %d dead sources' relocation reservations, %d changed meanwhile or unreadable\n",
		len(res.Reclaims), verb, res.Scanned, res.DeadOwner, len(res.Returns), len(res.Released), res.Skipped)
	if err == nil && opts.ID != "" && res.Scanned == 1 && res.DeadOwner == 0 && len(res.Returns) == 0 && len(res.Released) == 0 && res.Skipped == 0 {
		// The one object named: its owner lives (or it is still being
		// created by a live creator). Said, since "0 reclaimed" alone
		// reads like a failure.
		fmt.Fprintf(stdout, "%s %q: its owner's lease is live; nothing to reclaim (ctl locate says where it is)\n", fs.Arg(0), opts.ID)
	}
	if err != nil {
		return storeFailed(stderr, name, err)
	}
	return ExitOK
}

// slotsOf says what a reservation's bundle held, e.g. "1 actor slot".
func slotsOf(b authority.Bundle) string {
	var parts []string
	plural := func(n int, what string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s slot", n, what)
		}
		return fmt.Sprintf("%d %s slots", n, what)
	}
	if b.Actors > 0 {
		parts = append(parts, plural(b.Actors, "actor"))
	}
	if b.Spots > 0 {
		parts = append(parts, plural(b.Spots, "spot"))
	}
	if b.SpotType != nil && b.SpotType.Count > 0 {
		parts = append(parts, plural(b.SpotType.Count, string(b.SpotType.ObjectKind)+" "+b.SpotType.StableType))
	}
	if len(parts) == 0 {
		return "no slots"
	}
	return strings.Join(parts, ", ")
}
