package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/router"
)

// sendAll sends records 1..count from n to peer, retrying on backpressure
// (the caller's job by design: Send never blocks). It returns how often the
// queue was full.
func sendAll(ctx context.Context, n *Node, peer RID, count int, data []byte) (backpressured int, err error) {
	for seq := 1; seq <= count; {
		err := n.Send(ctx, peer, seqSend(peer, uint64(seq), data))
		switch {
		case err == nil:
			seq++
		case errors.Is(err, ErrBackpressure):
			backpressured++
			time.Sleep(50 * time.Microsecond)
		default:
			return backpressured, fmt.Errorf("send %d: %w", seq, err)
		}
	}
	return backpressured, nil
}

// orderChecker verifies that one-way records from each sender arrive as
// 1, 2, 3, ... and signals when want have arrived.
type orderChecker struct {
	mu     sync.Mutex
	next   map[string]uint64
	bad    []string
	total  atomic.Int64
	want   int64
	doneCh chan struct{}
	once   sync.Once
}

func newOrderChecker(want int64) *orderChecker {
	return &orderChecker{next: map[string]uint64{}, want: want, doneCh: make(chan struct{})}
}

func (o *orderChecker) see(from PeerInfo, rec *router.Record) {
	o.mu.Lock()
	k := string(from.RID)
	exp := o.next[k] + 1
	if got := seqOf(rec); got != exp && len(o.bad) < 10 {
		o.bad = append(o.bad, fmt.Sprintf("from %s: got seq %d, want %d", from.RID, got, exp))
	}
	o.next[k] = seqOf(rec)
	o.mu.Unlock()
	if o.total.Add(1) == o.want {
		o.once.Do(func() { close(o.doneCh) })
	}
}

// TestOrderedStreamWithReverseTraffic: 100,000 records A→B arrive complete
// and in order while B→A traffic (one-way records and requests, paced) runs
// for the whole duration of the A→B stream.
func TestOrderedStreamWithReverseTraffic(t *testing.T) {
	const aToB = 100_000
	atB := newOrderChecker(aToB)
	atA := newOrderChecker(-1) // count known only at the end
	cfgA, cfgB := testConfig("a", 1), testConfig("b", 1)
	// Liveness is in-band: under -race on two cores the receiver can lag
	// the flood by seconds, so this test keeps the production timeout.
	cfgA.PeerTimeout, cfgB.PeerTimeout = 15*time.Second, 15*time.Second
	// Request deadlines are not under test here; a shared CI machine may
	// starve the process for seconds.
	cfgB.RequestTimeout = time.Minute
	cfgA.Handler = echoHandler(atA.see)
	cfgB.Handler = echoHandler(atB.see)
	a, b := startNode(t, cfgA), startNode(t, cfgB)
	connectAndWait(t, a, b)
	connectAndWait(t, b, a)

	ctx := context.Background()
	data := make([]byte, 64)
	var aDone atomic.Bool
	reverse := make(chan error, 1)
	var reverseSent, reverseRequests int
	go func() {
		seq := uint64(0)
		for !aDone.Load() {
			err := b.Send(ctx, a.RID(), seqSend(a.RID(), seq+1, data))
			if errors.Is(err, ErrBackpressure) {
				time.Sleep(50 * time.Microsecond)
				continue
			}
			if err != nil {
				reverse <- fmt.Errorf("B→A send %d: %w", seq+1, err)
				return
			}
			seq++
			if seq%10 == 0 {
				rep, err := b.Request(ctx, a.RID(), spotRequest(a.RID(), seq, []byte{byte(seq)}))
				if err != nil {
					reverse <- fmt.Errorf("B→A request %d: %w", seq, err)
					return
				}
				if len(rep.Payload.Data) != 1 || rep.Payload.Data[0] != byte(seq) {
					reverse <- fmt.Errorf("B→A request %d: mismatched reply %v", seq, rep.Payload.Data)
					return
				}
				reverseRequests++
			}
			if seq%5 == 0 {
				time.Sleep(200 * time.Microsecond)
			}
		}
		reverseSent = int(seq)
		reverse <- nil
	}()
	bp, err := sendAll(ctx, a, b.RID(), aToB, data)
	aDone.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-reverse; err != nil {
		t.Fatal(err)
	}
	select {
	case <-atB.doneCh:
	case <-time.After(20 * time.Second):
		t.Fatalf("A→B: only %d of %d records arrived", atB.total.Load(), aToB)
	}
	waitFor(t, 10*time.Second, "B→A records", func() bool { return atA.total.Load() == int64(reverseSent) })
	for name, oc := range map[string]*orderChecker{"A→B": atB, "B→A": atA} {
		oc.mu.Lock()
		if len(oc.bad) > 0 {
			t.Fatalf("%s out of order: %v", name, oc.bad)
		}
		oc.mu.Unlock()
	}
	if reverseSent < 100 || reverseRequests < 10 {
		t.Fatalf("reverse traffic too thin to overlap: %d records, %d requests", reverseSent, reverseRequests)
	}
	t.Logf("A→B %d records (%d backpressure retries); B→A %d records and %d requests meanwhile", aToB, bp, reverseSent, reverseRequests)
	if st := b.Stats(); st.ProtocolErrors != 0 || st.Peers[a.RID().String()].RecordsIn < aToB {
		t.Fatalf("stats of B: %+v", st)
	}
}

