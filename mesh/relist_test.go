package mesh

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/demoapp"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

func TestRelistAsk(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		lastRan time.Duration // since t0; <0: never
		armed   bool
		at      time.Duration
		wantRun bool
		wantDue bool
	}{
		{"never ran: at once", -1, false, 0, true, false},
		{"a gap after the last round: at once", 0, false, relistGap, true, false},
		{"within the gap: armed for its end", 0, false, relistGap / 2, false, true},
		{"already armed: nothing more", 0, true, relistGap / 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r relist
			defer r.stop()
			if tc.lastRan >= 0 {
				r.ran(t0.Add(tc.lastRan))
			}
			if tc.armed {
				r.ask(t0.Add(tc.lastRan))
			}
			if got := r.ask(t0.Add(tc.at)); got != tc.wantRun {
				t.Errorf("ask run = %v, want %v", got, tc.wantRun)
			}
			if got := r.due() != nil; got != tc.wantDue {
				t.Errorf("armed = %v, want %v", got, tc.wantDue)
			}
			r.ran(t0.Add(tc.at))
			if r.due() != nil {
				t.Error("a round that ran left the early one armed")
			}
		})
	}
}

// A creation order refused by a draining server makes the creating node
// read the lists at once, so its later creations are no longer offered to
// that server. The answer (command 20, terminated/none) cannot say it is
// draining; the descriptor it published before refusing does. Before, the
// creating node offered creations to it until its next discovery round.
func TestACreationRefusedByADrainingServerRelistsAtOnce(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	f := newFixture(t)
	c := newClusterOn(t, f, nil, 2, nil) // two servers
	cfg := objConfig("objects")
	cfg.Node.RoutingID = "0909"
	cfg.Node.ObjectRole = config.RoleClient
	logs := new(syncbuf.Buffer)
	client, err := Start(context.Background(), Options{Config: cfg, Factories: spot.NewRegistry(), Location: f.loc, Relocation: f.reloc,
		DiscoveryInterval: time.Hour, // only its first round and the early ones run
		Logger:            slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	if err := client.WaitPeers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	draining := c.nodes[1]
	if client.isLeaving(draining.RID(), draining.LifecycleGeneration()) {
		t.Fatal("the client lists the server leaving before it drains")
	}
	if err := draining.publishDrainingState(ctx); err != nil {
		t.Fatal(err)
	}
	refusedBy := func() int {
		return strings.Count(logs.String(), "creation target failed before the callback; trying another node")
	}
	i := 0
	for ; refusedBy() == 0; i++ {
		if i == 40 {
			t.Fatal("40 creations and none was placed on the draining server")
		}
		if _, err := client.Manager().CreateActor(ctx, fmt.Sprintf("relist-%d", i), demoapp.CounterType); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the client to list the draining server draining", func() bool {
		return client.isLeaving(draining.RID(), draining.LifecycleGeneration())
	})
	before := refusedBy()
	for j := 0; j < 20; j++ {
		ref, err := client.Manager().CreateActor(ctx, fmt.Sprintf("relist-%d", i+j), demoapp.CounterType)
		if err != nil {
			t.Fatal(err)
		}
		if owner := ownerIndex(t, c, record.ObjectActor, ref.ActorID); owner != 0 {
			t.Fatalf("creation %d placed on node %d, want the serving one", j, owner)
		}
	}
	if n := refusedBy() - before; n != 0 {
		t.Fatalf("%d more creations were offered to the draining server after the client listed it draining", n)
	}
}
