package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
)

// A closed node's Manager answers every call ErrClosed, as docs/EMBEDDING.md
// §11 and the Manager's error vocabulary say ("ErrClosed: the node is
// shutting down"). Before, only creations, Destroy/Close, relocations and
// Instance Spot calls did: Find, Send, Request and BindSession went on
// reading the store (a store passed in Options is still open) and answered
// from it — a message to an object alive on another node ErrUnavailable
// (the transport was closed) and a Find its ref, an object the closed node
// had owned ErrNotFound, which an application takes for a destroyed object.
func TestClosedNodesManagerAnswersErrClosed(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "alive-1", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	// The node closed is a server that does not own the Actor: the Actor
	// stays alive on the other one.
	closing := 1
	if c.indexOf(ref.NodeRID) == 1 {
		closing = 2
	}
	m := c.m(closing)
	if _, err := m.RequestActor(ctx, ref, []byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[closing].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"FindActor": func() error { _, err := m.FindActor(ctx, ref.ActorID); return err },
		"FindSpot":  func() error { _, err := m.FindSpot(ctx, "some-spot"); return err },
		"SendActor": func() error { return m.SendActor(ctx, ref, []byte("late")) },
		"RequestActor": func() error {
			_, err := m.RequestActor(ctx, ref, []byte("late"))
			return err
		},
		"SendSpot": func() error { return m.SendSpot(ctx, SpotRef{SpotID: "some-spot", ObjectGeneration: 1}, nil) },
		"RequestSpot": func() error {
			_, err := m.RequestSpot(ctx, SpotRef{SpotID: "some-spot", ObjectGeneration: 1}, nil)
			return err
		},
		"BindSession": func() error { _, err := m.BindSession(ctx, ref); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed node: %v, want ErrClosed", name, err)
		}
	}
	// The Actor itself is alive: the other nodes reach it.
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("after")); err != nil {
		t.Fatal(err)
	}
}

// WaitPeers on a node that has stopped returns ErrClosed instead of
// waiting for its context — for ever, without a deadline — for peers a
// stopped node never admits.
func TestWaitPeersOnAStoppedNodeIsErrClosed(t *testing.T) {
	c := newCluster(t, 1, nil)
	if err := c.nodes[0].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a failing run from hanging.
	ctx := ctxT(t, 30*time.Second)
	if err := c.nodes[0].WaitPeers(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitPeers on a stopped node: %v, want ErrClosed", err)
	}
}
