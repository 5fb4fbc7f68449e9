package record

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// RecordVersion is the only recordVersion this package writes and reads.
const RecordVersion = 1

// Bounds. Those marked (spec) come from the spec; the others are this
// project's choice, documented in docs/RECORDS.md.
const (
	MaxValueBytes            = 1 << 20 // (spec) one stored value, also the Location Store SPI bound
	MaxIDBytes               = 255     // (spec §3.3) ActorId / SpotId
	MaxNameBytes             = 255     // MeshName, ChannelName, OwnerId, stableType, maintenanceWave, reservationId
	MaxRoutingIDBytes        = 255     // raw RoutingId bytes
	MaxEndpointBytes         = 1024    // endpoint text
	MaxSecurityIdentityBytes = 1024    // securityIdentity text
	MaxContentReferenceBytes = 4096    // pendingCreation.requestContentReference (a Relocation Store reference bound)
	MaxCapabilities          = 1024    // (spec §3.4, §4) objectCapabilities entries
	MaxSpotTypes             = 1024    // capacity.spotTypes entries (the registered-type list bound of §4)
	MaxWeight                = 10000   // (spec §4) placementWeight, channelWeights values, ClientServer weight
	MaxSlots                 = 1<<31 - 1
	MaxCreationRequestBytes  = 1 << 20 // (spec §7) stored creation request
)

// Kind names a record kind. The value is the first segment of the record's
// logical key preimage.
type Kind string

// Record kinds. KindCounter, KindDescriptorJournal and KindRemovedMeshNode
// are project-specific (not in spec §3.4).
const (
	KindMeshNode        Kind = "mesh-node"
	KindOwnerLease      Kind = "owner-lease"
	KindClientServer    Kind = "client-server"
	KindFanoutPublisher Kind = "fanout-publisher"
	KindAuthority       Kind = "authority"
	KindCounter         Kind = "counter"
	// KindDescriptorJournal is the record naming the descriptor keys the
	// last changes touched (journal.go).
	KindDescriptorJournal Kind = "descriptor-journal"
	// KindRemovedMeshNode is the expiring record of a descriptor its run's
	// watchers removed, for operators (removed.go). Its prefix is not
	// "mesh-node:", so descriptor scans never meet it.
	KindRemovedMeshNode Kind = "removed-mesh-node"
)

// Generation is a 63-bit unsigned generation or revision: ObjectGeneration,
// AuthorityOwnerGeneration, (Owner)LeaseGeneration, lifecycleGeneration and
// descriptorRevision. The stored range is 1..MaxGeneration; 0 is never valid.
// In JSON it is a decimal string without sign or leading zeros.
type Generation uint64

// MaxGeneration is 2^63-1. For issued generations it is the exhausted
// sentinel (never issued, spec §3.2); for descriptor revisions it is the last
// usable value (spec §4).
const MaxGeneration Generation = 1<<63 - 1

// Valid reports whether g is in 1..MaxGeneration.
func (g Generation) Valid() bool { return g >= 1 && g <= MaxGeneration }

// String is the decimal form used in JSON.
func (g Generation) String() string { return strconv.FormatUint(uint64(g), 10) }

// NextRevision returns the descriptor revision after last (0 when none was
// published yet). Revisions may reach MaxGeneration itself (spec §4: only a
// next value that would exceed 2^63-1 is refused, and the host then switches
// to Error).
func NextRevision(last Generation) (Generation, error) {
	if last >= MaxGeneration {
		return 0, ErrRevisionExhausted
	}
	return last + 1, nil
}

// EpochMillis is a store timestamp in Unix epoch milliseconds, 0..2^63-1.
// In JSON it is a decimal string.
type EpochMillis int64

// EpochMillisOf converts t (normally a StoreNow) to milliseconds.
func EpochMillisOf(t time.Time) EpochMillis { return EpochMillis(t.UnixMilli()) }

// Time converts back to a time.Time in UTC.
func (e EpochMillis) Time() time.Time { return time.UnixMilli(int64(e)).UTC() }

// IdentityKind is the authority key's object kind segment: one authority
// row per Id and IdentityKind (spec §3.4).
type IdentityKind string

// Authority key kinds. Entry, User and Instance Spots all use IdentitySpot.
const (
	IdentityActor IdentityKind = "actor"
	IdentitySpot  IdentityKind = "spot"
)

// ObjectKind is a placement object kind. Entry Spots never appear: an Entry
// Spot's Actor is counted as an actor (spec §3.4, §4).
type ObjectKind string

// Object kinds.
const (
	ObjectActor        ObjectKind = "actor"
	ObjectUserSpot     ObjectKind = "userSpot"
	ObjectInstanceSpot ObjectKind = "instanceSpot"
)

// IdentityKind maps an object kind to its authority key kind.
func (k ObjectKind) IdentityKind() IdentityKind {
	if k == ObjectActor {
		return IdentityActor
	}
	return IdentitySpot
}

