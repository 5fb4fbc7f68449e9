package mesh

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/spot"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// One node: creation is local (no wire), Find returns the Ready object, and
// Send/Request reach its mailbox through the same fence a remote message
// passes.
func TestLocalCreateFindAndMessage(t *testing.T) {
	c := newCluster(t, 1, nil)
	n, m := c.nodes[0], c.m(0)
	ctx := ctxT(t, 20*time.Second)

	ref, err := m.CreateActor(ctx, "a-1", testActorType)
	if err != nil {
		t.Fatalf("CreateActor: %v", err)
	}
	if ref.ActorID != "a-1" || ref.ObjectGeneration == 0 || string(ref.NodeRID) != string(n.RID()) || ref.MeshName != "objects" {
		t.Fatalf("ref = %+v", ref)
	}
	found, err := m.FindActor(ctx, "a-1")
	if err != nil || found.ObjectGeneration != ref.ObjectGeneration {
		t.Fatalf("FindActor = %+v, %v", found, err)
	}
	for i := 0; i < 3; i++ {
		if err := m.SendActor(ctx, ref, []byte("tick")); err != nil {
			t.Fatalf("SendActor: %v", err)
		}
	}
	// The mailbox is ordered: the request runs after the three sends.
	got, err := m.RequestActor(ctx, ref, []byte("count"))
	if err != nil || string(got) != "count:3" {
		t.Fatalf("RequestActor(count) = %q, %v", got, err)
	}
	if _, err := m.RequestActor(ctx, ref, []byte("boom")); !errors.Is(err, ErrRequestFailed) {
		t.Fatalf("RequestActor(boom) = %v, want ErrRequestFailed", err)
	}

	sref, err := m.CreateUserSpot(ctx, testSpotType)
	if err != nil {
		t.Fatalf("CreateUserSpot: %v", err)
	}
	if !uuidV4.MatchString(sref.SpotID) {
		t.Fatalf("SpotId %q is not a lowercase UUID v4", sref.SpotID)
	}
	got, err = m.RequestSpot(ctx, sref, []byte("hi"))
	if err != nil || string(got) != "echo:hi" {
		t.Fatalf("RequestSpot = %q, %v", got, err)
	}
	gc, err := m.GetOrCreateUserSpot(ctx, "room-1", testSpotType)
	if err != nil || gc.Outcome != Created {
		t.Fatalf("GetOrCreateUserSpot = %+v, %v", gc, err)
	}
	again, err := m.GetOrCreateUserSpot(ctx, "room-1", testSpotType)
	if err != nil || again.Outcome != Existing || again.Ref.ObjectGeneration != gc.Ref.ObjectGeneration {
		t.Fatalf("second GetOrCreateUserSpot = %+v, %v", again, err)
	}
	st := n.ObjectStats()
	if st.Hosted != 4 { // the Entry Spot, a-1, the issued spot, room-1
		t.Fatalf("hosted = %d, want 4", st.Hosted)
	}
	if _, ok := n.obj.rt.Get(spot.Key{Spot: true, ID: entrySpotID(n.run)}); !ok {
		t.Fatal("the Server node has no Entry Spot")
	}
}

