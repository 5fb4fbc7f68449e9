package directory

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Tracker is discovery that reads only what may have changed
// (docs/DISCOVERY.md "Cost at scale"). It keeps, between rounds, the last
// complete descriptor list and what each host run's owner lease was last
// seen to say; a round then costs:
//
//   - one read of the descriptor change counter. Every descriptor write
//     and delete bumps it in the same batch, so an unchanged counter (same
//     store version) proves the list is still exactly the last complete
//     one — the same-point-in-time list of §4, without a scan;
//   - when it moved, the changed descriptors the descriptor journal names
//     and the counter again (tracker_journal.go), or the whole list
//     (counter, scan, counter, as Lister) when the journal cannot prove
//     the result;
//   - one owner-lease read per host run whose lease may have changed what
//     it says: a run not seen before, a run whose descriptor state changed,
//     and a run whose last known expiry has passed. A lease's expiry only
//     moves forward while it is held (renewals extend it; a release is
//     preceded by the `stopped` state, a loss followed by a new run's
//     descriptor), so "valid until the expiry last
//     read" is exact, not a guess: the lease is re-read when that expiry
//     comes, and a run that stopped renewing is invalid from that round on
//     — the same bound as reading every lease every round (lease expiry
//     plus one round). An invalid lease (missing, expired, another
//     generation) stays invalid for that run: a new lease is a new
//     LeaseGeneration and a new descriptor.
//
// Watching (when Linked is set) removes the last N² term: a run whose
// known expiry has come is read again only by the nodes that watch it —
// its Watchers successors in the ring of listed runs sorted by mesh and
// RID — and by any node without a healthy link to it. The others keep it
// valid while it stays listed: a run that dies loses its links (a killed
// process at once, a paused one after transport.peer_timeout), so every
// node still reads its lease at expiry; a run that lost only its store
// lease while its process and links live is found by its watchers, which
// remove its descriptor (DeadWatched), and the others see the counter move
// the next round (one round later than the bound above, in that case only). With every link healthy a round reads the leases of
// Watchers runs per lease period, whatever the mesh size.
//
// A Tracker is not safe for concurrent use; the node serialises rounds.
type Tracker struct {
	Store locstore.Store
	// PageSize is the scan page size of a full list, 1..1000.
	PageSize int
	Logger   *slog.Logger
	// Self is this node's RoutingID (its place in the watch ring).
	Self []byte
	// Linked, when set, reports a healthy admitted link to that node run;
	// nil reads every run's lease at its expiry (no watching).
	Linked func(rid []byte, lifecycleGeneration uint64) bool
	// Watchers is how many ring successors watch each run (0: 2).
	Watchers int
	// FullRelist reads the whole list whenever the counter moved, without
	// following the descriptor journal (tracker_journal.go): what a round
	// cost before the journal, kept for comparison in the benchmarks.
	FullRelist bool

	last       *Snapshot
	counter    counterState
	counterKey string
	leases     map[leaseRun]knownLease
	// deadWatched are the keys of the descriptors of the last round whose
	// lease this node found ended as one of their watchers.
	deadWatched []string
}

// DeadWatched returns the descriptor keys the last round found without a
// valid lease among the runs this node watches while their links are still
// up (a process alive but without its lease): the node removes them
// (directory.ReclaimKey), so that the nodes that trusted the list learn of
// it through the change counter. A run whose links went down is read by
// every node itself; its descriptor stays for the operator (Reclaim's
// MinAge).
func (t *Tracker) DeadWatched() []string { return slices.Clone(t.deadWatched) }

// watched returns the indexes of the entries this node watches: the
// Watchers entries after Self in the sorted list (wrapping), Self excluded.
// Without Linked, every entry.
func (t *Tracker) watched(entries []Entry) map[int]bool {
	out := map[int]bool{}
	if t.Linked == nil {
		for i := range entries {
			out[i] = true
		}
		return out
	}
	k := t.Watchers
	if k <= 0 {
		k = 2
	}
	self := -1
	for i, e := range entries {
		if string(e.Descriptor.RoutingID) == string(t.Self) {
			self = i
			break
		}
	}
	if self < 0 {
		// Not listed (yet): insert position by RID order.
		self = len(entries)
		for i, e := range entries {
			if string(e.Descriptor.RoutingID) > string(t.Self) {
				self = i
				break
			}
		}
		self-- // the successors start at self+1
	}
	// A run known to be without its lease does not count as one of the
	// Watchers: it watches nobody. It stays in the ring (a crashed run is
	// kept listed until the reclaim age), so counting it left the run
	// after a stretch of them with no live watcher, trusted by every node
	// for good once it lost its lease with its links up. It is still
	// watched itself.
	for step, live := 1, 0; step <= len(entries) && live < k; step++ {
		i := ((self+step)%len(entries) + len(entries)) % len(entries)
		if string(entries[i].Descriptor.RoutingID) != string(t.Self) {
			out[i] = true
			if !t.knownEnded(entries[i]) {
				live++
			}
		}
	}
	return out
}

