package spot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"unicode/utf8"
)

// ObjectKind is the kind of object a factory builds (§2, §3.3).
type ObjectKind uint8

const (
	// KindActor: created by id (Manager.CreateActor, GetOrCreateActor).
	KindActor ObjectKind = iota + 1
	// KindUserSpot: a Spot created by a call (Manager.CreateUserSpot with a
	// framework-issued id, GetOrCreateUserSpot with the caller's).
	KindUserSpot
	// KindInstanceSpot: a Spot created by the first message sent to its id
	// (Manager.SendInstance, RequestInstance); its New gets no Body.
	KindInstanceSpot
)

func (k ObjectKind) String() string {
	switch k {
	case KindActor:
		return "actor"
	case KindUserSpot:
		return "userSpot"
	case KindInstanceSpot:
		return "instanceSpot"
	}
	return fmt.Sprintf("ObjectKind(%d)", uint8(k))
}

// Policy is a factory's relocation policy (§2).
type Policy uint8

const (
	// PolicyDisabled rejects a cross-node move before capture.
	PolicyDisabled Policy = iota + 1
	// PolicyRecreate moves the queue and timers and builds a fresh instance
	// without application state.
	PolicyRecreate
	// PolicyPreserveState moves application state through the factory's
	// snapshot adapter, plus queue and timers.
	PolicyPreserveState
)

