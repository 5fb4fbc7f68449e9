package record

// RelocationStage is the stage of one Actor/Spot relocation as the
// authority row records it (spec §8.2, §9.1). "Preparing" is not a stored
// stage: it is the time in the source's memory before the first write, so
// a row without progress already says everything a reader needs to know
// about it (the source is the owner). "Completed" is not stored either: the
// new owner removes the progress (relocation null) once dispatch is open.
type RelocationStage string

// Relocation stages.
const (
	// RelocationCaptured: the source captured state and queue and keeps
	// them in memory; the source is still the owner.
	RelocationCaptured RelocationStage = "captured"
	// RelocationPrepared: the target finished Restore and registered its
	// temporary queue for the recorded target attempt; the source is still
	// the owner.
	RelocationPrepared RelocationStage = "prepared"
	// RelocationCommitted: the target's owner CAS applied; the recorded
	// target is the owner.
	RelocationCommitted RelocationStage = "committed"
)

func (s RelocationStage) valid() bool {
	return s == RelocationCaptured || s == RelocationPrepared || s == RelocationCommitted
}

var relocationStages = []string{string(RelocationCaptured), string(RelocationPrepared), string(RelocationCommitted)}

// RelocationParty is one side of a relocation: the host run (OwnerId,
// LeaseGeneration) and the MeshNode run (descriptor key inputs and
// lifecycleGeneration) it runs on. JSON: {lifecycleGeneration, meshName,
// ownerId, ownerLeaseGeneration, routingIdHex}.
type RelocationParty struct {
	OwnerID              string
	OwnerLeaseGeneration Generation
	MeshName             string
	RoutingID            []byte
	LifecycleGeneration  Generation
}

// RelocationProgress is the relocation progress state an authority row
// carries while one move of the object is under way (spec §3.3
// "Framework-internal data: … relocation progress state", §8.1 "Per-object
// location record: source and target, current stage"). JSON member
// "relocation"; null when no move is under way.
type RelocationProgress struct {
	Stage RelocationStage
	// RelocationID identifies the move (§8.1: non-zero 128-bit); JSON 32
	// lowercase hex digits.
	RelocationID [16]byte
	// TargetAttempt is the target attempt the move is bound to (§8.1
	// TargetAttemptGeneration: non-zero, compared only for equality); JSON
	// dec-string.
	TargetAttempt Generation
	// ReservationID names the target capacity reservation of the move
	// (§8.1: non-zero 128-bit); JSON 32 lowercase hex digits.
	ReservationID [16]byte
	Source        RelocationParty
	Target        RelocationParty
	// PreviousAuthorityOwnerGeneration is the source's
	// AuthorityOwnerGeneration, set exactly when Stage is committed (JSON
	// null otherwise): what Message Follow on the previous owner compares
	// against (§7.3).
	PreviousAuthorityOwnerGeneration Generation
}

// OwnerParty returns the party an authority row's owner and allocation
// name: who must be the relocation's source (captured, prepared) or target
// (committed).
func (a *Authority) OwnerParty() RelocationParty {
	return RelocationParty{
		OwnerID:              a.OwnerID,
		OwnerLeaseGeneration: a.OwnerLeaseGeneration,
		MeshName:             a.Allocation.Descriptor.MeshName,
		RoutingID:            a.Allocation.Descriptor.RoutingID,
		LifecycleGeneration:  a.Allocation.DescriptorLifecycleGeneration,
	}
}

// Equal reports whether p and o name the same host run on the same node run.
func (p RelocationParty) Equal(o RelocationParty) bool {
	return p.OwnerID == o.OwnerID && p.OwnerLeaseGeneration == o.OwnerLeaseGeneration && p.sameNode(o)
}

func (p RelocationParty) sameNode(o RelocationParty) bool {
	return p.MeshName == o.MeshName && string(p.RoutingID) == string(o.RoutingID) && p.LifecycleGeneration == o.LifecycleGeneration
}

// Equal reports whether p and o are the same progress, field by field.
func (p *RelocationProgress) Equal(o *RelocationProgress) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.Stage == o.Stage && p.RelocationID == o.RelocationID && p.TargetAttempt == o.TargetAttempt &&
		p.ReservationID == o.ReservationID && p.Source.Equal(o.Source) && p.Target.Equal(o.Target) &&
		p.PreviousAuthorityOwnerGeneration == o.PreviousAuthorityOwnerGeneration
}

// Clone returns a deep copy (nil for nil).
func (p *RelocationProgress) Clone() *RelocationProgress {
	if p == nil {
		return nil
	}
	c := *p
	c.Source.RoutingID = append([]byte(nil), p.Source.RoutingID...)
	c.Target.RoutingID = append([]byte(nil), p.Target.RoutingID...)
	return &c
}

// partyPaths are the field paths of one relocation party, spelled out as
// constants: every authority record with a move in progress is validated
// on each encode and decode, and joining them at run time cost ten
// allocations per record.
type partyPaths struct{ ownerID, leaseGen, meshName, routingID, lifecycleGen string }

