package router

import (
	"encoding/binary"
	"encoding/hex"
)

// Shared structures of service wire v1 (schema "types"). Each has a code
// method walking its fields in wire order; see codec.go.

// OperationID (operation-id) is a 128-bit operation identity: high u64 then
// low u64. Zero is allowed only on one-way records without a terminal
// completion.
type OperationID struct {
	High, Low uint64
}

// IsZero reports whether both halves are zero.
func (o OperationID) IsZero() bool { return o.High == 0 && o.Low == 0 }

// String renders the id as 32 lowercase hex digits.
func (o OperationID) String() string { return hex128(o.High, o.Low) }

// hex128 renders a 128-bit id as 32 lowercase hex digits, high half first.
func hex128(high, low uint64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], high)
	binary.BigEndian.PutUint64(b[8:], low)
	return hex.EncodeToString(b[:])
}

func (o *OperationID) code(c *codec, name string) {
	c.obj(name, func() {
		c.any64("high", &o.High)
		c.any64("low", &o.Low)
	})
}

// nonzero walks an operation id that must not be zero (requests).
func (o *OperationID) nonzero(c *codec, name string) {
	o.code(c, name)
	if c.err == nil && o.IsZero() {
		c.fail(ZeroNotAllowed, name, "operation id must not be zero on a request")
	}
}

// RelocationID (relocation-id) is the nonzero 128-bit identity of one move.
type RelocationID struct {
	High, Low uint64
}

// IsZero reports whether both halves are zero.
func (r RelocationID) IsZero() bool { return r.High == 0 && r.Low == 0 }

// String renders the id as 32 lowercase hex digits (logs, store records).
func (r RelocationID) String() string { return hex128(r.High, r.Low) }

func (r *RelocationID) code(c *codec, name string) {
	c.obj(name, func() {
		c.any64("high", &r.High)
		c.any64("low", &r.Low)
	})
	if c.err == nil && r.IsZero() {
		c.fail(ZeroNotAllowed, name, "relocation id must not be zero")
	}
}

// ActorRef (actor-ref): actorId text8, objectGeneration nonzero-u64.
type ActorRef struct {
	ActorID          string
	ObjectGeneration uint64
}

func (a *ActorRef) code(c *codec, name string) {
	c.obj(name, func() {
		c.text8("actorId", &a.ActorID)
		c.nz64("objectGeneration", &a.ObjectGeneration)
	})
}

// SpotRef (spot-ref): spotId text8, objectGeneration nonzero-u64.
type SpotRef struct {
	SpotID           string
	ObjectGeneration uint64
}

func (s *SpotRef) code(c *codec, name string) {
	c.obj(name, func() {
		c.text8("spotId", &s.SpotID)
		c.nz64("objectGeneration", &s.ObjectGeneration)
	})
}

// SpotRouteFence (spot-route-fence) addresses an exact Spot on an exact node
// run under an exact owner.
type SpotRouteFence struct {
	Spot                             SpotRef
	TargetNodeRID                    []byte
	TargetNodeGeneration             uint64
	ExpectedAuthorityOwnerGeneration uint64
	ExpectedOwnerLeaseGeneration     uint64
}

func (f *SpotRouteFence) code(c *codec, name string) {
	c.obj(name, func() {
		f.Spot.code(c, "spot")
		c.rid("targetNodeRid", &f.TargetNodeRID)
		c.nz64("targetNodeGeneration", &f.TargetNodeGeneration)
		c.nz64("expectedAuthorityOwnerGeneration", &f.ExpectedAuthorityOwnerGeneration)
		c.nz64("expectedOwnerLeaseGeneration", &f.ExpectedOwnerLeaseGeneration)
	})
}

// ActorRouteFence (actor-route-fence) addresses an exact Actor on an exact
// node run under an exact owner.
type ActorRouteFence struct {
	Actor                            ActorRef
	TargetNodeRID                    []byte
	TargetNodeGeneration             uint64
	ExpectedAuthorityOwnerGeneration uint64
	ExpectedOwnerLeaseGeneration     uint64
}

func (f *ActorRouteFence) code(c *codec, name string) {
	c.obj(name, func() {
		f.Actor.code(c, "actor")
		c.rid("targetNodeRid", &f.TargetNodeRID)
		c.nz64("targetNodeGeneration", &f.TargetNodeGeneration)
		c.nz64("expectedAuthorityOwnerGeneration", &f.ExpectedAuthorityOwnerGeneration)
		c.nz64("expectedOwnerLeaseGeneration", &f.ExpectedOwnerLeaseGeneration)
	})
}

// optionalActorRef walks optional-actor-ref: an optional-text8 actor id
// (empty = absent) followed by the generation only when the id is present.
func optionalActorRef(c *codec, name string, p **ActorRef) {
	c.obj(name, func() {
		var id string
		if !c.decoding && *p != nil {
			id = (*p).ActorID
			if id == "" {
				c.fail(ZeroNotAllowed, "actorId", "a present actor ref needs a nonempty id")
				return
			}
		}
		c.optText8("actorId", &id)
		if c.err != nil || id == "" {
			if c.decoding {
				*p = nil
			}
			return
		}
		if c.decoding {
			*p = &ActorRef{ActorID: id}
		}
		c.nz64("generation", &(*p).ObjectGeneration)
	})
}

