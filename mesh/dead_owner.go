package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Objects of a dead owner (docs/AUTHORITY.md "Reclaiming a dead owner's
// objects", issue 12): an Active record whose owner's lease has ended —
// the process was killed, or lost its lease for good — is not Ready to
// anyone. Find, messages and creations answer OwnerGoneError (Unavailable,
// naming the ended owner); once the record has looked so for the reclaim
// grace, a creation of the same Id replaces it, a Destroy/Close of its
// generation removes it, and the reclaim sweep removes it in the
// background. What the dead process held in memory (state, queue, timers)
// is lost; only the record is cleaned up.

// errOwnerLeaseEnded marks a read that found an owner's lease row gone or
// of another generation.
var errOwnerLeaseEnded = errors.New("owner lease ended")

// OwnerGoneError is the Unavailable answer for an object whose owner's
// lease has ended. errors.Is(err, ErrUnavailable) holds.
type OwnerGoneError struct {
	Kind     record.ObjectKind
	ID       string
	Owner    string // the ended owner's OwnerId
	OwnerGen uint64 // its LeaseGeneration
	NodeRID  []byte // the node run the record names
	// ReclaimableIn is how long until a creation may replace the record (0:
	// now, or not asked).
	ReclaimableIn time.Duration
}

func (e *OwnerGoneError) Error() string {
	// Not "lost" outright: a node that lost its lease to a store outage or
	// a pause, not to a kill, takes a new one when it can and re-adopts
	// the objects whose records are unchanged, with their state.
	s := fmt.Sprintf("%v: %s %q: its owner %s/%d (node %x) is gone: its owner lease ended; the state it held is lost unless that node gets a lease again and re-adopts it (a store outage or a pause, not a kill)",
		ErrUnavailable, e.Kind, e.ID, e.Owner, e.OwnerGen, e.NodeRID)
	if e.ReclaimableIn > 0 {
		s += fmt.Sprintf("; the Id can be created again in %v (reclaim grace)", e.ReclaimableIn.Round(time.Millisecond))
	}
	return s
}

// Unwrap makes errors.Is(err, ErrUnavailable) hold.
func (e *OwnerGoneError) Unwrap() error { return ErrUnavailable }

// errOwnerNotRenewed marks ownerDeadline's answer for an owner whose lease
// record is still there but past the admission deadline derived from it
// (§5): the owner admits no new work until it renews.
var errOwnerNotRenewed = errors.New("owner lease not renewed in time")

// ownerNotRenewed is the Unavailable answer for an object whose owner's
// lease is past its admission deadline but has not ended: the window of
// lease.fencing_margin between the two that every crash, pause or store
// outage of an owner opens. It names the object, the owner and its node,
// and what the caller may expect, as OwnerGoneError does once the lease has
// ended. Until 2026-12-07 the caller got "owner <OwnerId> is past its
// admission deadline", which named neither object nor node (an operator
// try-out: a SIGKILLed server's counters answered it for 2 s, over 1,100
// times, between "peer not admitted" and OwnerGoneError).
func ownerNotRenewed(a record.Authority) error {
	return fmt.Errorf("%w: %s %q: its owner %s/%d (node %x) has not renewed its owner lease in time and admits no new work: "+
		"that node stopped, is paused or is cut off from the store; it serves the object again once it renews, or the object reads as gone once the lease ends",
		ErrUnavailable, a.Allocation.ObjectKind, a.ObjectID, a.OwnerID, uint64(a.OwnerLeaseGeneration), a.Allocation.Descriptor.RoutingID)
}

func ownerGone(a record.Authority) *OwnerGoneError {
	return &OwnerGoneError{Kind: a.Allocation.ObjectKind, ID: a.ObjectID, Owner: a.OwnerID,
		OwnerGen: uint64(a.OwnerLeaseGeneration), NodeRID: append([]byte(nil), a.Allocation.Descriptor.RoutingID...)}
}

// endedOwners remembers when this node first saw each owner's lease ended:
// the reclaim grace counts from there. A lease row that is gone does not
// say when it expired; the first sighting is at most one discovery round
// or one sweep after it.
type endedOwners struct {
	mu    sync.Mutex
	first map[authority.Owner]time.Duration
}

// seen records an ended owner at now and returns how long ago it was first
// seen ended.
func (e *endedOwners) seen(o authority.Owner, now time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.first == nil {
		e.first = map[authority.Owner]time.Duration{}
	}
	at, ok := e.first[o]
	if !ok {
		e.first[o] = now
		return 0
	}
	return now - at
}

// ownerEnded reports whether the owner a record names has no live lease of
// its generation. Its own run is alive by definition (its gate guards it).
// With hint, a host run whose descriptor the last discovery round saw with
// a valid lease is taken as alive without a read — for callers whose
// "alive" only means "wait, or look again later" (a reclaim itself is
// conditioned on the lease row, ReclaimRequest); a caller that answers with
// it (Find, a GetOrCreate that finds the object, Close) passes no hint:
// the list can be a discovery round older than the owner's end, and Find
// said Ready for a dead owner's object for that long. Anything else is
// judged by reading the owner's lease row directly (§3.1).
func (o *objects) ownerEnded(ctx context.Context, a record.Authority, hint bool) (bool, error) {
	owner := authority.OwnerOf(a)
	if self, gen := o.n.Owner(); owner.ID == self && owner.LeaseGeneration == gen {
		return false, nil
	}
	if hint && o.n.ownerListedAlive(owner) {
		return false, nil
	}
	ended, err := leaseEnded(ctx, o.n.loc, owner)
	if err != nil {
		return false, fmt.Errorf("%s: %w", a.ObjectID, err)
	}
	if ended {
		o.ended.seen(owner, o.n.clock.Now())
	}
	return ended, nil
}

// ownRunHosts reports whether a names this node's own run (its RoutingID
// and lifecycle generation, whatever its owner lease generation) and this
// node hosts that object at a's ObjectGeneration.
func (o *objects) ownRunHosts(a record.Authority) bool {
	node := authority.NodeOf(a)
	if !bytes.Equal(node.RoutingID, o.n.run.rid) || node.LifecycleGeneration != o.n.run.lifecycleGeneration {
		return false
	}
	key := spot.Key{Spot: a.Allocation.ObjectKind != record.ObjectActor, ID: a.ObjectID}
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.hosted[key]
	return ok && !h.entry && h.objectGeneration == uint64(a.ObjectGeneration)
}

// reclaimDead removes row's Active record when its owner's lease has ended
// and, with grace, has looked ended to this node for the reclaim grace. It
// returns (true, nil) when it removed the record; (false, *OwnerGoneError)
// when the owner is gone but the record may not be removed yet; (false,
// nil) when the owner is alive or the record changed meanwhile (the caller
// re-reads). hint is ownerEnded's.
func (o *objects) reclaimDead(ctx context.Context, row authority.AuthorityRow, grace, hint bool, why string) (bool, error) {
	a := row.Record
	if !row.Found || a.Allocation.State != record.AllocationActive {
		return false, nil
	}
	if o.ownRunHosts(a) {
		// This very node run holds the object, under a lease generation it
		// lost since (an operation held across the loss; re-adopted when
		// it serves again, readoptAfterHold): not a dead owner's — its
		// instance runs here.
		return false, nil
	}
	ended, err := o.ownerEnded(ctx, a, hint)
	if err != nil || !ended {
		return false, err
	}
	gone := ownerGone(a)
	if grace {
		if wait := o.n.cfg.Recovery.ReclaimGrace - o.ended.seen(authority.OwnerOf(a), o.n.clock.Now()); wait > 0 {
			gone.ReclaimableIn = wait
			return false, gone
		}
	}
	var res ReclaimResult
	r := reclaimer{loc: o.n.loc, exec: o.exec, log: o.log, why: why, admit: o.n.lease.Gate().Admit}
	err = r.reclaimRow(ctx, &res, a, row.Version, map[authority.Owner]bool{authority.OwnerOf(a): true})
	o.n.metrics.reclaimed(res)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			return false, gone // our own eligibility is in doubt: change nothing
		}
		return false, err
	}
	return res.Reclaimed == 1, nil
}

