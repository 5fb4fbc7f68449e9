package router

import (
	"fmt"
	"strings"
)

// Hello (command 1) opens admission: the connecting node's descriptor.
// Sent on the DEALER towards the peer's ROUTER.
type Hello struct {
	Admission ServiceAdmission
}

// Admit (command 2) accepts admission with the admitting node's descriptor.
// Sent back on the ROUTER to the hello's sender.
type Admit struct {
	Admission ServiceAdmission
}

// Reject (command 3) refuses admission with a reason.
type Reject struct {
	Reason RejectReason
}

// Command implements Body.
func (*Hello) Command() Command { return CmdHello }

// Command implements Body.
func (*Admit) Command() Command { return CmdAdmit }

// Command implements Body.
func (*Reject) Command() Command { return CmdReject }

func (b *Hello) code(c *codec)  { b.Admission.code(c, "admission") }
func (b *Admit) code(c *codec)  { b.Admission.code(c, "admission") }
func (b *Reject) code(c *codec) { enum32(c, "reason", &b.Reason) }

// ServiceAdmission (service-admission) is a conditional union on the
// topology kind (u8), followed by a u32 length covering the selected case.
type ServiceAdmission struct {
	Topology     TopologyKind
	RouteMesh    *RouteMeshAdmission    // set iff Topology == TopologyRouteMesh
	ClientServer *ClientServerAdmission // set iff Topology == TopologyClientServer
}

func (a *ServiceAdmission) code(c *codec, name string) {
	c.obj(name, func() {
		enum8(c, "topologyKind", &a.Topology)
		// The schema bounds the whole union (descriptorEnvelopeBytes); the
		// length covers what follows the 1-byte kind and the 4-byte length.
		c.delimited("length", 4, DescriptorEnvelopeBytes-5, func() {
			switch a.Topology {
			case TopologyRouteMesh:
				c.unionOthers("clientServer", a.ClientServer != nil)
				if p := unionCase(c, "routeMesh", &a.RouteMesh); p != nil {
					p.code(c, "routeMesh")
				}
			case TopologyClientServer:
				c.unionOthers("routeMesh", a.RouteMesh != nil)
				if p := unionCase(c, "clientServer", &a.ClientServer); p != nil {
					p.code(c, "clientServer")
				}
			}
		})
	})
}

// RouteMeshAdmission (route-mesh-admission) is a MeshNode's descriptor as
// exchanged during RouteMesh admission.
type RouteMeshAdmission struct {
	MeshName            string
	SecurityIdentity    string
	LifecycleGeneration uint64
	DescriptorRevision  uint64
	AdvertisedEndpoint  string
	Channels            []ChannelEntry // sorted by name, unique
	Extension           DescriptorExtension
}

// ChannelEntry (channel-entry): a channel name and its weight 0..100.
type ChannelEntry struct {
	ChannelName string
	Weight      uint32
}

func (a *RouteMeshAdmission) code(c *codec, name string) {
	c.obj(name, func() {
		c.text8("meshName", &a.MeshName)
		c.text8("securityIdentity", &a.SecurityIdentity)
		c.nz64("lifecycleGeneration", &a.LifecycleGeneration)
		c.nz64("descriptorRevision", &a.DescriptorRevision)
		c.text("advertisedEndpoint", &a.AdvertisedEndpoint, 2, 1, EndpointBytes)
		// channel-entry is at least 1+1 (name) + 4 (weight) bytes.
		vector(c, "channels", 2, 65535, 6, &a.Channels, func(e *ChannelEntry) {
			c.obj("", func() {
				c.text8("channelName", &e.ChannelName)
				c.u32("weight", &e.Weight, 0, WeightMax)
			})
		})
		if c.err == nil {
			for i := 1; i < len(a.Channels); i++ {
				if a.Channels[i-1].ChannelName >= a.Channels[i].ChannelName {
					c.fail(NotCanonical, "channels", "channel names must be sorted and unique")
					break
				}
			}
		}
		a.Extension.code(c, "extension")
	})
}

