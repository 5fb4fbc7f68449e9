package mesh

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// typedNilObj is a Handler with a pointer receiver that uses its fields,
// as most are: a nil *typedNilObj fails every turn.
type typedNilObj struct{ n int }

func (o *typedNilObj) Receive(t *spot.Turn, env spot.Envelope) error {
	o.n++
	if env.Kind == spot.Request {
		return t.Reply([]byte("ok"))
	}
	return nil
}

type typedNilSnapshot struct{}

func (typedNilSnapshot) Snapshot(spot.Handler) ([]byte, error) { return nil, nil }

func (typedNilSnapshot) Restore(context.Context, spot.CreateRequest, []byte) (spot.Handler, error) {
	var h *typedNilObj // an application's "not found" path returning its nil pointer
	return h, nil
}

// A factory's New, or a snapshot adapter's Restore, that returns a nil
// pointer of its handler type (a typed nil in a non-nil spot.Handler) and
// no error is refused as returning no handler, like an untyped nil: the
// creation fails ErrCreateFailed and leaves no record, the move ends
// NotMoved (targetFailed) with the object still served on its source.
// Before, the nil pointer passed the nil check: the creation succeeded
// and every message to the object failed (a nil dereference in Receive,
// recovered as a handler panic), and a move replaced a working object by
// such a broken one.
func TestFactoryOrRestoreReturningATypedNilHandlerFails(t *testing.T) {
	f := newFixture(t)
	for _, fac := range []spot.Factory{
		{StableType: "test.typednil.new", Kind: spot.KindActor, Policy: spot.PolicyDisabled,
			New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
				var h *typedNilObj
				return h, nil
			}},
		{StableType: "test.typednil.restore", Kind: spot.KindActor, Policy: spot.PolicyPreserveState, Snapshot: typedNilSnapshot{},
			New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return &typedNilObj{}, nil }},
	} {
		if err := f.reg.Register(fac); err != nil {
			t.Fatal(err)
		}
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	ctx := ctxT(t, 60*time.Second)

	_, err := c.m(0).CreateActor(ctx, "typed-nil-new", "test.typednil.new")
	if !errors.Is(err, ErrCreateFailed) || !strings.Contains(err.Error(), "no handler") {
		t.Fatalf("CreateActor with a factory returning a nil *typedNilObj: %v, want ErrCreateFailed (no handler)", err)
	}
	if rowOf(t, c, record.ObjectActor, "typed-nil-new").Found {
		t.Fatal("the failed creation left its record")
	}

	ref, err := c.m(0).CreateActor(ctx, "typed-nil-restore", "test.typednil.restore")
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, "typed-nil-restore")
	res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, "typed-nil-restore", ref.ObjectGeneration))
	if res.Outcome != NotMoved || !strings.Contains(res.Detail, "no handler") {
		t.Fatalf("move with Restore returning a nil *typedNilObj: %v (%s: %s), want notMoved (…no handler…)", res.Outcome, res.Reason, res.Detail)
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "ok" {
		t.Fatalf("after the failed move: %q, %v; want ok from the source", got, err)
	}
}
