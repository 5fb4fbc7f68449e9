package router

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzResolveReplyTail: the request-specific tail of an ok reply is only
// interpreted by the requester (Record.ResolveReplyTail), so FuzzDecode never
// reaches the tail decoders. Resolving arbitrary tail bytes for any operation
// kind never panics, fails only with *ProtocolError leaving the record as it
// was, and a resolved record re-encodes to exactly the frames it came from.
func FuzzResolveReplyTail(f *testing.F) {
	for _, s := range []struct {
		kind MeshOperationKind
		tail ReplyTail
	}{
		{OpActorLookup, &ActorLookupTail{Actor: ActorRef{"a", 1}, SpotID: "s", SpotGeneration: 2, AuthorityOwnerGeneration: 3}},
		{OpActorJoin, &ActorJoinTail{Result: JoinAccepted, Spot: &SpotRef{"s", 1}}},
		{OpActorJoin, &ActorJoinTail{Result: JoinRejected}},
		{OpActorJoin, &ActorJoinTail{Result: JoinRejected, Spot: &SpotRef{"s", 1}}},
		{OpStreamBind, &StreamBindTail{BindingGeneration: 1, AuthorityOwnerGeneration: 2}},
		{OpUserSpotCreate, &UserSpotCreateTail{Result: CreateCreated, Spot: SpotRef{"s", 1}}},
		{OpUserSpotClose, &UserSpotCloseTail{Closed: true}},
		{OpActorCreate, &ActorCreateTail{Result: CreateExisting, Actor: &ActorRef{"a", 1}}},
		{OpActorCreate, &ActorCreateTail{Result: CreateRejected}},
	} {
		frames, err := Encode(&Record{Body: &Reply{Correlation: 1, Tail: s.tail}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(s.kind), frames[0][HeadPrefixLen+16:], false)
		f.Add(uint8(s.kind), frames[0][HeadPrefixLen+16:], true)
	}
	f.Fuzz(func(t *testing.T, kind uint8, tail []byte, withPayload bool) {
		frames := [][]byte{cat(replyWithFailure(ResultOK, 0), tail)}
		if withPayload {
			frames = append(frames, payloadFrame("p", "c", []byte("x")))
		}
		r, err := Decode(frames)
		if err != nil {
			return
		}
		before := r.Body.(*Reply).Tail
		op := MeshOperationKind(kind % 20)
		if err := r.ResolveReplyTail(op); err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("resolve failed with %T %v", err, err)
			}
			if r.Body.(*Reply).Tail != before {
				t.Fatalf("failed resolve changed the tail")
			}
			return
		}
		again, err := Encode(r)
		if err != nil {
			t.Fatalf("re-encode of a resolved reply failed: %v", err)
		}
		if !framesEqual(again, frames) {
			t.Fatalf("re-encode differs:\n got %x\nwant %x", again, frames)
		}
		r2, err := Decode(again)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.ResolveReplyTail(op); err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("second resolve: %v\n%#v\n%#v", err, r.Body, r2.Body)
		}
		if _, err := DescribeJSON(r); err != nil {
			t.Fatalf("describe: %v", err)
		}
	})
}

// FuzzDecodeMetadata: the metadata frame decoder on its own (also used
// outside Decode, mesh/retarget.go) never panics, fails only with
// *ProtocolError and accepts only what EncodeMetadata renders identically.
func FuzzDecodeMetadata(f *testing.F) {
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 1, 1, 'k', 0, 1, 'v'})
	f.Add([]byte{1, 2, 1, 'a', 0, 0, 1, 'b', 0, 1, 'v'})
	f.Fuzz(func(t *testing.T, frame []byte) {
		es, err := DecodeMetadata(frame)
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) {
				t.Fatalf("decode failed with %T %v", err, err)
			}
			return
		}
		enc, err := EncodeMetadata(es)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if string(enc) != string(frame) {
			t.Fatalf("re-encode differs: %x vs %x", enc, frame)
		}
	})
}
