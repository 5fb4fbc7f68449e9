package record

import (
	"encoding/hex"
	"sort"
	"strings"
)

// MeshNodeDescriptor is the MeshNode descriptor record (spec §3.4, §4),
// stored under MeshNodePreimage(MeshName, RoutingID).
//
// OwnerID, LeaseGeneration and DescriptorRevision are written twice — at the
// record's top level and inside "descriptor" — from these single fields, so
// an encoded record can never disagree with itself; decoding checks that the
// two copies agree.
type MeshNodeDescriptor struct {
	MeshName            string
	RoutingID           []byte // raw bytes; JSON routingIdHex
	LifecycleGeneration Generation
	DescriptorRevision  Generation
	Endpoint            string  // advertised ROUTER endpoint
	EntrySpotID         *string // non-nil exactly when ObjectRole is RoleServer
	// ChannelWeights maps a ClientServer ChannelName to its selection
	// weight 0..10000.
	ChannelWeights map[string]int
	// ApplicationVersion is the application deployment sequence number,
	// 0..2^63-1 (0: none configured). Written as a decimal string: it is a
	// sequence number, not a magnitude.
	ApplicationVersion uint64
	// ObjectCapabilities is at most MaxCapabilities entries, unique by
	// (ObjectKind, StableType). Encode writes them sorted by ObjectKind then
	// StableType (UTF-16 code unit order) whatever the slice order.
	ObjectCapabilities    []ObjectCapability
	ObjectRole            ObjectRole
	PlacementWeight       int // 0..10000
	Capacity              NodeCapacity
	ActivationConcurrency ActivationConcurrency
	MaintenanceWave       *string // nil: JSON null
	State                 State
	SecurityIdentity      string // 0..1024 bytes; empty when transport security is off
	OwnerID               string
	LeaseGeneration       Generation
	UpdatedAt             EpochMillis
}

// ObjectCapability is one registered object-kind placement capability.
type ObjectCapability struct {
	ObjectKind         ObjectKind
	StableType         string
	Policy             RelocationPolicy
	HasSnapshotAdapter bool
	Limit              int // 0..2^31-1, 0 = unlimited
}

// NodeCapacity is the operator-facing copy of a node's usage (spec §4); the
// Location Store counters remain the source of truth.
type NodeCapacity struct {
	Actors SlotUsage
	Spots  SlotUsage // Entry Spots are not counted
	// SpotTypes is at most MaxSpotTypes entries, unique by (ObjectKind,
	// StableType), ObjectKind userSpot or instanceSpot; written sorted like
	// ObjectCapabilities.
	SpotTypes []SpotTypeUsage
}

// SlotUsage is {active, reserved, limit}, each 0..2^31-1 (limit 0 =
// unlimited).
type SlotUsage struct {
	Active, Reserved, Limit int
}

// SpotTypeUsage is the usage of one Spot kind / stable type.
type SpotTypeUsage struct {
	ObjectKind              ObjectKind
	StableType              string
	Active, Reserved, Limit int
}

// ActivationConcurrency is the Instance Spot factory concurrency {active,
// limit}, each 0..2^31-1.
type ActivationConcurrency struct {
	Active, Limit int
}

