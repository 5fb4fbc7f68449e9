package directory

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
)

// Connectable reports whether a peer in state s is a connection target.
// Every state of a running process is: preparing (the ROUTER is bound and
// the descriptor published before serving, so handshakes can finish before
// traffic), serving, relocating and draining (objects are still owned and
// moving), relocated (the node still answers Message Follow for objects
// that left it). stopped and error are not: the process is going or
// unusable. Whether a message may actually be sent is decided later by the
// transport handshake and admission (spec §4 "ready"), and placement
// checks Serving itself.
func Connectable(s record.State) bool {
	switch s {
	case record.StatePreparing, record.StateServing, record.StateRelocating,
		record.StateRelocated, record.StateDraining:
		return true
	}
	return false
}

// Intent is the wish to keep a connection to one peer, taken from a
// complete list.
type Intent struct {
	RoutingID           []byte
	Endpoint            string
	SecurityIdentity    string
	LifecycleGeneration record.Generation
	OwnerID             string
	LeaseGeneration     record.Generation
	State               record.State
	DescriptorRevision  record.Generation
}

// samePeer reports whether two intents name the same running peer at the
// same address: otherwise the connection must be rebuilt. The run is its
// lifecycleGeneration and OwnerId: a restart gets new ones. A new
// LeaseGeneration under both unchanged is the same process that lost its
// owner lease and reacquired it (docs/LEASE.md) — its link, bound to the
// node run, stays good, and rebuilding it only made every peer
// unreachable for a moment after each store outage.
func (i Intent) samePeer(o Intent) bool {
	return i.Endpoint == o.Endpoint && i.SecurityIdentity == o.SecurityIdentity &&
		i.LifecycleGeneration == o.LifecycleGeneration && i.OwnerID == o.OwnerID
}

// ActionKind says what to do with a connection.
type ActionKind uint8

// Action kinds.
const (
	// Connect to a peer not in the previous intents.
	Connect ActionKind = iota + 1
	// Disconnect from a peer no longer wanted.
	Disconnect
	// Reconnect: drop the connection and connect again to Endpoint (the
	// peer restarted, or its endpoint or identity changed).
	Reconnect
)

