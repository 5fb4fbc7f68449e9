package mesh

import (
	"bytes"
	"errors"
	"testing"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// retarget changes only the fence, the hop count and the origin entry: the
// operation id, correlation, ObjectGeneration, other metadata and payload
// travel unchanged (§7.3), and the result still encodes.
func TestRetargetKeepsEverythingButTheRoute(t *testing.T) {
	op := router.OperationID{High: 1, Low: 2}
	oldTo := routeTo{nodeRID: []byte{1}, nodeGen: 1, ownerGen: 3, leaseGen: 4}
	newTo := routeTo{nodeRID: []byte{2, 2}, nodeGen: 7, ownerGen: 4, leaseGen: 9}
	other, err := router.EncodeMetadata([]router.MetadataEntry{{Key: "app.trace", Value: "abc"}})
	if err != nil {
		t.Fatal(err)
	}
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("hello")}
	org := origin{rid: []byte{0xaa, 0xbb}, gen: 12}
	tests := []router.Body{
		&router.ActorSend{Operation: op, TargetActor: actorFence(router.ActorRef{ActorID: "a", ObjectGeneration: 5}, oldTo)},
		&router.ActorRequest{Correlation: 77, Operation: op, TargetActor: actorFence(router.ActorRef{ActorID: "a", ObjectGeneration: 5}, oldTo)},
		&router.SpotSend{Operation: op, SourceSpotID: "entry:x", TargetSpot: spotFence(router.SpotRef{SpotID: "s", ObjectGeneration: 5}, oldTo)},
		&router.SpotRequest{Correlation: 77, Operation: op, SourceSpotID: "entry:x", TargetSpot: spotFence(router.SpotRef{SpotID: "s", ObjectGeneration: 5}, oldTo)},
	}
	for _, body := range tests {
		t.Run(body.Command().String(), func(t *testing.T) {
			rec := router.NewRecord(body, other, payload)
			out, err := retarget(rec, newTo, 3, org)
			if err != nil {
				t.Fatal(err)
			}
			frames, err := router.Encode(out)
			if err != nil {
				t.Fatal(err)
			}
			back, err := router.Decode(frames)
			if err != nil {
				t.Fatal(err)
			}
			m, ok := messageOf(back)
			if !ok {
				t.Fatal("not a message")
			}
			if m.op != op || m.gen != 5 || m.hop != 3 || !bytes.Equal(m.to.nodeRID, newTo.nodeRID) || m.to.nodeGen != 7 ||
				m.to.ownerGen != 4 || m.to.leaseGen != 9 {
				t.Fatalf("retargeted message %+v", m)
			}
			if (m.corr == 77) != (body.Command() == router.CmdActorRequest || body.Command() == router.CmdSpotRequest) {
				t.Fatalf("correlation %d", m.corr)
			}
			if string(back.Payload.Data) != "hello" {
				t.Fatalf("payload %q", back.Payload.Data)
			}
			got, err := originOf(back, transport.PeerInfo{RID: []byte{9}, LifecycleGeneration: 1})
			if err != nil || !bytes.Equal(got.rid, org.rid) || got.gen != org.gen {
				t.Fatalf("origin %v, %v", got, err)
			}
			es, _ := router.DecodeMetadata(back.Metadata)
			if len(es) != 2 || es[0].Key != "app.trace" {
				t.Fatalf("metadata %v", es)
			}
			// The original record is untouched.
			if m0, _ := messageOf(rec); m0.hop != 0 || m0.to.ownerGen != 3 {
				t.Fatalf("original changed: %+v", m0)
			}
		})
	}
	if _, err := retarget(router.NewRecord(&router.MessageFollow{}, nil, nil), newTo, 1, org); !errors.Is(err, ErrInvalidOperation) {
		t.Fatalf("retarget of a non-message = %v", err)
	}
}

// A direct message's origin is its peer; a malformed origin entry is a typed
// refusal.
func TestOriginOf(t *testing.T) {
	peer := transport.PeerInfo{RID: []byte{9}, LifecycleGeneration: 4}
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("x")}
	rec := router.NewRecord(&router.ActorSend{}, nil, payload)
	if got, err := originOf(rec, peer); err != nil || !got.direct(peer) {
		t.Fatalf("direct origin %v, %v", got, err)
	}
	for _, bad := range []string{"", "zz/1", "09/0", "09", "/3", "09/x"} {
		meta, err := router.EncodeMetadata([]router.MetadataEntry{{Key: metaOrigin, Value: bad}})
		if err != nil {
			t.Fatal(err)
		}
		rec := router.NewRecord(&router.ActorSend{}, meta, payload)
		if _, err := originOf(rec, peer); !errors.Is(err, ErrInvalidOperation) {
			t.Errorf("origin %q: %v", bad, err)
		}
	}
}