// DescriptorExtension (descriptor-extension) is a TLV set: u32 total length,
// then fields of u8 id, u32 length, value, in ascending id order. Unknown
// ids are kept (Unknown) so that re-encoding reproduces the input.
type DescriptorExtension struct {
	RuntimeState         RuntimeState         // id 1, required
	ApplicationVersion   int64                // id 2, required, 0..2^63-1
	SpotTypes            []string             // id 3, optional (nil = absent), sorted unique
	StatefulCapabilities []StatefulCapability // id 4, optional (nil = absent)
	MaintenanceWave      *string              // id 5, optional optional-text8
	ProtocolCapabilities []string             // id 6, required, sorted unique, contains RequiredProtocolCapability
	ObjectRole           ObjectRole           // id 7, required
	PlacementWeight      uint32               // id 8, required, 0..100
	ActiveCapacityLimit  uint32               // id 9, required, 1..2^31-1
	PendingCapacityLimit uint32               // id 10, required, 0..2^31-1
	ActiveCapacityUsed   uint32               // id 11, required
	PendingCapacityUsed  uint32               // id 12, required
	Unknown              []ExtensionField     // ids this node does not know, ascending
}

// ExtensionField is a TLV field this node does not interpret.
type ExtensionField struct {
	ID    uint8
	Value []byte
}

// StatefulCapability (stateful-capability-entry).
type StatefulCapability struct {
	ObjectKind           StatefulObjectKind
	Type                 string
	RelocationPolicy     RelocationPolicy
	ActiveCapacityLimit  uint32 // 1..2^31-1
	PendingCapacityLimit uint32 // 0..2^31-1
	HasSnapshotAdapter   bool   // true exactly for the snapshot policy
	Available            uint64 // ordinal-or-zero
}

const lastKnownExtensionField = 12

var extensionRequired = [lastKnownExtensionField + 1]bool{1: true, 2: true, 6: true, 7: true, 8: true, 9: true, 10: true, 11: true, 12: true}

var extensionNames = [lastKnownExtensionField + 1]string{
	1: "runtimeState", 2: "applicationVersion", 3: "spotTypes", 4: "statefulCapabilities",
	5: "maintenanceWave", 6: "protocolCapabilities", 7: "objectRole", 8: "placementWeight",
	9: "activeCapacityLimit", 10: "pendingCapacityLimit", 11: "activeCapacityUsed", 12: "pendingCapacityUsed",
}

// present reports, for encoding, whether known field id carries a value.
func (x *DescriptorExtension) present(id uint8) bool {
	switch id {
	case 3:
		return x.SpotTypes != nil
	case 4:
		return x.StatefulCapabilities != nil
	case 5:
		return x.MaintenanceWave != nil
	}
	return extensionRequired[id]
}

// field walks the value of known field id.
func (x *DescriptorExtension) field(c *codec, id uint8) {
	name := extensionNames[id]
	switch id {
	case 1:
		enum8(c, name, &x.RuntimeState)
	case 2:
		c.i64(name, &x.ApplicationVersion, 0, MaxApplicationVersion)
	case 3:
		sortedText8Vector(c, name, &x.SpotTypes)
	case 4:
		statefulCapabilities(c, name, &x.StatefulCapabilities)
	case 5:
		if c.decoding {
			x.MaintenanceWave = new(string)
		}
		c.optText8(name, x.MaintenanceWave)
	case 6:
		sortedText8Vector(c, name, &x.ProtocolCapabilities)
		if c.err == nil {
			found := false
			for _, s := range x.ProtocolCapabilities {
				found = found || s == RequiredProtocolCapability
			}
			if !found {
				c.fail(MissingField, name, "must contain "+RequiredProtocolCapability)
			}
		}
	case 7:
		enum8(c, name, &x.ObjectRole)
	case 8:
		c.u32(name, &x.PlacementWeight, 0, WeightMax)
	case 9:
		c.u32(name, &x.ActiveCapacityLimit, 1, ObjectTypeCapacityMaximum)
	case 10:
		c.u32(name, &x.PendingCapacityLimit, 0, ObjectTypeCapacityMaximum)
	case 11:
		c.u32(name, &x.ActiveCapacityUsed, 0, 1<<32-1)
	case 12:
		c.u32(name, &x.PendingCapacityUsed, 0, 1<<32-1)
	}
}