// Three nodes; node 0 has placement weight 0, so everything node 0 creates
// is created remotely (commands 49/47) and every message it sends crosses
// the wire (24/25, 21/22 answered by 20).
func TestRemoteCreateAndMessaging(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *config.Config) {
		if i == 0 {
			cfg.Node.PlacementWeight = 0
		}
	})
	ctx := ctxT(t, 30*time.Second)
	m := c.m(0)
	placed := map[int]int{}
	var refs []ActorRef
	for i := 0; i < 8; i++ {
		ref, err := m.CreateActor(ctx, fmt.Sprintf("remote-%d", i), testActorType, WithBody([]byte("x")))
		if err != nil {
			t.Fatalf("CreateActor %d: %v", i, err)
		}
		at := c.indexOf(ref.NodeRID)
		if ref.MeshName != "objects" || ref.ObjectGeneration == 0 {
			t.Fatalf("ref %+v", ref)
		}
		if at <= 0 {
			t.Fatalf("actor %d placed on node %d; weight 0 must exclude node 0", i, at)
		}
		placed[at]++
		refs = append(refs, ref)
	}
	for _, ref := range refs {
		if err := m.SendActor(ctx, ref, []byte("tick")); err != nil {
			t.Fatal(err)
		}
		got, err := m.RequestActor(ctx, ref, []byte("count"))
		if err != nil || string(got) != "count:1" {
			t.Fatalf("RequestActor(%s) = %q, %v", ref.ActorID, got, err)
		}
		got, err = m.RequestActor(ctx, ref, []byte("whoami"))
		if err != nil || string(got) != ref.ActorID {
			t.Fatalf("whoami = %q, %v", got, err)
		}
	}
	var delivered uint64
	for _, n := range c.nodes[1:] {
		delivered += n.ObjectStats().Delivered
	}
	if delivered != uint64(3*len(refs)) {
		t.Fatalf("targets delivered %d messages, want %d", delivered, 3*len(refs))
	}
	if c.nodes[0].ObjectStats().Delivered != 0 {
		t.Fatal("node 0 delivered messages although it hosts nothing")
	}

	// A User Spot created remotely, messaged from a third node.
	sref, err := m.CreateUserSpot(ctx, testSpotType, InMesh("objects"))
	if err != nil {
		t.Fatalf("CreateUserSpot: %v", err)
	}
	if c.indexOf(sref.NodeRID) <= 0 || sref.MeshName != "objects" {
		t.Fatalf("spot placed on node %d", c.indexOf(sref.NodeRID))
	}
	other := 1
	if c.indexOf(sref.NodeRID) == 1 {
		other = 2
	}
	got, err := c.m(other).RequestSpot(ctx, sref, []byte("hello"))
	if err != nil || string(got) != "echo:hello" {
		t.Fatalf("RequestSpot from node %d = %q, %v", other, got, err)
	}
	// Find from any node gives the same ref.
	for i := range c.nodes {
		f, err := c.m(i).FindSpot(ctx, sref.SpotID)
		if err != nil || f.ObjectGeneration != sref.ObjectGeneration || string(f.NodeRID) != string(sref.NodeRID) {
			t.Fatalf("FindSpot on node %d = %+v, %v", i, f, err)
		}
	}
	t.Logf("placement of 8 actors: node1=%d node2=%d", placed[1], placed[2])
}

// §11: Close stops object work first — a request queued behind a busy turn
// is answered (not lost), later messages are refused — and the owner sweep
// then removes the node's authority rows, so the objects are gone for
// everyone.
func TestCloseAnswersQueuedWorkAndEndsObjects(t *testing.T) {
	c := clientAndServer(t)
	ctx := ctxT(t, 20*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "closing", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.m(0).RequestActor(ctx, ref, []byte("warm")); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		body []byte
		err  error
	}
	busy, queued := make(chan answer, 1), make(chan answer, 1)
	go func() { b, err := c.m(0).RequestActor(ctx, ref, []byte("block:closing")); busy <- answer{b, err} }()
	eventually(t, 5*time.Second, "the busy turn to start", func() bool { return c.nodes[1].ObjectStats().Delivered >= 2 })
	go func() { b, err := c.m(0).RequestActor(ctx, ref, []byte("queued")); queued <- answer{b, err} }()
	eventually(t, 5*time.Second, "the second request to queue", func() bool { return c.nodes[1].ObjectStats().Delivered >= 3 })
	closed := make(chan error, 1)
	go func() { closed <- c.nodes[1].Close(ctx) }()
	close(c.probe.gate("closing"))
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Neither request is lost: the busy one finishes its turn, the queued
	// one runs or is answered with a closed failure.
	if a := <-busy; a.err != nil || string(a.body) != "unblocked" {
		t.Fatalf("busy request = %q, %v", a.body, a.err)
	}
	if a := <-queued; a.err != nil && !errors.Is(a.err, ErrUnavailable) {
		t.Fatalf("queued request = %q, %v", a.body, a.err)
	}
	if _, err := c.m(1).CreateActor(ctx, "after-close", testActorType); !errors.Is(err, ErrClosed) {
		t.Fatalf("CreateActor on a closed node = %v, want ErrClosed", err)
	}
	// The owner swept its rows: the object no longer exists.
	_, err = c.m(0).FindActor(ctx, "closing")
	wantIs(t, err, ErrNotFound)
	_, err = c.m(0).RequestActor(ctx, ref, []byte("late"))
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("RequestActor after the owner closed = %v", err)
	}
}
