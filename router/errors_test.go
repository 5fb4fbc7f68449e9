package router

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func mustEncode(t *testing.T, r *Record) [][]byte {
	t.Helper()
	f, err := Encode(r)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return f
}

// patch returns a copy of frames with the single occurrence of old in frame
// i replaced by new; it fails the test if old is not found exactly once.
func patch(t *testing.T, frames [][]byte, i int, old, new []byte) [][]byte {
	t.Helper()
	if n := bytes.Count(frames[i], old); n != 1 {
		t.Fatalf("pattern %x occurs %d times in frame %d", old, n, i)
	}
	out := make([][]byte, len(frames))
	copy(out, frames)
	out[i] = bytes.Replace(frames[i], old, new, 1)
	return out
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// Distinctive values so that patch can find their encoding.
const (
	magicGen  = 0x0102030405060708
	magicGen2 = 0x1112131415161718
	magicU32  = 0x0badf00d
)

func sampleHello() *Record {
	return NewRecord(&Hello{ServiceAdmission{Topology: TopologyRouteMesh, RouteMesh: &RouteMeshAdmission{
		MeshName: "MESHNAME", SecurityIdentity: "SECID", LifecycleGeneration: magicGen, DescriptorRevision: magicGen2,
		AdvertisedEndpoint: "tcp://h:1",
		Channels:           []ChannelEntry{{"CHA", 1}, {"CHB", 2}},
		Extension: DescriptorExtension{
			RuntimeState: RuntimeServing, ApplicationVersion: 3,
			StatefulCapabilities: []StatefulCapability{{StatefulActor, "TYPEX", PolicySnapshot, 5, 6, true, 7}},
			ProtocolCapabilities: []string{RequiredProtocolCapability}, ObjectRole: ObjectRoleServer,
			PlacementWeight: 50, ActiveCapacityLimit: 10, PendingCapacityLimit: 2, ActiveCapacityUsed: 1, PendingCapacityUsed: magicU32,
		},
	}}}, nil, nil)
}

func sampleSpotSend(meta []byte) *Record {
	return NewRecord(&SpotSend{OperationID{1, 2}, 3, "SRCID", SpotRouteFence{SpotRef{"SPOT", magicGen}, []byte("RIDX"), 4, 5, 6}},
		meta, &Payload{PacketName: "PKT", ContentType: "CT", Data: []byte("DATA")})
}

func sampleActorSend(bound bool) *Record {
	b := &ActorSend{Operation: OperationID{1, 2}, TargetActor: ActorRouteFence{ActorRef{"ACT", 1}, []byte("R"), 2, 3, 4}}
	if bound {
		b.BoundSession = &BoundSessionTail{[]byte("S"), 1, 2}
	}
	return NewRecord(b, nil, &Payload{PacketName: "P", ContentType: "C"})
}

func sampleReply(result TerminalResult, code FrameworkErrorCode, p *Payload) *Record {
	return &Record{Command: CmdReply, Body: &Reply{Correlation: 9, Result: result, FailureCode: code}, Payload: p}
}

func sampleClose() *Record {
	return NewRecord(&UserSpotClose{1, OperationID{0, 1}, []byte("SRC"), 2,
		UserSpotCloseFence{SpotRef{"CLOSESPOT", 3}, []byte("T"), 4, 5, "SV"}, 6}, nil, nil)
}

func sampleFollow() *Record {
	a := ActorRouteFence{ActorRef{"A", 1}, []byte("R"), 2, 3, 4}
	return NewRecord(&MessageFollow{MessageFollowRouteV1{
		MessageFollowRoute{Kind: ObjectActor, Actor: &a}, MessageFollowRoute{Kind: ObjectActor, Actor: &a},
		7, 1, 2, OperationID{}, 0}}, nil, nil)
}

func sampleInstance(kind InstanceRouteKind, op InstanceOperationKind, opID OperationID) *Record {
	b := &InstanceSpot{SourceNodeGeneration: 1, SourceNodeRID: []byte("S"), OperationKind: op, Operation: opID}
	if kind == InstanceRouteReady {
		b.Route = InstanceRoute{Kind: kind, Ready: &InstanceReadyRoute{[]byte("T"), 1, "I", AuthorityGenerationFence{1, "o", 2, 3, "v"}}}
	} else {
		b.Route = InstanceRoute{Kind: kind, Cold: &InstanceColdRoute{[]byte("T"), 1, "I", "m", "t", "d", 9}}
	}
	if op == InstanceRequest {
		b.ReplyRouteID = 5
	}
	return NewRecord(b, nil, &Payload{PacketName: "P", ContentType: "C"})
}

func probe(id uint64) []byte { return cat([]byte{'Z', 'M', 1, 5, 0}, be64(id)) }

type kindCase struct {
	name   string
	frames func(t *testing.T) [][]byte
	kind   ErrorKind
	field  string // substring expected in ProtocolError.Field ("" = not checked)
}

func one(b []byte) func(*testing.T) [][]byte { return func(*testing.T) [][]byte { return [][]byte{b} } }

// TestDecodeErrorKinds has at least one malformed record per error kind.
func TestDecodeErrorKinds(t *testing.T) {
	meta := func(t *testing.T) []byte {
		m, err := EncodeMetadata([]MetadataEntry{{"KEY", "VAL"}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []kindCase{
		{"magic first byte", one(cat([]byte{'X', 'M', 1, 5, 0}, be64(1))), BadMagic, "magic"},
		{"magic second byte", one([]byte{'Z', 'Q'}), BadMagic, "magic"},
		{"short head", one([]byte{'Z', 'M', 1}), Truncated, "head"},
		{"empty frame 0", one(nil), Truncated, "head"},
		{"wire major 2", one(cat([]byte{'Z', 'M', 2, 5, 0}, be64(1))), BadWireMajor, ""},
		{"wire major 0", one(cat([]byte{'Z', 'M', 0, 5, 0}, be64(1))), BadWireMajor, ""},
		{"command 0", one(cat([]byte{'Z', 'M', 1, 0, 0}, be64(1))), UnknownCommand, ""},
		{"command 7 reserved", one(cat([]byte{'Z', 'M', 1, 7, 0}, be64(1))), UnknownCommand, ""},
		{"command 4 update (v1, not spoken)", one(cat([]byte{'Z', 'M', 1, 4, 0}, be64(1))), UnknownCommand, ""},
		{"command 51 (v1, not spoken)", one([]byte{'Z', 'M', 1, 51, 0}), UnknownCommand, ""},
		{"command 255", one([]byte{'Z', 'M', 1, 255, 0}), UnknownCommand, ""},
		{"metadata flag on probe", one(cat([]byte{'Z', 'M', 1, 5, 1}, be64(1))), ForbiddenFlag, "flags"},
		{"undefined flag bit", one(cat([]byte{'Z', 'M', 1, 5, 0x80}, be64(1))), ForbiddenFlag, "flags"},
		{"bound session on spotSend", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			f[0][4] = FlagBoundSession | FlagSourceSpotID
			return f
		}, ForbiddenFlag, "flags"},
		{"extension flag on actorSend", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleActorSend(false))
			f[0][4] = FlagExtension
			return f
		}, ForbiddenFlag, "flags"},
		{"boundSession without sourceSpotId", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleActorSend(true))
			f[0][4] = FlagBoundSession
			return f
		}, MissingFlag, "flags"},
		{"sourceSpotId without boundSession", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleActorSend(false))
			f[0][4] = FlagSourceSpotID
			return f
		}, MissingFlag, "flags"},
		{"no frames", func(*testing.T) [][]byte { return nil }, FrameCount, ""},
		{"probe with extra frame", func(*testing.T) [][]byte { return [][]byte{probe(1), {}} }, FrameCount, ""},
		{"spotSend without payload", func(t *testing.T) [][]byte { return mustEncode(t, sampleSpotSend(nil))[:1] }, FrameCount, ""},
		{"metadata flag without frame", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			f[0][4] = FlagMetadata
			return f
		}, FrameCount, ""},
		{"reply with three frames", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleReply(ResultOK, FailNone, &Payload{PacketName: "p", ContentType: "c"}))
			return append(f, f[1])
		}, FrameCount, ""},
		{"truncated probe id", one(probe(1)[:12]), Truncated, "probeId"},
		{"truncated admission", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleHello())
			f[0] = f[0][:len(f[0])-3]
			return f
		}, Truncated, "admission"},
		{"text length past end", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			return patch(t, f, 0, []byte("\x05SRCID"), []byte("\xffSRCID"))
		}, Truncated, "sourceSpotId"},
		{"channel count past end", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, []byte("\x00\x02\x03CHA"), []byte("\xff\xff\x03CHA"))
		}, Truncated, "channels"},
		{"payload envelope length past end", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			f[1] = append([]byte(nil), f[1]...)
			binary.BigEndian.PutUint32(f[1][1:], uint32(len(f[1])))
			return f
		}, Truncated, "payload"},
		{"trailing byte after probe", one(append(probe(1), 0)), TrailingBytes, ""},
		{"trailing byte after payload", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			f[1] = append(append([]byte(nil), f[1]...), 0)
			return f
		}, TrailingBytes, "payload"},
		{"trailing byte inside payload envelope", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			p := append(append([]byte(nil), f[1]...), 0)
			binary.BigEndian.PutUint32(p[1:], binary.BigEndian.Uint32(p[1:])+1)
			f[1] = p
			return f
		}, TrailingBytes, "payload"},
		{"trailing byte inside close fence", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleClose())
			// The fence is version 1, u16 length, body; append one byte to
			// the body and grow the length, keeping the deadline after it.
			i := bytes.Index(f[0], []byte("\x09CLOSESPOT")) - 3
			n := binary.BigEndian.Uint16(f[0][i+1:])
			end := i + 3 + int(n)
			b := cat(f[0][:end], []byte{0}, f[0][end:])
			binary.BigEndian.PutUint16(b[i+1:], n+1)
			return [][]byte{b}
		}, TrailingBytes, "target"},
		{"tail on failed reply", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleReply(ResultTimedOut, FailNone, nil))
			f[0] = append(f[0], 1)
			return f
		}, TrailingBytes, ""},
		{"trailing byte in metadata", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(meta(t)))
			f[1] = append(append([]byte(nil), f[1]...), 0)
			return f
		}, TrailingBytes, "metadata"},
		{"bad utf-8", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, []byte("MESHNAME"), []byte("MESH\xffAME"))
		}, BadUTF8, "meshName"},
		{"NUL in text", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, []byte("SECID"), []byte("SE\x00ID"))
		}, NULInText, "securityIdentity"},
		{"bad utf-8 in payload packet name", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleSpotSend(nil)), 1, []byte("PKT"), []byte("P\xc0T"))
		}, BadUTF8, "packetName"},
		{"zero probe id", one(probe(0)), ZeroNotAllowed, "probeId"},
		{"empty text8", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleSpotSend(nil)), 0, []byte("\x05SRCID"), []byte("\x00"))
		}, ZeroNotAllowed, "sourceSpotId"},
		{"zero generation", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, be64(magicGen), be64(0))
		}, ZeroNotAllowed, "lifecycleGeneration"},
		{"zero operation id on request", func(t *testing.T) [][]byte {
			r := NewRecord(&SpotRequest{1, OperationID{magicGen, magicGen2}, 0, "S", SpotRouteFence{SpotRef{"s", 1}, []byte("r"), 1, 1, 1}},
				nil, &Payload{PacketName: "p", ContentType: "c"})
			return patch(t, mustEncode(t, r), 0, cat(be64(magicGen), be64(magicGen2)), make([]byte, 16))
		}, ZeroNotAllowed, "operation"},
		{"cold activation send with zero operation", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleInstance(InstanceRouteColdActivation, InstanceSend, OperationID{magicGen, magicGen2}))
			return patch(t, f, 0, cat(be64(magicGen), be64(magicGen2)), make([]byte, 16))
		}, ZeroNotAllowed, "operation"},
		{"reject reason 0", one(cat([]byte{'Z', 'M', 1, 3, 0}, be32(0))), EnumRange, "reason"},
		{"reject reason 13", one(cat([]byte{'Z', 'M', 1, 3, 0}, be32(13))), EnumRange, "reason"},
		{"topology kind 3", one(cat([]byte{'Z', 'M', 1, 1, 0, 3}, be32(0))), EnumRange, "topologyKind"},
		{"terminal result 1", one(cat([]byte{'Z', 'M', 1, 20, 0}, be64(1), be32(1), be32(0))), EnumRange, "terminalResult"},
		{"bool8 value 2", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, cat([]byte{1}, be64(7)), cat([]byte{2}, be64(7)))
		}, EnumRange, "hasSnapshotAdapter"},
		{"failure code 23", one(replyWithFailure(ResultInternalError, 23)), UnknownFrameworkError, "failureCode"},
		{"failure code 36", one(replyWithFailure(ResultInternalError, 36)), UnknownFrameworkError, "failureCode"},
		{"hop count 9", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleSpotSend(nil)), 0, []byte("\x03\x05SRCID"), []byte("\x09\x05SRCID"))
		}, BoundExceeded, "messageFollowHopCount"},
		{"generation above 2^63-1", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, be64(magicGen), be64(1<<63))
		}, BoundExceeded, "lifecycleGeneration"},
		{"channel weight 101", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, cat([]byte("CHB"), be32(2)), cat([]byte("CHB"), be32(101)))
		}, BoundExceeded, "weight"},
		{"endpoint length 4097", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, []byte("\x00\x09tcp://h:1"), []byte("\x10\x01tcp://h:1"))
		}, BoundExceeded, "advertisedEndpoint"},
		{"metadata frame over 1024 bytes", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(meta(t)))
			f[1] = make([]byte, MetadataBytes+1)
			return f
		}, BoundExceeded, "metadata"},
		{"message follow hop count 9", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleFollow()), 0, cat([]byte{7}, be32(1), be32(2)), cat([]byte{9}, be32(1), be32(2)))
		}, BoundExceeded, "hopCount"},
		{"admission length over 1 MiB", one(cat([]byte{'Z', 'M', 1, 1, 0, 1}, be32(DescriptorEnvelopeBytes))), BoundExceeded, "admission"},
		{"payload version 2", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(nil))
			f[1] = append([]byte{2}, f[1][1:]...)
			return f
		}, BadVersion, "payload"},
		{"metadata version 0", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(meta(t)))
			f[1] = append([]byte{0}, f[1][1:]...)
			return f
		}, BadVersion, "metadata"},
		{"close fence version 2", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleClose())
			i := bytes.Index(f[0], []byte("\x09CLOSESPOT")) - 3
			f[0] = append([]byte(nil), f[0]...)
			f[0][i] = 2
			return f
		}, BadVersion, "target"},
		{"channels not sorted", func(t *testing.T) [][]byte {
			f := patch(t, mustEncode(t, sampleHello()), 0, []byte("\x03CHA"), []byte("\x03CHC"))
			return f
		}, NotCanonical, "channels"},
		{"duplicate metadata key", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleSpotSend(meta(t)))
			f[1] = []byte{1, 2, 1, 'k', 0, 0, 1, 'k', 0, 1, 'v'}
			return f
		}, NotCanonical, "metadata"},
		{"extension field out of order", func(t *testing.T) [][]byte {
			// Field 12 renumbered 10 follows field 11.
			return patch(t, mustEncode(t, sampleHello()), 0, cat([]byte{12}, be32(4), be32(magicU32)), cat([]byte{10}, be32(4), be32(magicU32)))
		}, NotCanonical, "fieldId"},
		{"required extension field missing", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, cat([]byte{12}, be32(4), be32(magicU32)), cat([]byte{13}, be32(4), be32(magicU32)))
		}, MissingField, "pendingCapacityUsed"},
		{"required protocol capability missing", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, []byte(RequiredProtocolCapability), []byte("framework-service-v12"))
		}, MissingField, "protocolCapabilities"},
		{"ok reply with failure code", one(replyWithFailure(ResultOK, 1)), Constraint, "failureCode"},
		{"notFound without failure code", one(replyWithFailure(ResultNotFound, 0)), Constraint, "failureCode"},
		{"failure code with the wrong result", one(replyWithFailure(ResultInternalError, uint32(FailActorRouteNotFound))), Constraint, "failureCode"},
		{"boundary failure with failure code", one(replyWithFailure(ResultTimedOut, uint32(FailWorkerTimedOut))), Constraint, "failureCode"},
		{"failed reply with payload", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleReply(ResultOK, FailNone, &Payload{PacketName: "p", ContentType: "c"}))
			f[0] = replyWithFailure(ResultNotFound, uint32(FailActorRouteNotFound))
			return f
		}, Constraint, "payload"},
		{"ready send with nonzero operation", func(t *testing.T) [][]byte {
			f := mustEncode(t, sampleInstance(InstanceRouteReady, InstanceRequest, OperationID{magicGen, magicGen2}))
			// Turn the request into a send: kind byte 2→1 and drop the reply route id.
			f = patch(t, f, 0, cat([]byte{2}, be64(magicGen), be64(magicGen2), be64(5)), cat([]byte{1}, be64(magicGen), be64(magicGen2)))
			return f
		}, Constraint, "operation"},
		{"snapshot policy without adapter", func(t *testing.T) [][]byte {
			return patch(t, mustEncode(t, sampleHello()), 0, cat([]byte{1}, be64(7)), cat([]byte{0}, be64(7)))
		}, Constraint, "hasSnapshotAdapter"},
		{"route commit from source", func(t *testing.T) [][]byte {
			r := NewRecord(&SessionRelocationRoute{
				Relocation: RelocationID{0, 1}, Coordinator: RelocationCoordinatorFence{"c", 1, []byte("r"), 1, "v"},
				SenderRole: RoleTarget, Actor: ActorRef{"SESSIONACTOR", 1}, SessionOwnerNodeRID: []byte("o"), SessionOwnerNodeGeneration: 1,
				SessionOwnerID: "o", SessionOwnerLeaseGeneration: 1, SessionRID: []byte("s"), BindingGeneration: 1,
				Route: SessionRouteUpdate{Action: RouteCommit, Commit: &SessionRouteCommit{1, 2, []byte("t"), 3, 0}},
			}, nil, nil)
			return patch(t, mustEncode(t, r), 0, []byte("\x02\x0cSESSIONACTOR"), []byte("\x01\x0cSESSIONACTOR"))
		}, Constraint, "action"},
		{"zero relocation id", func(t *testing.T) [][]byte {
			r := NewRecord(&RelocationCancel{RelocationBinding{RelocationID{magicGen, magicGen2}, 1, SourceFence{"o", 1, []byte("n"), 1}}}, nil, nil)
			return patch(t, mustEncode(t, r), 0, cat(be64(magicGen), be64(magicGen2)), make([]byte, 16))
		}, ZeroNotAllowed, "relocation"},
		{"restore request chunk count without length", func(t *testing.T) [][]byte {
			r := NewRecord(&RelocationPrepare{Correlation: 1, Binding: RelocationBinding{RelocationID{0, 1}, 1, SourceFence{"o", 1, []byte("n"), 1}},
				Object: RelocationObject{StatefulActor, "a", "t", 1, 1}, TargetNodeRID: []byte("t"), TargetNodeGeneration: 1,
				TotalLength: magicGen2 & 0xffffff, ChunkCount: 1, CRC32C: magicU32, DeadlineUnixMs: 1}, nil, nil)
			return patch(t, mustEncode(t, r), 0, cat(be64(magicGen2&0xffffff), be32(1)), cat(be64(0), be32(1)))
		}, Constraint, "chunkCount"},
	}
	seen := map[ErrorKind]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frames := tc.frames(t)
			r, err := Decode(frames)
			var pe *ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("got record %+v, err %v; want a protocol error", r, err)
			}
			if r != nil {
				t.Fatalf("record returned with an error")
			}
			if pe.Kind != tc.kind {
				t.Fatalf("kind %s, want %s (%v)", pe.Kind, tc.kind, err)
			}
			if !strings.Contains(pe.Field, tc.field) {
				t.Fatalf("field %q, want it to contain %q (%v)", pe.Field, tc.field, err)
			}
			if pe.Error() == "" {
				t.Fatal("empty message")
			}
		})
		seen[tc.kind] = true
	}
	for k := BadMagic; k <= Constraint; k++ {
		if !seen[k] {
			t.Errorf("no decode case for kind %s", k)
		}
	}
}

