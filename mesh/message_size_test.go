package mesh

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/demoapp"
)

// A message body over the transport's frame limit (MaxFrameBytes, 64 MiB +
// 64 KiB) to an object on another node is refused at once as the caller's
// ErrInvalidOperation, naming the limit; the object and the link go on.
// Before, a one-way send was accepted and then took the link down and up
// for good (the peer's guard closed every connection at its header), every
// later message to that node stuck behind it.
func TestOversizeMessageIsRefusedAndTheLinkGoesOn(t *testing.T) {
	c := newClusterOn(t, newFixture(t), nil, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "big-body", demoapp.CounterType)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 65<<20)
	for name, call := range map[string]func() error{
		"send":    func() error { return c.m(0).SendActor(ctx, ref, big) },
		"request": func() error { _, err := c.m(0).RequestActor(ctx, ref, big); return err },
	} {
		err := call()
		if !errors.Is(err, ErrInvalidOperation) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "MaxFrameBytes") {
			t.Fatalf("%s of a %d-byte body: %v, want ErrInvalidOperation naming MaxFrameBytes", name, len(big), err)
		}
	}
	if err := c.m(0).SendActor(ctx, ref, []byte("inc")); err != nil {
		t.Fatal(err)
	}
	if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "1" {
		t.Fatalf("get after the refused bodies: %q, %v; want 1", got, err)
	}
}