// BoundSessionTail (optional-bound-session-tail) follows the target actor
// when both bound-session flags are set.
type BoundSessionTail struct {
	SourceSessionRID        []byte
	SourceBindingGeneration uint64
	SourceSessionSequence   uint64
}

func (t *BoundSessionTail) code(c *codec, name string) {
	c.obj(name, func() {
		c.rid("sourceSessionRid", &t.SourceSessionRID)
		c.nz64("sourceBindingGeneration", &t.SourceBindingGeneration)
		c.nz64("sourceSessionSequence", &t.SourceSessionSequence)
	})
}

// boundSessionTail walks the flag-conditioned tail of actorSend/actorRequest.
func boundSessionTail(c *codec, p **BoundSessionTail) {
	if c.err != nil {
		return
	}
	present := c.flags&flagBoundSessionT == flagBoundSessionT
	if c.decoding {
		if present {
			*p = new(BoundSessionTail)
			(*p).code(c, "boundSessionTail")
		}
		return
	}
	switch {
	case present && *p == nil:
		c.fail(MissingField, "boundSessionTail", "bound-session flags set but the body has no tail")
	case !present && *p != nil:
		c.fail(MissingFlag, "boundSessionTail", "body has a bound-session tail but the bound-session flags are clear")
	case present:
		(*p).code(c, "boundSessionTail")
	}
}

// AuthorityGenerationFence (authority-generation-fence).
type AuthorityGenerationFence struct {
	ObjectGeneration         uint64
	OwnerID                  string
	AuthorityOwnerGeneration uint64
	LeaseGeneration          uint64
	StoreVersion             string
}

func (f *AuthorityGenerationFence) code(c *codec, name string) {
	c.obj(name, func() {
		c.nz64("objectGeneration", &f.ObjectGeneration)
		c.text8("ownerId", &f.OwnerID)
		c.nz64("authorityOwnerGeneration", &f.AuthorityOwnerGeneration)
		c.nz64("leaseGeneration", &f.LeaseGeneration)
		c.storeVersion("storeVersion", &f.StoreVersion)
	})
}

// ObjectReservationFence (object-reservation-fence) binds a remote creation
// to the reservation the source made in the Location Store.
type ObjectReservationFence struct {
	ReservationID              string
	ExpectedStoreVersion       string
	ObjectGeneration           uint64
	AuthorityOwnerGeneration   uint64
	TargetNodeRID              []byte
	TargetNodeGeneration       uint64
	TargetOwnerID              string
	TargetOwnerLeaseGeneration uint64
	PendingCapacityDelta       uint32
}

func (f *ObjectReservationFence) code(c *codec, name string) {
	c.obj(name, func() {
		c.text8("reservationId", &f.ReservationID)
		c.storeVersion("expectedStoreVersion", &f.ExpectedStoreVersion)
		c.nz64("objectGeneration", &f.ObjectGeneration)
		c.nz64("authorityOwnerGeneration", &f.AuthorityOwnerGeneration)
		c.rid("targetNodeRid", &f.TargetNodeRID)
		c.nz64("targetNodeGeneration", &f.TargetNodeGeneration)
		c.text8("targetOwnerId", &f.TargetOwnerID)
		c.nz64("targetOwnerLeaseGeneration", &f.TargetOwnerLeaseGeneration)
		c.nz32("pendingCapacityDelta", &f.PendingCapacityDelta)
	})
}

// RelocationCoordinatorFence (relocation-coordinator-fence).
type RelocationCoordinatorFence struct {
	CoordinatorOwnerID            string
	CoordinatorLeaseGeneration    uint64
	CoordinatorNodeRID            []byte
	CoordinatorNodeGeneration     uint64
	ExpectedAuthorityStoreVersion string
}

func (f *RelocationCoordinatorFence) code(c *codec, name string) {
	c.obj(name, func() {
		c.text8("coordinatorOwnerId", &f.CoordinatorOwnerID)
		c.nz64("coordinatorLeaseGeneration", &f.CoordinatorLeaseGeneration)
		c.rid("coordinatorNodeRid", &f.CoordinatorNodeRID)
		c.nz64("coordinatorNodeGeneration", &f.CoordinatorNodeGeneration)
		c.storeVersion("expectedAuthorityStoreVersion", &f.ExpectedAuthorityStoreVersion)
	})
}

// SourceFence (request-source-fence) identifies the exact source owner and
// node run of a request or of a relocation.
type SourceFence struct {
	SourceOwnerID              string
	SourceOwnerLeaseGeneration uint64
	SourceNodeRID              []byte
	SourceNodeGeneration       uint64
}

func (f *SourceFence) code(c *codec, name string) {
	c.obj(name, func() {
		c.text8("sourceOwnerId", &f.SourceOwnerID)
		c.nz64("sourceOwnerLeaseGeneration", &f.SourceOwnerLeaseGeneration)
		c.rid("sourceNodeRid", &f.SourceNodeRID)
		c.nz64("sourceNodeGeneration", &f.SourceNodeGeneration)
	})
}