// ownerListedAlive reports whether the last discovery round listed a
// descriptor of owner's host run with a valid lease.
func (n *Node) ownerListedAlive(owner authority.Owner) bool {
	snap, list, ok := n.lastSnapshotNumbered()
	return ok && n.memo.listedAlive(list, snap, owner)
}

// ReclaimResult counts what a reclaim sweep saw and did.
type ReclaimResult struct {
	Scanned   int // authority rows looked at
	DeadOwner int // Active rows whose owner's lease had ended
	Reclaimed int // of those, removed
	Waiting   int // of those, left for the reclaim grace
	Skipped   int // undecodable, or changed while the sweep looked
	// Resumed counts Instance Spots whose first message was not recorded
	// done: a node's sweep restores them from the stored first message
	// instead of removing them (docs/INSTANCE-SPOTS.md).
	Resumed  int
	Reclaims []ReclaimedObject
	// Released are the relocation reservations whose source's owner lease
	// ended before its move committed or was cancelled: nobody else
	// releases them, and each held slots of its target's run reserved for
	// as long as that run lived (docs/AUTHORITY.md §10).
	Released []ReleasedReservation
	// Returns are the abandoned creations whose reservation was returned:
	// a Reserved record whose owner's lease ended, so its creation can
	// never commit, held its Id and its slots until someone asked for the
	// Id again — after a store outage, a creator's own abort may not have
	// reached the store. Nothing was created, so no state is lost. (An
	// Instance Spot's activation is cancelled with its stored first
	// message, by a node's sweep only.)
	Returns []ReclaimedObject
}

