package transport

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/router"
)

// A receiver whose handler is stuck for several peer timeouts (its reader
// reads nothing) gets every one-way message its sender accepted, once and
// in order. The sender gives the connection up (its liveness deadline, then
// the drain's linger) and links again; before, ~18,600 of ~37,000 records
// were lost without a count: what the sender's kernel still held when it
// closed the silent connection gracefully (counted delivered, refused when
// the receiver cut the superseded connection), and what the receiver's
// kernel held when its cut of a connection the sender had reset fell back
// to a close; and the old connection's last records could arrive after
// the new one's. Now the sender closes a silent connection abortively when
// nothing is in flight and sends what was not acknowledged again; the
// receiver reads a reset connection to its end, and a superseding
// connection delivers nothing before the connection it superseded is read
// to its end.
func TestStuckReceiverLongerThanTwoPeerTimeouts(t *testing.T) {
	forEachLinkSecurity(t, testStuckReceiver)
}

func testStuckReceiver(t *testing.T, secure bool) {
	gate := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(gate) })
	p := newSeqPair(t, secure, time.Second, 150*time.Millisecond, 0, func() { <-gate }, nil)
	a, b, ev := p.a, p.b, p.ev
	data := make([]byte, 100)
	ctx := context.Background()
	var accepted uint64
	stop := time.Now().Add(4 * time.Second) // past the liveness deadline and the drain's linger
	for time.Now().Before(stop) {
		if sendSeq(ctx, a, b.RID(), accepted+1, data) {
			accepted++
		}
	}
	once.Do(func() { close(gate) })
	got := p.waitArrived(accepted, 10*time.Second)
	lost, reordered := seqGaps(t, got, accepted)
	st := a.Stats()
	t.Logf("accepted %d, arrived %d, lost %d, out of order %d; sender: resent %d, unsent %d; down events %d; held give-ups %d (%d lost); receiver: copies dropped %d",
		accepted, len(got), lost, reordered, st.Resent, st.Unsent, ev.count(EventDown), st.HeldGiveUps, st.HeldLost, b.Stats().Duplicates)
	if lost != 0 || reordered != 0 || st.Unsent != 0 || st.HeldLost != 0 {
		t.Fatalf("%d of %d accepted records lost (%d counted unsent, %d lost after a held give-up), %d out of order", lost, accepted, st.Unsent, st.HeldLost, reordered)
	}
}

// A receiver that reads, only slowly — its backlog takes several peer
// timeouts to read, and the sender's liveness probes wait behind it — makes
// the sender give the connection up and link again over and over (each
// time resetting the old connection and resending what the receiver never
// acknowledged), but every accepted record arrives once, in order. It
// checks the give-up's reset against a receiver that is alive and reading:
// nothing may arrive twice (the transport before the seventeenth session
// passed it too, with one give-up and a graceful close). A give-up that
// finds segments in flight to this receiver counts them delivered and holds
// the connection open until the receiver acknowledged them
// (docs/TRANSPORT.md); it happens under load (-race in CI, about one run
// in ten here). Before the hold such a give-up closed the socket, and the
// receiver's answer to a probe it read there made the sender's kernel
// reset it: 29 to 1,753 records lost in about half of the CI runs of
// 2026-12-06. (Giving such a receiver more lingers while it acknowledged
// more was tried: the messages kept meanwhile expired, and some arrived
// out of order.) On a loaded machine the receiver read a given-up
// connection for longer than KeepUnsent, refusing the link's hellos
// meanwhile: the messages kept at the give-up were dropped (up to 5,375
// counted unsent) and a hold behind that connection gave up (up to 3,008
// counted lost, 2,675 really lost), in 5 of 7 runs at a load of 8 to 10;
// each refusal as a duplicate now counts as a sign of life for both
// (Node.noteRefusedAsDuplicate).
func TestSlowReceiverLosesNothing(t *testing.T) {
	forEachLinkSecurity(t, testSlowReceiver)
}

