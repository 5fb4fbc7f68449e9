package transport

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// TestSquattersDoNotLockOutNewPeers: MaxUnadmitted is one node-wide pool,
// and a connection that never says hello keeps its slot for up to two
// handshake timeouts. A single host that dials again whenever one of its
// connections is closed — at the hello deadline, or at once when refused
// at the cap — grabs every slot the moment it frees, so a peer that was
// not admitted before the flood (a node starting, or one whose connection
// dropped and must hello again) is refused at accept on every retry and
// never gets in. docs/TRANSPORT.md says the flood "can delay a new peer's
// admission until the flood's connections hit the hello deadline"; with a
// squatter that redials it is delayed for as long as the squatter runs.
// The squatter here is 256 redialling loops from another source address
// (127.0.0.2) than the peer, as it would be in a real network; MaxUnadmitted
// is 4 so that the test is short, the default 64 only needs more loops. It
// shows the defect as a race the squatter wins (with 8 loops the peer got in
// within 3 s; with 64, in 1 run of 3; with 256, in none of 4).
//
// Fixed on 2026-12-07 (it was tagged knownopen until then): each source
// address gets a fair share of MaxUnadmitted, and a connection from an
// address over its share is evicted to let another address's in
// (docs/TRANSPORT.md, "MaxUnadmitted (64), shared fairly between source
// addresses").
func TestSquattersDoNotLockOutNewPeers(t *testing.T) {
	cfgB := testConfig("b", 1)
	cfgB.Endpoint = "tcp://0.0.0.0:0"
	cfgB.MaxUnadmitted = 4
	cfgB.HandshakeTimeout = time.Second
	b := startNode(t, cfgB)
	_, port, err := net.SplitHostPort(b.rt.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort("127.0.0.1", port)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for i := 0; i < 256; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp", target)
				if err != nil {
					continue
				}
				stopRead := context.AfterFunc(ctx, func() { _ = c.Close() })
				_, _ = io.Copy(io.Discard, c) // held until the node closes it
				stopRead()
				_ = c.Close()
			}
		}()
	}
	waitFor(t, 5*time.Second, "squatters holding every slot", func() bool { return b.Stats().RefusedUnadmitted > 0 })

	cfgA := testConfig("a", 1)
	a := startNode(t, cfgA)
	if err := a.Connect(b.RID(), "tcp://"+target); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*cfgB.HandshakeTimeout)
	defer cancel()
	if _, err := a.WaitAdmitted(wctx, b.RID()); err != nil {
		s := b.Stats()
		t.Fatalf("a new peer was not admitted within %s while one host squats the unadmitted slots: %v "+
			"(refused at the cap %d, handshake failures %d)", 10*cfgB.HandshakeTimeout, err, s.RefusedUnadmitted, s.HandshakeFailures)
	}
}

// TestFullPoolMakesRoomForAnotherAddress: with the unadmitted pool full of
// one address's silent connections, a peer dialling from another address
// takes the slot of that address's oldest connection at once instead of
// being refused until the squatters' hello deadline (a minute here); a
// further connection from the squatting address is refused, not given the
// peer's slot.
func TestFullPoolMakesRoomForAnotherAddress(t *testing.T) {
	cfgB := testConfig("b", 1)
	cfgB.Endpoint = "tcp://0.0.0.0:0"
	cfgB.MaxUnadmitted = 4
	cfgB.HandshakeTimeout = time.Minute // the squatters keep their slots
	b := startNode(t, cfgB)
	_, port, err := net.SplitHostPort(b.rt.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort("127.0.0.1", port)
	unadm := func() int {
		b.rt.mu.Lock()
		defer b.rt.mu.Unlock()
		return b.rt.unadm
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	var squatters []net.Conn
	for i := 0; i < cfgB.MaxUnadmitted; i++ {
		c, err := d.Dial("tcp", target)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		squatters = append(squatters, c)
		waitFor(t, 5*time.Second, "squatter accepted", func() bool { return unadm() == i+1 })
	}

	a := startNode(t, testConfig("a", 1))
	if err := a.Connect(b.RID(), "tcp://"+target); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), cfgB.HandshakeTimeout/2)
	defer cancel()
	if _, err := a.WaitAdmitted(wctx, b.RID()); err != nil {
		t.Fatalf("peer from another address not admitted while one address fills the unadmitted pool: %v (refused %d, evicted %d)",
			err, b.Stats().RefusedUnadmitted, b.Stats().EvictedUnadmitted)
	}
	s := b.Stats()
	if s.EvictedUnadmitted != 1 || s.RefusedUnadmitted != 0 {
		t.Fatalf("evicted %d, refused %d; want 1 and 0", s.EvictedUnadmitted, s.RefusedUnadmitted)
	}
	if !closedByPeer(squatters[0], 5*time.Second) {
		t.Fatal("the squatting address's oldest connection was not the one closed")
	}
	waitFor(t, 5*time.Second, "squatters' slots", func() bool { return unadm() == cfgB.MaxUnadmitted-1 })

	// The pool has room for one: the squatting address takes it; the next
	// one from it is refused (it holds most), not given another's slot.
	for i := 0; i < 2; i++ {
		c, err := d.Dial("tcp", target)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i == 0 {
			waitFor(t, 5*time.Second, "squatter accepted", func() bool { return unadm() == cfgB.MaxUnadmitted })
			continue
		}
		if !closedByPeer(c, 5*time.Second) {
			t.Fatal("connection from the address holding the whole pool not refused")
		}
	}
	if s := b.Stats(); s.RefusedUnadmitted != 1 || s.EvictedUnadmitted != 1 {
		t.Fatalf("refused %d, evicted %d; want 1 and 1", s.RefusedUnadmitted, s.EvictedUnadmitted)
	}
}

func TestAddrGroup(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.2:5000", "127.0.0.2"},
		{"[::ffff:10.1.2.3]:5000", "10.1.2.3"},
		{"[2001:db8:1:2:aaaa::1]:5000", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:5000", "fe80::/64"},
	} {
		ap, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := addrGroup(ap); got != c.want {
			t.Errorf("addrGroup(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}
