package chunk

import (
	"bytes"
	"testing"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// The bounds here must sit inside the wire's (router/relocation.go), and
// the checksum must be the one the wire declares.
func TestBoundsMatchTheWire(t *testing.T) {
	if MaxChunkCount != router.RelocationChunkCount {
		t.Errorf("MaxChunkCount %d, wire %d", MaxChunkCount, router.RelocationChunkCount)
	}
	if MaxChunkSize > router.RelocationChunkBytes {
		t.Errorf("MaxChunkSize %d above the wire's %d", MaxChunkSize, router.RelocationChunkBytes)
	}
	if MaxPayloadBound > router.RelocationLogicalBytes {
		t.Errorf("MaxPayloadBound %d above the wire's %d", MaxPayloadBound, router.RelocationLogicalBytes)
	}
	b := randBytes(newRand(1), 10000)
	if router.UpdateCRC32C(router.CRC32C(b[:3000]), b[3000:]) != router.CRC32C(b) {
		t.Error("UpdateCRC32C does not extend CRC32C")
	}
}

// TestBindingWireRoundTrip: BindingOf and Wire are inverse.
func TestBindingWireRoundTrip(t *testing.T) {
	rb := router.RelocationBinding{Relocation: router.RelocationID{High: 1, Low: 2}, TargetAttempt: 3,
		Source: router.SourceFence{SourceOwnerID: "o", SourceOwnerLeaseGeneration: 4, SourceNodeRID: []byte{9}, SourceNodeGeneration: 5}}
	b := BindingOf(rb)
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	back := b.Wire()
	if back.Relocation != rb.Relocation || back.TargetAttempt != rb.TargetAttempt || back.Source.SourceOwnerID != "o" ||
		!bytes.Equal(back.Source.SourceNodeRID, rb.Source.SourceNodeRID) || back.Source.SourceNodeGeneration != 5 ||
		back.Source.SourceOwnerLeaseGeneration != 4 || BindingOf(back) != b {
		t.Fatalf("round trip: %+v -> %+v -> %+v", rb, b, back)
	}
}

// A whole handoff through the real wire codec: the source encodes, splits
// and sends 40 + 52s; the target decodes the records, assembles under the
// binding it read from them, verifies and decodes the payload.
func TestHandoffThroughWireRecords(t *testing.T) {
	p := &Payload{
		Object:   Object{Kind: spot.KindActor, ID: "cart/42", Generation: 3, StableType: "demo.Cart"},
		Policy:   spot.PolicyPreserveState,
		State:    jsonState(newRand(2), 500),
		Captured: spot.Captured{Queue: messageQueue(newRand(3), 100)},
	}
	payload, err := Encode(p, EncodeOptions{Compression: CompressS2})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Split(payload, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	rb := router.RelocationBinding{
		Relocation:    router.RelocationID{High: 7, Low: 9},
		TargetAttempt: 2,
		Source: router.SourceFence{SourceOwnerID: "owner-a", SourceOwnerLeaseGeneration: 4,
			SourceNodeRID: []byte{0, 1, 2}, SourceNodeGeneration: 5},
	}
	send := func(body router.Body) router.Body {
		frames, err := router.Encode(router.NewRecord(body, nil, nil))
		if err != nil {
			t.Fatalf("encode %v: %v", body.Command(), err)
		}
		rec, err := router.Decode(frames)
		if err != nil {
			t.Fatalf("decode %v: %v", body.Command(), err)
		}
		return rec.Body
	}
	req := send(&router.RelocationPrepare{
		Correlation: 1, Binding: rb,
		Object:        router.RelocationObject{Kind: router.StatefulActor, ObjectID: p.Object.ID, StableType: p.Object.StableType, ObjectGeneration: 3, ExpectedAuthorityOwnerGeneration: 8},
		TargetNodeRID: []byte{9}, TargetNodeGeneration: 1,
		TotalLength: tr.Length, ChunkCount: tr.Count, CRC32C: tr.CRC32C, DeadlineUnixMs: 1,
	}).(*router.RelocationPrepare)

	reg := newReg(t, Limits{})
	b := BindingOf(req.Binding)
	if _, err := reg.Begin(b, Declaration{Length: req.TotalLength, Count: req.ChunkCount, CRC32C: req.CRC32C}); err != nil {
		t.Fatal(err)
	}
	var progress Progress
	for i, c := range tr.Chunks {
		st := send(&router.RelocationState{Binding: rb, ChunkIndex: uint32(i), Data: c}).(*router.RelocationState)
		if progress, err = reg.Add(BindingOf(st.Binding), st.ChunkIndex, st.Data); err != nil {
			t.Fatal(err)
		}
	}
	if !progress.Ready {
		t.Fatalf("not ready after all chunks: %+v", progress)
	}
	out, err := reg.Complete(b)
	if err != nil || !bytes.Equal(out, payload) {
		t.Fatalf("complete: %v", err)
	}
	got, err := Decode(out, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	equalPayload(t, p, got)
	cancel := send(&router.RelocationCancel{Binding: rb}).(*router.RelocationCancel)
	reg.Abort(BindingOf(cancel.Binding))
	if _, err := reg.Begin(b, Declaration{Length: req.TotalLength, Count: req.ChunkCount, CRC32C: req.CRC32C}); err == nil {
		t.Fatal("a cancelled binding was restarted")
	}
}
