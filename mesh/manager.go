package mesh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// Manager is the application API over the objects of a mesh (spec §7,
// §7.2, §7.3): create, find, message, destroy and close Actors and User
// Spots wherever they are placed. Obtain it with Node.Manager. Every method
// takes the call's context first; its deadline is the call's one deadline
// (a creation without a deadline gets DefaultCreateTimeout).
type Manager struct {
	o *objects
}

// Manager returns the node's Manager.
func (n *Node) Manager() *Manager { return &Manager{o: n.obj} }

// ActorRef names one generation of an Actor (§7.2). MeshName and NodeRID
// show where it was at lookup time; they are informational and never used
// to address a message (the route is resolved from the authority record).
type ActorRef struct {
	ActorID          string
	ObjectGeneration uint64
	MeshName         string
	NodeRID          []byte
}

// SpotRef names one generation of a User Spot (§7.2).
type SpotRef struct {
	SpotID           string
	ObjectGeneration uint64
	MeshName         string
	NodeRID          []byte
}

func (r ActorRef) String() string {
	return fmt.Sprintf("actor %s@%d on %s/%s", r.ActorID, r.ObjectGeneration, r.MeshName, hex.EncodeToString(r.NodeRID))
}

func (r SpotRef) String() string {
	return fmt.Sprintf("spot %s@%d on %s/%s", r.SpotID, r.ObjectGeneration, r.MeshName, hex.EncodeToString(r.NodeRID))
}

// CreateOutcome tells a GetOrCreate caller whether its call created the
// object or found it.
type CreateOutcome uint8

// Outcomes of GetOrCreate (Create returns only Created).
const (
	Created CreateOutcome = iota + 1
	Existing
)

func (c CreateOutcome) String() string {
	switch c {
	case Created:
		return "created"
	case Existing:
		return "existing"
	}
	return fmt.Sprintf("CreateOutcome(%d)", uint8(c))
}

// ActorCreation is the result of GetOrCreateActor.
type ActorCreation struct {
	Ref     ActorRef
	Outcome CreateOutcome
}

// SpotCreation is the result of GetOrCreateUserSpot.
type SpotCreation struct {
	Ref     SpotRef
	Outcome CreateOutcome
}

// DefaultCreateTimeout is the deadline of a creation whose context has
// none: §7 wants one deadline spanning lookup through Ready, so an
// unbounded call is not offered.
const DefaultCreateTimeout = 30 * time.Second

// CreateOption configures one Create or GetOrCreate call. Giving the same
// option twice is ErrInvalidOperation (§7).
type CreateOption func(*createOptions) error

type createOptions struct {
	inMesh   *string
	body     []byte
	op       [16]byte
	opSet    bool
	seenMesh bool
	seenBody bool
	seenOpID bool
}

// InMesh places the object on a node of the named mesh (§7). Omitted, the
// node's own object-role mesh is used.
func InMesh(name string) CreateOption {
	return func(o *createOptions) error {
		if o.seenMesh {
			return fmt.Errorf("%w: InMesh given twice", ErrInvalidOperation)
		}
		o.seenMesh = true
		if err := record.ValidateMeshName(name); err != nil {
			return fmt.Errorf("%w: InMesh: %w", ErrInvalidOperation, err)
		}
		o.inMesh = &name
		return nil
	}
}

// WithBody sets the application's creation request bytes, handed to the
// factory as spot.CreateRequest.Body. It is stored with the pending creation
// in the Location Store (§7: at most 1 MiB stored, MaxCreationBody bytes of
// body).
func WithBody(b []byte) CreateOption {
	return func(o *createOptions) error {
		if o.seenBody {
			return fmt.Errorf("%w: WithBody given twice", ErrInvalidOperation)
		}
		o.seenBody = true
		o.body = append([]byte(nil), b...)
		return nil
	}
}

// WithOperationID fixes the call's 128-bit OperationId (§7). A caller that
// lost a creation's answer calls again with the same OperationId and the
// same request on the same node run, and receives the stored final result
// (kept until 5 minutes past the original deadline by store time) instead
// of creating again. Without it a fresh random OperationId is used.
func WithOperationID(id [16]byte) CreateOption {
	return func(o *createOptions) error {
		if o.seenOpID {
			return fmt.Errorf("%w: WithOperationID given twice", ErrInvalidOperation)
		}
		o.seenOpID = true
		if id == [16]byte{} {
			return fmt.Errorf("%w: OperationId must not be zero", ErrInvalidOperation)
		}
		o.op, o.opSet = id, true
		return nil
	}
}

// NewOperationID returns a fresh random non-zero 128-bit OperationId.
func NewOperationID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	}
	return id
}

func applyOptions(opts []CreateOption) (createOptions, error) {
	var co createOptions
	for _, f := range opts {
		if f == nil {
			return co, fmt.Errorf("%w: nil option", ErrInvalidOperation)
		}
		if err := f(&co); err != nil {
			return co, err
		}
	}
	return co, nil
}