// TestPeerRestartNewGeneration: a peer killed and restarted (same RID and
// endpoint, new lifecycle generation) is re-admitted and traffic resumes;
// requests to the old run fail with ErrPeerDown.
func TestPeerRestartNewGeneration(t *testing.T) {
	ev := newEventLog()
	cfgA := testConfig("a", 1)
	cfgA.OnEvent = ev.on
	cfgA.Handler = echoHandler(nil)
	a := startNode(t, cfgA)

	hold := make(chan struct{})
	started := make(chan struct{}, 16)
	cfgB := testConfig("b", 10)
	// The old run swallows requests: they stay pending until it dies.
	cfgB.Handler = func(ctx context.Context, _ PeerInfo, rec *router.Record, _ func(*router.Record) error) {
		if _, ok := RequestCorrelation(rec); ok {
			started <- struct{}{}
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
	}
	b1 := startNode(t, cfgB)
	connectAndWait(t, a, b1)
	connectAndWait(t, b1, a)
	ev.wait(t, EventAdmitted, 5*time.Second)

	const pending = 5
	errc := make(chan error, pending)
	for i := 0; i < pending; i++ {
		go func(i int) {
			_, err := a.Request(context.Background(), b1.RID(), spotRequest(b1.RID(), uint64(i+1), nil))
			errc <- err
		}(i)
	}
	<-started // at least one is being "processed" by the old run

	// Kill B: its sockets close; the port and RID come back with a new run.
	endpoint := b1.Endpoint()
	_ = b1.Close()
	close(hold)
	for i := 0; i < pending; i++ {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrPeerDown) {
				t.Fatalf("request to the old run: %v, want ErrPeerDown", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("request to the dead run still pending")
		}
	}
	if e := ev.wait(t, EventDown, 5*time.Second); e.Peer.LifecycleGeneration != 10 {
		t.Fatalf("down event %+v", e)
	}

	cfgB2 := testConfig("b", 11)
	cfgB2.Endpoint = endpoint
	cfgB2.Handler = echoHandler(nil)
	b2 := startNode(t, cfgB2)
	e := ev.wait(t, EventAdmitted, 10*time.Second)
	if e.Peer.LifecycleGeneration != 11 {
		t.Fatalf("re-admitted with generation %d, want 11", e.Peer.LifecycleGeneration)
	}
	rep, err := a.Request(context.Background(), b2.RID(), spotRequest(b2.RID(), 100, []byte("again")))
	if err != nil || string(rep.Payload.Data) != "again" {
		t.Fatalf("request to the new run: %v, %v", rep, err)
	}
	// And the new run reaches A through A's ROUTER (same identity as the old
	// run's connection: handover).
	connectAndWait(t, b2, a)
	if _, err := b2.Request(context.Background(), a.RID(), spotRequest(a.RID(), 1, []byte("x"))); err != nil {
		t.Fatalf("B2→A request: %v", err)
	}
}

// TestRestartDetectedByHello: when the new run's hello reaches our ROUTER
// before our own link notices the old connection is gone (the old process
// is hung, not dead), the newer lifecycle generation alone ends the old
// session and fails its requests.
func TestRestartDetectedByHello(t *testing.T) {
	a := startNode(t, testConfig("a", 1))
	// The "old run": a fake that admits, acks nothing and never dies.
	old := newFakePeer(t, "b", 20)
	if err := a.Connect(old.rid, old.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.WaitAdmitted(ctx, old.rid); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := a.Request(context.Background(), old.rid, spotRequest(old.rid, 1, nil))
		errc <- err
	}()
	old.next(router.CmdSpotRequest, 5*time.Second)

	// The "new run" of the same RID says hello to A's ROUTER.
	newRun := startNode(t, testConfig("b", 21))
	connectAndWait(t, newRun, a)
	if err := recvWithin(t, errc, 5*time.Second, "failure of the request to the old run"); !errors.Is(err, ErrPeerDown) {
		t.Fatalf("err = %v, want ErrPeerDown", err)
	}
}

// TestManyQuickPeers: 200 peers connect and disconnect quickly in every
// phase (mid-TCP, mid-greeting, after the ZMTP handshake, right after hello
// while the admit is being written, full nodes closing at once); the ROUTER
// must not deadlock and afterwards still serves a normal peer.
func TestManyQuickPeers(t *testing.T) {
	cfgB := testConfig("b", 1)
	cfgB.Handler = echoHandler(nil)
	b := startNode(t, cfgB)
	addr := b.rt.ln.Addr().String()
	hello, err := encodeInfra(&router.Hello{Admission: b.currentAdmission()})
	if err != nil {
		t.Fatal(err)
	}
	const peers = 200
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := 0; i < peers; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			quickPeer(t, i, addr, b, hello)
		}(i)
	}
	wg.Wait()

	// The ROUTER still serves a normal peer promptly.
	cfgA := testConfig("normal", 1)
	a := startNode(t, cfgA)
	connectAndWait(t, a, b)
	for i := 0; i < 100; i++ {
		if _, err := a.Request(context.Background(), b.RID(), spotRequest(b.RID(), uint64(i+1), []byte("ok"))); err != nil {
			t.Fatalf("request %d after the churn: %v", i, err)
		}
	}
	// Every churned connection is gone (only the normal peer's remains).
	waitFor(t, 10*time.Second, "churned connections to close", func() bool { return b.Stats().InboundConns == 1 })
	t.Logf("after churn: %+v goroutines=%d", b.Stats(), runtime.NumGoroutine())
}