var (
	sourcePaths = partyPaths{"relocation.source.ownerId", "relocation.source.ownerLeaseGeneration",
		"relocation.source.meshName", "relocation.source.routingIdHex", "relocation.source.lifecycleGeneration"}
	targetPaths = partyPaths{"relocation.target.ownerId", "relocation.target.ownerLeaseGeneration",
		"relocation.target.meshName", "relocation.target.routingIdHex", "relocation.target.lifecycleGeneration"}
)

func (v *val) party(path *partyPaths, p RelocationParty) {
	v.name(path.ownerID, p.OwnerID)
	v.gen(path.leaseGen, p.OwnerLeaseGeneration)
	v.name(path.meshName, p.MeshName)
	v.routingID(path.routingID, p.RoutingID)
	v.gen(path.lifecycleGen, p.LifecycleGeneration)
}

// validateRelocation checks the progress on its own and against the row it
// is stored in: who owns the row follows from the stage (§8.2: the source
// through Prepared, the recorded target from Committed on), a move needs an
// Active record without creation recovery state (§6.1, §7.1), and source
// and target are different node runs (§6.1: an invalid target combination).
func (a *Authority) validateRelocation(v *val) {
	r := a.Relocation
	if r == nil {
		return
	}
	const p = "relocation."
	v.enum(p+"stage", string(r.Stage), r.Stage.valid())
	if r.RelocationID == ([16]byte{}) {
		v.fail(p+"relocationId", "must be non-zero")
	}
	if r.ReservationID == ([16]byte{}) {
		v.fail(p+"reservationId", "must be non-zero")
	}
	v.gen(p+"targetAttempt", r.TargetAttempt)
	v.party(&sourcePaths, r.Source)
	v.party(&targetPaths, r.Target)
	if v.err != nil {
		return
	}
	switch {
	case r.Source.sameNode(r.Target):
		v.fail(p+"target", "is the source's node run")
	case a.Allocation.State != AllocationActive:
		v.fail(p+"stage", "a relocation needs an active allocation, not "+quote(string(a.Allocation.State)))
	case a.PendingCreation != nil:
		v.fail(p+"stage", "a relocation cannot start while pendingCreation holds creation recovery state")
	case r.Stage == RelocationCommitted && !r.Target.Equal(a.OwnerParty()):
		v.fail(p+"target", "a committed relocation's target must be the record's owner and node")
	case r.Stage != RelocationCommitted && !r.Source.Equal(a.OwnerParty()):
		v.fail(p+"source", "a "+string(r.Stage)+" relocation's source must be the record's owner and node")
	case r.Stage == RelocationCommitted && !r.PreviousAuthorityOwnerGeneration.Valid():
		v.fail(p+"previousAuthorityOwnerGeneration", "required when committed")
	case r.Stage == RelocationCommitted && r.PreviousAuthorityOwnerGeneration >= a.AuthorityOwnerGeneration:
		v.fail(p+"previousAuthorityOwnerGeneration", "must be below authorityOwnerGeneration "+a.AuthorityOwnerGeneration.String())
	case r.Stage != RelocationCommitted && r.PreviousAuthorityOwnerGeneration != 0:
		v.fail(p+"previousAuthorityOwnerGeneration", "must be null before committed")
	}
}

func (o *obj) party(name string) RelocationParty {
	c := o.child(name)
	p := RelocationParty{
		LifecycleGeneration:  c.gen("lifecycleGeneration"),
		MeshName:             c.str("meshName"),
		OwnerID:              c.str("ownerId"),
		OwnerLeaseGeneration: c.gen("ownerLeaseGeneration"),
		RoutingID:            c.hexBytes("routingIdHex"),
	}
	c.end()
	return p
}

// id128 reads 32 lowercase hex digits.
func (o *obj) id128(name string) [16]byte {
	var id [16]byte
	b := o.hexBytes(name)
	if o.d.err != nil {
		return id
	}
	if len(b) != len(id) {
		o.d.fieldErr(joinPath(o.path(), name), "must be 32 lowercase hex characters")
		return id
	}
	copy(id[:], b)
	return id
}

// decodeRelocation reads the "relocation" member (null: nil).
func (o *obj) relocation(name string) *RelocationProgress {
	c := o.nullChild(name)
	if c == nil {
		return nil
	}
	r := &RelocationProgress{
		Stage:         RelocationStage(c.sym("stage", relocationStages)),
		RelocationID:  c.id128("relocationId"),
		TargetAttempt: c.gen("targetAttempt"),
		ReservationID: c.id128("reservationId"),
		Source:        c.party("source"),
		Target:        c.party("target"),
	}
	if v := c.typed("previousAuthorityOwnerGeneration", jString, true); v != nil && v.t == jString {
		u, reason := parseCanonicalUint(v.s)
		if reason != "" {
			c.d.fieldErr(joinPath(c.path(), "previousAuthorityOwnerGeneration"), "decimal string "+quote(v.s)+": "+reason)
		}
		r.PreviousAuthorityOwnerGeneration = Generation(u)
		if u == 0 && reason == "" {
			// 0 is how a Go value says "null"; a stored "0" is not a
			// generation and must not decode as absent.
			c.d.fieldErr(joinPath(c.path(), "previousAuthorityOwnerGeneration"), "generation 0 outside 1..2^63-1")
		}
	}
	c.end()
	return r
}
