package record

// Authority is the authority record of one Actor or Spot (spec §3.2, §3.3,
// §3.4), stored under AuthorityPreimage(kind, id). The Id is the key, not
// part of the value. Every integer is written as a decimal JSON string
// (spec §3.4: "except for payload, integer fields are written as JSON
// strings"), including the capacity counts and requestEncodedSize.
type Authority struct {
	// ObjectID is the global ActorId or SpotId the row is keyed by. The key
	// is a digest, so without it a scan (§7.4 operational list, §11 owner
	// sweep) could not say which object a row belongs to. Written as
	// "objectId"; a project addition to §3.4's "at least" field list.
	ObjectID string
	// Payload is opaque bytes the framework does not interpret here; JSON
	// base64 (standard alphabet, padded). nil and empty are the same.
	Payload                  []byte
	ObjectGeneration         Generation
	AuthorityOwnerGeneration Generation
	OwnerID                  string
	OwnerLeaseGeneration     Generation
	Allocation               Allocation
	PendingCreation          *PendingCreation // nil: JSON null
	// Relocation is the progress of a move under way (nil: JSON null, no
	// move; also after the move completed). Written as "relocation"; a
	// project addition to §3.4's "at least" field list (§3.3 lists
	// relocation progress as framework-internal data of the record).
	Relocation *RelocationProgress
}

// Allocation is the authority's placement information.
type Allocation struct {
	State      AllocationState
	ObjectKind ObjectKind
	StableType string
	// Descriptor identifies the target MeshNode descriptor (its key
	// inputs): JSON {meshName, routingIdHex}.
	Descriptor DescriptorRef
	// DescriptorLifecycleGeneration is the target MeshNode's
	// lifecycleGeneration, CAS-checked against it.
	DescriptorLifecycleGeneration Generation
	Capacity                      AllocationCapacity
}

// DescriptorRef names a MeshNode descriptor.
type DescriptorRef struct {
	MeshName  string
	RoutingID []byte
}

// AllocationCapacity is the bundle of slots an allocation secured. Actors
// and Spots are 0..2^31-1; SpotType is nil exactly when ObjectKind is
// actor, and otherwise names the allocation's own Spot kind and stable type
// (spec §3.3: "1 Spot slot plus 1 slot of that Spot kind/stable type"). At
// least one slot is positive.
type AllocationCapacity struct {
	Actors   int
	Spots    int
	SpotType *SpotTypeSlots
}

// SpotTypeSlots is the secured slot count of one Spot kind / stable type.
type SpotTypeSlots struct {
	ObjectKind ObjectKind
	StableType string
	Count      int // 0..2^31-1
}

// PendingCreation is the creation-in-progress state (spec §7).
type PendingCreation struct {
	ReservationID           string // 1..255 bytes, no NUL
	RequestContentReference string // 1..4096 bytes, no NUL
	RequestSHA256           [32]byte
	RequestEncodedSize      int // 0..MaxCreationRequestBytes
}

func (a *Authority) validate() error {
	v := &val{kind: KindAuthority}
	v.text("objectId", a.ObjectID, 1, MaxIDBytes, true)
	v.gen("objectGeneration", a.ObjectGeneration)
	v.gen("authorityOwnerGeneration", a.AuthorityOwnerGeneration)
	v.name("ownerId", a.OwnerID)
	v.gen("ownerLeaseGeneration", a.OwnerLeaseGeneration)
	al := &a.Allocation
	const p = "allocation."
	v.enum(p+"state", string(al.State), al.State.valid())
	v.enum(p+"objectKind", string(al.ObjectKind), al.ObjectKind.valid())
	v.name(p+"stableType", al.StableType)
	v.name(p+"descriptor.meshName", al.Descriptor.MeshName)
	v.routingID(p+"descriptor.routingIdHex", al.Descriptor.RoutingID)
	v.gen(p+"descriptorLifecycleGeneration", al.DescriptorLifecycleGeneration)
	c := &al.Capacity
	v.rng(p+"capacity.actors", c.Actors, 0, MaxSlots)
	v.rng(p+"capacity.spots", c.Spots, 0, MaxSlots)
	total := c.Actors + c.Spots
	switch {
	case al.ObjectKind == ObjectActor && c.SpotType != nil:
		v.fail(p+"capacity.spotType", "must be null for an actor")
	case al.ObjectKind.isSpot() && c.SpotType == nil:
		v.fail(p+"capacity.spotType", "required for a spot")
	case c.SpotType != nil:
		st := c.SpotType
		if st.ObjectKind != al.ObjectKind {
			v.fail(p+"capacity.spotType.objectKind", quote(string(st.ObjectKind))+" differs from allocation.objectKind "+quote(string(al.ObjectKind)))
		}
		if st.StableType != al.StableType {
			v.fail(p+"capacity.spotType.stableType", quote(st.StableType)+" differs from allocation.stableType "+quote(al.StableType))
		}
		v.rng(p+"capacity.spotType.count", st.Count, 0, MaxSlots)
		total += st.Count
	}
	if v.err == nil && total == 0 {
		v.fail(p+"capacity", "a secured bundle needs at least one positive slot")
	}
	if pc := a.PendingCreation; pc != nil {
		const q = "pendingCreation."
		v.name(q+"reservationId", pc.ReservationID)
		v.text(q+"requestContentReference", pc.RequestContentReference, 1, MaxContentReferenceBytes, true)
		v.rng(q+"requestEncodedSize", pc.RequestEncodedSize, 0, MaxCreationRequestBytes)
	}
	a.validateRelocation(v)
	return v.err
}