func (k ObjectKind) valid() bool {
	return k == ObjectActor || k == ObjectUserSpot || k == ObjectInstanceSpot
}

func (k ObjectKind) isSpot() bool { return k == ObjectUserSpot || k == ObjectInstanceSpot }

// RelocationPolicy is an object capability's relocation policy.
type RelocationPolicy string

// Relocation policies as written in objectCapabilities.
const (
	PolicyUnspecified RelocationPolicy = "unspecified"
	PolicyDisabled    RelocationPolicy = "disabled"
	PolicyRecreate    RelocationPolicy = "recreate"
	PolicySnapshot    RelocationPolicy = "snapshot"
)

func (p RelocationPolicy) valid() bool {
	switch p {
	case PolicyUnspecified, PolicyDisabled, PolicyRecreate, PolicySnapshot:
		return true
	}
	return false
}

// ObjectRole is a MeshNode's object role.
type ObjectRole string

// Object roles.
const (
	RoleNone   ObjectRole = "none"
	RoleClient ObjectRole = "client"
	RoleServer ObjectRole = "server"
)

func (r ObjectRole) valid() bool { return r == RoleNone || r == RoleClient || r == RoleServer }

// State is a descriptor's running state (all three descriptor kinds).
type State string

// Descriptor states.
const (
	StatePreparing  State = "preparing"
	StateServing    State = "serving"
	StateRelocating State = "relocating"
	StateRelocated  State = "relocated"
	StateDraining   State = "draining"
	StateStopped    State = "stopped"
	StateError      State = "error"
)

func (s State) valid() bool {
	switch s {
	case StatePreparing, StateServing, StateRelocating, StateRelocated, StateDraining, StateStopped, StateError:
		return true
	}
	return false
}

// AllocationState is an authority allocation's state (spec §6.1).
type AllocationState string

// Allocation states.
const (
	AllocationReserved AllocationState = "reserved"
	AllocationActive   AllocationState = "active"
)

func (s AllocationState) valid() bool { return s == AllocationReserved || s == AllocationActive }

// --- text validation shared by keys and records -------------------------

// checkText validates a UTF-8 text field: length in minLen..maxLen bytes,
// valid UTF-8, and (when noNUL) no NUL byte. It returns a reason or "".
func checkText(s string, minLen, maxLen int, noNUL bool) string {
	switch {
	case len(s) < minLen && minLen == 1:
		return "empty"
	case len(s) < minLen:
		return "shorter than " + strconv.Itoa(minLen) + " bytes"
	case len(s) > maxLen:
		return strconv.Itoa(len(s)) + " bytes, limit " + strconv.Itoa(maxLen)
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	}
	if noNUL {
		for i := 0; i < len(s); i++ {
			if s[i] == 0 {
				return "contains a NUL byte at offset " + strconv.Itoa(i)
			}
		}
	}
	return ""
}

func textErr(kind Kind, field, s string, maxLen int) error {
	if r := checkText(s, 1, maxLen, true); r != "" {
		return &FieldError{Kind: kind, Field: field, Reason: r}
	}
	return nil
}

// ValidateObjectID checks a global ActorId or SpotId: UTF-8, 1..255 bytes,
// no NUL (spec §3.3). IDs are compared byte for byte: no Unicode
// normalisation, no case folding.
func ValidateObjectID(id string) error { return textErr(KindAuthority, "id", id, MaxIDBytes) }

// ValidateMeshName checks a MeshName: UTF-8, 1..255 bytes, no NUL.
func ValidateMeshName(name string) error {
	return textErr(KindMeshNode, "meshName", name, MaxNameBytes)
}

// ValidateChannelName checks a ChannelName: UTF-8, 1..255 bytes, no NUL.
func ValidateChannelName(name string) error {
	return textErr(KindClientServer, "channelName", name, MaxNameBytes)
}

// ValidateOwnerID checks an OwnerId: UTF-8, 1..255 bytes, no NUL.
func ValidateOwnerID(id string) error { return textErr(KindOwnerLease, "ownerId", id, MaxNameBytes) }

// ValidateStableType checks a stable type name: UTF-8, 1..255 bytes, no NUL.
func ValidateStableType(t string) error {
	return textErr(KindMeshNode, "stableType", t, MaxNameBytes)
}

// ValidateRoutingID checks raw RoutingId bytes: 1..255 bytes.
func ValidateRoutingID(rid []byte) error {
	if r := checkRoutingID(rid); r != "" {
		return &FieldError{Kind: KindMeshNode, Field: "routingId", Reason: r}
	}
	return nil
}

func checkRoutingID(rid []byte) string {
	switch {
	case len(rid) == 0:
		return "empty"
	case len(rid) > MaxRoutingIDBytes:
		return strconv.Itoa(len(rid)) + " bytes, limit " + strconv.Itoa(MaxRoutingIDBytes)
	}
	return ""
}