// knownEnded reports whether the last read of e's run's lease found it
// ended (missing, expired or another generation, and not reacquired by its
// OwnerId): an ended lease never comes back under that generation.
func (t *Tracker) knownEnded(e Entry) bool {
	k, ok := t.leases[leaseRun{e.Descriptor.OwnerID, e.Descriptor.LeaseGeneration}]
	return ok && !k.check.Valid && !k.check.Reacquired && !k.check.Unreadable
}

type leaseRun struct {
	owner string
	gen   record.Generation
}

// knownLease is what a run's lease said when last read.
type knownLease struct {
	check leaseCheck
	// state is the descriptor state the verdict was read under: a
	// descriptor whose state changed has its lease read again. A change
	// that keeps the state (a capacity copy, a weight) needs no read: the
	// run's publisher commits only while its lease is live (the batch is
	// fenced on it), so the known expiry stays the bound, and a release is
	// always preceded by the `stopped` state (§11).
	state record.State
}

// RoundStats counts one round's store reads.
type RoundStats struct {
	// Listed: the change counter had moved and the whole list was read.
	Listed bool
	// Followed: the change counter had moved and the list was brought up
	// to date from the descriptor journal (JournalReads: the journal and
	// the changed descriptors).
	Followed     bool
	CounterReads int
	ScanPages    int
	JournalReads int
	LeaseReads   int
}

// Reads is every store read of the round.
func (s RoundStats) Reads() int {
	return s.CounterReads + s.ScanPages + s.JournalReads + s.LeaseReads
}

func (t *Tracker) logger() *slog.Logger {
	if t.Logger == nil {
		return slog.Default()
	}
	return t.Logger
}

// Round returns the current complete list of meshName with each entry's
// lease verdict, reading as little as the rules above allow. On error
// nothing is returned and the Tracker's state is unchanged except for
// lease verdicts already refreshed (they stay exact).
func (t *Tracker) Round(ctx context.Context, meshName string) (Snapshot, RoundStats, error) {
	var st RoundStats
	if t.Store == nil {
		return Snapshot{}, st, fmt.Errorf("%w: tracker: no Location Store", ErrInvalidArgument)
	}
	if err := validPageSize(t.PageSize); err != nil {
		return Snapshot{}, st, err
	}
	if t.last != nil && t.last.MeshName != meshName {
		t.last, t.leases = nil, nil // another mesh: start over
	}
	if t.leases == nil {
		t.leases = map[leaseRun]knownLease{}
	}
	if t.counterKey == "" {
		k, err := changeCounterKey()
		if err != nil {
			return Snapshot{}, st, err
		}
		t.counterKey = k
	}
	var snap Snapshot
	c, err := readCounter(ctx, t.Store, t.counterKey)
	st.CounterReads++
	if err != nil {
		return Snapshot{}, st, fmt.Errorf("directory: round: %w", err)
	}
	if t.last != nil && c.same(t.counter) {
		snap = *t.last
		snap.Entries = slices.Clone(t.last.Entries)
		snap.StoreNow = c.StoreNow
		snap.Attempts = 0
	} else if snap, c, err = t.changedList(ctx, meshName, c, &st); err != nil {
		return Snapshot{}, st, fmt.Errorf("directory: round: %w", err)
	}
	// Lease verdicts: read what may have changed; the rest is exact from
	// the last read (see the type's comment).
	watch := t.watched(snap.Entries)
	// trusted: a run whose known expiry has come but that this node
	// neither watches nor has lost its link to: kept valid while listed.
	trusted := func(i int) bool {
		d := snap.Entries[i].Descriptor
		return !watch[i] && t.Linked(d.RoutingID, uint64(d.LifecycleGeneration))
	}
	due := map[leaseRun]record.State{} // run → the descriptor state it is read under
	for i, e := range snap.Entries {
		r := leaseRun{e.Descriptor.OwnerID, e.Descriptor.LeaseGeneration}
		k, ok := t.leases[r]
		// A reacquired run's newer lease ends too (its process may die before
		// it republishes): read it again at its expiry, as a valid one.
		expired := (k.check.Valid || k.check.Reacquired) && !snap.StoreNow.Before(k.check.ExpiresAt)
		if !ok || k.state != e.Descriptor.State || k.check.Unreadable || (expired && !trusted(i)) {
			due[r] = e.Descriptor.State
		}
	}
	st.LeaseReads = len(due)
	if err := t.readLeases(ctx, due); err != nil {
		return Snapshot{}, st, fmt.Errorf("directory: round: %w", err)
	}
	seen := make(map[leaseRun]bool, len(snap.Entries))
	t.deadWatched = t.deadWatched[:0]
	for i := range snap.Entries {
		e := &snap.Entries[i]
		r := leaseRun{e.Descriptor.OwnerID, e.Descriptor.LeaseGeneration}
		k := t.leases[r]
		seen[r] = true
		_, read := due[r]
		valid := k.check.Valid && (snap.StoreNow.Before(k.check.ExpiresAt) || (!read && trusted(i)))
		if !valid && watch[i] && !k.check.Unreadable && !k.check.Reacquired && t.Linked != nil &&
			t.Linked(e.Descriptor.RoutingID, uint64(e.Descriptor.LifecycleGeneration)) {
			// Its process still answers on its links, so the nodes that
			// trust the list would not look: only its removal tells them.
			t.deadWatched = append(t.deadWatched, e.Key)
		}
		e.LeaseValid, e.LeaseCheckedAt = valid, k.check.StoreNow
		e.LeaseReacquired = !valid && k.check.Reacquired
		e.LeaseExpiresAt = time.Time{}
		if k.check.Found {
			e.LeaseExpiresAt = k.check.ExpiresAt
		}
	}
	for r := range t.leases {
		if !seen[r] {
			delete(t.leases, r)
		}
	}
	snap.Complete = true
	last := snap
	last.Entries = slices.Clone(snap.Entries)
	t.last, t.counter = &last, c
	return snap, st, nil
}

