package router

// UserSpotCreate (command 47) asks the exact reserved target to create a User
// Spot into the slot the source reserved in the Location Store (spec §7).
// The creation content is read by the target from the Location Store, never
// carried here. The terminal answer is a command 20 reply whose tail is a
// UserSpotCreateTail.
type UserSpotCreate struct {
	Correlation          uint64      // nonzero
	Operation            OperationID // nonzero
	SourceNodeRID        []byte
	SourceNodeGeneration uint64 // nonzero
	SpotID               string
	StableType           string
	Reservation          ObjectReservationFence
	DeadlineUnixMs       uint64 // nonzero
}

// UserSpotClose (command 48) asks the owner to close an exact User Spot
// generation (spec §7.2); answered by a reply with a UserSpotCloseTail.
type UserSpotClose struct {
	Correlation          uint64      // nonzero
	Operation            OperationID // nonzero
	SourceNodeRID        []byte
	SourceNodeGeneration uint64 // nonzero
	Target               UserSpotCloseFence
	DeadlineUnixMs       uint64 // nonzero
}

// UserSpotCloseFence (user-spot-close-fence-v1): version 1, u16 length, then
// the fenced target.
type UserSpotCloseFence struct {
	Spot                             SpotRef
	TargetNodeRID                    []byte
	TargetNodeGeneration             uint64
	ExpectedAuthorityOwnerGeneration uint64
	ExpectedStoreVersion             string
}

// ActorCreate (command 49) asks the exact reserved target to create an Actor
// (spec §7); answered by a reply with an ActorCreateTail.
type ActorCreate struct {
	Correlation          uint64      // nonzero
	Operation            OperationID // nonzero
	SourceNodeRID        []byte
	SourceNodeGeneration uint64 // nonzero
	ActorID              string
	StableType           string
	Reservation          ObjectReservationFence
	DeadlineUnixMs       uint64 // nonzero
}

// Command implements Body.
func (*UserSpotCreate) Command() Command { return CmdUserSpotCreate }

// Command implements Body.
func (*UserSpotClose) Command() Command { return CmdUserSpotClose }

// Command implements Body.
func (*ActorCreate) Command() Command { return CmdActorCreate }

func (b *UserSpotCreate) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Operation.nonzero(c, "operation")
	c.rid("sourceNodeRid", &b.SourceNodeRID)
	c.nz64("sourceNodeGeneration", &b.SourceNodeGeneration)
	c.text8("spotId", &b.SpotID)
	c.text8("stableType", &b.StableType)
	b.Reservation.code(c, "reservation")
	c.nz64("deadlineUnixMs", &b.DeadlineUnixMs)
}

func (f *UserSpotCloseFence) code(c *codec, name string) {
	c.obj(name, func() {
		c.version("version")
		c.delimited("length", 2, 65535, func() {
			f.Spot.code(c, "spot")
			c.rid("targetNodeRid", &f.TargetNodeRID)
			c.nz64("targetNodeGeneration", &f.TargetNodeGeneration)
			c.nz64("expectedAuthorityOwnerGeneration", &f.ExpectedAuthorityOwnerGeneration)
			c.storeVersion("expectedStoreVersion", &f.ExpectedStoreVersion)
		})
	})
}

func (b *UserSpotClose) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Operation.nonzero(c, "operation")
	c.rid("sourceNodeRid", &b.SourceNodeRID)
	c.nz64("sourceNodeGeneration", &b.SourceNodeGeneration)
	b.Target.code(c, "target")
	c.nz64("deadlineUnixMs", &b.DeadlineUnixMs)
}

func (b *ActorCreate) code(c *codec) {
	c.nz64("correlation", &b.Correlation)
	b.Operation.nonzero(c, "operation")
	c.rid("sourceNodeRid", &b.SourceNodeRID)
	c.nz64("sourceNodeGeneration", &b.SourceNodeGeneration)
	c.text8("actorId", &b.ActorID)
	c.text8("stableType", &b.StableType)
	b.Reservation.code(c, "reservation")
	c.nz64("deadlineUnixMs", &b.DeadlineUnixMs)
}

// MessageFollow (command 50) is sent, after a successful relay by a previous
// owner, to the original sender's runtime so it drops its stale cached route
// (spec §7.3).
type MessageFollow struct {
	Route MessageFollowRouteV1
}

// MessageFollowRouteV1 (message-follow-route-v1): version 1, u32 length
// (≤ 16 MiB), then the fields below.
type MessageFollowRouteV1 struct {
	Source               MessageFollowRoute
	Target               MessageFollowRoute
	HopCount             uint8  // 1..8
	QueuedMessages       uint32 // 0..1024
	QueuedBytes          uint32 // 0..16 MiB
	OriginalOperation    OperationID
	OriginalReplyRouteID uint64 // nonzero for a request, zero for a one-way message
}

// MessageFollowRoute (message-follow-route): object kind u8, u16 length, then
// an actor or spot route fence.
type MessageFollowRoute struct {
	Kind  ObjectKind
	Actor *ActorRouteFence // set iff Kind == ObjectActor
	Spot  *SpotRouteFence  // set iff Kind == ObjectSpot
}

// Command implements Body.
func (*MessageFollow) Command() Command { return CmdMessageFollow }

func (r *MessageFollowRoute) code(c *codec, name string) {
	c.obj(name, func() {
		enum8(c, "objectKind", &r.Kind)
		c.delimited("length", 2, 65535, func() {
			switch r.Kind {
			case ObjectActor:
				c.unionOthers("spot", r.Spot != nil)
				if p := unionCase(c, "actor", &r.Actor); p != nil {
					p.code(c, "actor")
				}
			case ObjectSpot:
				c.unionOthers("actor", r.Actor != nil)
				if p := unionCase(c, "spot", &r.Spot); p != nil {
					p.code(c, "spot")
				}
			}
		})
	})
}

func (b *MessageFollow) code(c *codec) {
	r := &b.Route
	c.obj("route", func() {
		c.version("version")
		c.delimited("length", 4, MessageFollowBytes-5, func() { // whole structure ≤ messageFollowBytes
			r.Source.code(c, "source")
			r.Target.code(c, "target")
			c.u8("hopCount", &r.HopCount, 1, MessageFollowHopCount)
			c.u32("queuedMessages", &r.QueuedMessages, 0, MessageFollowMessages)
			c.u32("queuedBytes", &r.QueuedBytes, 0, MessageFollowBytes)
			r.OriginalOperation.code(c, "originalOperation")
			c.any64("originalReplyRouteId", &r.OriginalReplyRouteID)
		})
	})
}