// ReleasedReservation names one released relocation reservation.
type ReleasedReservation struct {
	ReservationID [16]byte
	Kind          record.ObjectKind
	ID            string
	Generation    uint64
	Source        string // the dead source owner
	SourceGen     uint64
	SourceRID     []byte
	TargetRID     []byte
	Bundle        authority.Bundle // the slots returned to the target's run
}

// ReclaimedObject names one removed record.
type ReclaimedObject struct {
	Kind       record.ObjectKind
	ID         string
	StableType string
	Generation uint64
	Owner      string // the dead owner
	OwnerGen   uint64
	NodeRID    []byte
	// RequestExpired (Returns only): the owner lives, the creation's
	// stored request expired without a result (reclaimer.returnExpired).
	RequestExpired bool
}

// ReclaimOptions select what ReclaimDeadOwners looks at.
type ReclaimOptions struct {
	// Kind and ID: one object (both set; for a Spot any Spot kind names
	// the same key), every object of Kind (ID empty), or every object
	// (Kind empty).
	Kind record.ObjectKind
	ID   string
	// DryRun only counts and lists what would be reclaimed.
	DryRun bool
	Logger *slog.Logger
}

// ReclaimDeadOwners removes the records of objects whose owner's lease has
// ended, without any grace — `meshnode ctl reclaim`, an operator's
// decision. A record whose owner is alive is never touched (the batch
// checks the lease row, authority.ReclaimRequest). Every removal is in the
// result and logged at DEBUG only: the caller reports them (ctl reclaim
// prints each on stdout; until 2026-12-07 each was also a WARN on its
// stderr, every removal written twice).
func ReclaimDeadOwners(ctx context.Context, st locstore.Store, opts ReclaimOptions) (ReclaimResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	exec, err := authority.NewExecutor(st, authority.WithLogger(log))
	if err != nil {
		return ReclaimResult{}, err
	}
	r := reclaimer{loc: st, exec: exec, log: log, dryRun: opts.DryRun, why: "ctl reclaim", listed: true}
	return r.run(ctx, opts.Kind, opts.ID)
}

// reclaimer is the scan shared by the node's sweep and ctl reclaim.
type reclaimer struct {
	loc    locstore.Store
	exec   *authority.Executor
	log    *slog.Logger
	dryRun bool
	why    string
	// wait, when set, returns how long an owner seen ended must still be
	// waited for (the node's reclaim grace); admit is the node's gate.
	wait  func(authority.Owner) time.Duration
	admit func() error
	// resume, when set (a node's sweep), takes an Instance Spot whose first
	// message is not recorded done instead of removing it: handled false
	// leaves the row for a node that offers its type. Without it (ctl
	// reclaim, an explicit operator action) such a row is removed too.
	resume func(ctx context.Context, a record.Authority, version string) (handled bool, err error)
	// shares, when set, returns the key prefixes under a kind prefix that
	// this reclaimer scans (a node's shares, sweepPrefixes); nil, or a nil
	// answer, scans every row.
	shares func(base string) []string
	// logged, when set (a node's sweep), bounds the WARN lines of one run:
	// the first sweepWarnFirst removals are logged at WARN, the rest at
	// DEBUG and counted (logRemoval), and the sweep says how many in one
	// WARN. A node killed with thousands of objects made the node that
	// swept them write a WARN per object at once (an operator try-out:
	// 514 lines in 20 ms).
	logged *removalLog
	// listed: the caller reports every removal from the result (ctl
	// reclaim prints each on stdout), so none is logged above DEBUG.
	listed bool
}