func (d *MeshNodeDescriptor) validate() error {
	v := &val{kind: KindMeshNode}
	const p = "descriptor."
	v.name(p+"meshName", d.MeshName)
	v.routingID(p+"routingIdHex", d.RoutingID)
	v.gen(p+"lifecycleGeneration", d.LifecycleGeneration)
	v.gen("descriptorRevision", d.DescriptorRevision)
	v.text(p+"endpoint", d.Endpoint, 1, MaxEndpointBytes, true)
	v.enum(p+"objectRole", string(d.ObjectRole), d.ObjectRole.valid())
	switch {
	case d.ObjectRole == RoleServer && d.EntrySpotID == nil:
		v.fail(p+"entrySpotId", "required when objectRole is server")
	case d.ObjectRole != RoleServer && d.EntrySpotID != nil:
		v.fail(p+"entrySpotId", "must be null unless objectRole is server")
	case d.EntrySpotID != nil:
		v.text(p+"entrySpotId", *d.EntrySpotID, 1, MaxIDBytes, true)
	}
	// Entry paths are built only when an entry fails: each entry is first
	// checked with an empty path, and only then are the entries walked in
	// their sorted order (so the first error is the same) with real paths.
	weightsOK := true
	for name, w := range d.ChannelWeights {
		probe := val{kind: v.kind}
		if probe.weight("", name, w); probe.err != nil {
			weightsOK = false
			break
		}
	}
	if !weightsOK {
		for _, name := range sortedKeys(d.ChannelWeights) {
			v.weight(p+"channelWeights["+quote(name)+"]", name, d.ChannelWeights[name])
		}
	}
	if d.ApplicationVersion > uint64(MaxGeneration) {
		v.fail(p+"applicationVersion", "beyond 2^63-1")
	}
	if v.err == nil && len(d.ObjectCapabilities) > MaxCapabilities {
		return &LimitError{Kind: KindMeshNode, What: p + "objectCapabilities entries", Limit: MaxCapabilities, Actual: len(d.ObjectCapabilities)}
	}
	seen := make(map[[2]string]bool, len(d.ObjectCapabilities))
	for i, c := range d.ObjectCapabilities {
		k := [2]string{string(c.ObjectKind), c.StableType}
		dup := seen[k]
		seen[k] = true
		// Check with an empty path first, so that a valid entry costs no
		// path strings; only a failing one is checked again with its path.
		if probe := (val{kind: v.kind}); v.err == nil {
			if probe.capability("", c, dup); probe.err != nil {
				v.capability(indexPath(p+"objectCapabilities", i), c, dup)
			}
		}
	}
	v.rng(p+"placementWeight", d.PlacementWeight, 0, MaxWeight)
	v.slots(p+"capacity.actors", d.Capacity.Actors)
	v.slots(p+"capacity.spots", d.Capacity.Spots)
	if v.err == nil && len(d.Capacity.SpotTypes) > MaxSpotTypes {
		return &LimitError{Kind: KindMeshNode, What: p + "capacity.spotTypes entries", Limit: MaxSpotTypes, Actual: len(d.Capacity.SpotTypes)}
	}
	seen = make(map[[2]string]bool, len(d.Capacity.SpotTypes))
	for i, s := range d.Capacity.SpotTypes {
		k := [2]string{string(s.ObjectKind), s.StableType}
		dup := seen[k]
		seen[k] = true
		if probe := (val{kind: v.kind}); v.err == nil {
			if probe.spotType("", s, dup); probe.err != nil {
				v.spotType(indexPath(p+"capacity.spotTypes", i), s, dup)
			}
		}
	}
	v.rng(p+"activationConcurrency.active", d.ActivationConcurrency.Active, 0, MaxSlots)
	v.rng(p+"activationConcurrency.limit", d.ActivationConcurrency.Limit, 0, MaxSlots)
	if d.MaintenanceWave != nil {
		v.name(p+"maintenanceWave", *d.MaintenanceWave)
	}
	v.enum(p+"state", string(d.State), d.State.valid())
	v.text(p+"securityIdentity", d.SecurityIdentity, 0, MaxSecurityIdentityBytes, true)
	v.name("ownerId", d.OwnerID)
	v.gen("leaseGeneration", d.LeaseGeneration)
	v.millis(p+"updatedAtEpochMs", d.UpdatedAt)
	return v.err
}

// weight checks one channelWeights entry.
func (v *val) weight(path, name string, w int) {
	v.name(path, name)
	v.rng(path, w, 0, MaxWeight)
}

// capability checks objectCapabilities entry c at path; dup: an earlier
// entry has the same (objectKind, stableType). The checks do not depend on
// path, which only names the error.
func (v *val) capability(path string, c ObjectCapability, dup bool) {
	v.enum(path+".objectKind", string(c.ObjectKind), c.ObjectKind.valid())
	v.name(path+".stableType", c.StableType)
	v.enum(path+".policy", string(c.Policy), c.Policy.valid())
	v.rng(path+".limit", c.Limit, 0, MaxSlots)
	if dup {
		v.fail(path, "duplicate capability "+string(c.ObjectKind)+" "+quote(c.StableType))
	}
}

