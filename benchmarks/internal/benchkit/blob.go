package benchkit

import (
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/spot"
)

// BlobType is the stable type of the moved Actor of the relocation suites.
const BlobType = "bench.blob"

// Blob is a movable PreserveStateWith Actor whose state is an opaque byte
// string of random (incompressible) bytes, handed to and taken from the
// framework without a copy, so that the figures price the framework, not
// the application's snapshot. "ping" is answered "pong", "crc" with the
// CRC-32 of the state (to check that the state survived the moves).
type Blob struct {
	id    string
	state []byte
}

// Receive implements spot.Handler.
func (o *Blob) Receive(t *spot.Turn, env spot.Envelope) error {
	switch string(env.Body) {
	case "ping":
		return t.Reply([]byte("pong"))
	case "crc":
		return t.Reply([]byte(strconv.FormatUint(uint64(crc32.ChecksumIEEE(o.state)), 10)))
	}
	return fmt.Errorf("blob: unknown request %q", env.Body)
}

// BlobWatch hears the moves of watched Blobs: Captured on the source when
// the snapshot adapter takes the state (the object is held from then on),
// Arrived on the target from spot.Relocated (the owner change is recorded,
// dispatch is still closed). Both run on the move's path: keep them cheap.
type BlobWatch interface {
	Captured(id string)
	Arrived(id string)
}

// watchedBlob is a Blob that reports its arrivals.
type watchedBlob struct {
	*Blob
	w BlobWatch
}

// Relocated implements spot.Relocated.
func (o watchedBlob) Relocated(_ context.Context, info spot.RelocationInfo) error {
	o.w.Arrived(info.ID)
	return nil
}

// blobSnapshot hands the state over as is: the framework copies it into
// the payload (chunk.Encode) and the target keeps the decoded bytes.
type blobSnapshot struct{ w BlobWatch }

func (s blobSnapshot) handler(id string, state []byte) spot.Handler {
	b := &Blob{id: id, state: state}
	if s.w == nil {
		return b
	}
	return watchedBlob{Blob: b, w: s.w}
}

func (s blobSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	var o *Blob
	switch h := h.(type) {
	case *Blob:
		o = h
	case watchedBlob:
		o = h.Blob
	default:
		return nil, fmt.Errorf("blob snapshot: handler is a %T", h)
	}
	if s.w != nil {
		s.w.Captured(o.id)
	}
	return o.state, nil
}

func (s blobSnapshot) Restore(_ context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	return s.handler(req.ID, state), nil
}

// RandomState is size incompressible bytes, the same for a size.
func RandomState(size int) []byte {
	s := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{byte(size), byte(size >> 8), byte(size >> 16), byte(size >> 24)}).Read(s)
	return s
}

// RegisterBlob registers the Blob type with a state of size bytes; with a
// watch (nil: none) its instances report their moves to it.
func RegisterBlob(size int, w BlobWatch) func(*spot.Registry) error {
	snap := blobSnapshot{w: w}
	return func(r *spot.Registry) error {
		return r.Register(spot.Factory{StableType: BlobType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
			Snapshot: snap, New: func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
				return snap.handler(req.ID, RandomState(size)), nil
			}})
	}
}

// BlobPayload is the Restore payload of Blob id with a state of size
// bytes, encoded as the mesh encodes it (same size on the wire).
func BlobPayload(b *testing.B, id string, size int) []byte {
	b.Helper()
	p, err := chunk.Encode(&chunk.Payload{Object: chunk.Object{Kind: spot.KindActor, ID: id, Generation: 1,
		StableType: BlobType}, Policy: spot.PolicyPreserveState, State: RandomState(size)}, chunk.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return p
}
