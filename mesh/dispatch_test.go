package mesh

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// A command with no dispatch entry is a protocol error: a request gets a
// typed command 20 at once (its sender does not wait for its deadline), a
// one-way record is dropped, both are counted, and the node keeps serving.
func TestUnhandledCommandGetsProtocolError(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "dispatch", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	target := c.nodes[1]
	// Stand for a command this node does not speak: drop two entries.
	delete(target.obj.dispatch, router.CmdActorRequest)
	delete(target.obj.dispatch, router.CmdActorSend)
	before := target.obj.stats.unhandled.Load()

	h, _ := target.obj.hostedFor(actorKey("dispatch"))
	_, leaseGen := target.Owner()
	fence := router.ActorRouteFence{Actor: router.ActorRef{ActorID: "dispatch", ObjectGeneration: ref.ObjectGeneration},
		TargetNodeRID: target.RID(), TargetNodeGeneration: target.LifecycleGeneration(),
		ExpectedAuthorityOwnerGeneration: h.ownerGeneration, ExpectedOwnerLeaseGeneration: leaseGen}
	payload := &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("count")}
	if err := c.nodes[0].Transport().Send(ctx, transport.RID(target.RID()), router.NewRecord(&router.ActorSend{TargetActor: fence}, nil, payload)); err != nil {
		t.Fatal(err)
	}
	resp, err := c.nodes[0].Transport().Request(ctx, transport.RID(target.RID()),
		router.NewRecord(&router.ActorRequest{Operation: opIDOf(NewOperationID()), TargetActor: fence}, nil, payload))
	if err != nil {
		t.Fatal(err)
	}
	rep, ok := resp.Body.(*router.Reply)
	if !ok || rep.Result != router.ResultProtocolError || rep.FailureCode != router.FailRequestProtocolError {
		t.Fatalf("answer %v, want protocolError/requestProtocolError", resp.Body)
	}
	// The one-way record went first on the same ordered connection, so it
	// was counted before the request was answered.
	if got := target.obj.stats.unhandled.Load() - before; got != 2 {
		t.Fatalf("unhandled counted %d, want 2", got)
	}
	// Other traffic goes on: a Spot create still works on that node.
	if _, err := c.m(0).CreateUserSpot(ctx, testSpotType); err != nil {
		t.Fatalf("node stopped serving: %v", err)
	}
}

// Command 39 never meets silence: a cold activation this node cannot take (the
// type is not one of its Instance Spot types) is answered at once with a
// typed command 20, so its sender does not wait for its deadline.
func TestInstanceSpotRequestIsAnswered(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	target := c.nodes[1]
	rec := router.NewRecord(&router.InstanceSpot{
		Route: router.InstanceRoute{Kind: router.InstanceRouteColdActivation, Cold: &router.InstanceColdRoute{
			TargetNodeRID: target.RID(), TargetNodeGeneration: target.LifecycleGeneration(), TargetSpotID: "room-7",
			TargetMeshName: "objects", StableType: testSpotType, TargetDescriptorVersion: "1",
			DeadlineUnixMs: uint64(time.Now().Add(10 * time.Second).UnixMilli())}},
		SourceNodeGeneration: c.nodes[0].LifecycleGeneration(), SourceNodeRID: c.nodes[0].RID(),
		OperationKind: router.InstanceRequest, Operation: opIDOf(NewOperationID()), ReplyRouteID: 77,
	}, nil, &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("hello")})
	start := time.Now()
	resp, err := c.nodes[0].Transport().Request(ctx, transport.RID(target.RID()), rec)
	if err != nil {
		t.Fatal(err)
	}
	rep, ok := resp.Body.(*router.Reply)
	if !ok || rep.Result == router.ResultOK {
		t.Fatalf("answer %v, want a typed failure", resp.Body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("answered after %v: the sender waited", took)
	}
}

// Command 39 with a Ready route is a Spot message under an exact authority
// fence (§7.1 "A Ready record exists"): the right fence is delivered and
// answered, a stale one is refused with a typed answer.
func TestInstanceSpotReadyRoute(t *testing.T) {
	c := instanceCluster(t, false, 2)
	ctx := ctxT(t, 20*time.Second)
	if _, err := c.m(0).RequestInstance(ctx, "ready-route", []byte("whoami")); err != nil {
		t.Fatal(err)
	}
	a, _ := c.instanceRecord(t, "ready-route")
	target := c.nodes[1]
	send := func(ownerGen uint64) *router.Reply {
		t.Helper()
		rec := router.NewRecord(&router.InstanceSpot{
			Route: router.InstanceRoute{Kind: router.InstanceRouteReady, Ready: &router.InstanceReadyRoute{
				TargetNodeRID: target.RID(), TargetNodeGeneration: target.LifecycleGeneration(), TargetSpotID: "ready-route",
				Authority: router.AuthorityGenerationFence{ObjectGeneration: uint64(a.ObjectGeneration), OwnerID: a.OwnerID,
					AuthorityOwnerGeneration: ownerGen, LeaseGeneration: uint64(a.OwnerLeaseGeneration), StoreVersion: "1"}}},
			SourceNodeGeneration: c.nodes[0].LifecycleGeneration(), SourceNodeRID: c.nodes[0].RID(),
			OperationKind: router.InstanceRequest, Operation: opIDOf(NewOperationID()),
		}, nil, &router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("hello")})
		resp, err := c.nodes[0].Transport().Request(ctx, transport.RID(target.RID()), rec)
		if err != nil {
			t.Fatal(err)
		}
		rep, ok := resp.Body.(*router.Reply)
		if !ok {
			t.Fatalf("answer %v", resp.Body)
		}
		if rep.Result == router.ResultOK && (resp.Payload == nil || string(resp.Payload.Data) != "echo:hello") {
			t.Fatalf("payload %v", resp.Payload)
		}
		return rep
	}
	if rep := send(uint64(a.AuthorityOwnerGeneration)); rep.Result != router.ResultOK {
		t.Fatalf("exact fence answered %s/%s", rep.Result, rep.FailureCode)
	}
	if rep := send(uint64(a.AuthorityOwnerGeneration) + 1); rep.Result == router.ResultOK {
		t.Fatal("a stale fence was delivered")
	}
}