// spotType checks capacity.spotTypes entry s at path, like capability.
func (v *val) spotType(path string, s SpotTypeUsage, dup bool) {
	v.enum(path+".objectKind", string(s.ObjectKind), s.ObjectKind.isSpot())
	v.name(path+".stableType", s.StableType)
	v.slots(path, SlotUsage{Active: s.Active, Reserved: s.Reserved, Limit: s.Limit})
	if dup {
		v.fail(path, "duplicate spot type "+string(s.ObjectKind)+" "+quote(s.StableType))
	}
}

func (v *val) slots(path string, s SlotUsage) {
	if inRange(s.Active, 0, MaxSlots) && inRange(s.Reserved, 0, MaxSlots) && inRange(s.Limit, 0, MaxSlots) {
		return // nothing to report: spare the path strings
	}
	v.rng(path+".active", s.Active, 0, MaxSlots)
	v.rng(path+".reserved", s.Reserved, 0, MaxSlots)
	v.rng(path+".limit", s.Limit, 0, MaxSlots)
}

// Validate checks every field, the entry-count bounds and the encoded size
// (at most MaxValueBytes). A host runs it on its whole descriptor at startup
// and fails instead of publishing a truncated one (spec §4).
func (d MeshNodeDescriptor) Validate() error {
	_, err := d.Encode()
	return err
}

// Preimage is MeshNodePreimage(d.MeshName, d.RoutingID).
func (d MeshNodeDescriptor) Preimage() ([]byte, error) {
	return MeshNodePreimage(d.MeshName, d.RoutingID)
}

// Encode returns the canonical JSON value.
func (d MeshNodeDescriptor) Encode() ([]byte, error) {
	root, err := d.value()
	if err != nil {
		return nil, err
	}
	return finish(KindMeshNode, encodeCanonical(root))
}

// value validates d and returns its whole record as a JSON tree (the
// removal record nests it: removed.go).
func (d MeshNodeDescriptor) value() (jvalue, error) {
	if err := d.validate(); err != nil {
		return jvalue{}, err
	}
	caps := append([]ObjectCapability(nil), d.ObjectCapabilities...)
	sort.Slice(caps, func(i, j int) bool {
		return lessKindType(caps[i].ObjectKind, caps[i].StableType, caps[j].ObjectKind, caps[j].StableType)
	})
	capVals := make([]jvalue, len(caps))
	for i, c := range caps {
		capVals[i] = jObjV(
			mem("objectKind", jStrV(string(c.ObjectKind))),
			mem("stableType", jStrV(c.StableType)),
			mem("policy", jStrV(string(c.Policy))),
			mem("hasSnapshotAdapter", jBoolV(c.HasSnapshotAdapter)),
			mem("limit", jUintV(uint64(c.Limit))),
		)
	}
	types := append([]SpotTypeUsage(nil), d.Capacity.SpotTypes...)
	sort.Slice(types, func(i, j int) bool {
		return lessKindType(types[i].ObjectKind, types[i].StableType, types[j].ObjectKind, types[j].StableType)
	})
	typeVals := make([]jvalue, len(types))
	for i, s := range types {
		typeVals[i] = jObjV(
			mem("objectKind", jStrV(string(s.ObjectKind))),
			mem("stableType", jStrV(s.StableType)),
			mem("active", jUintV(uint64(s.Active))),
			mem("reserved", jUintV(uint64(s.Reserved))),
			mem("limit", jUintV(uint64(s.Limit))),
		)
	}
	weights := make([]jmember, 0, len(d.ChannelWeights))
	for name, w := range d.ChannelWeights {
		weights = append(weights, mem(name, jUintV(uint64(w))))
	}
	desc := jObjV(
		mem("meshName", jStrV(d.MeshName)),
		mem("routingIdHex", jStrV(hex.EncodeToString(d.RoutingID))),
		mem("lifecycleGeneration", jDecStrV(uint64(d.LifecycleGeneration))),
		mem("descriptorRevision", jDecStrV(uint64(d.DescriptorRevision))),
		mem("endpoint", jStrV(d.Endpoint)),
		mem("entrySpotId", nullableStr(d.EntrySpotID)),
		mem("channelWeights", jObjV(weights...)),
		mem("applicationVersion", jDecStrV(d.ApplicationVersion)),
		mem("objectCapabilities", jArrV(capVals)),
		mem("objectRole", jStrV(string(d.ObjectRole))),
		mem("placementWeight", jUintV(uint64(d.PlacementWeight))),
		mem("capacity", jObjV(
			mem("actors", slotsValue(d.Capacity.Actors)),
			mem("spots", slotsValue(d.Capacity.Spots)),
			mem("spotTypes", jArrV(typeVals)),
		)),
		mem("activationConcurrency", jObjV(
			mem("active", jUintV(uint64(d.ActivationConcurrency.Active))),
			mem("limit", jUintV(uint64(d.ActivationConcurrency.Limit))),
		)),
		mem("maintenanceWave", nullableStr(d.MaintenanceWave)),
		mem("state", jStrV(string(d.State))),
		mem("securityIdentity", jStrV(d.SecurityIdentity)),
		mem("ownerId", jStrV(d.OwnerID)),
		mem("leaseGeneration", jDecStrV(uint64(d.LeaseGeneration))),
		mem("updatedAtEpochMs", jDecStrV(uint64(d.UpdatedAt))),
	)
	return descriptorEnvelope(d.OwnerID, d.LeaseGeneration, d.DescriptorRevision, desc), nil
}