// Validate checks every field and the encoded size.
func (a Authority) Validate() error {
	_, err := a.Encode()
	return err
}

// Key is the row's store key, from its own ObjectID and object kind.
func (a Authority) Key() (string, error) {
	kind, err := a.identityKind()
	if err != nil {
		return "", err
	}
	return AuthorityKey(kind, a.ObjectID)
}

// identityKind is the key kind of the row: it follows the allocation's
// object kind.
func (a Authority) identityKind() (IdentityKind, error) {
	if !a.Allocation.ObjectKind.valid() {
		return "", &FieldError{Kind: KindAuthority, Field: "allocation.objectKind", Reason: "unknown value " + quote(string(a.Allocation.ObjectKind))}
	}
	return a.Allocation.ObjectKind.IdentityKind(), nil
}

// Preimage is AuthorityPreimage(a.Allocation.ObjectKind.IdentityKind(), id):
// the key kind follows the allocation's object kind.
func (a Authority) Preimage(id string) ([]byte, error) {
	kind, err := a.identityKind()
	if err != nil {
		return nil, err
	}
	return AuthorityPreimage(kind, id)
}

// Encode returns the canonical JSON value.
func (a Authority) Encode() ([]byte, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	return finish(KindAuthority, appendAuthority(make([]byte, 0, authorityLen(&a)), &a))
}

// The enumerations' values, for obj.sym.
var (
	allocationStates = []string{string(AllocationReserved), string(AllocationActive)}
	objectKinds      = []string{string(ObjectActor), string(ObjectUserSpot), string(ObjectInstanceSpot)}
)

// DecodeAuthority reads an authority value.
func DecodeAuthority(value []byte) (Authority, error) {
	d, o, err := begin(KindAuthority, value)
	if err != nil {
		return Authority{}, err
	}
	defer d.release()
	var a Authority
	a.ObjectID = o.str("objectId")
	a.Payload = o.base64Bytes("payload")
	a.ObjectGeneration = o.gen("objectGeneration")
	a.AuthorityOwnerGeneration = o.gen("authorityOwnerGeneration")
	a.OwnerID = o.str("ownerId")
	a.OwnerLeaseGeneration = o.gen("ownerLeaseGeneration")
	al := o.child("allocation")
	a.Allocation.State = AllocationState(al.sym("state", allocationStates))
	a.Allocation.ObjectKind = ObjectKind(al.sym("objectKind", objectKinds))
	a.Allocation.StableType = al.str("stableType")
	ref := al.child("descriptor")
	a.Allocation.Descriptor = DescriptorRef{MeshName: ref.str("meshName"), RoutingID: ref.hexBytes("routingIdHex")}
	ref.end()
	a.Allocation.DescriptorLifecycleGeneration = al.gen("descriptorLifecycleGeneration")
	c := al.child("capacity")
	a.Allocation.Capacity.Actors = c.decimalInt("actors")
	a.Allocation.Capacity.Spots = c.decimalInt("spots")
	if st := c.nullChild("spotType"); st != nil {
		a.Allocation.Capacity.SpotType = &SpotTypeSlots{
			ObjectKind: ObjectKind(st.sym("objectKind", objectKinds)),
			StableType: st.str("stableType"),
			Count:      st.decimalInt("count"),
		}
		st.end()
	}
	c.end()
	al.end()
	if pc := o.nullChild("pendingCreation"); pc != nil {
		p := &PendingCreation{
			ReservationID:           pc.str("reservationId"),
			RequestContentReference: pc.str("requestContentReference"),
			RequestEncodedSize:      pc.decimalInt("requestEncodedSize"),
		}
		if sum := pc.hexBytes("requestSha256"); d.err == nil {
			if len(sum) != len(p.RequestSHA256) {
				d.fieldErr("pendingCreation.requestSha256", "must be 64 lowercase hex characters")
			}
			copy(p.RequestSHA256[:], sum)
		}
		pc.end()
		a.PendingCreation = p
	}
	a.Relocation = o.relocation("relocation")
	o.end()
	if d.err != nil {
		return Authority{}, d.err
	}
	if err := a.validate(); err != nil {
		return Authority{}, err
	}
	return a, nil
}
