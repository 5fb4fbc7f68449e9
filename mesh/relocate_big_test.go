package mesh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// blob is an Actor whose whole state is one byte slice; "sum" answers its
// SHA-256.
type blob struct{ data []byte }

func (b *blob) Receive(t *spot.Turn, env spot.Envelope) error {
	sum := sha256.Sum256(b.data)
	return t.Reply([]byte(hex.EncodeToString(sum[:])))
}

type blobSnapshot struct{}

func (blobSnapshot) Snapshot(h spot.Handler) ([]byte, error) { return h.(*blob).data, nil }
func (blobSnapshot) Restore(_ context.Context, _ spot.CreateRequest, state []byte) (spot.Handler, error) {
	return &blob{data: append([]byte(nil), state...)}, nil
}

// A 64 MiB state moves intact: 64 Restore chunks on the ordered connection,
// assembled and verified (CRC-32C) on the target, restored byte for byte.
func TestRelocate64MiBState(t *testing.T) {
	const size = 64 << 20
	state := make([]byte, size)
	rand.New(rand.NewSource(7)).Read(state)
	want := sha256.Sum256(state)
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: "test.blob", Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
		Snapshot: blobSnapshot{}, New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return &blob{data: state}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 120*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "blob", "test.blob")
	if err != nil {
		t.Fatal(err)
	}
	src := ownerIndex(t, c, record.ObjectActor, "blob")
	res, err := c.m(src).RelocateActor(ctx, ref)
	if err != nil || res.Outcome != Moved || !res.Confirmed {
		t.Fatalf("move: %+v, %v", res, err)
	}
	if res.PayloadBytes < size {
		t.Fatalf("payload %d bytes for a %d-byte state", res.PayloadBytes, size)
	}
	if got := ownerIndex(t, c, record.ObjectActor, "blob"); got == src {
		t.Fatal("the owner did not change")
	}
	got, err := c.m(0).RequestActor(ctx, ref, []byte("sum"))
	if err != nil || string(got) != hex.EncodeToString(want[:]) {
		t.Fatalf("state after the move: %q, %v", got, err)
	}
	t.Logf("64 MiB moved in %v (restore stream %v)", res.Timings.Total, res.Timings.Restore)
}
