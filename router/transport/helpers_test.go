package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// testLogger discards logs unless MESHNODE_TEST_LOG is set: the garbage
// tests log on purpose.
func testLogger() *slog.Logger {
	if os.Getenv("MESHNODE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a loopback node config with short real-time intervals.
func testConfig(name string, gen uint64) Config {
	return Config{
		RID:                 RID("node-" + name),
		Endpoint:            "tcp://127.0.0.1:0",
		MeshName:            "mesh-test",
		SecurityIdentity:    "sec-test",
		LifecycleGeneration: gen,
		DescriptorRevision:  1,
		ProbeInterval:       200 * time.Millisecond,
		// Generous real-time limits: a shared CI machine can starve the
		// process for seconds. Tests of the timing itself use ManualClock
		// or set their own values.
		PeerTimeout:      10 * time.Second,
		RequestTimeout:   30 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		ReconnectMin:     20 * time.Millisecond,
		ReconnectMax:     200 * time.Millisecond,
		Logger:           testLogger(),
	}
}

func startNode(t testing.TB, cfg Config) *Node {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.RID, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// connectAndWait links a to b and waits for admission.
func connectAndWait(t testing.TB, a, b *Node) PeerInfo {
	t.Helper()
	if err := a.Connect(b.RID(), b.Endpoint()); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := a.WaitAdmitted(ctx, b.RID())
	if err != nil {
		t.Fatalf("WaitAdmitted %s→%s: %v", a.RID(), b.RID(), err)
	}
	// b notes the connection admitted just after its admit went out, so a
	// can see the admit first: a test that then uses b's side of the
	// connection (ReplyInbound) found it not admitted yet (CI, 2026-12-07,
	// TestReplyInbound under load). In the product nothing uses it before
	// b reads a's next record, which comes after that.
	for !inboundAdmitted(b, a.RID()) {
		if ctx.Err() != nil {
			t.Fatalf("%s never noted %s's connection admitted", b.RID(), a.RID())
		}
		time.Sleep(time.Millisecond)
	}
	return info
}

// inboundAdmitted reports whether n holds an admitted connection from peer.
func inboundAdmitted(n *Node, peer RID) bool {
	ic := n.rt.current(string(peer))
	if ic == nil {
		return false
	}
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.admitted
}

func spotFence(target RID) router.SpotRouteFence {
	return router.SpotRouteFence{
		Spot:                             router.SpotRef{SpotID: "spot-1", ObjectGeneration: 1},
		TargetNodeRID:                    target,
		TargetNodeGeneration:             1,
		ExpectedAuthorityOwnerGeneration: 1,
		ExpectedOwnerLeaseGeneration:     1,
	}
}

func payload(data []byte) *router.Payload {
	return &router.Payload{PacketName: "test.Packet", ContentType: "application/octet-stream", Data: data}
}

// seqSend is a spotSend whose operation id carries a sequence number.
func seqSend(target RID, seq uint64, data []byte) *router.Record {
	return router.NewRecord(&router.SpotSend{
		Operation:    router.OperationID{High: 1, Low: seq},
		SourceSpotID: "src",
		TargetSpot:   spotFence(target),
	}, nil, payload(data))
}

func seqOf(rec *router.Record) uint64 {
	switch b := rec.Body.(type) {
	case *router.SpotSend:
		return b.Operation.Low
	case *router.SpotRequest:
		return b.Operation.Low
	}
	return 0
}

func spotRequest(target RID, seq uint64, data []byte) *router.Record {
	return router.NewRecord(&router.SpotRequest{
		Operation:    router.OperationID{High: 2, Low: seq},
		SourceSpotID: "src",
		TargetSpot:   spotFence(target),
	}, nil, payload(data))
}

func okReply(req *router.Record, data []byte) *router.Record {
	corr, _ := RequestCorrelation(req)
	var p *router.Payload
	if data != nil {
		p = payload(data)
	}
	return router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultOK, FailureCode: router.FailNone}, nil, p)
}

// echoHandler answers every request with its payload and passes one-way
// records to sink (if not nil).
func echoHandler(sink func(PeerInfo, *router.Record)) Handler {
	return func(ctx context.Context, from PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		if _, ok := RequestCorrelation(rec); ok {
			var data []byte
			if rec.Payload != nil {
				data = rec.Payload.Data
			}
			_ = reply(okReply(rec, data))
			return
		}
		if sink != nil {
			sink(from, rec)
		}
	}
}

// eventLog records events for assertions.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
	ch  chan Event
}

func newEventLog() *eventLog { return &eventLog{ch: make(chan Event, 1024)} }

func (e *eventLog) on(ev Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

// count is how many events of kind were recorded so far.
func (e *eventLog) count(kind EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// wait returns the next event of kind within d.
func (e *eventLog) wait(t testing.TB, kind EventKind, d time.Duration) Event {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event within %s", kind, d)
			return Event{}
		}
	}
}

// waitFor polls cond until it holds or d passes (real time). It is used
// only to wait for asynchronous effects, never to assert speed.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkNoLeak fails if goroutines started during the test are still
// running after a settle period.
func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutine leak: %d before, %d after\n%s", before, n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func errIs(err error, targets ...error) bool {
	for _, t := range targets {
		if !errors.Is(err, t) {
			return false
		}
	}
	return err != nil
}

// rawFrame builds a ZMTP message frame header + body.
func rawFrame(more bool, body []byte) []byte {
	var flag byte
	if more {
		flag |= flagMore
	}
	if len(body) > 255 {
		flag |= flagLong
		h := make([]byte, 9)
		h[0] = flag
		binary.BigEndian.PutUint64(h[1:], uint64(len(body)))
		return append(h, body...)
	}
	return append([]byte{flag, byte(len(body))}, body...)
}

// flushWithin flushes what a test wrote on a raw connection, within d.
func flushWithin(zc *zconn, d time.Duration) (bool, error) {
	_ = zc.raw.SetWriteDeadline(time.Now().Add(d))
	return zc.g.flush()
}

// sendSeq sends the one-way record seq to peer and reports whether a
// accepted it; a refusal is waited out briefly (backpressure 1 ms, the
// link down 5 ms) so that a streaming loop does not spin.
func sendSeq(ctx context.Context, a *Node, peer RID, seq uint64, data []byte) bool {
	err := a.Send(ctx, peer, seqSend(peer, seq, data))
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrBackpressure):
		time.Sleep(time.Millisecond)
	default:
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// seqGaps reads the sequence numbers a receiver got of the accepted
// 1..accepted one-way records sent in order: how many never arrived, and
// how many arrived after a higher one (duplicated or out of order). It logs
// each gap, for whoever debugs a loss.
func seqGaps(t testing.TB, got []uint64, accepted uint64) (lost uint64, reordered int) {
	t.Helper()
	next := uint64(1)
	seen := make(map[uint64]bool, len(got))
	for _, seq := range got {
		seen[seq] = true
		if seq < next {
			reordered++
			continue
		}
		if seq > next {
			t.Logf("gap %d..%d (%d records)", next, seq-1, seq-next)
		}
		next = seq + 1
	}
	// Lost is what never came at all; one that came late is reordered.
	for seq := uint64(1); seq <= accepted; seq++ {
		if !seen[seq] {
			lost++
		}
	}
	return lost, reordered
}
