package mesh

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

func TestDropCauseOf(t *testing.T) {
	tests := []struct {
		err  error
		want dropCause
	}{
		{wrapErr(ErrUnavailable, lease.ErrLeaseLost, "owner lease"), dropOwnerLease},
		{wrapErr(ErrUnavailable, lease.ErrLeaseExpired, "owner lease"), dropOwnerLease},
		{wrapErr(ErrUnavailable, lease.ErrLeaseReleased, "owner lease"), dropOwnerLease},
		{fmt.Errorf("%w: addressed to node run 01/2", errRouteStale), dropStaleRoute},
		{fmt.Errorf("%w: addressed to owner lease generation 3, this run holds 4", errRouteStale), dropStaleRoute},
		// Another run of this node (a restart), here or at the new owner
		// a previous owner would pass the message on to.
		{fmt.Errorf("%w: %w: addressed to node run 01/2, this is run 3", errRouteStale, errRunEnded), dropOtherRun},
		{errNotHosted("a"), dropNotHosted},
		{fmt.Errorf("%w: a is hosted at ObjectGeneration 2", ErrStaleGeneration), dropStaleGeneration},
		{fmt.Errorf("%w: a has 1024 queued", spot.ErrMailboxFull), dropMailboxFull},
		{wrapErr(ErrUnavailable, ErrClosed, "node closing"), dropOther},
		{errors.New("bad origin"), dropOther},
	}
	for _, tt := range tests {
		if got := dropCauseOf(tt.err); got != tt.want {
			t.Errorf("dropCauseOf(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// One-way messages a node refuses are reported at WARN once per round,
// by cause, and only when there were any (they used to be DEBUG lines
// only: a node resuming after a pause dropped a thousand of them without
// a word in its log).
func TestDroppedOneWayMessagesAreReported(t *testing.T) {
	f := newFixture(t)
	logs := f.logNode(1)
	c := newClusterOn(t, f, nil, 2, clientRole0)
	ctx := ctxT(t, 20*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "dropped", testActorType)
	if err != nil {
		t.Fatal(err)
	}
	target := c.nodes[1]
	good := fenceOf(t, target, ref)
	edits := []func(*router.ActorRouteFence){
		func(f *router.ActorRouteFence) { f.ExpectedAuthorityOwnerGeneration++ },
		func(f *router.ActorRouteFence) { f.TargetNodeGeneration++ },
		func(f *router.ActorRouteFence) { f.Actor.ActorID = "nobody" },
		func(f *router.ActorRouteFence) { f.Actor.ActorID = "nobody-either" },
		func(f *router.ActorRouteFence) { f.Actor.ObjectGeneration++ },
	}
	before := target.ObjectStats().FenceRefused
	for _, edit := range edits {
		f := good
		edit(&f)
		rec := router.NewRecord(&router.ActorSend{TargetActor: f}, nil,
			&router.Payload{PacketName: PacketName, ContentType: ContentType, Data: []byte("inc")})
		if err := c.nodes[0].Transport().Send(ctx, transport.RID(target.RID()), rec); err != nil {
			t.Fatal(err)
		}
	}
	// The node's discovery rounds (100 ms apart here) report them: in one
	// line, or split over two when a round fell between the sends. Every
	// drop is counted once, by cause, and nothing more is reported after.
	const report = "one-way messages refused here and dropped"
	eventually(t, 5*time.Second, "the sends to be refused", func() bool {
		return target.ObjectStats().FenceRefused-before == uint64(len(edits))
	})
	want := map[string]int{"stale_route": 1, "other_run": 1, "not_hosted": 2, "stale_generation": 1, "total": 5}
	counted := func() (map[string]int, int) {
		got, lines := map[string]int{}, 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if !strings.Contains(l, report) {
				continue
			}
			lines++
			if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "since=") {
				t.Errorf("report %q: want a WARN line with since=", l)
			}
			for _, f := range strings.Fields(l) {
				if k, v, ok := strings.Cut(f, "="); ok {
					if n, err := strconv.Atoi(v); err == nil {
						got[k] += n
					}
				}
			}
		}
		return got, lines
	}
	eventually(t, 5*time.Second, "the drops to be reported", func() bool {
		got, _ := counted()
		return got["total"] == 5
	})
	time.Sleep(300 * time.Millisecond) // rounds without drops report nothing
	got, lines := counted()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("reported %s=%d, want %d (%d lines):\n%s", k, got[k], v, lines, logs.String())
		}
	}
	if lines < 1 || lines > 2 {
		t.Fatalf("%d report lines for five drops sent at once, want 1 (2 if a round fell between them)", lines)
	}
}

// A round without drops writes nothing; one with drops one line, and
// counting starts afresh.
func TestDropReportResets(t *testing.T) {
	var d dropReport
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	d.report(log, time.Second)
	if logs.String() != "" {
		t.Fatalf("report without drops: %q", logs.String())
	}
	d.add(wrapErr(ErrUnavailable, lease.ErrLeaseLost, "owner lease"))
	d.add(wrapErr(ErrUnavailable, lease.ErrLeaseExpired, "owner lease"))
	d.report(log, 1500*time.Millisecond)
	if s := logs.String(); !strings.Contains(s, "owner_lease=2 total=2 since=1.5s") || strings.Count(s, "\n") != 1 {
		t.Fatalf("report %q", s)
	}
	d.report(log, time.Second)
	if strings.Count(logs.String(), "\n") != 1 {
		t.Fatalf("counts not reset: %q", logs.String())
	}
}