// resolveMesh applies §7's InMesh rules for a node that belongs to exactly
// one mesh (its own): role none has no object-role mesh (NotConfigured); an
// omitted InMesh is the node's own mesh; a named mesh other than its own is
// errOtherMesh, with that name. (The "two or more object-role meshes"
// InvalidOperation case cannot arise: a MeshNode joins one RouteMesh.)
func resolveMesh(role config.ObjectRole, own string, inMesh *string) (string, error) {
	if role != config.RoleClient && role != config.RoleServer {
		return "", fmt.Errorf("%w: object role %q offers no object create, find or message", ErrNotConfigured, role)
	}
	if inMesh == nil {
		return own, nil
	}
	if *inMesh != own {
		// Whether that mesh exists is for the store to say (otherMesh).
		return *inMesh, fmt.Errorf("%w: mesh %q (this node is a member of %q only)", errOtherMesh, *inMesh, own)
	}
	return own, nil
}

// checkRole is resolveMesh for calls without InMesh.
func (m *Manager) checkRole() error {
	_, err := resolveMesh(m.o.role(), m.o.n.cfg.Node.MeshName, nil)
	return err
}

// FindActor returns the current Ready Actor under actorID (§7.2). A missing
// or still-Creating Actor is ErrNotFound; nothing is created.
func (m *Manager) FindActor(ctx context.Context, actorID string) (ActorRef, error) {
	row, err := m.find(ctx, record.ObjectActor, actorID)
	if err != nil {
		return ActorRef{}, err
	}
	return actorRefOf(actorID, row.Record), nil
}

// FindSpot returns the current Ready User Spot under spotID (§7.2).
func (m *Manager) FindSpot(ctx context.Context, spotID string) (SpotRef, error) {
	row, err := m.find(ctx, record.ObjectUserSpot, spotID)
	if err != nil {
		return SpotRef{}, err
	}
	return spotRefOf(spotID, row.Record), nil
}

// FindInstance returns the current Ready Instance Spot under spotID (§7.2);
// it never activates one (a message does, SendInstance/RequestInstance).
func (m *Manager) FindInstance(ctx context.Context, spotID string) (SpotRef, error) {
	row, err := m.find(ctx, record.ObjectInstanceSpot, spotID)
	if err != nil {
		return SpotRef{}, err
	}
	return spotRefOf(spotID, row.Record), nil
}

func (m *Manager) find(ctx context.Context, kind record.ObjectKind, id string) (authority.AuthorityRow, error) {
	if err := m.checkRole(); err != nil {
		return authority.AuthorityRow{}, err
	}
	if err := m.o.closedErr(); err != nil {
		return authority.AuthorityRow{}, err
	}
	if err := record.ValidateObjectID(id); err != nil {
		return authority.AuthorityRow{}, fmt.Errorf("%w: id: %w", ErrInvalidOperation, err)
	}
	row, err := m.o.readAuthority(ctx, kind, id)
	if err != nil {
		return row, classify(ctx, err, "find "+id)
	}
	// Kind before state, as a message's route resolution and Create
	// check it: a record of another kind holds the id whether it is Ready
	// or still Creating (until 2026-12-07 a Creating one answered
	// ErrNotFound, TestFindOfAnotherKindIsTypeMismatchAlsoWhileCreating).
	if row.Found && row.Record.Allocation.ObjectKind != kind {
		return row, fmt.Errorf("%w: %q is %s, not %s", ErrTypeMismatch, id, aKind(row.Record.Allocation.ObjectKind), aKind(kind))
	}
	if !row.Found || row.Record.Allocation.State != record.AllocationActive {
		return row, fmt.Errorf("%w: no Ready %s %q", ErrNotFound, kind, id)
	}
	// Not Ready to anyone while its owner is gone (§7.4 "current owner
	// unavailable after commit").
	if ended, err := m.o.ownerEnded(ctx, row.Record, false); err != nil {
		return row, classify(ctx, err, "find "+id)
	} else if ended {
		return row, ownerGone(row.Record)
	}
	return row, nil
}

// readAuthority reads the authority row of (kind, id).
func (o *objects) readAuthority(ctx context.Context, kind record.ObjectKind, id string) (authority.AuthorityRow, error) {
	row, _, err := o.readAuthorityAt(ctx, kind, id)
	return row, err
}

func actorRefOf(id string, a record.Authority) ActorRef {
	return ActorRef{ActorID: id, ObjectGeneration: uint64(a.ObjectGeneration), MeshName: a.Allocation.Descriptor.MeshName,
		NodeRID: append([]byte(nil), a.Allocation.Descriptor.RoutingID...)}
}

func spotRefOf(id string, a record.Authority) SpotRef {
	return SpotRef{SpotID: id, ObjectGeneration: uint64(a.ObjectGeneration), MeshName: a.Allocation.Descriptor.MeshName,
		NodeRID: append([]byte(nil), a.Allocation.Descriptor.RoutingID...)}
}

// newSpotID issues a User Spot id: a lowercase canonical UUID v4 (§7).
func newSpotID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// aKind names an object kind with its article, as the docs write it ("an
// Actor", "a User Spot", "an Instance Spot"), for error messages.
func aKind(k record.ObjectKind) string {
	switch k {
	case record.ObjectActor:
		return "an Actor"
	case record.ObjectUserSpot:
		return "a User Spot"
	case record.ObjectInstanceSpot:
		return "an Instance Spot"
	}
	return fmt.Sprintf("an object of kind %q", string(k))
}
