package directory

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

// Lease is what the publisher needs from the host's owner lease;
// *lease.Manager satisfies it.
type Lease interface {
	// OwnerID and Generation are the host run (spec §3.1) written into the
	// descriptor.
	OwnerID() string
	Generation() uint64
	// Fence returns the owner-lease key and its last known version (empty
	// when the lease is lost). Every publish batch is conditioned on it.
	Fence() (key, version string)
}

var _ Lease = (*lease.Manager)(nil)

// PublisherConfig configures NewPublisher.
type PublisherConfig struct {
	// Store is the Location Store. Required.
	Store locstore.Store
	// Lease is the host run's owner lease. Required.
	Lease Lease
	// Gate is consulted before every publish attempt (spec §5: descriptor
	// publishing is a blocked target). Required; pass the lease manager's
	// Gate().
	Gate lease.Admitter
	// MeshName and RoutingID fix the descriptor key this publisher writes.
	MeshName  string
	RoutingID []byte
	// LastRevision is the last revision this host run already published
	// under this key, 0 when none (the normal case: a publisher lives as
	// long as its host run). A replacement publisher within the same run
	// passes the previous one's Revision() so that its revisions keep
	// increasing.
	LastRevision record.Generation
	// MaxAttempts bounds the read/write rounds of one Publish (Conflict
	// retries); 0 means DefaultPublishAttempts.
	MaxAttempts int
	// Logger, naming the mesh and rid (the node's does); nil means
	// slog.Default() with them.
	Logger *slog.Logger
}

// Outcome says what a Publish did.
type Outcome uint8

// Publish outcomes.
const (
	// Published: our descriptor was written (or a lost answer was confirmed
	// by re-reading it).
	Published Outcome = iota + 1
	// Ignored: the store already holds a descriptor of this host run at our
	// revision or a later one; nothing was written (spec §4: a replay at an
	// unchanged revision is a harmless no-op).
	Ignored
)

func (o Outcome) String() string {
	switch o {
	case Published:
		return "published"
	case Ignored:
		return "ignored"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// PublishResult reports a successful Publish.
type PublishResult struct {
	Outcome Outcome
	// Revision is the revision of this publish; for Ignored, StoredRevision
	// is the (greater or equal) revision found in the store.
	Revision       record.Generation
	StoredRevision record.Generation
	// Takeover is set when the write replaced another host run's descriptor
	// whose owner lease was gone; Previous* name that run. A run replacing
	// its own descriptor of an older lease generation (it lost its lease
	// and reacquired it) is not a takeover; Previous* then name that
	// older generation.
	Takeover                bool
	PreviousOwnerID         string
	PreviousLeaseGeneration record.Generation
	// StoreNow is the store time of the read that planned the write; the
	// descriptor's updatedAtEpochMs is this time.
	StoreNow time.Time
	// Attempts is the number of read/write rounds used.
	Attempts int
}

// Publisher publishes one host run's MeshNode descriptor (spec §4). It
// issues the revisions: the first publish is revision LastRevision+1 and
// every publish whose content differs from the previous one takes the next
// revision; publishing unchanged content reuses the revision, so a repeated
// publish is a replay that the store answers with Ignored.
//
// Publish calls are serialised; a Publisher is safe for concurrent use.
type Publisher struct {
	store       locstore.Store
	lease       Lease
	gate        lease.Admitter
	log         *slog.Logger
	maxAttempts int

	meshName  string
	routingID []byte
	key       string // descriptor key

	mu          sync.Mutex
	lastRev     record.Generation // last revision issued (or adopted from the store)
	lastContent []byte            // content of lastRev; nil forces a new revision
	exhausted   bool
}

// NewPublisher checks cfg and returns a publisher. It does no I/O.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	switch {
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: publisher: no Location Store", ErrInvalidArgument)
	case cfg.Lease == nil:
		return nil, fmt.Errorf("%w: publisher: no owner lease", ErrInvalidArgument)
	case cfg.Gate == nil:
		return nil, fmt.Errorf("%w: publisher: no admission gate", ErrInvalidArgument)
	case cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("%w: publisher: MaxAttempts %d is negative", ErrInvalidArgument, cfg.MaxAttempts)
	case cfg.LastRevision > record.MaxGeneration:
		return nil, fmt.Errorf("%w: publisher: LastRevision %d beyond 2^63-1", ErrInvalidArgument, cfg.LastRevision)
	}
	key, err := record.MeshNodeKey(cfg.MeshName, cfg.RoutingID)
	if err != nil {
		return nil, fmt.Errorf("%w: publisher: %w", ErrInvalidArgument, err)
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultPublishAttempts
	}
	rid := append([]byte(nil), cfg.RoutingID...)
	if cfg.Logger == nil {
		// A caller's logger names mesh and rid already (the node's does):
		// adding them again would repeat the keys in every JSON record.
		cfg.Logger = slog.Default().With("mesh", cfg.MeshName, "rid", hex.EncodeToString(rid))
	}
	return &Publisher{
		store: cfg.Store, lease: cfg.Lease, gate: cfg.Gate, maxAttempts: cfg.MaxAttempts,
		log:      cfg.Logger,
		meshName: cfg.MeshName, routingID: rid, key: key,
		lastRev: cfg.LastRevision,
	}, nil
}

