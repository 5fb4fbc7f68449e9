package router

import "fmt"

// Bounds of service wire v1 used by the spoken commands (schema "bounds").
const (
	RIDBytes                      = 255
	ShortTextBytes                = 255
	EndpointBytes                 = 4096
	MetadataBytes                 = 1024
	PacketNameBytes               = 255
	ContentTypeBytes              = 255
	AuthorityStoreVersionBytes    = 4096
	WireU32CompleteMessageBytes   = 4294967295
	ApplicationPayloadAbsoluteMax = 4294966774 // complete message minus the largest envelope overhead
	DescriptorEnvelopeBytes       = 1048576
	WeightMax                     = 100
	ObjectTypeCapacityMaximum     = 2147483647
	MessageFollowHopCount         = 8
	MessageFollowMessages         = 1024
	MessageFollowBytes            = 16777216
	SortedVectorMaxItems          = 1024 // sorted-text8-vector and stateful-capability-vector
	// MaxGeneration is the largest nonzero-u64 / ordinal-or-zero value
	// (2^63-1): generations travel as decimal strings in JSON and as int64 in
	// some runtimes.
	MaxGeneration = 1<<63 - 1
	// MaxApplicationVersion bounds descriptor applicationVersion (i64 ≥ 0).
	MaxApplicationVersion = 1<<63 - 1
	// RequiredProtocolCapability must be listed in every route-mesh
	// descriptor's protocolCapabilities.
	RequiredProtocolCapability = "framework-service-v11"
	// CapabilitySessionUnbind is the project's protocol capability of a
	// node that takes a closed Session's unbind (command 24 with
	// meshnode.control=unbind, docs/PROTOCOL.md) and drops the binding: a
	// node without it would queue that empty message for the application,
	// so it is sent (and passed on) only to peers that list it — a mesh
	// in a rolling upgrade keeps working. meshnode nodes list it through
	// transport.Config.Capabilities.
	CapabilitySessionUnbind = "meshnode-session-unbind-v1"
	// CapabilityBarrierHeld: the node takes the notice that a route-switch
	// barrier it sent, or a message of one of its bound Sessions, is held
	// on purpose (one-way 21/24 with meshnode.control=barrier-held), and
	// ignores one about neither; sent only to peers that list it, for the
	// same reason.
	CapabilityBarrierHeld = "meshnode-barrier-held-v1"
	// CapabilityLinkSequence: the node's transport takes command 56
	// (LinkSequence) and delivers each numbered one-way message of a peer
	// run once, dropping one it already delivered. A link numbers its
	// messages only to a peer that lists it; the transport lists it itself
	// (docs/TRANSPORT.md "Delivered once").
	CapabilityLinkSequence = "meshnode-link-sequence-v1"
)

// enumName names v, or "kind(N)" for a value the schema does not define.
// The number is printed as an integer: %v of v calls v.String, which is
// this function again — an undefined value (a zero field of a record built
// in code) overflowed the stack, a fatal error no recover catches.
func enumName[T ~uint8 | ~uint32](m map[T]string, v T, kind string) string {
	if s, ok := m[v]; ok {
		return s
	}
	return fmt.Sprintf("%s(%d)", kind, uint64(v))
}

func enumValid[T comparable](m map[T]string, v T) bool {
	_, ok := m[v]
	return ok
}

// RejectReason (reject-reason, u32) says why admission was refused.
type RejectReason uint32

// Reject reasons.
const (
	RejectProtocolVersionUnsupported RejectReason = 1
	RejectTopologyMismatch           RejectReason = 2
	RejectIdentityMismatch           RejectReason = 3
	RejectSecurityIdentityMismatch   RejectReason = 4
	RejectChannelMismatch            RejectReason = 5
	RejectLifecycleGenerationStale   RejectReason = 6
	RejectDescriptorRevisionStale    RejectReason = 7
	RejectCapabilityMismatch         RejectReason = 8
	RejectRuntimeNotServing          RejectReason = 9
	RejectDuplicateConnection        RejectReason = 10
	RejectInvalidDescriptor          RejectReason = 11
	RejectResourceLimit              RejectReason = 12
)