// DecodeMeshNode reads a MeshNode descriptor value, checking that the
// top-level and in-descriptor copies agree.
func DecodeMeshNode(value []byte) (MeshNodeDescriptor, error) {
	d, top, err := begin(KindMeshNode, value)
	if err != nil {
		return MeshNodeDescriptor{}, err
	}
	defer d.release()
	r := readMeshNode(d, top)
	top.end()
	if d.err != nil {
		return MeshNodeDescriptor{}, d.err
	}
	if err := r.validate(); err != nil {
		return MeshNodeDescriptor{}, err
	}
	return r, nil
}

// readMeshNode reads the members of a descriptor record's top level (top,
// whose recordVersion the caller checked) into a descriptor, leaving the
// first error in d; the caller ends top and validates. The removal record
// nests a descriptor record and reads it with this too (removed.go).
func readMeshNode(d *dec, top *obj) MeshNodeDescriptor {
	o := top.child("descriptor")
	// Errors name a member by its path: "descriptor…" in a descriptor
	// record, deeper when nested (built only then: decoding is hot).
	path, capsPath, typesPath := "descriptor", "descriptor.objectCapabilities", "descriptor.capacity.spotTypes"
	if p := o.path(); p != path {
		path, capsPath, typesPath = p, p+".objectCapabilities", p+".capacity.spotTypes"
	}
	var r MeshNodeDescriptor
	r.MeshName = o.str("meshName")
	r.RoutingID = o.hexBytes("routingIdHex")
	r.LifecycleGeneration = o.gen("lifecycleGeneration")
	r.Endpoint = o.str("endpoint")
	r.EntrySpotID = o.nullStr("entrySpotId")
	if w := o.child("channelWeights"); d.err == nil {
		for i := range w.members {
			m := &w.members[i]
			w.mark(i)
			if r.ChannelWeights == nil {
				r.ChannelWeights = make(map[string]int, len(w.members))
			}
			n, ok := plainNumber(&m.val)
			if !ok {
				n = d.numberValue(path+".channelWeights["+quote(m.name)+"]", &m.val)
			}
			// The name is a substring of the whole input: copy it.
			r.ChannelWeights[strings.Clone(m.name)] = n
		}
	}
	r.ApplicationVersion = o.decimalString("applicationVersion")
	caps := o.array("objectCapabilities")
	if d.err == nil && len(caps) > MaxCapabilities {
		d.setErr(&LimitError{Kind: KindMeshNode, What: "descriptor.objectCapabilities entries", Limit: MaxCapabilities, Actual: len(caps)})
		return r
	}
	if len(caps) > 0 && d.err == nil {
		r.ObjectCapabilities = make([]ObjectCapability, 0, len(caps))
	}
	for i := range caps {
		c := d.element(capsPath, i, &caps[i])
		r.ObjectCapabilities = append(r.ObjectCapabilities, ObjectCapability{
			ObjectKind:         ObjectKind(c.str("objectKind")),
			StableType:         c.str("stableType"),
			Policy:             RelocationPolicy(c.str("policy")),
			HasSnapshotAdapter: c.boolean("hasSnapshotAdapter"),
			Limit:              c.number("limit"),
		})
		c.end()
	}
	r.ObjectRole = ObjectRole(o.str("objectRole"))
	r.PlacementWeight = o.number("placementWeight")
	capObj := o.child("capacity")
	r.Capacity.Actors = readSlots(capObj.child("actors"))
	r.Capacity.Spots = readSlots(capObj.child("spots"))
	types := capObj.array("spotTypes")
	if d.err == nil && len(types) > MaxSpotTypes {
		d.setErr(&LimitError{Kind: KindMeshNode, What: "descriptor.capacity.spotTypes entries", Limit: MaxSpotTypes, Actual: len(types)})
		return r
	}
	if len(types) > 0 && d.err == nil {
		r.Capacity.SpotTypes = make([]SpotTypeUsage, 0, len(types))
	}
	for i := range types {
		t := d.element(typesPath, i, &types[i])
		r.Capacity.SpotTypes = append(r.Capacity.SpotTypes, SpotTypeUsage{
			ObjectKind: ObjectKind(t.str("objectKind")),
			StableType: t.str("stableType"),
			Active:     t.number("active"),
			Reserved:   t.number("reserved"),
			Limit:      t.number("limit"),
		})
		t.end()
	}
	capObj.end()
	ac := o.child("activationConcurrency")
	r.ActivationConcurrency = ActivationConcurrency{Active: ac.number("active"), Limit: ac.number("limit")}
	ac.end()
	r.MaintenanceWave = o.nullStr("maintenanceWave")
	r.State = State(o.str("state"))
	r.SecurityIdentity = o.str("securityIdentity")
	r.UpdatedAt = o.millis("updatedAtEpochMs")
	r.OwnerID, r.LeaseGeneration, r.DescriptorRevision = readCopies(d, top, o)
	o.end()
	return r
}

