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

// A message body over the frame limit to an object on the sender's own
// node is refused as a send to another node is (ErrInvalidOperation naming
// MaxFrameBytes), a User Spot's too: the object may move before it runs,
// and the move's relay — and a previous owner passing it on — sends it over
// the wire, which failed ErrInvalidRecord and lost the message its sender
// had been told was accepted (a request waited out its deadline). Before,
// a local one was taken into the mailbox.
func TestOversizeLocalMessageIsRefusedAsARemoteOne(t *testing.T) {
	c := newClusterOn(t, newFixture(t), nil, 2, clientRole0)
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "big-local", demoapp.CounterType)
	if err != nil {
		t.Fatal(err)
	}
	sref, err := c.m(0).CreateUserSpot(ctx, demoapp.ChatRoomType)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 65<<20)
	local := c.m(1) // the owner's own Manager
	for name, call := range map[string]func() error{
		"actor send":    func() error { return local.SendActor(ctx, ref, big) },
		"actor request": func() error { _, err := local.RequestActor(ctx, ref, big); return err },
		"spot send":     func() error { return local.SendSpot(ctx, sref, big) },
		"spot request":  func() error { _, err := local.RequestSpot(ctx, sref, big); return err },
	} {
		err := call()
		if !errors.Is(err, ErrInvalidOperation) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "MaxFrameBytes") {
			t.Fatalf("local %s of a %d-byte body: %v, want ErrInvalidOperation naming MaxFrameBytes", name, len(big), err)
		}
	}
	if err := local.SendActor(ctx, ref, []byte("inc")); err != nil {
		t.Fatal(err)
	}
	if got, err := local.RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "1" {
		t.Fatalf("get after the refused bodies: %q, %v; want 1 (nothing refused ran)", got, err)
	}
}