// quickPeer is one short-lived peer; the mode cycles with i.
func quickPeer(t *testing.T, i int, addr string, b *Node, hello [][]byte) {
	id := []byte(fmt.Sprintf("quick-%03d", i))
	switch i % 6 {
	case 0: // TCP connect and close.
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
		}
	case 1: // Half a greeting, then close.
		if c, err := net.Dial("tcp", addr); err == nil {
			_, _ = c.Write([]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3})
			_ = c.Close()
		}
	case 2: // Full ZMTP handshake, then close.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		if z, err := zmq4.Open(c, nil, zmq4.Dealer, id, false, nil); err == nil {
			_ = z.Close()
		} else {
			_ = c.Close()
		}
	case 3, 4: // Hello, then gone before (or while) the admit is written;
		// mode 4 also sends records right behind the hello.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		z, err := openZMTP(c, zmq4.Dealer, id, false, frameLimits{1 << 20, 1 << 20, 16, 1 << 16}, 4096, 5*time.Second, nil)
		if err != nil {
			return
		}
		_ = z.write(hello)
		if i%6 == 4 {
			for k := 0; k < 20; k++ {
				f, _ := router.Encode(seqSend(b.RID(), uint64(k+1), []byte("x")))
				_ = z.write(f)
			}
		}
		_, _ = flushWithin(z, time.Second)
		_ = z.close()
	case 5: // A whole node: connect, get admitted or not, close at once.
		cfg := testConfig(string(id), 1)
		n, err := New(cfg)
		if err != nil {
			t.Errorf("quick node: %v", err)
			return
		}
		_ = n.Connect(b.RID(), b.Endpoint())
		if i%12 == 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = n.WaitAdmitted(ctx, b.RID())
			cancel()
		}
		_ = n.Close()
	}
}

// TestDuplicateIdentityHandover: a second connection with the same identity
// replaces the first on our ROUTER (ZeroMQ ROUTER_HANDOVER semantics: a
// restarted peer reconnects before its old TCP connection is noticed dead),
// but only once the first is no longer live (the identity rule,
// docs/TRANSPORT.md): while the old run still speaks on its connection, a
// newer generation's hello is refused with duplicateConnection and changes
// nothing. When the old run is gone the newer run is admitted, and a
// displaced older run cannot take the identity back: its re-hello carries
// an older lifecycle generation and is rejected as stale.
func TestDuplicateIdentityHandover(t *testing.T) {
	got := make(chan uint64, 16)
	cfgB := testConfig("b", 1)
	cfgB.Handler = echoHandler(func(from PeerInfo, r *router.Record) { got <- from.LifecycleGeneration })
	b := startNode(t, cfgB)

	cfgOld := testConfig("p", 1)
	old := startNode(t, cfgOld)
	connectAndWait(t, old, b)

	// Same RID, newer run, old one still alive: refused.
	newer, evNew := rejectedWith(t, testConfig("p", 2), b, router.RejectDuplicateConnection)
	sendFromGen := func(n *Node, seq, wantGen uint64) {
		t.Helper()
		if err := n.Send(context.Background(), b.RID(), seqSend(b.RID(), seq, nil)); err != nil {
			t.Fatal(err)
		}
		if gen := recvWithin(t, got, 5*time.Second, "record"); gen != wantGen {
			t.Fatalf("record attributed to generation %d, want %d", gen, wantGen)
		}
	}
	sendFromGen(old, 1, 1) // the old run still holds the RID

	// The old run goes away: the newer one's retrying link is admitted.
	_ = old.Close()
	evNew.wait(t, EventAdmitted, 10*time.Second)
	sendFromGen(newer, 2, 2)
	b.rt.mu.Lock()
	cur := b.rt.byID[string(newer.RID())]
	b.rt.mu.Unlock()
	if cur == nil || cur.info.LifecycleGeneration != 2 {
		t.Fatalf("current connection of the identity: %+v", cur)
	}

	// With the newer run gone too, an older run coming back is stale (while
	// the newer run was live it would have been a duplicate: the identity
	// rule is checked first).
	_ = newer.Close()
	waitFor(t, 5*time.Second, "no inbound connection", func() bool { return b.Stats().InboundConns == 0 })
	rejectedWith(t, cfgOld, b, router.RejectLifecycleGenerationStale)
}