// Key returns the descriptor's store key.
func (p *Publisher) Key() string { return p.key }

// Revision returns the last revision issued (0 before the first publish).
func (p *Publisher) Revision() record.Generation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastRev
}

// Exhausted reports whether the revisions ran out (see ErrRevisionExhausted).
func (p *Publisher) Exhausted() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exhausted
}

// content is the descriptor's encoding with the fields the publisher
// writes per attempt (revision, updatedAt) set to their widest values. It
// serves two purposes: validating the descriptor (if it fits with the
// widest values, every real encoding fits, so nothing depends on which
// revision comes next) and telling whether the content changed.
func content(d record.MeshNodeDescriptor) ([]byte, error) {
	d.DescriptorRevision = record.MaxGeneration
	d.UpdatedAt = math.MaxInt64
	return d.Encode()
}

// Publish writes d as this host run's descriptor. The caller builds the
// whole descriptor; the publisher sets OwnerID and LeaseGeneration from the
// lease, DescriptorRevision (see Publisher) and UpdatedAt (store time).
// d.MeshName and d.RoutingID must be the publisher's.
//
// Errors: ErrInvalidDescriptor (nothing written, nothing truncated), the
// gate's error (lease.ErrLeaseExpired, ...), ErrRevisionExhausted (this and
// every later call), ErrRoutingIDInUse, ErrLeaseNotHeld, ErrStoredDescriptor,
// ErrCounter, ErrContention, or a store failure (errors.Is
// locstore.ErrUnavailable; the outcome may be unknown: publishing the same
// content again is a replay and safe).
func (p *Publisher) Publish(ctx context.Context, d record.MeshNodeDescriptor) (PublishResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exhausted {
		return PublishResult{}, fmt.Errorf("%w (%w)", ErrRevisionExhausted, record.ErrRevisionExhausted)
	}
	if d.MeshName != p.meshName || !bytes.Equal(d.RoutingID, p.routingID) {
		return PublishResult{}, fmt.Errorf("%w: descriptor for mesh %q rid %x, publisher is for mesh %q rid %x",
			ErrInvalidArgument, d.MeshName, d.RoutingID, p.meshName, p.routingID)
	}
	gen := p.lease.Generation()
	if gen > uint64(record.MaxGeneration) {
		return PublishResult{}, fmt.Errorf("%w: lease generation %d beyond 2^63-1", ErrLeaseNotHeld, gen)
	}
	d.OwnerID, d.LeaseGeneration = p.lease.OwnerID(), record.Generation(gen)
	d.RoutingID = p.routingID
	c, err := content(d)
	if err != nil {
		return PublishResult{}, fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	if err := p.gate.Admit(); err != nil {
		return PublishResult{}, fmt.Errorf("directory: publish not admitted: %w", err)
	}
	rev := p.lastRev
	if rev == 0 || !bytes.Equal(c, p.lastContent) {
		next, err := record.NextRevision(p.lastRev)
		if err != nil {
			p.exhausted = true
			p.log.Error("descriptor revision exhausted; publishing stopped, the node must switch to error", "revision", p.lastRev)
			return PublishResult{}, fmt.Errorf("%w (%w)", ErrRevisionExhausted, err)
		}
		rev = next
	}
	// Remember the revision before writing: if the outcome is unknown, the
	// caller's retry of the same content is then a replay at this revision.
	p.lastRev, p.lastContent = rev, c
	d.DescriptorRevision = rev
	return p.publish(ctx, d, c)
}

// maxPublishFailures is how many writes of one publish may fail (and not
// apply) before it gives up with the store's error.
const maxPublishFailures = 3

// publish runs read/plan/write rounds until one settles.
func (p *Publisher) publish(ctx context.Context, d record.MeshNodeDescriptor, c []byte) (PublishResult, error) {
	var (
		fenceKey, fenceVersion = p.lease.Fence()
		unknownWrite           []byte // bytes of a write whose outcome was unknown
		failures               int    // writes that failed and did not apply
	)
	for attempt := 1; attempt <= p.maxAttempts; attempt++ {
		if err := ctx.Err(); err != nil {
			return PublishResult{}, fmt.Errorf("directory: publish: %w", context.Cause(ctx))
		}
		if attempt > 1 {
			// After a Conflict the cached fence may be stale (a renew whose
			// answer was lost): read our own record and fence on what it is.
			v, err := p.ownFence(ctx, fenceKey)
			if err != nil {
				return PublishResult{}, err
			}
			fenceVersion = v
		}
		if fenceVersion == "" {
			return PublishResult{}, fmt.Errorf("%w: the lease manager holds no record version", ErrLeaseNotHeld)
		}
		if err := p.gate.Admit(); err != nil {
			return PublishResult{}, fmt.Errorf("directory: publish not admitted: %w", err)
		}
		res, req, value, done, err := p.plan(ctx, d, c, fenceKey, fenceVersion, unknownWrite)
		res.Attempts = attempt
		if err != nil || done {
			return res, err
		}
		wr, werr := p.store.Write(ctx, req)
		switch {
		case werr != nil && errors.Is(werr, locstore.ErrArgument):
			return PublishResult{}, fmt.Errorf("directory: publish: %w", werr)
		case werr != nil:
			// Outcome unknown (§10): settle it by reading our key.
			rr, rerr := p.store.Read(ctx, p.key)
			if rerr != nil {
				p.log.Warn("descriptor publish outcome unknown", "revision", d.DescriptorRevision, "err", werr)
				return PublishResult{}, fmt.Errorf("directory: publish outcome unknown: %w", errors.Join(werr, rerr))
			}
			if rr.Found && bytes.Equal(rr.Value, value) {
				res.Outcome = Published
				p.published(res)
				return res, nil
			}
			if errors.Is(werr, locstore.ErrWriteRefused) {
				// The store refuses every write until an operator acts (out
				// of memory, a failed save): asking again at once, up to
				// maxAttempts times, would only end as "kept conflicting".
				return PublishResult{}, fmt.Errorf("directory: publish: %w", werr)
			}
			unknownWrite = value
			if failures++; failures >= maxPublishFailures {
				// A store that answers reads but fails writes (a read-only
				// replica in a failover) was asked up to maxAttempts times
				// at once, each with a WARN line, and the publish ended as
				// "kept conflicting". The caller publishes again later.
				return PublishResult{}, fmt.Errorf("directory: publish failed %d times: %w", failures, werr)
			}
			p.log.Warn("descriptor publish failed and did not apply; retrying", "revision", d.DescriptorRevision, "err", werr)
		case wr.Applied:
			res.Outcome = Published
			p.published(res)
			return res, nil
		default:
			p.log.Debug("descriptor publish conflicted; re-reading", "revision", d.DescriptorRevision, "attempt", attempt)
		}
	}
	return PublishResult{}, fmt.Errorf("%w: publish gave up after %d attempts", ErrContention, p.maxAttempts)
}

func (p *Publisher) published(res PublishResult) {
	if res.Takeover {
		p.log.Info("descriptor published, taking over from a host run whose lease is gone",
			"revision", res.Revision, "previous_owner", res.PreviousOwnerID, "previous_gen", res.PreviousLeaseGeneration)
		return
	}
	p.log.Debug("descriptor published", "revision", res.Revision)
}

// ownFence reads our owner-lease record and returns its version if it is
// still ours.
func (p *Publisher) ownFence(ctx context.Context, key string) (string, error) {
	lc, err := checkLease(ctx, p.store, p.lease.OwnerID(), record.Generation(p.lease.Generation()))
	if err != nil {
		return "", fmt.Errorf("directory: publish: %w", err)
	}
	if lc.Key != key {
		return "", fmt.Errorf("%w: fence key %q is not our owner-lease key %q", ErrLeaseNotHeld, key, lc.Key)
	}
	if !lc.Valid {
		return "", fmt.Errorf("%w: owner-lease record missing or not ours", ErrLeaseNotHeld)
	}
	return lc.Version, nil
}

// plan reads the stored descriptor and the change counter and decides:
// done (Ignored, or an error) or a write request. value is the descriptor
// bytes the request puts.
func (p *Publisher) plan(ctx context.Context, d record.MeshNodeDescriptor, c []byte, fenceKey, fenceVersion string, unknownWrite []byte) (res PublishResult, req locstore.WriteRequest, value []byte, done bool, err error) {
	res.Revision = d.DescriptorRevision
	rr, err := p.store.Read(ctx, p.key)
	if err != nil {
		return res, req, nil, true, fmt.Errorf("directory: publish: read descriptor: %w", err)
	}
	res.StoreNow = rr.StoreNow
	conds := []locstore.Condition{locstore.IfVersion(fenceKey, fenceVersion)}
	if !rr.Found {
		conds = append(conds, locstore.IfMissing(p.key))
	} else {
		stored, derr := record.DecodeMeshNode(rr.Value)
		if derr == nil && (stored.MeshName != p.meshName || !bytes.Equal(stored.RoutingID, p.routingID)) {
			derr = fmt.Errorf("holds mesh %q rid %x", stored.MeshName, stored.RoutingID)
		}
		if derr != nil {
			p.log.Error("stored descriptor under our key is unreadable; not overwriting it", "key", p.key, "err", derr)
			return res, req, nil, true, fmt.Errorf("%w: key %s: %w", ErrStoredDescriptor, p.key, derr)
		}
		if stored.OwnerID == d.OwnerID && stored.LeaseGeneration == d.LeaseGeneration {
			if stored.DescriptorRevision >= d.DescriptorRevision {
				return p.ignored(res, stored, c, unknownWrite, rr.Value), req, nil, true, nil
			}
		} else {
			lc, lerr := checkLease(ctx, p.store, stored.OwnerID, stored.LeaseGeneration)
			if lerr != nil {
				return res, req, nil, true, fmt.Errorf("directory: publish: %w", lerr)
			}
			// A lease another run reacquired under a newer generation
			// (its OwnerId is its own: never reused) is alive too, about to
			// republish; until 2026-12-06 it counted as gone, and a second
			// process started with the same routing id took a live run's
			// descriptor over. Our own run's older descriptor (we lost our
			// lease and reacquired it) is ours to replace.
			reacquiredByOther := lc.Reacquired && stored.OwnerID != d.OwnerID
			if lc.Valid || reacquiredByOther || lc.Unreadable {
				// Alive, or not provably dead: two nodes must never share a
				// mesh+routing id.
				return res, req, nil, true, &RoutingIDInUseError{
					MeshName: p.meshName, RoutingID: p.routingID,
					OwnerID: stored.OwnerID, LeaseGeneration: stored.LeaseGeneration, LeaseExpiresAt: lc.ExpiresAt, StoreNow: lc.StoreNow,
				}
			}
			// Our own run's older descriptor is no takeover: logging it as
			// one named this run as "a host run whose lease is gone" after
			// every lease recovery (operator try-out, a Redis pause).
			res.Takeover = stored.OwnerID != d.OwnerID
			res.PreviousOwnerID, res.PreviousLeaseGeneration = stored.OwnerID, stored.LeaseGeneration
			if lc.Key != fenceKey {
				conds = append(conds, lc.condition())
			}
		}
		conds = append(conds, locstore.IfVersion(p.key, rr.Version))
	}
	ch, err := readChange(ctx, p.store)
	if err != nil {
		return res, req, nil, true, fmt.Errorf("directory: publish: %w", err)
	}
	muts, err := ch.mutations(p.key)
	if err != nil {
		return res, req, nil, true, fmt.Errorf("directory: publish: %w", err)
	}
	conds = append(conds, ch.conditions()...)
	d.UpdatedAt = record.EpochMillisOf(rr.StoreNow)
	value, err = d.Encode()
	if err != nil {
		// content() validated the widest encoding; only a StoreNow before
		// 1970 can get here.
		return res, req, nil, true, fmt.Errorf("%w: %w", ErrInvalidDescriptor, err)
	}
	req = locstore.WriteRequest{
		Conditions: conds,
		Mutations:  append(muts, locstore.Put(p.key, value)),
	}
	return res, req, value, false, nil
}

// ignored settles a publish that finds a descriptor of our own run at our
// revision or a later one. Nothing is written. If this call's own write
// (with an unknown outcome) is what the store holds, it is reported as
// Published. A later revision with other content (a second publisher for
// the same run) makes our next publish take a revision above it.
func (p *Publisher) ignored(res PublishResult, stored record.MeshNodeDescriptor, c, unknownWrite, storedValue []byte) PublishResult {
	res.StoredRevision = stored.DescriptorRevision
	if unknownWrite != nil && bytes.Equal(unknownWrite, storedValue) {
		res.Outcome = Published
		return res
	}
	res.Outcome = Ignored
	if stored.DescriptorRevision > p.lastRev {
		p.lastRev = stored.DescriptorRevision
	}
	sc, err := content(stored)
	if err != nil || !bytes.Equal(sc, c) {
		p.lastContent = nil
		if stored.DescriptorRevision > res.Revision {
			p.log.Warn("store holds a later revision of this host run with other content; the next publish supersedes it",
				"revision", res.Revision, "stored_revision", stored.DescriptorRevision)
		}
	}
	return res
}
