package router

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
)

// Known-answer vectors assembled by hand from the schema's field lists. The
// round-trip tests cannot catch a field order or width mistake (the encoder
// and decoder share one walk); these vectors can.

type bb struct{ b []byte }

func (w *bb) u8(v uint8) *bb   { w.b = append(w.b, v); return w }
func (w *bb) u16(v uint16) *bb { w.b = binary.BigEndian.AppendUint16(w.b, v); return w }
func (w *bb) u32(v uint32) *bb { w.b = binary.BigEndian.AppendUint32(w.b, v); return w }
func (w *bb) u64(v uint64) *bb { w.b = binary.BigEndian.AppendUint64(w.b, v); return w }
func (w *bb) t8(s string) *bb  { return w.u8(uint8(len(s))).raw([]byte(s)) }
func (w *bb) t16(s string) *bb { return w.u16(uint16(len(s))).raw([]byte(s)) }
func (w *bb) raw(p []byte) *bb { w.b = append(w.b, p...); return w }

// len16/len32 prefix the bytes built by f with their length.
func (w *bb) len16(f func(*bb)) *bb {
	var in bb
	f(&in)
	return w.u16(uint16(len(in.b))).raw(in.b)
}

func (w *bb) len32(f func(*bb)) *bb {
	var in bb
	f(&in)
	return w.u32(uint32(len(in.b))).raw(in.b)
}

func head(cmd Command, flags uint8) *bb { return (&bb{}).raw([]byte{'Z', 'M', 1, byte(cmd), flags}) }

func payloadFrame(name, ct string, data []byte) []byte {
	return (&bb{}).u8(1).len32(func(w *bb) { w.t8(name).t8(ct).u32(uint32(len(data))).raw(data) }).b
}

