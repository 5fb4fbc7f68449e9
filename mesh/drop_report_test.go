package mesh

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	var logs syncbuf.Buffer
	f.logTo = func(i int) io.Writer {
		if i == 1 {
			return &logs
		}
		return nil
	}
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
	// The node's next discovery round (100 ms apart here) reports them.
	const report = "one-way messages refused here and dropped"
	var line string
	eventually(t, 5*time.Second, "the drop report", func() bool {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, report) {
				line = l
				return true
			}
		}
		return false
	})
	if got := target.ObjectStats().FenceRefused - before; got != uint64(len(edits)) {
		t.Fatalf("refused %d, want %d", got, len(edits))
	}
	for _, want := range []string{"level=WARN", "stale_route=2", "not_hosted=2", "stale_generation=1", "total=5", "since="} {
		if !strings.Contains(line, want) {
			t.Errorf("report %q lacks %q", line, want)
		}
	}
	// One line for the five, and none for the rounds after.
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(logs.String(), report); n != 1 {
		t.Fatalf("%d report lines, want 1:\n%s", n, logs.String())
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
