package record

import "encoding/hex"

// ClientServerDescriptor is the ClientServer server descriptor record (spec
// §3.4), stored under ClientServerPreimage(ChannelName, ServerRoutingID).
// OwnerID, LeaseGeneration and DescriptorRevision are written at the top
// level and inside "descriptor", as for MeshNodeDescriptor.
type ClientServerDescriptor struct {
	ChannelName         string
	ServerRoutingID     []byte // raw bytes; JSON serverRoutingIdHex
	LifecycleGeneration Generation
	DescriptorRevision  Generation
	Endpoint            string
	Weight              int // 0..10000
	State               State
	SecurityIdentity    string // 0..1024 bytes
	OwnerID             string
	LeaseGeneration     Generation
	UpdatedAt           EpochMillis
}

// FanoutPublisherDescriptor is the fanout publisher descriptor record (spec
// §3.4): the ClientServer fields minus weight, stored under
// FanoutPublisherPreimage(ChannelName, PublisherRoutingID).
type FanoutPublisherDescriptor struct {
	ChannelName         string
	PublisherRoutingID  []byte // raw bytes; JSON publisherRoutingIdHex
	LifecycleGeneration Generation
	DescriptorRevision  Generation
	Endpoint            string // advertised PUB endpoint
	State               State
	SecurityIdentity    string
	OwnerID             string
	LeaseGeneration     Generation
	UpdatedAt           EpochMillis
}

// channelDescriptor is the shape both records share; ridField names the
// routing id member and weight is nil for fanout.
type channelDescriptor struct {
	kind                Kind
	ridField            string
	channelName         string
	routingID           []byte
	lifecycleGeneration Generation
	descriptorRevision  Generation
	endpoint            string
	weight              *int
	state               State
	securityIdentity    string
	ownerID             string
	leaseGeneration     Generation
	updatedAt           EpochMillis
}

func (c *channelDescriptor) validate() error {
	v := &val{kind: c.kind}
	const p = "descriptor."
	v.name(p+"channelName", c.channelName)
	v.routingID(p+c.ridField, c.routingID)
	v.gen(p+"lifecycleGeneration", c.lifecycleGeneration)
	v.gen("descriptorRevision", c.descriptorRevision)
	v.text(p+"endpoint", c.endpoint, 1, MaxEndpointBytes, true)
	if c.weight != nil {
		v.rng(p+"weight", *c.weight, 0, MaxWeight)
	}
	v.enum(p+"state", string(c.state), c.state.valid())
	v.text(p+"securityIdentity", c.securityIdentity, 0, MaxSecurityIdentityBytes, true)
	v.name("ownerId", c.ownerID)
	v.gen("leaseGeneration", c.leaseGeneration)
	v.millis(p+"updatedAtEpochMs", c.updatedAt)
	return v.err
}

func (c *channelDescriptor) encode() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	ms := []jmember{
		mem("channelName", jStrV(c.channelName)),
		mem(c.ridField, jStrV(hex.EncodeToString(c.routingID))),
		mem("lifecycleGeneration", jDecStrV(uint64(c.lifecycleGeneration))),
		mem("descriptorRevision", jDecStrV(uint64(c.descriptorRevision))),
		mem("endpoint", jStrV(c.endpoint)),
		mem("state", jStrV(string(c.state))),
		mem("securityIdentity", jStrV(c.securityIdentity)),
		mem("ownerId", jStrV(c.ownerID)),
		mem("leaseGeneration", jDecStrV(uint64(c.leaseGeneration))),
		mem("updatedAtEpochMs", jDecStrV(uint64(c.updatedAt))),
	}
	if c.weight != nil {
		ms = append(ms, mem("weight", jUintV(uint64(*c.weight))))
	}
	root := descriptorEnvelope(c.ownerID, c.leaseGeneration, c.descriptorRevision, jObjV(ms...))
	return finish(c.kind, encodeCanonical(root))
}

func decodeChannel(kind Kind, ridField string, withWeight bool, value []byte) (channelDescriptor, error) {
	d, top, err := begin(kind, value)
	if err != nil {
		return channelDescriptor{}, err
	}
	o := top.child("descriptor")
	c := channelDescriptor{kind: kind, ridField: ridField}
	c.channelName = o.str("channelName")
	c.routingID = o.hexBytes(ridField)
	c.lifecycleGeneration = o.gen("lifecycleGeneration")
	c.endpoint = o.str("endpoint")
	if withWeight {
		w := o.number("weight")
		c.weight = &w
	}
	c.state = State(o.str("state"))
	c.securityIdentity = o.str("securityIdentity")
	c.updatedAt = o.millis("updatedAtEpochMs")
	c.ownerID, c.leaseGeneration, c.descriptorRevision = readCopies(d, top, o)
	o.end()
	top.end()
	if d.err != nil {
		return channelDescriptor{}, d.err
	}
	if err := c.validate(); err != nil {
		return channelDescriptor{}, err
	}
	return c, nil
}