func (x *DescriptorExtension) code(c *codec, name string) {
	c.obj(name, func() {
		c.delimited("length", 4, DescriptorEnvelopeBytes-4, func() {
			if c.decoding {
				x.decodeFields(c)
			} else {
				x.encodeFields(c)
			}
		})
	})
}

func (x *DescriptorExtension) decodeFields(c *codec) {
	var seen [lastKnownExtensionField + 1]bool
	last := -1
	for c.err == nil && c.remaining() > 0 {
		id64, ok := c.readUint("fieldId", 1)
		if !ok {
			return
		}
		id := uint8(id64)
		if int(id) <= last {
			c.fail(NotCanonical, "fieldId", fmt.Sprintf("field %d after field %d (ascending, no duplicates)", id, last))
			return
		}
		last = int(id)
		var val []byte
		// Field length: bounded by the enclosing (already bounded) region.
		val, ok = c.span("fieldLength", 4, 0, DescriptorEnvelopeBytes)
		if !ok {
			return
		}
		if len(val) == 0 {
			val = nil
		}
		if id == 0 || id > lastKnownExtensionField {
			// Unknown fields are skipped after length validation; they are
			// kept (aliasing the input) so re-encoding is byte-exact; each
			// costs at least 5 input bytes, so the slice grows with the input.
			x.Unknown = append(x.Unknown, ExtensionField{ID: id, Value: val})
			continue
		}
		seen[id] = true
		sub := &codec{decoding: true, buf: val, cmd: c.cmd}
		x.field(sub, id)
		if sub.err == nil && sub.remaining() != 0 {
			sub.fail(TrailingBytes, extensionNames[id], fmt.Sprintf("%d bytes after the value", sub.remaining()))
		}
		if sub.err != nil {
			c.err = sub.err
			return
		}
	}
	if c.err != nil {
		return
	}
	for id := 1; id <= lastKnownExtensionField; id++ {
		if extensionRequired[id] && !seen[id] {
			c.fail(MissingField, extensionNames[id], "required descriptor extension field absent")
			return
		}
	}
}

func (x *DescriptorExtension) encodeFields(c *codec) {
	u := x.Unknown
	for i := range u {
		if u[i].ID != 0 && u[i].ID <= lastKnownExtensionField {
			c.fail(Constraint, "unknown", fmt.Sprintf("field id %d is a known field", u[i].ID))
			return
		}
		if i > 0 && u[i].ID <= u[i-1].ID {
			c.fail(NotCanonical, "unknown", "unknown fields must be in ascending id order without duplicates")
			return
		}
	}
	emitUnknown := func(f ExtensionField) {
		c.writeUint(1, uint64(f.ID))
		c.writeUint(4, uint64(len(f.Value)))
		c.buf = append(c.buf, f.Value...)
		if c.js != nil {
			c.js.hex(fmt.Sprintf("unknownField%d", f.ID), f.Value)
		}
	}
	for id := 0; id <= 255 && c.err == nil; id++ {
		if len(u) > 0 && int(u[0].ID) == id {
			emitUnknown(u[0])
			u = u[1:]
			continue
		}
		if id == 0 || id > lastKnownExtensionField || !x.present(uint8(id)) {
			continue
		}
		c.writeUint(1, uint64(id))
		pos := len(c.buf)
		c.writeUint(4, 0)
		x.field(c, uint8(id))
		if c.err != nil {
			return
		}
		n := len(c.buf) - pos - 4
		c.buf[pos] = byte(n >> 24)
		c.buf[pos+1] = byte(n >> 16)
		c.buf[pos+2] = byte(n >> 8)
		c.buf[pos+3] = byte(n)
	}
}

// sortedText8Vector walks sorted-text8-vector: u16 count (≤1024) of text8,
// sorted by bytes and unique.
func sortedText8Vector(c *codec, name string, v *[]string) {
	vector(c, name, 2, SortedVectorMaxItems, 2, v, func(s *string) { c.text8("", s) })
	if c.err == nil {
		for i := 1; i < len(*v); i++ {
			if (*v)[i-1] >= (*v)[i] {
				c.fail(NotCanonical, name, "entries must be sorted and unique")
				return
			}
		}
	}
	if c.decoding && c.err == nil && *v == nil {
		*v = []string{}
	}
}