var rejectReasonNames = map[RejectReason]string{
	1: "protocolVersionUnsupported", 2: "topologyMismatch", 3: "identityMismatch",
	4: "securityIdentityMismatch", 5: "channelMismatch", 6: "lifecycleGenerationStale",
	7: "descriptorRevisionStale", 8: "capabilityMismatch", 9: "runtimeNotServing",
	10: "duplicateConnection", 11: "invalidDescriptor", 12: "resourceLimit",
}

func (v RejectReason) String() string { return enumName(rejectReasonNames, v, "rejectReason") }
func (v RejectReason) valid() bool    { return enumValid(rejectReasonNames, v) }

// TopologyKind (service-topology-kind, u8) discriminates service-admission.
type TopologyKind uint8

// Topology kinds.
const (
	TopologyRouteMesh    TopologyKind = 1
	TopologyClientServer TopologyKind = 2
)

var topologyNames = map[TopologyKind]string{1: "routeMesh", 2: "clientServer"}

func (v TopologyKind) String() string { return enumName(topologyNames, v, "topologyKind") }
func (v TopologyKind) valid() bool    { return enumValid(topologyNames, v) }

// ClientServerRole (client-server-role, u8).
type ClientServerRole uint8

// Client/server roles.
const (
	RoleClient ClientServerRole = 1
	RoleServer ClientServerRole = 2
)

var clientServerRoleNames = map[ClientServerRole]string{1: "client", 2: "server"}

func (v ClientServerRole) String() string { return enumName(clientServerRoleNames, v, "role") }
func (v ClientServerRole) valid() bool    { return enumValid(clientServerRoleNames, v) }

// clientServerDirection (client-server-direction, u8) has the single value
// clientToServer; it is a wire constant, not a Go field.
type clientServerDirection uint8

var directionNames = map[clientServerDirection]string{1: "clientToServer"}

func (v clientServerDirection) String() string { return enumName(directionNames, v, "direction") }
func (v clientServerDirection) valid() bool    { return enumValid(directionNames, v) }

// RuntimeState (runtime-state, u8).
type RuntimeState uint8

// Runtime states.
const (
	RuntimePreparing RuntimeState = 0
	RuntimeServing   RuntimeState = 1
	RuntimeDraining  RuntimeState = 2
	RuntimeStopped   RuntimeState = 3
	RuntimeError     RuntimeState = 4
)

var runtimeStateNames = map[RuntimeState]string{0: "preparing", 1: "serving", 2: "draining", 3: "stopped", 4: "error"}

func (v RuntimeState) String() string { return enumName(runtimeStateNames, v, "runtimeState") }
func (v RuntimeState) valid() bool    { return enumValid(runtimeStateNames, v) }

// ObjectRole (object-role, u8).
type ObjectRole uint8

// Object roles.
const (
	ObjectRoleNone   ObjectRole = 0
	ObjectRoleClient ObjectRole = 1
	ObjectRoleServer ObjectRole = 2
)

var objectRoleNames = map[ObjectRole]string{0: "none", 1: "client", 2: "server"}

func (v ObjectRole) String() string { return enumName(objectRoleNames, v, "objectRole") }
func (v ObjectRole) valid() bool    { return enumValid(objectRoleNames, v) }

// StatefulObjectKind (stateful-object-kind, u8).
type StatefulObjectKind uint8

// Stateful object kinds.
const (
	StatefulActor        StatefulObjectKind = 1
	StatefulUserSpot     StatefulObjectKind = 2
	StatefulInstanceSpot StatefulObjectKind = 3
)

var statefulKindNames = map[StatefulObjectKind]string{1: "actor", 2: "userSpot", 3: "instanceSpot"}

func (v StatefulObjectKind) String() string { return enumName(statefulKindNames, v, "objectKind") }
func (v StatefulObjectKind) valid() bool    { return enumValid(statefulKindNames, v) }

// RelocationPolicy (relocation-policy-kind, u8).
type RelocationPolicy uint8

