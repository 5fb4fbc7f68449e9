package mesh

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// A peer streaming well-formed records that this node refuses gets a few
// log lines, not one per record: an operator try-out's fake peer sent
// 45,000 and the node wrote 3,235 lines in a second. Every Restore is still
// answered. The refusal names the sender's RID once hex-encoded (it said
// "sent by 6262/1" for RID bb: the RID's String was hex-encoded again).
func TestRefusedPeerRecordsDoNotFloodTheLog(t *testing.T) {
	n, logs := startLoggingNode(t, "recordlog")
	var now time.Duration // frozen: every record falls in one window
	n.obj.restoreRefusedLog.now = func() time.Duration { return now }
	n.obj.route44IgnoredLog.now = func() time.Duration { return now }

	from := transport.PeerInfo{RID: transport.RID{0xbb}, LifecycleGeneration: 1}
	prepare := router.NewRecord(&router.RelocationPrepare{Correlation: 1,
		Binding: router.RelocationBinding{Relocation: router.RelocationID{Low: 1}, TargetAttempt: 1,
			Source: router.SourceFence{SourceOwnerID: "o", SourceOwnerLeaseGeneration: 1, SourceNodeRID: []byte{0xaa}, SourceNodeGeneration: 1}},
		Object: router.RelocationObject{Kind: router.StatefulActor, ObjectID: "x", StableType: "t", ObjectGeneration: 1,
			ExpectedAuthorityOwnerGeneration: 1},
		TargetNodeRID: n.RID(), TargetNodeGeneration: 1, DeadlineUnixMs: 1}, nil, nil)
	route := &router.SessionRelocationRoute{Actor: router.ActorRef{ActorID: "a", ObjectGeneration: 1},
		SessionOwnerNodeRID: []byte{0xcc}, SessionOwnerNodeGeneration: 1, SessionOwnerID: "o", SessionOwnerLeaseGeneration: 1,
		SessionRID: []byte{0xdd}, BindingGeneration: 1,
		Route: router.SessionRouteUpdate{Action: router.RouteAbort, Abort: &router.SessionRouteAbort{CurrentAuthorityOwnerGeneration: 1}}}

	const records = 100
	answered := 0
	send := func() {
		n.obj.inboundPrepare(context.Background(), from, prepare, func(*router.Record) error { answered++; return nil })
		n.obj.applySessionRoute(route)
	}
	for i := 0; i < records; i++ {
		send()
	}
	for _, msg := range []string{`msg="relocation: Restore refused"`, `msg="command 44 ignored"`} {
		if got := strings.Count(logs.String(), msg); got != peerLogBurst {
			t.Errorf("%d records wrote %d lines %s, want %d", records, got, msg, peerLogBurst)
		}
	}
	if answered != records {
		t.Errorf("%d of %d Restores answered", answered, records)
	}
	if !strings.Contains(logs.String(), `detail="sent by bb/1, the binding names source aa/1"`) {
		t.Errorf("refusal detail does not name the sender bb/1:\n%s", logs.String())
	}
	// The next window's first line says how many were left out.
	now += peerLogEvery
	send()
	for _, msg := range []string{`msg="relocation: Restore refused"`, `msg="command 44 ignored"`} {
		if !strings.Contains(lastLine(logs.String(), msg), "suppressed=90") {
			t.Errorf("next window's %s line does not say suppressed=90: %q", msg, lastLine(logs.String(), msg))
		}
	}
}

// A requester gone with many requests queued here fails each of their
// replies: a few WARN lines, not one per reply (a fake peer that died with
// requests in flight made its node write 746 "reply not sent" lines). The
// answers to moved requests share the budget.
func TestLostRepliesDoNotFloodTheLog(t *testing.T) {
	n, logs := startLoggingNode(t, "replylog")
	var now time.Duration
	n.obj.replyNotSentLog.now = func() time.Duration { return now }
	gone := func(*router.Record) error { return transport.ErrPeerDown }
	rec := replyRecord(familyActor, 1, []byte("x"), nil)
	// A requester this node has no link to: each moved answer fails at once.
	moved := replyRoute{fam: familyActor, gen: 1, corr: 1, rid: []byte{0xee}}
	const replies = 100
	for i := 0; i < replies; i++ {
		n.obj.sendReply(gone, rec)
		n.obj.sendPortableReply(moved, rec)
	}
	lines := strings.Count(logs.String(), `msg="reply not sent"`) + strings.Count(logs.String(), `msg="moved request's reply not sent"`)
	if lines != peerLogBurst {
		t.Fatalf("%d lost replies wrote %d lines, want %d:\n%s", 2*replies, lines, peerLogBurst, logs.String())
	}
	now += peerLogEvery
	n.obj.sendReply(gone, rec)
	if l := lastLine(logs.String(), `msg="reply not sent"`); !strings.Contains(l, "suppressed=190") {
		t.Fatalf("next window's line does not say suppressed=190: %q", l)
	}
}

// startLoggingNode starts a lone node of mesh that logs INFO and up, as
// text, into the returned buffer.
func startLoggingNode(t *testing.T, mesh string) (*Node, *syncbuf.Buffer) {
	t.Helper()
	f := newFixture(t)
	logs := new(syncbuf.Buffer)
	n, err := Start(context.Background(), Options{Config: fastConfig(mesh), Factories: f.reg, Location: f.loc,
		Relocation: f.reloc, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n, logs
}

// lastLine is the last line of logs that contains s.
func lastLine(logs, s string) string {
	last := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, s) {
			last = l
		}
	}
	return last
}
