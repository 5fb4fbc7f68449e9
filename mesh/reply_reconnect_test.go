package mesh

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

// A request's answer whose arrival connection is gone by the time the
// handler answers — the requester's link to the target failed after the
// request arrived — is sent the way a moved request's answer is (the
// target's own link to the requester), and the requester's portable call,
// which waits PortableGrace for such an answer, takes it. It was dropped
// ("reply not sent") and the requester waited out its deadline for an
// answer the target had. Here the requester drops its link while the
// handler runs; the hook stands for the reply's send on the old
// connection failing ErrPeerDown, as it does once the target has seen the
// connection end (the requester reconnecting supersedes it).
func TestReplyAfterItsConnectionWentIsSentAnotherWay(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "reply-reconnect", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	host := ownerIndex(t, c, record.ObjectActor, ref.ActorID)
	from := 1 - host
	if _, err := c.m(from).RequestActor(ctx, ref, []byte("warm")); err != nil { // the route, cached
		t.Fatal(err)
	}
	var dropped atomic.Int32
	c.nodes[host].obj.hooks.Store(&testHooks{arrivalReply: func() error {
		if dropped.Add(1) > 1 {
			return nil
		}
		if err := c.nodes[from].tr.Disconnect(transport.RID(c.nodes[host].RID())); err != nil {
			return fmt.Errorf("test: %w", err)
		}
		return fmt.Errorf("%w: the request's connection is gone (test)", transport.ErrPeerDown)
	}})
	got, err := c.m(from).RequestActor(ctx, ref, []byte("after"))
	if err != nil || string(got) != "echo:after" {
		t.Fatalf("request whose arrival connection went before its answer: %q, %v; want echo:after", got, err)
	}
	if dropped.Load() == 0 {
		t.Fatal("the reply never went through the arrival connection's send")
	}
}
