package mesh

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
)

// An Actor's host drops the binding of a Session whose node run is gone:
// before, every Session ever bound to an Actor moved with it and got a
// command 44 per move for ever (a client restarting, or binding Sessions
// from short-lived processes, made both grow). Two clients bind a Session
// each; a first move keeps both bindings (both runs live); the second
// client stops; once the host's descriptor lists show it gone, the next
// move carries only the live client's binding, which still switches and
// delivers.
func TestBindingsOfAGoneSessionRunAreDropped(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 4, func(i int, cfg *config.Config) {
		if i == 0 || i == 3 {
			cfg.Node.ObjectRole = config.RoleClient
		}
	})
	ctx := ctxT(t, 60*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "sess-prune", seqType)
	if err != nil {
		t.Fatal(err)
	}
	live, err := c.m(0).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	leaving, err := c.m(3).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		s    *Session
		name string
	}{{live, "live"}, {leaving, "leaving"}} {
		if err := s.s.Send(ctx, []byte("s:"+s.name+":1")); err != nil {
			t.Fatal(err)
		}
	}
	home := c.indexOf(live.Actor().NodeRID)
	other := 3 - home
	bound := func(at int) map[string]uint64 { return c.nodes[at].obj.hostedSessions(actorKey(ref.ActorID)) }
	waitUntil(t, "both bindings on the host", func() bool { return len(bound(home)) == 2 })

	move := func(from, to int) {
		t.Helper()
		res, err := c.m(from).RelocateActor(ctx, ref, ToNode(c.nodes[to].RID()))
		if err != nil || res.Outcome != Moved || !res.Confirmed {
			t.Fatalf("move %d → %d: %+v, %v", from, to, res, err)
		}
	}
	move(home, other)
	if got := bound(other); len(got) != 2 {
		t.Fatalf("after a move with both Sessions' runs live: %d bindings on the target, want 2", len(got))
	}

	if err := c.nodes[3].Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, from, _ := c.nodes[other].lastSnapshotNumbered()
	waitUntil(t, "two descriptor lists without the stopped client", func() bool {
		snap, list, _ := c.nodes[other].lastSnapshotNumbered()
		for _, e := range snap.Entries {
			if bytes.Equal(e.Descriptor.RoutingID, c.nodes[3].RID()) {
				from = list
			}
		}
		return list >= from+2
	})
	move(other, home)
	got := bound(home)
	if _, ok := got[string(live.rid)]; !ok || len(got) != 1 {
		t.Fatalf("after the client stopped: bindings %d on the target (live one kept: %v), want only the live client's", len(got), ok)
	}
	if n := c.nodes[other].ObjectStats().SessionBindingsPruned; n != 1 {
		t.Fatalf("source pruned %d bindings, want 1", n)
	}
	waitUntil(t, "the live Session's route switched", func() bool { return bytes.Equal(live.Actor().NodeRID, c.nodes[home].RID()) })
	if err := live.Send(ctx, []byte("s:live:2")); err != nil {
		t.Fatal(err)
	}
	state := sessionState(t, ctx, live)
	if state.Duplicates != 0 || state.Gaps != 0 || state.Last["live"] != 2 {
		t.Fatalf("state %+v", state)
	}
}