func TestKnownAnswerVectors(t *testing.T) {
	spotFence := func(w *bb) { w.t8("room-1").u64(3).t8("node-b").u64(4).u64(5).u64(6) }
	wantSpotFence := SpotRouteFence{SpotRef{"room-1", 3}, []byte("node-b"), 4, 5, 6}
	cases := []struct {
		name   string
		frames [][]byte
		want   *Record
		kind   MeshOperationKind // reply tail context
	}{
		{
			name:   "reject resourceLimit",
			frames: [][]byte{head(CmdReject, 0).u32(12).b},
			want:   &Record{Command: CmdReject, Body: &Reject{RejectResourceLimit}},
		},
		{
			name: "hello routeMesh",
			frames: [][]byte{head(CmdHello, 0).u8(1).len32(func(w *bb) {
				w.t8("main").t8("sec").u64(1).u64(2).t16("tcp://a:1").
					u16(1).t8("chat").u32(100).
					len32(func(w *bb) {
						w.u8(1).u32(1).u8(1)
						w.u8(2).u32(8).u64(5)
						w.u8(5).u32(1).u8(0)
						w.u8(6).len32(func(w *bb) { w.u16(1).t8("framework-service-v11") })
						w.u8(7).u32(1).u8(2)
						w.u8(8).u32(4).u32(100)
						w.u8(9).u32(4).u32(10000)
						w.u8(10).u32(4).u32(128)
						w.u8(11).u32(4).u32(0)
						w.u8(12).u32(4).u32(1)
						w.u8(99).u32(2).u16(0xbeef)
					})
			}).b},
			want: &Record{Command: CmdHello, Body: &Hello{ServiceAdmission{Topology: TopologyRouteMesh, RouteMesh: &RouteMeshAdmission{
				MeshName: "main", SecurityIdentity: "sec", LifecycleGeneration: 1, DescriptorRevision: 2, AdvertisedEndpoint: "tcp://a:1",
				Channels: []ChannelEntry{{"chat", 100}},
				Extension: DescriptorExtension{RuntimeState: RuntimeServing, ApplicationVersion: 5, MaintenanceWave: new(string),
					ProtocolCapabilities: []string{"framework-service-v11"}, ObjectRole: ObjectRoleServer, PlacementWeight: 100,
					ActiveCapacityLimit: 10000, PendingCapacityLimit: 128, PendingCapacityUsed: 1,
					Unknown: []ExtensionField{{99, []byte{0xbe, 0xef}}}},
			}}}},
		},
		{
			name: "admit clientServer server",
			frames: [][]byte{head(CmdAdmit, 0).u8(2).len32(func(w *bb) {
				w.u8(2).len16(func(w *bb) {
					w.t8("orders").u8(1).t8("srv").u64(7).u64(8).u32(20).u8(1).t8("sec").u32(4096).t16("tcp://s:2")
				})
			}).b},
			want: &Record{Command: CmdAdmit, Body: &Admit{ServiceAdmission{Topology: TopologyClientServer, ClientServer: &ClientServerAdmission{
				Role: RoleServer, Server: &ServerAdmission{"orders", []byte("srv"), 7, 8, 20, RuntimeServing, "sec", 4096, "tcp://s:2"}}}}},
		},
		{
			name: "reply userSpotCreate created with payload",
			frames: [][]byte{
				head(CmdReply, 0).u64(7).u32(0).u32(0).u8(2).t8("spot-1").u64(2).b,
				payloadFrame("Created", "application/json", []byte("{}")),
			},
			want: &Record{Command: CmdReply, Body: &Reply{Correlation: 7, Tail: &UserSpotCreateTail{CreateCreated, SpotRef{"spot-1", 2}}},
				Payload: &Payload{"Created", "application/json", []byte("{}")}},
			kind: OpUserSpotCreate,
		},
		{
			name:   "reply actorCreate existing",
			frames: [][]byte{head(CmdReply, 0).u64(8).u32(0).u32(0).u8(1).len16(func(w *bb) { w.t8("actor-1").u64(9) }).b},
			want:   &Record{Command: CmdReply, Body: &Reply{Correlation: 8, Tail: &ActorCreateTail{CreateExisting, &ActorRef{"actor-1", 9}}}},
			kind:   OpActorCreate,
		},
		{
			name:   "reply actorJoin rejected without spot",
			frames: [][]byte{head(CmdReply, 0).u64(8).u32(0).u32(0).u32(1).len16(func(w *bb) { w.u8(0).u16(0) }).b},
			want:   &Record{Command: CmdReply, Body: &Reply{Correlation: 8, Tail: &ActorJoinTail{Result: JoinRejected}}},
			kind:   OpActorJoin,
		},
		{
			name:   "reply conflict spotMoving",
			frames: [][]byte{head(CmdReply, 0).u64(9).u32(107).u32(34).b},
			want:   &Record{Command: CmdReply, Body: &Reply{Correlation: 9, Result: ResultConflict, FailureCode: FailSpotMoving}},
		},
		{
			name: "spotSend with metadata",
			frames: [][]byte{
				head(CmdSpotSend, FlagMetadata).u64(0).u64(0).u8(2).t8("src").raw(func() []byte { var w bb; spotFence(&w); return w.b }()).b,
				(&bb{}).u8(1).u8(1).t8("trace").t16("abc").b,
				payloadFrame("Chat", "text/plain", nil),
			},
			want: &Record{Command: CmdSpotSend, Flags: FlagMetadata, Metadata: (&bb{}).u8(1).u8(1).t8("trace").t16("abc").b,
				Body:    &SpotSend{MessageFollowHopCount: 2, SourceSpotID: "src", TargetSpot: wantSpotFence},
				Payload: &Payload{"Chat", "text/plain", nil}},
		},
		{
			name: "actorRequest with bound session, no source actor",
			frames: [][]byte{
				head(CmdActorRequest, FlagBoundSession|FlagSourceSpotID).u64(11).u64(0).u64(1).u8(0).u8(0).
					t8("act").u64(2).t8("nb").u64(3).u64(4).u64(5).
					t8("sess").u64(6).u64(7).b,
				payloadFrame("P", "C", []byte{1}),
			},
			want: &Record{Command: CmdActorRequest, Flags: FlagBoundSession | FlagSourceSpotID,
				Body: &ActorRequest{Correlation: 11, Operation: OperationID{0, 1},
					TargetActor:  ActorRouteFence{ActorRef{"act", 2}, []byte("nb"), 3, 4, 5},
					BoundSession: &BoundSessionTail{[]byte("sess"), 6, 7}},
				Payload: &Payload{"P", "C", []byte{1}}},
		},
		{
			name: "instanceSpot cold activation request",
			frames: [][]byte{
				head(CmdInstanceSpot, 0).u8(2).len16(func(w *bb) {
					w.t8("tn").u64(1).t8("inst-1").t8("main").t8("presence").t8("rev-3").u64(1700000000000)
				}).u64(2).t8("sn").u8(0).u8(2).u64(0).u64(5).u64(77).b,
				payloadFrame("Hello", "application/octet-stream", []byte("x")),
			},
			want: &Record{Command: CmdInstanceSpot, Body: &InstanceSpot{
				Route:                InstanceRoute{Kind: InstanceRouteColdActivation, Cold: &InstanceColdRoute{[]byte("tn"), 1, "inst-1", "main", "presence", "rev-3", 1700000000000}},
				SourceNodeGeneration: 2, SourceNodeRID: []byte("sn"), OperationKind: InstanceRequest, Operation: OperationID{0, 5}, ReplyRouteID: 77},
				Payload: &Payload{"Hello", "application/octet-stream", []byte("x")}},
		},
		{
			name: "userSpotClose",
			frames: [][]byte{head(CmdUserSpotClose, 0).u64(3).u64(0).u64(4).t8("node-a").u64(5).
				u8(1).len16(func(w *bb) { w.t8("room-1").u64(6).t8("node-b").u64(7).u64(8).t16("sv-9") }).u64(1700000000000).b},
			want: &Record{Command: CmdUserSpotClose, Body: &UserSpotClose{3, OperationID{0, 4}, []byte("node-a"), 5,
				UserSpotCloseFence{SpotRef{"room-1", 6}, []byte("node-b"), 7, 8, "sv-9"}, 1700000000000}},
		},
		{
			name: "actorCreate",
			frames: [][]byte{head(CmdActorCreate, 0).u64(3).u64(1).u64(2).t8("node-a").u64(4).t8("actor-1").t8("player").
				t8("reservation-1").t16("store-3").u64(2).u64(3).t8("node-b").u64(4).t8("target-owner").u64(5).u32(1).
				u64(1700000000000).b},
			want: &Record{Command: CmdActorCreate, Body: &ActorCreate{3, OperationID{1, 2}, []byte("node-a"), 4, "actor-1", "player",
				ObjectReservationFence{"reservation-1", "store-3", 2, 3, []byte("node-b"), 4, "target-owner", 5, 1}, 1700000000000}},
		},
		{
			name: "messageFollow spot",
			frames: [][]byte{head(CmdMessageFollow, 0).u8(1).len32(func(w *bb) {
				w.u8(2).len16(spotFence)
				w.u8(2).len16(spotFence)
				w.u8(1).u32(3).u32(300).u64(0).u64(9).u64(0)
			}).b},
			want: &Record{Command: CmdMessageFollow, Body: &MessageFollow{MessageFollowRouteV1{
				MessageFollowRoute{Kind: ObjectSpot, Spot: &wantSpotFence}, MessageFollowRoute{Kind: ObjectSpot, Spot: &wantSpotFence},
				1, 3, 300, OperationID{0, 9}, 0}}},
		},
		{
			name: "sessionRelocationRoute abort",
			frames: [][]byte{head(CmdSessionRelocationRoute, 0).u64(0).u64(1).
				t8("coord").u64(2).t8("nc").u64(3).t16("sv").u8(1).t8("actor-1").u64(4).
				t8("so").u64(5).t8("owner").u64(6).t8("sr").u64(7).u8(2).len16(func(w *bb) { w.u64(8) }).b},
			want: &Record{Command: CmdSessionRelocationRoute, Body: &SessionRelocationRoute{RelocationID{0, 1},
				RelocationCoordinatorFence{"coord", 2, []byte("nc"), 3, "sv"}, RoleSource, ActorRef{"actor-1", 4},
				[]byte("so"), 5, "owner", 6, []byte("sr"), 7, SessionRouteUpdate{Action: RouteAbort, Abort: &SessionRouteAbort{8}}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.frames)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got.Command == CmdReply {
				if err := got.ResolveReplyTail(tc.kind); err != nil {
					t.Fatalf("resolve: %v", err)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got.Body, tc.want.Body)
			}
			enc, err := Encode(tc.want)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if len(enc) != len(tc.frames) {
				t.Fatalf("%d frames, want %d", len(enc), len(tc.frames))
			}
			for i := range enc {
				if !bytes.Equal(enc[i], tc.frames[i]) {
					t.Fatalf("frame %d\n got %x\nwant %x", i, enc[i], tc.frames[i])
				}
			}
		})
	}
}
