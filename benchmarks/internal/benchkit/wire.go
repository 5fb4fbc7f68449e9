package benchkit

import (
	"context"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// --- a move's records ---------------------------------------------------------

// MoveBinding is the binding of a move from src, shaped like the mesh's
// (128-bit relocation id, target attempt, a UUID owner id).
func MoveBinding(src transport.RID) router.RelocationBinding {
	return router.RelocationBinding{Relocation: router.RelocationID{High: 1, Low: 2}, TargetAttempt: 3,
		Source: router.SourceFence{SourceOwnerID: "6f1c2b8e-3d4a-4c5b-9e6f-7a8b9c0d1e2f", SourceOwnerLeaseGeneration: 8,
			SourceNodeRID: src, SourceNodeGeneration: 1}}
}

// MovePrepare is the Restore request (40) of Blob id to dst, declaring tr.
func MovePrepare(bind router.RelocationBinding, dst transport.RID, id string, tr chunk.Transfer) *router.Record {
	return router.NewRecord(&router.RelocationPrepare{Binding: bind,
		Object: router.RelocationObject{Kind: router.StatefulActor, ObjectID: id, StableType: BlobType,
			ObjectGeneration: 1, ExpectedAuthorityOwnerGeneration: 1},
		TargetNodeRID: dst, TargetNodeGeneration: 1, TotalLength: tr.Declaration.Length,
		ChunkCount: tr.Declaration.Count, CRC32C: tr.Declaration.CRC32C,
		DeadlineUnixMs: uint64(time.Now().Add(time.Minute).UnixMilli())}, nil, nil)
}

// MoveChunk is chunk i (52) of a move.
func MoveChunk(bind router.RelocationBinding, i int, data []byte) *router.Record {
	return router.NewRecord(&router.RelocationState{Binding: bind, ChunkIndex: uint32(i), Data: data}, nil, nil)
}

// MoveReady is the relay-ready answer (53) the target gives a Restore
// request once it has every chunk.
func MoveReady(prep *router.RelocationPrepare) *router.Record {
	return router.NewRecord(&router.RelocationReady{Correlation: prep.Correlation, Relocation: prep.Binding.Relocation,
		TargetAttempt: prep.Binding.TargetAttempt, Outcome: router.RelocationRelayReady}, nil, nil)
}

// MoveCutover is the one-way cutover (54) of a move.
func MoveCutover(bind router.RelocationBinding) *router.Record {
	return router.NewRecord(&router.RelocationCutover{Binding: bind}, nil, nil)
}

// MoveFrames is the encoded records of one move of a Blob id whose Restore
// payload is payload, cut in chunkSize chunks, as the mesh sends them: the
// source's 40 and 52s (toTarget), the target's 53 (back) and the source's
// 54 (cutover). The correlation is a fixed nonzero one: the sizes are the
// mesh's.
func MoveFrames(b *testing.B, id string, payload []byte, chunkSize int) (toTarget [][][]byte, back, cutover [][]byte) {
	b.Helper()
	tr, err := chunk.Split(payload, chunkSize)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := transport.RID("0123456789abcdef"), transport.RID("fedcba9876543210")
	bind := MoveBinding(src)
	prep := MovePrepare(bind, dst, id, tr)
	body, _ := prep.Body.(*router.RelocationPrepare)
	body.Correlation = 0x0123456789abcdef
	recs := []*router.Record{prep}
	for i, c := range tr.Chunks {
		recs = append(recs, MoveChunk(bind, i, c))
	}
	enc := func(r *router.Record) [][]byte {
		f, err := router.Encode(r)
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	for _, r := range recs {
		toTarget = append(toTarget, enc(r))
	}
	return toTarget, enc(MoveReady(body)), enc(MoveCutover(bind))
}

// --- stock zmq4 ---------------------------------------------------------------

// Zmq4Router is a stock zmq4 ROUTER listening on loopback TCP, closed when
// the benchmark ends.
func Zmq4Router(b *testing.B) zmq4.Socket {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := zmq4.NewRouter(ctx)
	b.Cleanup(func() { _ = r.Close(); cancel() })
	if err := r.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	return r
}

// Zmq4Dealer is a stock zmq4 DEALER named id connected to r, closed when
// the benchmark ends (before r).
func Zmq4Dealer(b *testing.B, r zmq4.Socket, id string) zmq4.Socket {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := zmq4.NewDealer(ctx, zmq4.WithID(zmq4.SocketIdentity(id)))
	b.Cleanup(func() { _ = d.Close(); cancel() })
	if err := d.Dial("tcp://" + r.Addr().String()); err != nil {
		b.Fatal(err)
	}
	return d
}
