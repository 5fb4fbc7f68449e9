package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// An Instance Spot activation the factory declines is ErrRejected with a
// *RejectedError, as docs/EMBEDDING.md §11 says for every decline, whether
// the requester is the activating node itself or another one. Before, the
// activating node answered an error that matched ErrRejected but was no
// *RejectedError, and a requester on another node got ErrRequestFailed
// (the decline travelled as internalError/requestFailed, wireFailure had
// no case for it) — the same decline, two error classes by where the
// caller ran.
func TestDeclinedInstanceActivationIsErrRejected(t *testing.T) {
	f := newFixture(t)
	const typ = "test.declining-instance"
	if err := f.reg.Register(spot.Factory{StableType: typ, Kind: spot.KindInstanceSpot, Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return nil, &spot.Declined{Reason: "no such customer"}
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 2, clientRole0) // node 0 a client, node 1 the only server
	ctx := ctxT(t, 30*time.Second)
	for _, from := range []int{1, 0} {
		_, err := c.m(from).RequestInstance(ctx, "cart:nobody", []byte("hi"), InstanceType(typ))
		var rej *RejectedError
		if !errors.Is(err, ErrRejected) || !errors.As(err, &rej) {
			t.Errorf("RequestInstance from node %d: %v; want ErrRejected and a *RejectedError", from, err)
			continue
		}
		if errors.Is(err, ErrRequestFailed) || errors.Is(err, ErrUnavailable) {
			t.Errorf("RequestInstance from node %d: %v also matches another class", from, err)
		}
		if rej.ID != "cart:nobody" {
			t.Errorf("RequestInstance from node %d: RejectedError names %q", from, rej.ID)
		}
		if from == 1 && rej.Reason != "no such customer" {
			t.Errorf("the activating node's RejectedError: reason %q", rej.Reason)
		}
	}
	if _, err := c.m(0).FindInstance(ctx, "cart:nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindInstance after the declines: %v, want ErrNotFound", err)
	}
}
