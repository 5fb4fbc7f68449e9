package router

// SpotSend (command 21) is a one-way application message to a Spot. It
// carries the route fence of the exact target owner and the Message Follow
// hop count (0..8). Payload required; metadata allowed.
type SpotSend struct {
	Operation             OperationID // may be zero (one-way)
	MessageFollowHopCount uint8
	SourceSpotID          string // text8
	TargetSpot            SpotRouteFence
}

// SpotRequest (command 22) is a request to a Spot; the reply is command 20
// with the same correlation.
type SpotRequest struct {
	Correlation           uint64      // nonzero
	Operation             OperationID // nonzero
	MessageFollowHopCount uint8
	SourceSpotID          string
	TargetSpot            SpotRouteFence
}

// ActorSend (command 24) is a one-way application message to an Actor.
// BoundSession is present iff both bound-session flags are set.
type ActorSend struct {
	Operation             OperationID // may be zero (one-way)
	MessageFollowHopCount uint8
	SourceActor           *ActorRef // optional
	TargetActor           ActorRouteFence
	BoundSession          *BoundSessionTail
}

// ActorRequest (command 25) is a request to an Actor.
type ActorRequest struct {
	Correlation           uint64      // nonzero
	Operation             OperationID // nonzero
	MessageFollowHopCount uint8
	SourceActor           *ActorRef
	TargetActor           ActorRouteFence
	BoundSession          *BoundSessionTail
}

// Command implements Body.
func (*SpotSend) Command() Command { return CmdSpotSend }

// Command implements Body.
func (*SpotRequest) Command() Command { return CmdSpotRequest }

// Command implements Body.
func (*ActorSend) Command() Command { return CmdActorSend }

// Command implements Body.
func (*ActorRequest) Command() Command { return CmdActorRequest }

func hopCount(c *codec, v *uint8) { c.u8("messageFollowHopCount", v, 0, MessageFollowHopCount) }

func (b *SpotSend) code(c *codec) {
	b.Operation.code(c, "operation")
	hopCount(c, &b.MessageFollowHopCount)
	c.text8("sourceSpotId", &b.SourceSpotID)
	b.TargetSpot.code(c, "targetSpot")
}

func (b *SpotRequest) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Operation.nonzero(c, "operation")
	hopCount(c, &b.MessageFollowHopCount)
	c.text8("sourceSpotId", &b.SourceSpotID)
	b.TargetSpot.code(c, "targetSpot")
}

func (b *ActorSend) code(c *codec) {
	b.Operation.code(c, "operation")
	hopCount(c, &b.MessageFollowHopCount)
	optionalActorRef(c, "sourceActor", &b.SourceActor)
	b.TargetActor.code(c, "targetActor")
	boundSessionTail(c, &b.BoundSession)
}

func (b *ActorRequest) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Operation.nonzero(c, "operation")
	hopCount(c, &b.MessageFollowHopCount)
	optionalActorRef(c, "sourceActor", &b.SourceActor)
	b.TargetActor.code(c, "targetActor")
	boundSessionTail(c, &b.BoundSession)
}

// InstanceSpot (command 39) is a message to an Instance Spot; on the target it
// creates the Spot by cold activation when missing (spec §7.1). Payload
// required; metadata allowed.
type InstanceSpot struct {
	Route                InstanceRoute
	SourceNodeGeneration uint64 // nonzero
	SourceNodeRID        []byte
	SourceSpotID         string // optional ("" = absent)
	OperationKind        InstanceOperationKind
	// Operation is zero for a send to a Ready route and nonzero otherwise.
	Operation OperationID
	// ReplyRouteID is nonzero for a request and zero (absent on the wire) for
	// a send.
	ReplyRouteID uint64
}

// InstanceRoute (instance-route-v1): route kind u8, u16 length, then the
// Ready or ColdActivation case.
type InstanceRoute struct {
	Kind  InstanceRouteKind
	Ready *InstanceReadyRoute // set iff Kind == InstanceRouteReady
	Cold  *InstanceColdRoute  // set iff Kind == InstanceRouteColdActivation
}

// InstanceReadyRoute targets an already Ready Instance Spot under an exact
// authority fence.
type InstanceReadyRoute struct {
	TargetNodeRID        []byte
	TargetNodeGeneration uint64
	TargetSpotID         string
	Authority            AuthorityGenerationFence
}

// InstanceColdRoute asks the target to cold-activate the Instance Spot; it
// carries no authority fence (the source creates no owner or generation).
type InstanceColdRoute struct {
	TargetNodeRID           []byte
	TargetNodeGeneration    uint64
	TargetSpotID            string
	TargetMeshName          string
	StableType              string
	TargetDescriptorVersion string
	DeadlineUnixMs          uint64 // nonzero
}

// Command implements Body.
func (*InstanceSpot) Command() Command { return CmdInstanceSpot }

func (r *InstanceRoute) code(c *codec, name string) {
	c.obj(name, func() {
		enum8(c, "routeKind", &r.Kind)
		c.delimited("length", 2, 65535, func() {
			switch r.Kind {
			case InstanceRouteReady:
				c.unionOthers("coldActivation", r.Cold != nil)
				if p := unionCase(c, "ready", &r.Ready); p != nil {
					c.obj("ready", func() {
						c.rid("targetNodeRid", &p.TargetNodeRID)
						c.nz64("targetNodeGeneration", &p.TargetNodeGeneration)
						c.text8("targetSpotId", &p.TargetSpotID)
						p.Authority.code(c, "authority")
					})
				}
			case InstanceRouteColdActivation:
				c.unionOthers("ready", r.Ready != nil)
				if p := unionCase(c, "coldActivation", &r.Cold); p != nil {
					c.obj("coldActivation", func() {
						c.rid("targetNodeRid", &p.TargetNodeRID)
						c.nz64("targetNodeGeneration", &p.TargetNodeGeneration)
						c.text8("targetSpotId", &p.TargetSpotID)
						c.text8("targetMeshName", &p.TargetMeshName)
						c.text8("stableType", &p.StableType)
						c.text8("targetDescriptorVersion", &p.TargetDescriptorVersion)
						c.nz64("deadlineUnixMs", &p.DeadlineUnixMs)
					})
				}
			}
		})
	})
}

func (b *InstanceSpot) code(c *codec) {
	b.Route.code(c, "route")
	c.nz64("sourceNodeGeneration", &b.SourceNodeGeneration)
	c.rid("sourceNodeRid", &b.SourceNodeRID)
	c.optText8("sourceSpotId", &b.SourceSpotID)
	enum8(c, "operationKind", &b.OperationKind)
	b.Operation.code(c, "operation")
	if c.err != nil {
		return
	}
	// Schema semantic constraints of instanceSpot.
	if b.Route.Kind == InstanceRouteReady && b.OperationKind == InstanceSend {
		c.constraint("operation", !b.Operation.IsZero(), "a send to a Ready instance route carries operation id zero")
	} else if b.Operation.IsZero() {
		c.fail(ZeroNotAllowed, "operation", "requests and cold activations carry a nonzero operation id")
	}
	c.obj("replyRoute", func() {
		switch b.OperationKind {
		case InstanceRequest:
			c.nz64("replyRouteId", &b.ReplyRouteID)
		case InstanceSend:
			c.constraint("replyRouteId", b.ReplyRouteID != 0, "a send has no reply route")
		}
	})
}