// TestEncodeRejectsInvalidValues checks that Encode applies the decoder's
// rules instead of emitting bytes the peer would reject.
func TestEncodeRejectsInvalidValues(t *testing.T) {
	ok := sampleSpotSend(nil)
	cases := []struct {
		name string
		rec  *Record
		kind ErrorKind
	}{
		{"nil record", nil, MissingField},
		{"zero probe", NewRecord(&LivenessProbe{0}, nil, nil), ZeroNotAllowed},
		{"probe above 2^63-1", NewRecord(&LivenessProbe{1 << 63}, nil, nil), BoundExceeded},
		{"command mismatch", &Record{Command: CmdAdmit, Body: &LivenessAck{1}}, Constraint},
		{"metadata on probe", &Record{Flags: FlagMetadata, Body: &LivenessProbe{1}, Metadata: []byte{1, 0}}, ForbiddenFlag},
		{"metadata frame without flag", &Record{Body: ok.Body, Metadata: []byte{1, 0}, Payload: ok.Payload}, MissingFlag},
		{"metadata flag without frame", &Record{Flags: FlagMetadata, Body: ok.Body, Payload: ok.Payload}, FrameCount},
		{"payload missing", NewRecord(ok.Body, nil, nil), FrameCount},
		{"payload forbidden", NewRecord(&LivenessAck{1}, nil, &Payload{PacketName: "p", ContentType: "c"}), FrameCount},
		{"bound tail without flags", &Record{Body: sampleActorSend(true).Body, Payload: ok.Payload}, MissingFlag},
		{"bound flags without tail", &Record{Flags: flagBoundSessionT, Body: sampleActorSend(false).Body, Payload: ok.Payload}, MissingField},
		{"NUL in text", NewRecord(&SpotSend{SourceSpotID: "a\x00", TargetSpot: SpotRouteFence{SpotRef{"s", 1}, []byte("r"), 1, 1, 1}}, nil, ok.Payload), NULInText},
		{"bad utf-8", NewRecord(&SpotSend{SourceSpotID: "\xff", TargetSpot: SpotRouteFence{SpotRef{"s", 1}, []byte("r"), 1, 1, 1}}, nil, ok.Payload), BadUTF8},
		{"text too long", NewRecord(&SpotSend{SourceSpotID: strings.Repeat("a", 256), TargetSpot: SpotRouteFence{SpotRef{"s", 1}, []byte("r"), 1, 1, 1}}, nil, ok.Payload), BoundExceeded},
		{"empty rid", NewRecord(&SpotSend{SourceSpotID: "a", TargetSpot: SpotRouteFence{SpotRef{"s", 1}, nil, 1, 1, 1}}, nil, ok.Payload), ZeroNotAllowed},
		{"union case missing", NewRecord(&Hello{ServiceAdmission{Topology: TopologyRouteMesh}}, nil, nil), MissingField},
		{"two union cases", NewRecord(&Hello{ServiceAdmission{Topology: TopologyClientServer,
			ClientServer: &ClientServerAdmission{Role: RoleClient, Client: &ClientAdmission{"c", "s", 1}},
			RouteMesh:    &RouteMeshAdmission{}}}, nil, nil), Constraint},
		{"unknown failure code", sampleReply(ResultInternalError, 30, nil), UnknownFrameworkError},
		{"tail on failed reply", &Record{Body: &Reply{Correlation: 1, Result: ResultTimedOut, Tail: &UserSpotCloseTail{true}}}, Constraint},
		{"existing creation with payload", &Record{Body: &Reply{Correlation: 1, Tail: &UserSpotCreateTail{CreateExisting, SpotRef{"s", 1}}},
			Payload: &Payload{PacketName: "p", ContentType: "c"}}, Constraint},
		{"unsorted spot types", func() *Record {
			r := sampleHello()
			r.Body.(*Hello).Admission.RouteMesh.Extension.SpotTypes = []string{"b", "a"}
			return r
		}(), NotCanonical},
		{"unknown extension field with known id", func() *Record {
			r := sampleHello()
			r.Body.(*Hello).Admission.RouteMesh.Extension.Unknown = []ExtensionField{{ID: 3}}
			return r
		}(), Constraint},
		{"metadata duplicate key", NewRecord(ok.Body, []byte{1, 2, 1, 'k', 0, 0, 1, 'k', 0, 0}, ok.Payload), NotCanonical},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(tc.rec)
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.Kind != tc.kind {
				t.Fatalf("got %v, want kind %s", err, tc.kind)
			}
			if _, err := DescribeJSON(tc.rec); !errors.Is(err, ErrProtocol) {
				t.Fatalf("DescribeJSON: got %v, want the same protocol error", err)
			}
		})
	}
}

