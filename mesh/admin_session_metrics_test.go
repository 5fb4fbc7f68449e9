package mesh

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
)

// Bound Session events are in /metrics: a move sends its command 44 from
// the target (route_sent there) and the Session's node switches its route
// (switched there). Before, they were only in ObjectStats.
func TestAdminMetricsCountSessionEvents(t *testing.T) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.Admin = config.AdminConfig{Listen: "127.0.0.1:0", Token: adminToken}
	})
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "metered-session", seqType)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.m(0).BindSession(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(ctx, []byte("s:m:1")); err != nil {
		t.Fatal(err)
	}
	home := c.indexOf(s.Actor().NodeRID)
	other := 3 - home
	waitUntil(t, "the binding on the host", func() bool { return len(c.nodes[home].obj.hostedSessions(actorKey(ref.ActorID))) == 1 })
	res, err := c.m(home).RelocateActor(ctx, ref, ToNode(c.nodes[other].RID()))
	if err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}
	waitUntil(t, "the Session's route switched", func() bool { return bytes.Equal(s.Actor().NodeRID, c.nodes[other].RID()) })
	if _, body := c.adminGet(t, other, "/metrics"); metricValue(body, "meshnode_session_events_total", `event="route_sent"`) < 1 {
		t.Fatalf("the target's /metrics counts no command 44 sent")
	}
	if _, body := c.adminGet(t, 0, "/metrics"); metricValue(body, "meshnode_session_events_total", `event="switched"`) < 1 {
		t.Fatalf("the Session node's /metrics counts no route switch")
	}
}