func testSlowReceiver(t *testing.T, secure bool) {
	var alog syncbuf.Buffer
	// At most ~5,000 records/s: 6,000 take > 2 peer timeouts. The sender's
	// KeepUnsent — how long kept messages wait, and how long a hold waits
	// for an acknowledgement — is not what makes it give up, so it is
	// longer than a starved -race process stops for (a hold's receiver
	// ran nothing for about a second at a load of 10 on two cores, and
	// 2,097 records that then arrived were counted lost after a 1 s bound).
	p := newSeqPair(t, secure, 500*time.Millisecond, 100*time.Millisecond, 4*time.Second, func() { time.Sleep(200 * time.Microsecond) }, &alog)
	a, b, ev := p.a, p.b, p.ev
	data := make([]byte, 100)
	ctx := context.Background()
	var accepted uint64
	for accepted < 6000 {
		if sendSeq(ctx, a, b.RID(), accepted+1, data) {
			accepted++
		}
	}
	got := p.waitArrived(accepted, 30*time.Second)
	lost, reordered := seqGaps(t, got, accepted)
	st := a.Stats()
	t.Logf("accepted %d, arrived %d, lost %d, out of order %d; sender: resent %d, unsent %d, down events %d, given up with messages in flight %d (held; %d of those lost)",
		accepted, len(got), lost, reordered, st.Resent, st.Unsent, ev.count(EventDown), st.HeldGiveUps, st.HeldLost)
	if ev.count(EventDown) == 0 {
		t.Fatal("the sender's liveness never gave up on the slow receiver: the test did not test the give-up")
	}
	if lost != 0 || reordered != 0 || st.Unsent != 0 || st.HeldLost != 0 || uint64(len(got)) != accepted {
		t.Fatalf("%d of %d accepted records lost (%d counted unsent, %d counted lost after a held give-up), %d out of order or twice, %d arrived\n%s",
			lost, accepted, st.Unsent, st.HeldLost, reordered, len(got), alog.String())
	}
}

// forEachLinkSecurity runs test on plain links and on CURVE links: what a
// link remembers and sends again is counted in the bytes on the wire, which
// CURVE makes larger than the records.
func forEachLinkSecurity(t *testing.T, test func(t *testing.T, secure bool)) {
	t.Run("null", func(t *testing.T) { test(t, false) })
	t.Run("curve", func(t *testing.T) { test(t, true) })
}

// seqPair is a receiver that records the sequence numbers of the one-way
// records its handler gets (each after handle returns) and a sender linked
// to it, both with peer timeout pt and probe interval probe, over CURVE
// when secure; the sender keeps unsent messages for keep (0: the default)
// and logs to senderLog when it is not nil.
type seqPair struct {
	a, b *Node
	ev   *eventLog // the sender's events
	mu   sync.Mutex
	got  []uint64
}

func newSeqPair(t *testing.T, secure bool, pt, probe, keep time.Duration, handle func(), senderLog io.Writer) *seqPair {
	t.Helper()
	p := &seqPair{ev: newEventLog()}
	bcfg, acfg := testConfig("receiver", 1), testConfig("sender", 1)
	if secure {
		ka, kb := mustKeyPair(t), mustKeyPair(t)
		bcfg = curveTestConfig("receiver", kb, ka.Public)
		acfg = curveTestConfig("sender", ka, kb.Public)
	}
	bcfg.PeerTimeout, bcfg.ProbeInterval = pt, probe
	bcfg.Handler = echoHandler(func(_ PeerInfo, rec *router.Record) {
		handle()
		p.mu.Lock()
		p.got = append(p.got, seqOf(rec))
		p.mu.Unlock()
	})
	p.b = startNode(t, bcfg)
	acfg.PeerTimeout, acfg.ProbeInterval, acfg.KeepUnsent = pt, probe, keep
	if senderLog != nil {
		acfg.Logger = slog.New(slog.NewTextHandler(senderLog, nil))
	}
	acfg.OnEvent = p.ev.on
	p.a = startNode(t, acfg)
	if err := p.a.Connect(p.b.RID(), p.b.Endpoint()); err != nil {
		t.Fatal(err)
	}
	p.ev.wait(t, EventAdmitted, 5*time.Second)
	return p
}

// waitArrived waits, at most d, until accepted records arrived, and
// returns the sequence numbers that did.
func (p *seqPair) waitArrived(accepted uint64, d time.Duration) []uint64 {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		// Distinct numbers: a record that arrived twice must not end the
		// wait before the others arrived (a CI run reported 559 "lost",
		// still on their way, beside 874 that had arrived twice).
		p.mu.Lock()
		seen := make(map[uint64]bool, len(p.got))
		for _, v := range p.got {
			seen[v] = true
		}
		p.mu.Unlock()
		if uint64(len(seen)) >= accepted {
			break
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uint64(nil), p.got...)
}