// Relocation policies.
const (
	PolicyDisabled RelocationPolicy = 0
	PolicyRecreate RelocationPolicy = 1
	PolicySnapshot RelocationPolicy = 2
)

var policyNames = map[RelocationPolicy]string{0: "disabled", 1: "recreate", 2: "snapshot"}

func (v RelocationPolicy) String() string { return enumName(policyNames, v, "relocationPolicy") }
func (v RelocationPolicy) valid() bool    { return enumValid(policyNames, v) }

// TerminalResult (request-terminal-result, u32) is a reply's outcome class.
type TerminalResult uint32

// Terminal results.
const (
	ResultOK              TerminalResult = 0
	ResultTimedOut        TerminalResult = 101
	ResultNotFound        TerminalResult = 102
	ResultTerminated      TerminalResult = 103
	ResultProtocolError   TerminalResult = 104
	ResultInternalError   TerminalResult = 105
	ResultRejected        TerminalResult = 106
	ResultConflict        TerminalResult = 107
	ResultBusy            TerminalResult = 108
	ResultNotConnected    TerminalResult = 109
	ResultInvalidArgument TerminalResult = 110
	ResultInvalidState    TerminalResult = 111
	ResultNotSupported    TerminalResult = 112
	ResultBackpressured   TerminalResult = 113
)

var terminalResultNames = map[TerminalResult]string{
	0: "ok", 101: "timedOut", 102: "notFound", 103: "terminated", 104: "protocolError",
	105: "internalError", 106: "rejected", 107: "conflict", 108: "busy", 109: "notConnected",
	110: "invalidArgument", 111: "invalidState", 112: "notSupported", 113: "backpressured",
}

func (v TerminalResult) String() string { return enumName(terminalResultNames, v, "terminalResult") }
func (v TerminalResult) valid() bool    { return enumValid(terminalResultNames, v) }

// isBoundaryFailure reports the results that carry failure code none and no
// payload (schema terminal-failure-integrity "boundaryFailure").
func (v TerminalResult) isBoundaryFailure() bool {
	switch v {
	case ResultTimedOut, ResultTerminated, ResultBusy, ResultNotConnected,
		ResultInvalidArgument, ResultInvalidState, ResultNotSupported, ResultBackpressured:
		return true
	}
	return false
}

// FrameworkErrorCode (framework-error-code, u32) refines a typed failure.
// Wire values 23..32 are public-only and never valid on the wire.
type FrameworkErrorCode uint32

// Framework error codes (wire values).
const (
	FailNone                         FrameworkErrorCode = 0
	FailActorRouteNotFound           FrameworkErrorCode = 1
	FailActorCreateFailed            FrameworkErrorCode = 2
	FailActorAlreadyExists           FrameworkErrorCode = 3
	FailActorTypeMismatch            FrameworkErrorCode = 4
	FailSpotCreateFailed             FrameworkErrorCode = 5
	FailSpotRouteNotFound            FrameworkErrorCode = 6
	FailSpotTypeMismatch             FrameworkErrorCode = 7
	FailActorSessionNotBound         FrameworkErrorCode = 8
	FailHandlerNotFound              FrameworkErrorCode = 9
	FailRouteHandlerNotFound         FrameworkErrorCode = 10
	FailActorDispatchHandlerNotFound FrameworkErrorCode = 11
	FailPayloadDecodeFailed          FrameworkErrorCode = 12
	FailRouteNotConnected            FrameworkErrorCode = 13
	FailRequestTargetNotFound        FrameworkErrorCode = 14
	FailRequestRejected              FrameworkErrorCode = 15
	FailRequestProtocolError         FrameworkErrorCode = 16
	FailRequestFailed                FrameworkErrorCode = 17
	FailWorkerQueueFull              FrameworkErrorCode = 18
	FailWorkerTimedOut               FrameworkErrorCode = 19
	FailWorkerFailed                 FrameworkErrorCode = 20
	FailActorLocationStale           FrameworkErrorCode = 21
	FailActorCreateRejected          FrameworkErrorCode = 22
	FailSpotGenerationStale          FrameworkErrorCode = 33
	FailSpotMoving                   FrameworkErrorCode = 34
	FailRelocationDataLost           FrameworkErrorCode = 35
)