func (k ActionKind) String() string {
	switch k {
	case Connect:
		return "connect"
	case Disconnect:
		return "disconnect"
	case Reconnect:
		return "reconnect"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is one connection change. For Disconnect only RoutingID and
// Reason are meaningful.
type Action struct {
	Kind                ActionKind
	RoutingID           []byte
	Endpoint            string
	SecurityIdentity    string
	LifecycleGeneration record.Generation
	// Reason is a short explanation for logs: "new peer", "gone", "lease
	// not valid", "state stopped", "restarted", "endpoint changed", ...
	Reason string
}

// GraceStatus is the planner's view of store health (spec §10).
type GraceStatus struct {
	// HaveList: a complete list was observed at least once; LastListAt is
	// the monotonic reading given with the latest one.
	HaveList   bool
	LastListAt time.Duration
	// Failing: the latest observation was a store failure.
	Failing bool
	// InGrace: failing for less than StoreFailureGrace. The last complete
	// list and its intents are kept and nothing new is connected.
	InGrace bool
	// GraceElapsed: failing for StoreFailureGrace or longer. The list and
	// its intents are still kept unchanged (they change only on the next
	// complete list, §10), but they are stale; the node reports it.
	GraceElapsed bool
	// FailingSince is the monotonic reading of the first failure of the
	// current run of failures; Elapsed is how long ago that was.
	FailingSince time.Duration
	Elapsed      time.Duration
	// LastErr is the latest failure.
	LastErr error
}

// PlannerConfig configures NewPlanner.
type PlannerConfig struct {
	// MeshName is this node's mesh: only its peers are targets.
	MeshName string
	// Self is this node's routing id, never a target.
	Self []byte
	// Grace is StoreFailureGrace (§10); 0 means no grace.
	Grace time.Duration
}

// Planner keeps the last complete descriptor list and the connection
// intents derived from it. It does no I/O and reads no clock: every call
// takes now, a monotonic reading (e.g. lease.Clock.Now()). It is not safe
// for concurrent use; the node drives it from one goroutine.
type Planner struct {
	mesh  string
	self  []byte
	grace time.Duration

	have       bool
	snapshot   Snapshot
	lastListAt time.Duration
	intents    map[string]Intent // by hex(RoutingID)

	failing      bool
	failingSince time.Duration
	lastErr      error
}

// NewPlanner checks cfg and returns a planner with no list and no intents.
func NewPlanner(cfg PlannerConfig) (*Planner, error) {
	if err := record.ValidateMeshName(cfg.MeshName); err != nil {
		return nil, fmt.Errorf("%w: planner: %w", ErrInvalidArgument, err)
	}
	if err := record.ValidateRoutingID(cfg.Self); err != nil {
		return nil, fmt.Errorf("%w: planner: self: %w", ErrInvalidArgument, err)
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("%w: planner: grace %v is negative", ErrInvalidArgument, cfg.Grace)
	}
	return &Planner{
		mesh: cfg.MeshName, self: append([]byte(nil), cfg.Self...), grace: cfg.Grace,
		intents: map[string]Intent{},
	}, nil
}

// Observe applies a complete list (from List, after a successful read)
// and returns the connection changes, in a fixed order: disconnects, then
// reconnects, then connects, each by routing id. It ends a store failure:
// the list is compared with the intents kept through the failure, so after
// recovery every peer is re-checked before anything changes.
//
// A target is a peer of this mesh, not self, whose owner lease is valid
// and whose state is Connectable. A peer that stays a target with the same
// endpoint, identity and run (lifecycleGeneration, OwnerId) keeps its
// connection whatever else changed (state, weights, capacity, a lease
// reacquired under a new LeaseGeneration — also in the moment its
// descriptor still names the old one, Entry.LeaseReacquired).
func (p *Planner) Observe(now time.Duration, s Snapshot) ([]Action, error) {
	if !s.Complete {
		return nil, ErrIncompleteSnapshot
	}
	if s.MeshName != "" && s.MeshName != p.mesh {
		return nil, fmt.Errorf("%w: planner for mesh %q given a list of mesh %q", ErrInvalidArgument, p.mesh, s.MeshName)
	}
	want := make(map[string]Intent)
	why := make(map[string]string) // why a listed peer is not a target
	for _, e := range s.Entries {
		d := e.Descriptor
		if d.MeshName != p.mesh || bytes.Equal(d.RoutingID, p.self) {
			continue
		}
		id := hex.EncodeToString(d.RoutingID)
		switch {
		case !e.LeaseValid && !e.LeaseReacquired:
			why[id] = "lease not valid"
			continue
		case !Connectable(d.State):
			why[id] = "state " + string(d.State)
			continue
		}
		want[id] = Intent{
			RoutingID: append([]byte(nil), d.RoutingID...), Endpoint: d.Endpoint, SecurityIdentity: d.SecurityIdentity,
			LifecycleGeneration: d.LifecycleGeneration, OwnerID: d.OwnerID, LeaseGeneration: d.LeaseGeneration,
			State: d.State, DescriptorRevision: d.DescriptorRevision,
		}
	}

	var disc, reconn, conn []Action
	for id, old := range p.intents {
		if _, ok := want[id]; ok {
			continue
		}
		reason, ok := why[id]
		if !ok {
			reason = "gone"
		}
		disc = append(disc, Action{Kind: Disconnect, RoutingID: old.RoutingID, Reason: reason})
	}
	for id, w := range want {
		old, ok := p.intents[id]
		switch {
		case !ok:
			conn = append(conn, connectAction(Connect, w, "new peer"))
		case !old.samePeer(w):
			reconn = append(reconn, connectAction(Reconnect, w, changeReason(old, w)))
		}
	}
	for _, as := range [][]Action{disc, reconn, conn} {
		sort.Slice(as, func(i, j int) bool { return bytes.Compare(as[i].RoutingID, as[j].RoutingID) < 0 })
	}
	p.intents = want
	p.snapshot, p.have, p.lastListAt = s, true, now
	p.failing, p.lastErr, p.failingSince = false, nil, 0
	out := make([]Action, 0, len(disc)+len(reconn)+len(conn))
	out = append(out, disc...)
	out = append(out, reconn...)
	return append(out, conn...), nil
}

func connectAction(k ActionKind, w Intent, reason string) Action {
	return Action{
		Kind: k, RoutingID: w.RoutingID, Endpoint: w.Endpoint, SecurityIdentity: w.SecurityIdentity,
		LifecycleGeneration: w.LifecycleGeneration, Reason: reason,
	}
}

func changeReason(old, w Intent) string {
	switch {
	case old.OwnerID != w.OwnerID || old.LifecycleGeneration != w.LifecycleGeneration:
		return "restarted"
	case old.Endpoint != w.Endpoint:
		return "endpoint changed"
	default:
		return "security identity changed"
	}
}

// ObserveFailure records a failed list read (a store failure, a List
// error). Nothing changes: the last complete list and every intent from it
// are kept (including peers not connected yet), no action is returned and
// so nothing new is connected (§10). The grace is measured from the first
// failure of a run of failures. It never touches the owner lease.
func (p *Planner) ObserveFailure(now time.Duration, err error) GraceStatus {
	if !p.failing {
		p.failing, p.failingSince = true, now
	}
	p.lastErr = err
	return p.Status(now)
}

// Status reports the grace state at now.
func (p *Planner) Status(now time.Duration) GraceStatus {
	st := GraceStatus{HaveList: p.have, LastListAt: p.lastListAt, Failing: p.failing, LastErr: p.lastErr}
	if !p.failing {
		return st
	}
	st.FailingSince = p.failingSince
	st.Elapsed = now - p.failingSince
	if st.Elapsed < 0 {
		st.Elapsed = 0
	}
	st.InGrace = st.Elapsed < p.grace
	st.GraceElapsed = !st.InGrace
	return st
}

// Intents returns the current intents, sorted by routing id.
func (p *Planner) Intents() []Intent {
	out := make([]Intent, 0, len(p.intents))
	for _, i := range p.intents {
		out = append(out, i)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].RoutingID, out[j].RoutingID) < 0 })
	return out
}

// Wanted reports whether rid is a current connection target (for a
// transport deciding whether to keep an inbound or redial a dropped
// connection).
func (p *Planner) Wanted(rid []byte) (Intent, bool) {
	i, ok := p.intents[hex.EncodeToString(rid)]
	return i, ok
}

// Last returns the last complete list observed (ok false before the
// first one). It is kept through store failures.
func (p *Planner) Last() (Snapshot, bool) { return p.snapshot, p.have }