// sweepWarnFirst is how many removals one sweep run logs at WARN.
const sweepWarnFirst = 20

// removalLog counts the removals one sweep run logged at WARN and those it
// logged at DEBUG only.
type removalLog struct{ warned, quiet int }

// logRemoval logs msg about one removal: at WARN, unless this run has
// already logged sweepWarnFirst of them (then DEBUG, counted).
func (r reclaimer) logRemoval(msg string, args ...any) {
	level := slog.LevelWarn
	if r.listed {
		level = slog.LevelDebug
	} else if l := r.logged; l != nil {
		if l.warned >= sweepWarnFirst {
			level = slog.LevelDebug
			l.quiet++
		} else {
			l.warned++
		}
	}
	r.log.Log(context.Background(), level, msg, args...)
}

// prefixesOf returns the key prefixes under base this reclaimer scans.
func (r reclaimer) prefixesOf(base string) []string {
	if r.shares != nil {
		if p := r.shares(base); p != nil {
			return p
		}
	}
	return []string{base}
}

func (r reclaimer) run(ctx context.Context, kind record.ObjectKind, id string) (ReclaimResult, error) {
	var res ReclaimResult
	if id != "" {
		key, err := authority.Object{ID: id, Kind: kind}.Key()
		if err != nil {
			return res, fmt.Errorf("%w: %w", ErrInvalidOperation, err)
		}
		rr, err := r.loc.Read(ctx, key)
		if err != nil {
			return res, fmt.Errorf("read %s: %w", id, err)
		}
		if !rr.Found {
			return res, fmt.Errorf("%w: no %s %q", ErrNotFound, kind, id)
		}
		return res, r.one(ctx, &res, "", key, rr.Value, rr.Version, map[authority.Owner]bool{})
	}
	// Authority keys are hashes (record.Key): one prefix for every kind;
	// the kind filter applies to the decoded rows. A node's sweep may scan
	// only its shares of the key space (sweepShards).
	ended := map[authority.Owner]bool{} // per sweep: one lease read per owner
	for _, prefix := range r.prefixesOf(record.KindPrefix(record.KindAuthority)) {
		if err := r.scan(ctx, prefix, func(it locstore.Item) error {
			return r.one(ctx, &res, kind, it.Key, it.Value, it.Version, ended)
		}); err != nil {
			return res, err
		}
	}
	// Reservation keys are hashes of the reservation id: their shares too.
	for _, prefix := range r.prefixesOf(record.KindPrefix(authority.KindRelocationReservation)) {
		if err := r.scan(ctx, prefix, func(it locstore.Item) error {
			return r.reservation(ctx, &res, kind, it, ended)
		}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// scan hands every row under prefix to each (one snapshot scan).
func (r reclaimer) scan(ctx context.Context, prefix string, each func(locstore.Item) error) error {
	cursor, restarts := "", 0
	for {
		page, err := r.loc.Scan(ctx, locstore.ScanRequest{Prefix: prefix, Limit: 500, Cursor: cursor})
		if err != nil {
			return fmt.Errorf("reclaim sweep: scan: %w", err)
		}
		if page.Expired {
			if restarts++; restarts > 3 {
				return errors.New("reclaim sweep: scan snapshot kept expiring")
			}
			cursor = ""
			continue
		}
		for _, it := range page.Items {
			if err := each(it); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		cursor = page.Next
	}
}

// Sweep shards: authority keys are "authority:" and a hex digest, so the
// first two hex digits split them into 256 even shares. In a mesh of more
// than sweepShardAll serving nodes each shard is swept by sweepShardCopies
// of them (consecutive in RID order) instead of by every node: the sweep's
// store cost stops growing with the number of nodes (docs/DISCOVERY.md
// §3.1), and a shard still has a sweeper while one of its two is down.
const (
	sweepShards      = 256
	sweepShardAll    = 16
	sweepShardCopies = 2
)

// sweepPrefixes returns the key prefixes under base (a kind prefix of
// hashed keys: authority, relocation reservation) the node at index self of
// n serving nodes (sorted by RID) sweeps: nil (every key) when n is at most
// sweepShardAll or self is not among them.
func sweepPrefixes(base string, self, n int) []string {
	if n <= sweepShardAll || self < 0 || self >= n {
		return nil
	}
	var out []string
	for s := 0; s < sweepShards; s++ {
		for c := 0; c < sweepShardCopies; c++ {
			if (s+c)%n == self {
				out = append(out, fmt.Sprintf("%s%02x", base, s))
				break
			}
		}
	}
	return out
}

// one looks at one authority row: reclaims it when it is Active and its
// owner's lease has ended (and the grace, if any, has passed).
func (r reclaimer) one(ctx context.Context, res *ReclaimResult, kind record.ObjectKind, key string, value []byte, version string, ended map[authority.Owner]bool) error {
	a, err := record.DecodeAuthority(value)
	if err != nil {
		res.Scanned++
		res.Skipped++
		r.log.Warn("reclaim: undecodable authority row", "key", key, "err", err)
		return nil
	}
	if kind != "" && a.Allocation.ObjectKind != kind {
		return nil
	}
	res.Scanned++
	return r.reclaimRow(ctx, res, a, version, ended)
}

// reclaimRow reclaims the decoded row a (at version) when it is Active and
// its owner's lease has ended (and the grace, if any, has passed).
func (r reclaimer) reclaimRow(ctx context.Context, res *ReclaimResult, a record.Authority, version string, ended map[authority.Owner]bool) error {
	var err error
	abandoned := a.Allocation.State == record.AllocationReserved
	if a.Allocation.State != record.AllocationActive && !abandoned {
		return nil
	}
	owner := authority.OwnerOf(a)
	dead, err := ownerDead(ctx, r.loc, owner, ended)
	if err != nil {
		return err
	}
	if !dead {
		if abandoned && a.Allocation.ObjectKind != record.ObjectInstanceSpot {
			return r.returnExpired(ctx, res, a, version)
		}
		return nil
	}
	if abandoned && a.Allocation.ObjectKind == record.ObjectInstanceSpot {
		// Its activation's stored first message goes with it: a node's own
		// instance recovery cancels both (instance_recover.go); ctl reclaim
		// has no Relocation Store and leaves it to a node.
		if r.resume != nil && r.resumeInstance(ctx, res, a, version) {
			res.Returns = append(res.Returns, reclaimedOf(a))
		}
		return nil
	}
	if abandoned {
		return r.returnReservation(ctx, res, a, version, owner)
	}
	res.DeadOwner++
	if r.resume != nil && a.PendingCreation != nil && a.Allocation.ObjectKind == record.ObjectInstanceSpot {
		if r.resumeInstance(ctx, res, a, version) {
			res.Resumed++
		}
		return nil
	}
	removed, err := r.removeDead(ctx, res, a, owner, &res.Reclaims, "reclaim", func(ctx context.Context) error {
		_, err := r.exec.Reclaim(ctx, authority.ReclaimRequest{
			Object:           authority.Object{ID: a.ObjectID, Kind: a.Allocation.ObjectKind, StableType: a.Allocation.StableType},
			ObjectGeneration: uint64(a.ObjectGeneration), Owner: owner, IfVersion: version})
		return err
	}, "reclaimed an object of a dead owner: its owner lease ended; the state it held in memory is lost")
	if removed {
		res.Reclaimed++
	}
	return err
}

// ownerDead is leaseEnded, asked once per owner and sweep (ended).
func ownerDead(ctx context.Context, st locstore.Store, owner authority.Owner, ended map[authority.Owner]bool) (bool, error) {
	dead, ok := ended[owner]
	if !ok {
		var err error
		if dead, err = leaseEnded(ctx, st, owner); err != nil {
			return false, err
		}
		ended[owner] = dead
	}
	return dead, nil
}

// leaseEnded reads owner's lease row directly (§3.1): ended when it is gone
// or holds another generation. An unreadable row is not evidence of death.
func leaseEnded(ctx context.Context, st locstore.Store, owner authority.Owner) (bool, error) {
	key, err := record.OwnerLeaseKey(owner.ID)
	if err != nil {
		return false, nil // an owner id we cannot even key is not ours to judge
	}
	rr, err := st.Read(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read owner lease of %s: %w", owner.ID, err)
	}
	lr, err := authority.LeaseRowOf(key, rr)
	if err != nil {
		return false, nil
	}
	return !lr.Found || uint64(lr.Lease.LeaseGeneration) != owner.LeaseGeneration, nil
}

// reclaimSweep is the node's background reclaim: on a serving node, every
// recovery.reclaim_sweep_interval, records of owners seen dead for the
// reclaim grace are removed (each logged).
func (n *Node) reclaimSweep(ctx context.Context) (ReclaimResult, error) {
	o := n.obj
	logged := &removalLog{}
	r := reclaimer{loc: n.loc, exec: o.exec, log: n.log, why: "sweep", admit: n.lease.Gate().Admit, logged: logged,
		wait: func(owner authority.Owner) time.Duration {
			return n.cfg.Recovery.ReclaimGrace - o.ended.seen(owner, n.clock.Now())
		},
		resume: func(ctx context.Context, a record.Authority, version string) (bool, error) {
			key, err := authority.Object{ID: a.ObjectID, Kind: a.Allocation.ObjectKind}.Key()
			if err != nil {
				return false, err
			}
			done, err := o.recoverInstance(ctx, authority.AuthorityRow{Key: key, Found: true, Record: a, Version: version}, false)
			if errors.Is(err, errCannotRestore) {
				return false, nil
			}
			return done, err
		}}
	self, nodes := n.sweepPosition()
	r.shares = func(base string) []string { return sweepPrefixes(base, self, nodes) }
	res, err := r.run(ctx, "", "")
	n.metrics.reclaimed(res)
	if logged.quiet > 0 {
		n.log.Warn("reclaim sweep: more records of dead owners removed than logged one by one (the rest at DEBUG)",
			"logged", logged.warned, "not_logged", logged.quiet, "reclaimed", res.Reclaimed,
			"reservations_returned", len(res.Returns), "relocation_reservations_released", len(res.Released))
	}
	if res.DeadOwner > 0 || len(res.Returns) > 0 || len(res.Released) > 0 {
		n.log.Info("reclaim sweep", "scanned", res.Scanned, "dead_owner", res.DeadOwner, "reclaimed", res.Reclaimed,
			"reservations_returned", len(res.Returns), "relocation_reservations_released", len(res.Released),
			"resumed", res.Resumed, "waiting_grace", res.Waiting, "skipped", res.Skipped)
	}
	return res, err
}

// sweepPosition is this node's index among the serving server nodes of
// its mesh in the last discovery list, and their count (sweepPositionIn).
// It reads the list as discovery read it (listed), not the list the node
// holds: every node must share out the shards from the same list, and
// a peer's refusal of a move as draining, shown in the held list at once,
// reaches only the node it refused — counted by it alone, the peer's
// shards had three sweepers or one until a list said draining for all.
func (n *Node) sweepPosition() (int, int) {
	n.mu.Lock()
	snap, ok := n.listed, n.haveSnap
	n.mu.Unlock()
	if !ok {
		return -1, 0
	}
	return sweepPositionIn(snap, n.cfg.Node.MeshName, n.run.rid)
}

// sweepPositionIn is the index of the node self among the serving server
// nodes of mesh in snap (sorted by RID), and their count; -1 when self is
// not among them.
func sweepPositionIn(snap directory.Snapshot, mesh string, self []byte) (int, int) {
	at, count := -1, 0
	for _, e := range snap.Entries { // sorted by mesh, then RID
		if !servingServer(e, mesh) {
			continue
		}
		if bytes.Equal(e.Descriptor.RoutingID, self) {
			at = count
		}
		count++
	}
	return at, count
}

// returnReservation aborts the Reserved record a (at version) of a creation
// whose owner's lease ended (and whose grace, if any, has passed): its
// Commit can never apply (it needs that lease), so the record only held its
// Id and its slots. The Abort is conditioned on the version read and names
// the reservation, so a record that changed meanwhile is left alone.
func (r reclaimer) returnReservation(ctx context.Context, res *ReclaimResult, a record.Authority, version string, owner authority.Owner) error {
	req := authority.AbortRequest{
		Object:           authority.Object{ID: a.ObjectID, Kind: a.Allocation.ObjectKind, StableType: a.Allocation.StableType},
		ObjectGeneration: uint64(a.ObjectGeneration), IfVersion: version}
	if a.PendingCreation != nil {
		req.ReservationID = a.PendingCreation.ReservationID
	}
	_, err := r.removeDead(ctx, res, a, owner, &res.Returns, "return the reservation of", func(ctx context.Context) error {
		_, err := r.exec.Abort(ctx, req)
		return err
	}, "returned the reservation of an abandoned creation: its owner lease ended before the creation finished; nothing was created")
	return err
}

// returnExpired returns the reservation of a Creating Actor or User Spot
// record a (at version) whose owner lives but whose stored creation request
// is gone: the request is kept until 5 minutes past the creation's deadline
// (the Commit or Abort deletes it with the record's change), so its creator
// has long stopped waiting and its target can no longer run it — nobody
// will commit or abort it. Such a record is left when the target failed
// before checking the reservation (so did not return it) and the creator
// stopped or died before returning it: it held the Id (a Create said it
// exists, a GetOrCreate waited until its deadline) and the target's slots
// for as long as the target's run lived (review, 2026-12-07). The Abort is
// conditioned on the version read: a record decided meanwhile is skipped.
func (r reclaimer) returnExpired(ctx context.Context, res *ReclaimResult, a record.Authority, version string) error {
	pc := a.PendingCreation
	if pc == nil || !strings.HasPrefix(pc.RequestContentReference, record.KindPrefix(KindCreationRequest)) {
		return nil // no stored request (authority's storedRequest): nothing expires
	}
	rr, err := r.loc.Read(ctx, pc.RequestContentReference)
	if err != nil {
		return fmt.Errorf("reclaim: read the creation request of %s: %w", a.ObjectID, err)
	}
	if rr.Found {
		return nil // its creation may still be decided
	}
	obj := reclaimedOf(a)
	obj.RequestExpired = true
	if r.dryRun {
		res.Returns = append(res.Returns, obj)
		return nil
	}
	if r.admit != nil {
		if err := r.admit(); err != nil {
			return wrapErr(ErrUnavailable, err, "owner lease: reclaim stopped")
		}
	}
	_, err = r.exec.Abort(ctx, authority.AbortRequest{
		Object:           authority.Object{ID: a.ObjectID, Kind: a.Allocation.ObjectKind, StableType: a.Allocation.StableType},
		ObjectGeneration: uint64(a.ObjectGeneration), ReservationID: pc.ReservationID, IfVersion: version})
	if skip, err := r.settled(res, err, "return the expired reservation of", a.ObjectID); skip {
		return err
	}
	res.Returns = append(res.Returns, obj)
	r.logRemoval("returned the reservation of an abandoned creation: its creation request expired (5 minutes past its deadline) without a result; nothing was created",
		"object", a.ObjectID, "kind", string(a.Allocation.ObjectKind), "type", a.Allocation.StableType,
		"generation", uint64(a.ObjectGeneration), "owner", a.OwnerID, "owner_gen", uint64(a.OwnerLeaseGeneration),
		"node", fmt.Sprintf("%x", a.Allocation.Descriptor.RoutingID), "by", r.why)
	return nil
}

// removeDead removes the record a of the dead owner with remove — once the
// grace, if any, has passed, and through the node's gate — and lists it in
// *list, logging msg; a dry run only lists it. A record that changed since
// the scan is skipped: someone else decided. It reports whether remove
// applied.
func (r reclaimer) removeDead(ctx context.Context, res *ReclaimResult, a record.Authority, owner authority.Owner,
	list *[]ReclaimedObject, what string, remove func(context.Context) error, msg string) (bool, error) {
	obj := reclaimedOf(a)
	if go_, err := r.mayRemove(res, owner, func() { *list = append(*list, obj) }); !go_ {
		return false, err
	}
	err := remove(ctx)
	if skip, err := r.settled(res, err, what, a.ObjectID); skip {
		return false, err
	}
	*list = append(*list, obj)
	r.logRemoval(msg, "object", a.ObjectID, "kind", string(a.Allocation.ObjectKind), "type", a.Allocation.StableType,
		"generation", uint64(a.ObjectGeneration), "dead_owner", a.OwnerID, "dead_owner_gen", uint64(a.OwnerLeaseGeneration),
		"dead_node", fmt.Sprintf("%x", a.Allocation.Descriptor.RoutingID), "by", r.why)
	return true, nil
}

// mayRemove decides whether a removal for the dead owner may go ahead now:
// not while its grace (if any) runs, not in a dry run (which only lists, by
// dryList), not when the node's gate is closed (an error).
func (r reclaimer) mayRemove(res *ReclaimResult, owner authority.Owner, dryList func()) (bool, error) {
	if r.wait != nil && r.wait(owner) > 0 {
		res.Waiting++
		return false, nil
	}
	if r.dryRun {
		dryList()
		return false, nil
	}
	if r.admit != nil {
		if err := r.admit(); err != nil {
			return false, wrapErr(ErrUnavailable, err, "owner lease: reclaim stopped")
		}
	}
	return true, nil
}

// settled sorts a removal's error: nil goes on; a row that changed since
// the scan is skipped (someone else decided); anything else is returned,
// naming what was done to whom.
func (r reclaimer) settled(res *ReclaimResult, err error, what, id string) (bool, error) {
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, authority.ErrConflict), errors.Is(err, authority.ErrNotFound), errors.Is(err, authority.ErrStaleGeneration):
		res.Skipped++
		return true, nil
	default:
		return true, fmt.Errorf("%s %s: %w", what, id, err)
	}
}

// reservation releases the relocation reservation it (a scanned row) when
// its source's owner lease has ended (and the grace, if any, has passed).
// Only the source releases a reservation it secured, when its move is
// cancelled; the target's owner CAS consumes it. A source that died in
// between — killed during a drain — left it behind, and with it the
// target run's slots, reserved for as long as that run lives: with limits,
// every such death shrank the node's room. By the grace (a minute by
// default, after the lease's TTL) any target attempt of that move has
// committed (which consumed the row) or given up; a CAS still in flight
// would find the row gone and leave the object to its dead owner, which is
// where it is anyway. The release is conditioned on the row as it is read
// again; a row gone meanwhile is skipped.
func (r reclaimer) reservation(ctx context.Context, res *ReclaimResult, kind record.ObjectKind, it locstore.Item, ended map[authority.Owner]bool) error {
	rv, err := authority.DecodeReservation(it.Value)
	if err != nil {
		res.Skipped++
		r.log.Warn("reclaim: undecodable relocation reservation row", "key", it.Key, "err", err)
		return nil
	}
	if kind != "" && rv.ObjectKind != kind {
		return nil
	}
	owner := rv.Source.Owner
	if dead, err := ownerDead(ctx, r.loc, owner, ended); !dead {
		return err
	}
	rel := ReleasedReservation{ReservationID: rv.ID, Kind: rv.ObjectKind, ID: rv.ObjectID, Generation: rv.ObjectGeneration,
		Source: owner.ID, SourceGen: owner.LeaseGeneration, SourceRID: rv.Source.Node.RoutingID,
		TargetRID: rv.Target.Node.RoutingID, Bundle: rv.Bundle}
	if go_, err := r.mayRemove(res, owner, func() { res.Released = append(res.Released, rel) }); !go_ {
		return err
	}
	out, err := r.exec.ReleaseCapacity(ctx, authority.CapacityRequest{ReservationID: rv.ID})
	if skip, err := r.settled(res, err, "release the relocation reservation of", rv.ObjectID); skip {
		return err
	}
	if out.AlreadyApplied { // consumed by the move's owner CAS, or released, since the scan
		res.Skipped++
		return nil
	}
	res.Released = append(res.Released, rel)
	r.logRemoval("released the relocation reservation of a dead source: its owner lease ended before the move committed or was cancelled; the target's reserved slots are returned",
		"object", rv.ObjectID, "kind", string(rv.ObjectKind), "generation", rv.ObjectGeneration,
		"reservation", fmt.Sprintf("%x", rv.ID), "dead_owner", owner.ID, "dead_owner_gen", owner.LeaseGeneration,
		"dead_node", fmt.Sprintf("%x", rv.Source.Node.RoutingID), "target_node", fmt.Sprintf("%x", rv.Target.Node.RoutingID),
		"by", r.why)
	return nil
}

// reclaimedOf names the record a for a ReclaimResult.
func reclaimedOf(a record.Authority) ReclaimedObject {
	return ReclaimedObject{Kind: a.Allocation.ObjectKind, ID: a.ObjectID, StableType: a.Allocation.StableType,
		Generation: uint64(a.ObjectGeneration), Owner: a.OwnerID, OwnerGen: uint64(a.OwnerLeaseGeneration),
		NodeRID: append([]byte(nil), a.Allocation.Descriptor.RoutingID...)}
}

// resumeInstance hands the Instance Spot record a (at version) of a dead
// owner to this node's own recovery (restored, or its abandoned activation
// cancelled) and reports whether that changed it; otherwise it is counted
// as skipped.
func (r reclaimer) resumeInstance(ctx context.Context, res *ReclaimResult, a record.Authority, version string) bool {
	done, err := r.resume(ctx, a, version)
	if err != nil {
		r.log.Warn("sweep: Instance Spot of a dead owner not recovered", "object", a.ObjectID, "state", string(a.Allocation.State), "err", err)
	}
	if err != nil || !done {
		res.Skipped++
		return false
	}
	return true
}