type failureInfo struct {
	name   string
	result TerminalResult // the exact terminal result this code must travel with
}

var failureCodes = map[FrameworkErrorCode]failureInfo{
	0:  {"none", ResultOK},
	1:  {"actorRouteNotFound", ResultNotFound},
	2:  {"actorCreateFailed", ResultInternalError},
	3:  {"actorAlreadyExists", ResultConflict},
	4:  {"actorTypeMismatch", ResultConflict},
	5:  {"spotCreateFailed", ResultInternalError},
	6:  {"spotRouteNotFound", ResultNotFound},
	7:  {"spotTypeMismatch", ResultConflict},
	8:  {"actorSessionNotBound", ResultNotFound},
	9:  {"handlerNotFound", ResultNotFound},
	10: {"routeHandlerNotFound", ResultNotFound},
	11: {"actorDispatchHandlerNotFound", ResultNotFound},
	12: {"payloadDecodeFailed", ResultProtocolError},
	13: {"routeNotConnected", ResultInternalError},
	14: {"requestTargetNotFound", ResultNotFound},
	15: {"requestRejected", ResultRejected},
	16: {"requestProtocolError", ResultProtocolError},
	17: {"requestFailed", ResultInternalError},
	18: {"workerQueueFull", ResultRejected},
	19: {"workerTimedOut", ResultInternalError},
	20: {"workerFailed", ResultInternalError},
	21: {"actorLocationStale", ResultConflict},
	22: {"actorCreateRejected", ResultRejected},
	33: {"spotGenerationStale", ResultConflict},
	34: {"spotMoving", ResultConflict},
	35: {"relocationDataLost", ResultInternalError},
}

func (v FrameworkErrorCode) String() string {
	if f, ok := failureCodes[v]; ok {
		return f.name
	}
	return fmt.Sprintf("frameworkError(%d)", uint32(v))
}

func (v FrameworkErrorCode) valid() bool { _, ok := failureCodes[v]; return ok }

// PublicValue is the public API value of a wire failure code
// ("wire-value-minus-one"); ok is false for FailNone.
func (v FrameworkErrorCode) PublicValue() (public uint32, ok bool) {
	if v == FailNone || !v.valid() {
		return 0, false
	}
	return uint32(v) - 1, true
}

// TerminalResult is the one terminal result a typed failure code travels
// with (schema exactResultByFailureCode); ResultOK for FailNone.
func (v FrameworkErrorCode) TerminalResult() TerminalResult { return failureCodes[v].result }

// MeshOperationKind (mesh-operation-kind, u32) names the original request a
// reply answers; it selects the reply's request-specific tail.
type MeshOperationKind uint32

// Mesh operation kinds.
const (
	OpNone                MeshOperationKind = 0
	OpNodeRequest         MeshOperationKind = 1
	OpChannelRequest      MeshOperationKind = 2
	OpSpotRequest         MeshOperationKind = 3
	OpActorRequest        MeshOperationKind = 4
	OpActorLookup         MeshOperationKind = 5
	OpActorDestroy        MeshOperationKind = 6
	OpActorJoin           MeshOperationKind = 7
	OpActorLeave          MeshOperationKind = 8
	OpStreamBind          MeshOperationKind = 9
	OpStreamUnbind        MeshOperationKind = 10
	OpStreamClose         MeshOperationKind = 11
	OpInstanceSpotRequest MeshOperationKind = 12
	OpUserSpotCreate      MeshOperationKind = 13
	OpUserSpotClose       MeshOperationKind = 14
	OpActorCreate         MeshOperationKind = 15
)

var meshOpNames = map[MeshOperationKind]string{
	0: "none", 1: "nodeRequest", 2: "channelRequest", 3: "spotRequest", 4: "actorRequest",
	5: "actorLookup", 6: "actorDestroy", 7: "actorJoin", 8: "actorLeave", 9: "streamBind",
	10: "streamUnbind", 11: "streamClose", 12: "instanceSpotRequest", 13: "userSpotCreate",
	14: "userSpotClose", 15: "actorCreate",
}

