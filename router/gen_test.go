package router

import (
	"math"
	"math/rand/v2"
	"slices"
	"unicode/utf8"
)

// gen produces random valid values for property tests. Small lengths are
// favoured but every bound is reached now and then.
type gen struct{ r *rand.Rand }

func newGen(seed uint64) *gen { return &gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *gen) chance(n int) bool { return g.r.IntN(n) == 0 }

// length picks 0..max, usually small, sometimes max.
func (g *gen) length(lo, hi int) int {
	switch {
	case hi <= lo:
		return lo
	case g.chance(16):
		return hi
	case g.chance(2):
		return lo + g.r.IntN(min(8, hi-lo+1))
	default:
		return lo + g.r.IntN(min(64, hi-lo+1))
	}
}

var runePool = []rune{'a', 'z', 'A', '0', '-', '.', '/', ':', ' ', 'é', 'ß', '語', '🚀', '\u007f', '\u0001'}

// text returns valid UTF-8 without NUL, minB..maxB bytes.
func (g *gen) text(minB, maxB int) string {
	n := g.length(minB, maxB)
	b := make([]byte, 0, n)
	for len(b) < n {
		r := runePool[g.r.IntN(len(runePool))]
		if len(b)+utf8.RuneLen(r) > n {
			r = 'x'
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}

func (g *gen) text8() string    { return g.text(1, ShortTextBytes) }
func (g *gen) optText8() string { return g.text(0, ShortTextBytes) }
func (g *gen) storeVersion() string {
	if g.chance(32) {
		return g.text(AuthorityStoreVersionBytes, AuthorityStoreVersionBytes)
	}
	return g.text(1, 40)
}

func (g *gen) bytes(minB, maxB int) []byte {
	n := g.length(minB, maxB)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return b
}

func (g *gen) rid() []byte { return g.bytes(1, RIDBytes) }

func (g *gen) u64() uint64 {
	switch g.r.IntN(4) {
	case 0:
		return 0
	case 1:
		return math.MaxUint64
	default:
		return g.r.Uint64()
	}
}

func (g *gen) nz64() uint64 {
	if g.chance(8) {
		return MaxGeneration
	}
	if g.chance(4) {
		return 1
	}
	return 1 + g.r.Uint64N(MaxGeneration)
}

func (g *gen) ord64() uint64 {
	if g.chance(8) {
		return 0
	}
	return g.nz64()
}

func (g *gen) u32(lo, hi uint32) uint32 {
	if g.chance(8) {
		return hi
	}
	if g.chance(8) {
		return lo
	}
	return lo + uint32(g.r.Uint64N(uint64(hi-lo)+1))
}

func (g *gen) opID() OperationID {
	if g.chance(8) {
		return OperationID{}
	}
	return OperationID{g.u64(), g.u64()}
}

func (g *gen) nzOpID() OperationID {
	o := g.opID()
	if o.IsZero() {
		o.Low = 1
	}
	return o
}

func (g *gen) relocationID() RelocationID {
	r := RelocationID{g.u64(), g.u64()}
	if r.IsZero() {
		r.High = 1
	}
	return r
}

func (g *gen) actorRef() ActorRef { return ActorRef{g.text8(), g.nz64()} }
func (g *gen) spotRef() SpotRef   { return SpotRef{g.text8(), g.nz64()} }

func (g *gen) spotFence() SpotRouteFence {
	return SpotRouteFence{g.spotRef(), g.rid(), g.nz64(), g.nz64(), g.nz64()}
}

func (g *gen) actorFence() ActorRouteFence {
	return ActorRouteFence{g.actorRef(), g.rid(), g.nz64(), g.nz64(), g.nz64()}
}

func (g *gen) optActor() *ActorRef {
	if g.chance(2) {
		return nil
	}
	a := g.actorRef()
	return &a
}

func (g *gen) hop() uint8 { return uint8(g.r.IntN(MessageFollowHopCount + 1)) }

func (g *gen) sortedUnique(n int, item func() string) []string {
	set := map[string]bool{}
	for range n {
		set[item()] = true
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func (g *gen) extension() DescriptorExtension {
	x := DescriptorExtension{
		RuntimeState:         RuntimeState(g.r.IntN(5)),
		ApplicationVersion:   int64(g.ord64()),
		ObjectRole:           ObjectRole(g.r.IntN(3)),
		PlacementWeight:      g.u32(0, WeightMax),
		ActiveCapacityLimit:  g.u32(1, ObjectTypeCapacityMaximum),
		PendingCapacityLimit: g.u32(0, ObjectTypeCapacityMaximum),
		ActiveCapacityUsed:   g.u32(0, math.MaxUint32),
		PendingCapacityUsed:  g.u32(0, math.MaxUint32),
	}
	caps := g.sortedUnique(g.r.IntN(4), g.text8)
	if !slices.Contains(caps, RequiredProtocolCapability) {
		caps = append(caps, RequiredProtocolCapability)
		slices.Sort(caps)
	}
	x.ProtocolCapabilities = caps
	if g.chance(2) {
		x.SpotTypes = g.sortedUnique(g.r.IntN(4), g.text8)
	}
	if g.chance(2) {
		seen := map[[2]string]bool{}
		x.StatefulCapabilities = []StatefulCapability{}
		for range g.r.IntN(4) {
			p := RelocationPolicy(g.r.IntN(3))
			e := StatefulCapability{
				ObjectKind: StatefulObjectKind(1 + g.r.IntN(3)), Type: g.text8(), RelocationPolicy: p,
				ActiveCapacityLimit: g.u32(1, ObjectTypeCapacityMaximum), PendingCapacityLimit: g.u32(0, ObjectTypeCapacityMaximum),
				HasSnapshotAdapter: p == PolicySnapshot, Available: g.ord64(),
			}
			k := [2]string{e.ObjectKind.String(), e.Type}
			if !seen[k] {
				seen[k] = true
				x.StatefulCapabilities = append(x.StatefulCapabilities, e)
			}
		}
		slices.SortFunc(x.StatefulCapabilities, func(a, b StatefulCapability) int {
			if a.ObjectKind != b.ObjectKind {
				return int(a.ObjectKind) - int(b.ObjectKind)
			}
			if a.Type < b.Type {
				return -1
			}
			if a.Type > b.Type {
				return 1
			}
			return 0
		})
	}
	if g.chance(2) {
		w := g.optText8()
		x.MaintenanceWave = &w
	}
	if g.chance(3) {
		for id := 13; id < 256; id += 1 + g.r.IntN(120) {
			x.Unknown = append(x.Unknown, ExtensionField{ID: uint8(id), Value: g.bytes(0, 16)})
		}
		if g.chance(2) {
			x.Unknown = append([]ExtensionField{{ID: 0, Value: g.bytes(0, 4)}}, x.Unknown...)
		}
	}
	return x
}

func (g *gen) admission() ServiceAdmission {
	if g.chance(2) {
		chans := g.sortedUnique(g.r.IntN(5), g.text8)
		entries := make([]ChannelEntry, len(chans))
		for i, n := range chans {
			entries[i] = ChannelEntry{n, g.u32(0, WeightMax)}
		}
		if len(entries) == 0 && g.chance(2) {
			entries = nil
		}
		if entries != nil && len(entries) == 0 {
			entries = nil
		}
		return ServiceAdmission{Topology: TopologyRouteMesh, RouteMesh: &RouteMeshAdmission{
			MeshName: g.text8(), SecurityIdentity: g.text8(), LifecycleGeneration: g.nz64(),
			DescriptorRevision: g.nz64(), AdvertisedEndpoint: g.text(1, EndpointBytes),
			Channels: entries, Extension: g.extension(),
		}}
	}
	cs := &ClientServerAdmission{}
	if g.chance(2) {
		cs.Role = RoleClient
		cs.Client = &ClientAdmission{g.text8(), g.text8(), g.u32(1, math.MaxUint32)}
	} else {
		cs.Role = RoleServer
		cs.Server = &ServerAdmission{
			ChannelName: g.text8(), ServerRID: g.rid(), LifecycleGeneration: g.nz64(), DescriptorRevision: g.nz64(),
			Weight: g.u32(0, WeightMax), RuntimeState: RuntimeState(g.r.IntN(5)), SecurityIdentity: g.text8(),
			NormalizedEffectiveMaxMessageBytes: g.u32(1, math.MaxUint32), AdvertisedEndpoint: g.text(1, EndpointBytes),
		}
	}
	return ServiceAdmission{Topology: TopologyClientServer, ClientServer: cs}
}

func (g *gen) reservation() ObjectReservationFence {
	return ObjectReservationFence{g.text8(), g.storeVersion(), g.nz64(), g.nz64(), g.rid(), g.nz64(), g.text8(), g.nz64(), g.u32(1, math.MaxUint32)}
}

func (g *gen) followRoute() MessageFollowRoute {
	if g.chance(2) {
		f := g.actorFence()
		return MessageFollowRoute{Kind: ObjectActor, Actor: &f}
	}
	f := g.spotFence()
	return MessageFollowRoute{Kind: ObjectSpot, Spot: &f}
}

func (g *gen) binding() RelocationBinding {
	return RelocationBinding{g.relocationID(), g.nz64(), SourceFence{g.text8(), g.nz64(), g.rid(), g.nz64()}}
}

// replyTail returns a random ok-reply tail and the operation kind it answers.
func (g *gen) replyTail() (ReplyTail, MeshOperationKind) {
	switch g.r.IntN(8) {
	case 0:
		return &ActorLookupTail{g.actorRef(), g.text8(), g.nz64(), g.nz64()}, OpActorLookup
	case 1:
		if g.chance(2) {
			s := g.spotRef()
			return &ActorJoinTail{JoinAccepted, &s}, OpActorJoin
		}
		t := &ActorJoinTail{Result: JoinRejected}
		if g.chance(2) {
			s := g.spotRef()
			t.Spot = &s
		}
		return t, OpActorJoin
	case 2:
		return &StreamBindTail{g.nz64(), g.nz64()}, OpStreamBind
	case 3:
		return &UserSpotCreateTail{CreateResult(1 + g.r.IntN(3)), g.spotRef()}, OpUserSpotCreate
	case 4:
		return &UserSpotCloseTail{g.chance(2)}, OpUserSpotClose
	case 5:
		t := &ActorCreateTail{Result: CreateResult(1 + g.r.IntN(3))}
		if t.Result != CreateRejected {
			a := g.actorRef()
			t.Actor = &a
		}
		return t, OpActorCreate
	case 6:
		return nil, OpSpotRequest
	default:
		return nil, OpNone
	}
}

func (g *gen) payload() *Payload {
	return &Payload{PacketName: g.text(1, PacketNameBytes), ContentType: g.text(1, ContentTypeBytes), Data: g.bytes(0, 300)}
}

func (g *gen) metadata() []byte {
	n := g.r.IntN(5)
	var es []MetadataEntry
	seen := map[string]bool{}
	for range n {
		k := g.text(1, 12)
		if seen[k] {
			continue
		}
		seen[k] = true
		es = append(es, MetadataEntry{k, g.text(0, 60)})
	}
	b, err := EncodeMetadata(es)
	if err != nil {
		panic(err)
	}
	return b
}

// sample is a random valid record plus, for replies, the operation kind
// that resolves its tail.
type sample struct {
	rec  *Record
	kind MeshOperationKind
}

// record returns a random valid record for cmd.
func (g *gen) record(cmd Command) sample {
	var body Body
	kind := OpNone
	switch cmd {
	case CmdHello:
		body = &Hello{g.admission()}
	case CmdAdmit:
		body = &Admit{g.admission()}
	case CmdReject:
		body = &Reject{RejectReason(1 + g.r.IntN(12))}
	case CmdLivenessProbe:
		body = &LivenessProbe{g.nz64()}
	case CmdLivenessAck:
		body = &LivenessAck{g.nz64()}
	case CmdReply:
		rep := &Reply{Correlation: g.nz64()}
		switch g.r.IntN(3) {
		case 0:
			rep.Tail, kind = g.replyTail()
		case 1:
			rep.Result = []TerminalResult{ResultTimedOut, ResultTerminated, ResultBusy, ResultNotConnected,
				ResultInvalidArgument, ResultInvalidState, ResultNotSupported, ResultBackpressured}[g.r.IntN(8)]
		default:
			codes := []FrameworkErrorCode{}
			for c := range failureCodes {
				if c != FailNone {
					codes = append(codes, c)
				}
			}
			slices.Sort(codes)
			rep.FailureCode = codes[g.r.IntN(len(codes))]
			rep.Result = rep.FailureCode.TerminalResult()
		}
		body = rep
	case CmdSpotSend:
		body = &SpotSend{g.opID(), g.hop(), g.text8(), g.spotFence()}
	case CmdSpotRequest:
		body = &SpotRequest{g.nz64(), g.nzOpID(), g.hop(), g.text8(), g.spotFence()}
	case CmdActorSend:
		b := &ActorSend{g.opID(), g.hop(), g.optActor(), g.actorFence(), nil}
		if g.chance(2) {
			b.BoundSession = &BoundSessionTail{g.rid(), g.nz64(), g.nz64()}
		}
		body = b
	case CmdActorRequest:
		b := &ActorRequest{g.nz64(), g.nzOpID(), g.hop(), g.optActor(), g.actorFence(), nil}
		if g.chance(2) {
			b.BoundSession = &BoundSessionTail{g.rid(), g.nz64(), g.nz64()}
		}
		body = b
	case CmdInstanceSpot:
		b := &InstanceSpot{SourceNodeGeneration: g.nz64(), SourceNodeRID: g.rid(), SourceSpotID: g.optText8()}
		if g.chance(2) {
			b.Route = InstanceRoute{Kind: InstanceRouteReady, Ready: &InstanceReadyRoute{g.rid(), g.nz64(), g.text8(),
				AuthorityGenerationFence{g.nz64(), g.text8(), g.nz64(), g.nz64(), g.storeVersion()}}}
		} else {
			b.Route = InstanceRoute{Kind: InstanceRouteColdActivation, Cold: &InstanceColdRoute{g.rid(), g.nz64(), g.text8(),
				g.text8(), g.text8(), g.text8(), g.nz64()}}
		}
		b.OperationKind = InstanceOperationKind(1 + g.r.IntN(2))
		if b.OperationKind == InstanceRequest {
			b.ReplyRouteID = g.nz64()
		}
		if b.Route.Kind == InstanceRouteColdActivation || b.OperationKind == InstanceRequest {
			b.Operation = g.nzOpID()
		}
		body = b
	case CmdSessionRelocationRoute:
		b := &SessionRelocationRoute{
			Relocation:  g.relocationID(),
			Coordinator: RelocationCoordinatorFence{g.text8(), g.nz64(), g.rid(), g.nz64(), g.storeVersion()},
			Actor:       g.actorRef(), SessionOwnerNodeRID: g.rid(), SessionOwnerNodeGeneration: g.nz64(),
			SessionOwnerID: g.text8(), SessionOwnerLeaseGeneration: g.nz64(), SessionRID: g.rid(), BindingGeneration: g.nz64(),
		}
		if g.chance(2) {
			b.SenderRole = []RelocationRole{RoleTarget, RoleCoordinator}[g.r.IntN(2)]
			b.Route = SessionRouteUpdate{Action: RouteCommit, Commit: &SessionRouteCommit{g.nz64(), g.nz64(), g.rid(), g.nz64(), g.ord64()}}
		} else {
			b.SenderRole = []RelocationRole{RoleSource, RoleCoordinator}[g.r.IntN(2)]
			b.Route = SessionRouteUpdate{Action: RouteAbort, Abort: &SessionRouteAbort{g.nz64()}}
		}
		body = b
	case CmdUserSpotCreate:
		body = &UserSpotCreate{g.nz64(), g.nzOpID(), g.rid(), g.nz64(), g.text8(), g.text8(), g.reservation(), g.nz64()}
	case CmdUserSpotClose:
		body = &UserSpotClose{g.nz64(), g.nzOpID(), g.rid(), g.nz64(),
			UserSpotCloseFence{g.spotRef(), g.rid(), g.nz64(), g.nz64(), g.storeVersion()}, g.nz64()}
	case CmdActorCreate:
		body = &ActorCreate{g.nz64(), g.nzOpID(), g.rid(), g.nz64(), g.text8(), g.text8(), g.reservation(), g.nz64()}
	case CmdMessageFollow:
		body = &MessageFollow{MessageFollowRouteV1{g.followRoute(), g.followRoute(), uint8(1 + g.r.IntN(MessageFollowHopCount)),
			g.u32(0, MessageFollowMessages), g.u32(0, MessageFollowBytes), g.opID(), g.u64()}}
	case CmdRelocationPrepare:
		b := &RelocationPrepare{Correlation: g.nz64(), Binding: g.binding(),
			Object:        RelocationObject{StatefulObjectKind(1 + g.r.IntN(3)), g.text8(), g.text8(), g.nz64(), g.nz64()},
			TargetNodeRID: g.rid(), TargetNodeGeneration: g.nz64(), CRC32C: g.u32(0, math.MaxUint32), DeadlineUnixMs: g.nz64()}
		if !g.chance(8) {
			b.ChunkCount = g.u32(1, RelocationChunkCount)
			lo := uint64(b.ChunkCount)
			hi := min(uint64(b.ChunkCount)*RelocationChunkBytes, RelocationLogicalBytes)
			b.TotalLength = lo + g.r.Uint64N(hi-lo+1)
		}
		body = b
	case CmdRelocationState:
		body = &RelocationState{g.binding(), g.u32(0, RelocationChunkCount-1), g.bytes(1, 2000)}
	case CmdRelocationReady:
		b := &RelocationReady{Correlation: g.nz64(), Relocation: g.relocationID(), TargetAttempt: g.nz64(), Outcome: RelocationRelayReady}
		if g.chance(2) {
			b.Outcome = RelocationFailed
			b.Failure = RelocationFailure(1 + g.r.IntN(9))
			b.Detail = g.optText8()
		}
		body = b
	case CmdRelocationCutover:
		b := &RelocationCutover{Binding: g.binding(), RelayedCount: g.ord64()}
		if b.RelayedCount != 0 {
			b.RelayedCRC32C = g.u32(0, math.MaxUint32)
		}
		body = b
	case CmdRelocationCancel:
		body = &RelocationCancel{g.binding()}
	case CmdLinkSequence:
		body = &LinkSequence{Next: g.nz64(), Run: g.nz64()}
	default:
		panic("no generator for " + cmd.String())
	}
	spec := commandTable[cmd]
	var meta []byte
	if spec.allowed&FlagMetadata != 0 && g.chance(2) {
		meta = g.metadata()
	}
	var p *Payload
	switch spec.payload {
	case payloadRequired:
		p = g.payload()
	case payloadOptional:
		if rep := body.(*Reply); rep.Result == ResultOK && g.chance(2) {
			if t, ok := rep.Tail.(*UserSpotCreateTail); ok && t.Result == CreateExisting {
				break
			}
			if t, ok := rep.Tail.(*ActorCreateTail); ok && t.Result == CreateExisting {
				break
			}
			p = g.payload()
		}
	}
	return sample{NewRecord(body, meta, p), kind}
}