func statefulCapabilities(c *codec, name string, v *[]StatefulCapability) {
	// An entry is at least 1 + 2 + 1 + 4 + 4 + 1 + 8 bytes.
	vector(c, name, 2, SortedVectorMaxItems, 21, v, func(e *StatefulCapability) {
		c.obj("", func() {
			enum8(c, "objectKind", &e.ObjectKind)
			c.text8("type", &e.Type)
			enum8(c, "relocationPolicy", &e.RelocationPolicy)
			c.u32("activeCapacityLimit", &e.ActiveCapacityLimit, 1, ObjectTypeCapacityMaximum)
			c.u32("pendingCapacityLimit", &e.PendingCapacityLimit, 0, ObjectTypeCapacityMaximum)
			c.boolean("hasSnapshotAdapter", &e.HasSnapshotAdapter)
			c.ord64("available", &e.Available)
			c.constraint("hasSnapshotAdapter", e.HasSnapshotAdapter != (e.RelocationPolicy == PolicySnapshot),
				"a snapshot adapter is present exactly for the snapshot policy")
		})
	})
	if c.err != nil {
		return
	}
	es := *v
	for i := 1; i < len(es); i++ {
		a, b := es[i-1], es[i]
		if a.ObjectKind > b.ObjectKind || (a.ObjectKind == b.ObjectKind && strings.Compare(a.Type, b.Type) >= 0) {
			c.fail(NotCanonical, name, "entries must be sorted by (objectKind, type) and unique")
			return
		}
	}
	if c.decoding && *v == nil {
		*v = []StatefulCapability{}
	}
}

// ClientServerAdmission (client-server-admission): a union on the role (u8)
// followed by a u16 length covering the selected case.
type ClientServerAdmission struct {
	Role   ClientServerRole
	Client *ClientAdmission // set iff Role == RoleClient
	Server *ServerAdmission // set iff Role == RoleServer
}

// ClientAdmission is the client case; the direction is the wire constant
// clientToServer.
type ClientAdmission struct {
	ChannelName                        string
	SecurityIdentity                   string
	NormalizedEffectiveMaxMessageBytes uint32 // nonzero
}

// ServerAdmission is the server case; the direction is the wire constant
// clientToServer.
type ServerAdmission struct {
	ChannelName                        string
	ServerRID                          []byte
	LifecycleGeneration                uint64
	DescriptorRevision                 uint64
	Weight                             uint32 // 0..100
	RuntimeState                       RuntimeState
	SecurityIdentity                   string
	NormalizedEffectiveMaxMessageBytes uint32 // nonzero
	AdvertisedEndpoint                 string
}

func direction(c *codec) {
	d := clientServerDirection(1)
	enum8(c, "direction", &d)
}

func (a *ClientServerAdmission) code(c *codec, name string) {
	c.obj(name, func() {
		enum8(c, "role", &a.Role)
		c.delimited("length", 2, 65535, func() {
			switch a.Role {
			case RoleClient:
				c.unionOthers("server", a.Server != nil)
				if p := unionCase(c, "client", &a.Client); p != nil {
					c.obj("client", func() {
						c.text8("channelName", &p.ChannelName)
						direction(c)
						c.text8("securityIdentity", &p.SecurityIdentity)
						c.nz32("normalizedEffectiveMaxMessageBytes", &p.NormalizedEffectiveMaxMessageBytes)
					})
				}
			case RoleServer:
				c.unionOthers("client", a.Client != nil)
				if p := unionCase(c, "server", &a.Server); p != nil {
					c.obj("server", func() {
						c.text8("channelName", &p.ChannelName)
						direction(c)
						c.rid("serverRid", &p.ServerRID)
						c.nz64("lifecycleGeneration", &p.LifecycleGeneration)
						c.nz64("descriptorRevision", &p.DescriptorRevision)
						c.u32("weight", &p.Weight, 0, WeightMax)
						enum8(c, "runtimeState", &p.RuntimeState)
						c.text8("securityIdentity", &p.SecurityIdentity)
						c.nz32("normalizedEffectiveMaxMessageBytes", &p.NormalizedEffectiveMaxMessageBytes)
						c.text("advertisedEndpoint", &p.AdvertisedEndpoint, 2, 1, EndpointBytes)
					})
				}
			}
		})
	})
}