func (v MeshOperationKind) String() string { return enumName(meshOpNames, v, "operationKind") }
func (v MeshOperationKind) valid() bool    { return enumValid(meshOpNames, v) }

// ActorJoinResult (actor-join-result, u32).
type ActorJoinResult uint32

// Actor join results.
const (
	JoinAccepted ActorJoinResult = 0
	JoinRejected ActorJoinResult = 1
)

var joinResultNames = map[ActorJoinResult]string{0: "accepted", 1: "rejected"}

func (v ActorJoinResult) String() string { return enumName(joinResultNames, v, "joinResult") }
func (v ActorJoinResult) valid() bool    { return enumValid(joinResultNames, v) }

// CreateResult (user-spot-create-result and actor-create-result, both u8
// with the same values) is the terminal state of a remote creation.
type CreateResult uint8

// Creation terminal states.
const (
	CreateExisting CreateResult = 1
	CreateCreated  CreateResult = 2
	CreateRejected CreateResult = 3
)

var createResultNames = map[CreateResult]string{1: "existing", 2: "created", 3: "rejected"}

func (v CreateResult) String() string { return enumName(createResultNames, v, "createResult") }
func (v CreateResult) valid() bool    { return enumValid(createResultNames, v) }

// InstanceRouteKind (instance-route-kind, u8).
type InstanceRouteKind uint8

// Instance route kinds.
const (
	InstanceRouteReady          InstanceRouteKind = 1
	InstanceRouteColdActivation InstanceRouteKind = 2
)

var instanceRouteNames = map[InstanceRouteKind]string{1: "ready", 2: "coldActivation"}

func (v InstanceRouteKind) String() string { return enumName(instanceRouteNames, v, "routeKind") }
func (v InstanceRouteKind) valid() bool    { return enumValid(instanceRouteNames, v) }

// InstanceOperationKind (instance-operation-kind, u8).
type InstanceOperationKind uint8

// Instance operation kinds.
const (
	InstanceSend    InstanceOperationKind = 1
	InstanceRequest InstanceOperationKind = 2
)

var instanceOpNames = map[InstanceOperationKind]string{1: "send", 2: "request"}

func (v InstanceOperationKind) String() string { return enumName(instanceOpNames, v, "operationKind") }
func (v InstanceOperationKind) valid() bool    { return enumValid(instanceOpNames, v) }

// RelocationRole (relocation-role, u8).
type RelocationRole uint8

// Relocation roles.
const (
	RoleSource      RelocationRole = 1
	RoleTarget      RelocationRole = 2
	RoleCoordinator RelocationRole = 3
)

var relocationRoleNames = map[RelocationRole]string{1: "source", 2: "target", 3: "coordinator"}

func (v RelocationRole) String() string { return enumName(relocationRoleNames, v, "relocationRole") }
func (v RelocationRole) valid() bool    { return enumValid(relocationRoleNames, v) }

// RouteAction (session-relocation-route-action, u8).
type RouteAction uint8

// Session relocation route actions.
const (
	RouteCommit RouteAction = 1
	RouteAbort  RouteAction = 2
)

var routeActionNames = map[RouteAction]string{1: "commit", 2: "abort"}

func (v RouteAction) String() string { return enumName(routeActionNames, v, "action") }
func (v RouteAction) valid() bool    { return enumValid(routeActionNames, v) }

// ObjectKind (authority-object-kind, u8).
type ObjectKind uint8

// Authority object kinds.
const (
	ObjectActor ObjectKind = 1
	ObjectSpot  ObjectKind = 2
)

var objectKindNames = map[ObjectKind]string{1: "actor", 2: "spot"}

func (v ObjectKind) String() string { return enumName(objectKindNames, v, "objectKind") }
func (v ObjectKind) valid() bool    { return enumValid(objectKindNames, v) }