func (p Policy) String() string {
	switch p {
	case PolicyDisabled:
		return "disabled"
	case PolicyRecreate:
		return "recreate"
	case PolicyPreserveState:
		return "snapshot"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// CreateRequest is what a factory's New (and a snapshot adapter's Restore)
// receives.
type CreateRequest struct {
	ID         string // ActorId or SpotId
	Generation uint64 // ObjectGeneration, nonzero
	StableType string // the factory's
	// Body is the application's creation request bytes (may be empty). It
	// is empty when New runs for anything but a creation: an Instance
	// Spot's activation, a PolicyRecreate move, and in Restore.
	Body []byte
}

// Declined is returned (wrapped or not) by a factory's New to decline a
// creation: the framework deletes the Creating record, returns the space
// and reports Rejected with Reason. Any other error is an exception.
type Declined struct {
	Reason string // given to the caller as mesh.RejectedError.Reason
}

func (d *Declined) Error() string { return "declined: " + d.Reason }

// SnapshotAdapter turns a live instance's application state into bytes and
// back. It is required exactly for PolicyPreserveState.
type SnapshotAdapter interface {
	// Snapshot returns h's state, on the node the object leaves, while the
	// object is held (no turn runs). It should only copy and return
	// promptly. A move does not wait for it past its deadline: it ends
	// there (NotMoved, deadlineExceeded) and the object stays on its node,
	// but held — no turn runs — until Snapshot returns, whose result is
	// then discarded. An adapter that can stop early implements
	// ContextSnapshotter as well.
	Snapshot(h Handler) ([]byte, error)
	// Restore builds the instance from Snapshot's bytes on the node the
	// object arrives at; ctx ends with the move's deadline or the node's
	// stop. An error, a panic or no handler fails the move (NotMoved).
	Restore(ctx context.Context, req CreateRequest, state []byte) (Handler, error)
}

// ContextSnapshotter is an optional interface of a SnapshotAdapter whose
// Snapshot can stop early: when the adapter implements it, a move calls
// SnapshotContext instead of Snapshot, with a context that ends at the
// move's deadline, when its caller cancels it or when the node stops. An
// adapter that returns once ctx ends (with any error: the move has ended
// already) frees its object at once; until it returns the object stays
// held, as for Snapshot.
type ContextSnapshotter interface {
	SnapshotContext(ctx context.Context, h Handler) ([]byte, error)
}

// Factory describes one stable type an application registers.
type Factory struct {
	// StableType names the type, 1..255 bytes of UTF-8. It is stored with
	// every object: never rename a type that has objects.
	StableType string
	// Kind is required (the zero value is refused).
	Kind ObjectKind
	// Policy is required (the zero value is refused): what a move does.
	Policy Policy
	// Snapshot is required with PolicyPreserveState and refused with the
	// other policies.
	Snapshot SnapshotAdapter
	// Limit caps live Spots of this type on one node; 0 = unlimited
	// (node.limits.spot_types overrides it). A User or Instance Spot type
	// only: spec §4 has no per-Actor-type limit, and Validate refuses one.
	Limit int
	// New builds an instance. It must tolerate being run again for the same
	// ID and generation (a process may die mid-creation, §7). It runs on
	// the node that will host the object, with a ctx that ends at the
	// creation's deadline or the node's stop; a *Declined error refuses the
	// creation (mesh.ErrRejected), any other error, a panic or no handler
	// fails it (mesh.ErrCreateFailed).
	New func(ctx context.Context, req CreateRequest) (Handler, error)
}

// ErrFactory is matched by every factory registration error.
var ErrFactory = errors.New("spot: invalid factory")

// Validate checks a factory description.
func (f Factory) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrFactory, f.StableType, fmt.Sprintf(format, a...))
	}
	switch {
	case f.StableType == "" || len(f.StableType) > 255:
		return bad("stable type must be 1..255 bytes")
	case !utf8.ValidString(f.StableType):
		return bad("stable type is not valid UTF-8")
	case f.Kind == 0:
		// The zero value is invalid on purpose: a forgotten field is not
		// read as an Actor.
		return bad("Kind is not set: choose spot.KindActor, spot.KindUserSpot or spot.KindInstanceSpot")
	case f.Kind < KindActor || f.Kind > KindInstanceSpot:
		return bad("unknown object kind %d", f.Kind)
	case f.Policy == 0:
		return bad("Policy is not set: choose spot.PolicyDisabled (never moves), spot.PolicyRecreate " +
			"(a move starts a fresh instance) or spot.PolicyPreserveState (its state moves through Snapshot)")
	case f.Policy < PolicyDisabled || f.Policy > PolicyPreserveState:
		return bad("unknown relocation policy %d", f.Policy)
	case f.Policy == PolicyPreserveState && f.Snapshot == nil:
		return bad("policy snapshot (spot.PolicyPreserveState, PreserveStateWith) needs Snapshot, a SnapshotAdapter")
	case f.Policy != PolicyPreserveState && f.Snapshot != nil:
		return bad("a SnapshotAdapter is only used with policy snapshot (spot.PolicyPreserveState)")
	case f.Limit < 0 || int64(f.Limit) > 1<<31-1:
		return bad("limit %d outside 0..2^31-1", f.Limit)
	case f.Kind == KindActor && f.Limit != 0:
		// Until 2026-12-07 accepted and never enforced: the capacity rows
		// count Actors per node, not per type.
		return bad("Limit %d on an Actor type: there is no per-Actor-type limit (spec §4); "+
			"node.limits.actors caps the Actors of a node", f.Limit)
	case f.New == nil:
		return bad("New is nil")
	}
	return nil
}

// Registry holds factories by stable type, like database/sql drivers: an
// application's package registers its factories, the node reads them.
type Registry struct {
	mu sync.RWMutex
	m  map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]Factory{}} }

// Register adds f; a duplicate stable type or an invalid factory is an error.
func (r *Registry) Register(f Factory) error {
	if err := f.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[f.StableType]; dup {
		return fmt.Errorf("%w %q: already registered", ErrFactory, f.StableType)
	}
	r.m[f.StableType] = f
	return nil
}

// Lookup returns the factory of a stable type.
func (r *Registry) Lookup(stableType string) (Factory, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[stableType]
	return f, ok
}

// All returns every factory sorted by stable type.
func (r *Registry) All() []Factory {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Factory, 0, len(r.m))
	for _, f := range r.m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StableType < out[j].StableType })
	return out
}

// Default is the process-wide registry the stock binary and cli.Main use.
var Default = NewRegistry()

// MustRegister registers f in Default and panics on error. It is meant for
// package init functions, where a bad factory is a programming error (the
// same convention as database/sql.Register).
func MustRegister(f Factory) {
	if err := Default.Register(f); err != nil {
		panic(err)
	}
}