func readSlots(o *obj) SlotUsage {
	s := SlotUsage{Active: o.number("active"), Reserved: o.number("reserved"), Limit: o.number("limit")}
	o.end()
	return s
}

// --- shared by the three descriptor records -----------------------------

// descriptorEnvelope is the top level of a descriptor record.
func descriptorEnvelope(ownerID string, lease, revision Generation, desc jvalue) jvalue {
	return jObjV(
		mem("recordVersion", jUintV(RecordVersion)),
		mem("ownerId", jStrV(ownerID)),
		mem("leaseGeneration", jDecStrV(uint64(lease))),
		mem("descriptorRevision", jDecStrV(uint64(revision))),
		mem("descriptor", desc),
	)
}

// readCopies reads ownerId, leaseGeneration and descriptorRevision at the
// top level and inside descriptor, and reports the first disagreement. The
// comparison is on decoded values, so that a non-canonical but equal
// spelling is a canonical-form question (CheckCanonical), not a mismatch.
func readCopies(d *dec, top, desc *obj) (string, Generation, Generation) {
	owner, dOwner := top.str("ownerId"), desc.str("ownerId")
	lease, dLease := top.gen("leaseGeneration"), desc.gen("leaseGeneration")
	rev, dRev := top.gen("descriptorRevision"), desc.gen("descriptorRevision")
	if d.err != nil {
		return "", 0, 0
	}
	switch {
	case owner != dOwner:
		d.setErr(&MismatchError{Kind: d.kind, Field: "ownerId", TopLevel: quote(owner), Descriptor: quote(dOwner)})
	case lease != dLease:
		d.setErr(&MismatchError{Kind: d.kind, Field: "leaseGeneration", TopLevel: quote(lease.String()), Descriptor: quote(dLease.String())})
	case rev != dRev:
		d.setErr(&MismatchError{Kind: d.kind, Field: "descriptorRevision", TopLevel: quote(rev.String()), Descriptor: quote(dRev.String())})
	}
	return owner, lease, rev
}

func slotsValue(s SlotUsage) jvalue {
	return jObjV(
		mem("active", jUintV(uint64(s.Active))),
		mem("reserved", jUintV(uint64(s.Reserved))),
		mem("limit", jUintV(uint64(s.Limit))),
	)
}

func nullableStr(s *string) jvalue {
	if s == nil {
		return jNullV()
	}
	return jStrV(*s)
}

func lessKindType(ka ObjectKind, ta string, kb ObjectKind, tb string) bool {
	if c := compareUTF16(string(ka), string(kb)); c != 0 {
		return c < 0
	}
	return compareUTF16(ta, tb) < 0
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
