package cli

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh"
	"github.com/meshnode/meshnode/spot"
)

// echoObj answers a request with "echo " and its body.
type echoObj struct{}

func (echoObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind != spot.Request {
		return nil
	}
	return t.Reply(append([]byte("echo "), env.Body...))
}

// relayObj answers a request with what the Actor "echo:1" answers to it,
// through the Manager the application kept from Started.
type relayObj struct{ m *atomic.Pointer[mesh.Manager] }

func (r relayObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind != spot.Request {
		return nil
	}
	m := r.m.Load()
	if m == nil {
		return t.Reply([]byte("no manager yet"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := m.GetOrCreateActor(ctx, "echo:1", "test.echo")
	if err != nil {
		return t.Reply([]byte(err.Error()))
	}
	got, err := m.RequestActor(ctx, c.Ref, env.Body)
	if err != nil {
		return t.Reply([]byte(err.Error()))
	}
	return t.Reply(got)
}

// An application embedding cli.Main is handed the node `run` started
// (Started), and its handlers reach other objects through that node's
// Manager: a relay Actor's request creates and asks an echo Actor. Before
// (developer try-out, 2026-12-08) nothing handed the node to the
// application, so the handlers of a binary on the stock `run` could not
// reach any other object.
func TestRunHandsItsNodeToTheApplication(t *testing.T) {
	var m atomic.Pointer[mesh.Manager]
	reg := spot.NewRegistry()
	for _, f := range []spot.Factory{
		{StableType: "test.echo", Kind: spot.KindActor, Policy: spot.PolicyRecreate,
			New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return echoObj{}, nil }},
		{StableType: "test.relay", Kind: spot.KindActor, Policy: spot.PolicyRecreate,
			New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return relayObj{&m}, nil }},
	} {
		if err := reg.Register(f); err != nil {
			t.Fatal(err)
		}
	}
	started := make(chan *mesh.Node, 1)
	Factories, Started = reg, func(n *mesh.Node) {
		m.Store(n.Manager())
		started <- n
	}
	t.Cleanup(func() { Factories, Started = nil, nil })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"run", "--location_store.provider", "memory", "--relocation_store.provider", "memory",
			"--node.endpoint", "tcp://127.0.0.1:0", "--node.object_role", "server", "--log.level", "warn"}, &stdout, &stderr)
	}()
	var n *mesh.Node
	select {
	case n = <-started:
	case code := <-done:
		t.Fatalf("run ended (exit %d) before Started was called:\n%s", code, stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("Started not called within a minute:\n%s", stderr.String())
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	relay, err := n.Manager().CreateActor(rctx, "relay:1", "test.relay")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := n.Manager().RequestActor(rctx, relay, []byte("hi")); err != nil || string(got) != "echo hi" {
		t.Fatalf("the relay answered %q, %v; want \"echo hi\" (its handler reaching echo:1 through the Manager)", got, err)
	}
	cancel() // the stop signal
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("run ended with exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("run did not stop within a minute of its signal:\n%s", stderr.String())
	}
}