func (d *ClientServerDescriptor) channel() *channelDescriptor {
	w := d.Weight
	return &channelDescriptor{
		kind: KindClientServer, ridField: "serverRoutingIdHex",
		channelName: d.ChannelName, routingID: d.ServerRoutingID,
		lifecycleGeneration: d.LifecycleGeneration, descriptorRevision: d.DescriptorRevision,
		endpoint: d.Endpoint, weight: &w, state: d.State, securityIdentity: d.SecurityIdentity,
		ownerID: d.OwnerID, leaseGeneration: d.LeaseGeneration, updatedAt: d.UpdatedAt,
	}
}

// Encode returns the canonical JSON value.
func (d ClientServerDescriptor) Encode() ([]byte, error) { return d.channel().encode() }

// Validate checks every field and the encoded size.
func (d ClientServerDescriptor) Validate() error {
	_, err := d.Encode()
	return err
}

// Preimage is ClientServerPreimage(d.ChannelName, d.ServerRoutingID).
func (d ClientServerDescriptor) Preimage() ([]byte, error) {
	return ClientServerPreimage(d.ChannelName, d.ServerRoutingID)
}

// DecodeClientServer reads a ClientServer server descriptor value.
func DecodeClientServer(value []byte) (ClientServerDescriptor, error) {
	c, err := decodeChannel(KindClientServer, "serverRoutingIdHex", true, value)
	if err != nil {
		return ClientServerDescriptor{}, err
	}
	return ClientServerDescriptor{
		ChannelName: c.channelName, ServerRoutingID: c.routingID,
		LifecycleGeneration: c.lifecycleGeneration, DescriptorRevision: c.descriptorRevision,
		Endpoint: c.endpoint, Weight: *c.weight, State: c.state, SecurityIdentity: c.securityIdentity,
		OwnerID: c.ownerID, LeaseGeneration: c.leaseGeneration, UpdatedAt: c.updatedAt,
	}, nil
}

func (d *FanoutPublisherDescriptor) channel() *channelDescriptor {
	return &channelDescriptor{
		kind: KindFanoutPublisher, ridField: "publisherRoutingIdHex",
		channelName: d.ChannelName, routingID: d.PublisherRoutingID,
		lifecycleGeneration: d.LifecycleGeneration, descriptorRevision: d.DescriptorRevision,
		endpoint: d.Endpoint, state: d.State, securityIdentity: d.SecurityIdentity,
		ownerID: d.OwnerID, leaseGeneration: d.LeaseGeneration, updatedAt: d.UpdatedAt,
	}
}

// Encode returns the canonical JSON value.
func (d FanoutPublisherDescriptor) Encode() ([]byte, error) { return d.channel().encode() }

// Validate checks every field and the encoded size.
func (d FanoutPublisherDescriptor) Validate() error {
	_, err := d.Encode()
	return err
}

// Preimage is FanoutPublisherPreimage(d.ChannelName, d.PublisherRoutingID).
func (d FanoutPublisherDescriptor) Preimage() ([]byte, error) {
	return FanoutPublisherPreimage(d.ChannelName, d.PublisherRoutingID)
}

// DecodeFanoutPublisher reads a fanout publisher descriptor value.
func DecodeFanoutPublisher(value []byte) (FanoutPublisherDescriptor, error) {
	c, err := decodeChannel(KindFanoutPublisher, "publisherRoutingIdHex", false, value)
	if err != nil {
		return FanoutPublisherDescriptor{}, err
	}
	return FanoutPublisherDescriptor{
		ChannelName: c.channelName, PublisherRoutingID: c.routingID,
		LifecycleGeneration: c.lifecycleGeneration, DescriptorRevision: c.descriptorRevision,
		Endpoint: c.endpoint, State: c.state, SecurityIdentity: c.securityIdentity,
		OwnerID: c.ownerID, LeaseGeneration: c.leaseGeneration, UpdatedAt: c.updatedAt,
	}, nil
}