func TestResolveReplyTail(t *testing.T) {
	okTail := func(tail ReplyTail, p *Payload) [][]byte {
		return mustEncode(t, &Record{Body: &Reply{Correlation: 1, Tail: tail}, Payload: p})
	}
	cases := []struct {
		name   string
		frames [][]byte
		kind   MeshOperationKind
		want   ReplyTail
		errKnd ErrorKind
	}{
		{"close closed", okTail(&UserSpotCloseTail{true}, nil), OpUserSpotClose, &UserSpotCloseTail{true}, 0},
		{"close bool 2", [][]byte{cat(replyWithFailure(ResultOK, 0), []byte{2})}, OpUserSpotClose, nil, EnumRange},
		{"close tail missing", okTail(nil, nil), OpUserSpotClose, nil, Truncated},
		{"spot request has no tail", okTail(&UserSpotCloseTail{true}, nil), OpSpotRequest, nil, TrailingBytes},
		{"spot request empty", okTail(nil, nil), OpSpotRequest, nil, 0},
		{"create tail too long", [][]byte{cat(replyWithFailure(ResultOK, 0), []byte{2, 1, 's'}, be64(1), []byte{0})}, OpUserSpotCreate, nil, TrailingBytes},
		{"create result 4", [][]byte{cat(replyWithFailure(ResultOK, 0), []byte{4, 1, 's'}, be64(1))}, OpUserSpotCreate, nil, EnumRange},
		{"existing create with payload", func() [][]byte {
			f := okTail(&UserSpotCreateTail{CreateCreated, SpotRef{"s", 1}}, &Payload{PacketName: "p", ContentType: "c"})
			f[0] = cat(replyWithFailure(ResultOK, 0), []byte{1, 1, 's'}, be64(1))
			return f
		}(), OpUserSpotCreate, nil, Constraint},
		{"actor create rejected with actor", [][]byte{cat(replyWithFailure(ResultOK, 0), []byte{3, 0, 3, 1, 'a'}, be64(1))}, OpActorCreate, nil, TrailingBytes},
		{"undefined kind", okTail(nil, nil), MeshOperationKind(99), nil, EnumRange},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decode(tc.frames)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			err = r.ResolveReplyTail(tc.kind)
			if tc.errKnd != 0 {
				var pe *ProtocolError
				if !errors.As(err, &pe) || pe.Kind != tc.errKnd {
					t.Fatalf("got %v, want kind %s", err, tc.errKnd)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := r.Body.(*Reply).Tail
			if (got == nil) != (tc.want == nil) || (got != nil && got.OperationKind() != tc.want.OperationKind()) {
				t.Fatalf("tail %#v, want %#v", got, tc.want)
			}
		})
	}
}