// changedList returns the list after the counter moved (or on the first
// round): brought up to date from the journal when it can be, else read
// whole; and the counter observation that closed it.
func (t *Tracker) changedList(ctx context.Context, meshName string, c counterState, st *RoundStats) (Snapshot, counterState, error) {
	if !t.FullRelist {
		l, ok, err := t.followJournal(ctx, meshName, c, st)
		if err != nil || ok {
			return l.snap, l.closing, err
		}
	}
	counted := &countingStore{Store: t.Store}
	s, err := Lister{Store: counted, PageSize: t.PageSize, Logger: t.Logger}.descriptors(ctx, meshName)
	st.Listed, st.CounterReads, st.ScanPages = true, st.CounterReads+counted.reads, st.ScanPages+counted.scans
	return s.snap, s.closing, err
}

// readConcurrency bounds the reads of one round in flight (leases due,
// descriptors the journal names): a round after a list change or a burst
// of expiries may read many, and one at a time each waits a full store
// round trip.
const readConcurrency = 16

// readAll calls read for every key, at most readConcurrency at once, and
// returns the results of the calls that succeeded and the first error.
func readAll[K comparable, V any](keys []K, read func(K) (V, error)) (map[K]V, error) {
	type result struct {
		k   K
		v   V
		err error
	}
	in := make(chan K)
	out := make(chan result)
	for range min(readConcurrency, len(keys)) {
		go func() {
			for k := range in {
				v, err := read(k)
				out <- result{k, v, err}
			}
		}()
	}
	go func() {
		for _, k := range keys {
			in <- k
		}
		close(in)
	}()
	got := make(map[K]V, len(keys))
	var first error
	for range keys {
		r := <-out
		if r.err != nil {
			if first == nil {
				first = r.err
			}
			continue
		}
		got[r.k] = r.v
	}
	return got, first
}

// readLeases reads the leases of due and records each verdict. The first
// error is returned; verdicts already read stay (they are exact).
func (t *Tracker) readLeases(ctx context.Context, due map[leaseRun]record.State) error {
	got, err := readAll(slices.Collect(maps.Keys(due)), func(r leaseRun) (knownLease, error) {
		lc, err := checkLease(ctx, t.Store, r.owner, r.gen)
		return knownLease{check: lc, state: due[r]}, err
	})
	maps.Copy(t.leases, got)
	return err
}

// listed is a complete descriptor list without lease verdicts and the
// counter observation that closed it.
type listed struct {
	snap    Snapshot
	closing counterState
}

// descriptors is List without the lease reads: counter, scan, counter,
// again until consistent, up to MaxAttempts (same rules as List); and the
// counter observation that closed the list.
func (l Lister) descriptors(ctx context.Context, meshName string) (listed, error) {
	if meshName != "" {
		if err := record.ValidateMeshName(meshName); err != nil {
			return listed{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	attempts, log := l.defaults()
	counterKey, err := changeCounterKey()
	if err != nil {
		return listed{}, err
	}
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return listed{}, context.Cause(ctx)
		}
		snap, closing, err := l.readOnceCounter(ctx, counterKey, meshName, log)
		if err != nil {
			return listed{}, err
		}
		if snap == nil {
			last = ErrScanExpired
			log.Debug("descriptor scan expired; restarting from the first page", "attempt", attempt)
			continue
		}
		if !snap.Complete {
			last = ErrListChanged
			log.Debug("descriptor list changed while read; reading again", "attempt", attempt)
			continue
		}
		snap.Attempts = attempt
		return listed{snap: *snap, closing: closing}, nil
	}
	return listed{}, fmt.Errorf("%w (%d attempts)", last, attempts)
}

// defaults are l's MaxAttempts and Logger, or their defaults when unset.
func (l Lister) defaults() (attempts int, log *slog.Logger) {
	attempts, log = l.MaxAttempts, l.Logger
	if attempts == 0 {
		attempts = DefaultListAttempts
	}
	if log == nil {
		log = slog.Default()
	}
	return attempts, log
}

// countingStore counts the reads and scan pages of a full list.
type countingStore struct {
	locstore.Store
	reads, scans int
}

func (s *countingStore) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	s.reads++
	return s.Store.Read(ctx, key)
}

func (s *countingStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	s.scans++
	return s.Store.Scan(ctx, req)
}
