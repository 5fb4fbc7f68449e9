package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/meshnode/meshnode/router"
)

// zmtpGreeting is a ZMTP 3.0 NULL-mechanism greeting (client side).
func zmtpGreeting() []byte {
	g := make([]byte, 64)
	g[0], g[9] = 0xff, 0x7f
	g[10], g[11] = 3, 0
	copy(g[12:], "NULL")
	return g
}

// zmtpReady is a READY command frame with the given properties, in order.
func zmtpReady(props ...[2]string) []byte {
	body := []byte{5}
	body = append(body, "READY"...)
	for _, p := range props {
		body = append(body, byte(len(p[0])))
		body = append(body, p[0]...)
		body = binary.BigEndian.AppendUint32(body, uint32(len(p[1])))
		body = append(body, p[1]...)
	}
	return append([]byte{flagCommand, byte(len(body))}, body...)
}

// truncatedReady is a READY whose only metadata property declares a 2-byte
// name and then ends: zmq4's Property.Write slices 4 bytes past the end.
func truncatedReady() []byte {
	body := append([]byte{5}, "READY"...)
	body = append(body, 2, 'a', 'b')
	return append([]byte{flagCommand, byte(len(body))}, body...)
}

// rawDealer completes a ZMTP handshake as DEALER over a raw socket, so the
// test can then write arbitrary bytes.
func rawDealer(t *testing.T, addr string, identity string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write(append(zmtpGreeting(), zmtpReady([2]string{"Socket-Type", "DEALER"}, [2]string{"Identity", identity})...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// malformedRecords are records the codec must reject; each is one ZMTP
// message. None of them may reach the handler or disturb the connection.
func malformedRecords(target RID, adm router.ServiceAdmission) map[string][][]byte {
	valid, _ := router.Encode(seqSend(target, 1, []byte("x")))
	head := func(cmd, flags byte, body ...byte) []byte {
		return append([]byte{'Z', 'M', 1, cmd, flags}, body...)
	}
	probe := func(b ...byte) []byte { return head(5, 0, b...) }
	return map[string][][]byte{
		"empty frame":          {{}},
		"random bytes":         {[]byte("\x13\x37garbage that is not a record")},
		"bad magic":            {append([]byte{'X'}, valid[0][1:]...), valid[1]},
		"wire major 2":         {append([]byte{'Z', 'M', 2}, valid[0][3:]...), valid[1]},
		"unknown command":      {head(7, 0, 1, 2, 3, 4, 5, 6, 7, 8)},
		"forbidden flag":       {head(5, router.FlagMetadata, 0, 0, 0, 0, 0, 0, 0, 1), {1, 0}},
		"undefined flag bit":   {head(5, 0x80, 0, 0, 0, 0, 0, 0, 0, 1)},
		"zero probe id":        {probe(0, 0, 0, 0, 0, 0, 0, 0)},
		"truncated probe":      {probe(0, 0, 0, 0, 0, 0, 1)},
		"trailing byte":        {probe(0, 0, 0, 0, 0, 0, 0, 1, 0)},
		"missing payload":      {valid[0]},
		"extra frame":          {valid[0], valid[1], []byte("extra")},
		"truncated payload":    {valid[0], valid[1][:len(valid[1])-1]},
		"head only":            {head(21, 0)},
		"short head":           {[]byte{'Z', 'M', 1}},
		"admit wrong way":      mustEncode(&router.Admit{Admission: adm}),
		"ack wrong way":        mustEncode(&router.LivenessAck{ProbeID: 5}),
		"reject wrong way":     mustEncode(&router.Reject{Reason: router.RejectResourceLimit}),
		"huge declared length": {valid[0], append([]byte{1, 0xff, 0xff, 0xff, 0xf0}, valid[1][5:]...)},
	}
}

func mustEncode(b router.Body) [][]byte {
	frames, err := router.Encode(router.NewRecord(b, nil, nil))
	if err != nil {
		panic(err) // test input, built from valid values
	}
	return frames
}

// TestGarbageFromOnePeer: a stream of garbage and malformed records from one
// peer is dropped and counted per record; the node, the garbage peer's own
// valid records and another peer's traffic are untouched. Connection-level
// garbage (ZMTP framing) closes only the offending connection.
func TestGarbageFromOnePeer(t *testing.T) {
	good := newOrderChecker(3000)
	var mu sync.Mutex
	var fromGarbage []uint64
	cfgB := testConfig("b", 1)
	cfgB.Handler = echoHandler(func(from PeerInfo, r *router.Record) {
		if string(from.RID) == "garbage" {
			mu.Lock()
			fromGarbage = append(fromGarbage, seqOf(r))
			mu.Unlock()
			return
		}
		good.see(from, r)
	})
	b := startNode(t, cfgB)
	addr := b.rt.ln.Addr().String()

	// The well-behaved peer streams records and requests throughout.
	g := startNode(t, testConfig("good", 1))
	connectAndWait(t, g, b)
	goodErr := make(chan error, 1)
	go func() {
		if _, err := sendAll(context.Background(), g, b.RID(), 3000, []byte("good")); err != nil {
			goodErr <- err
			return
		}
		for i := 0; i < 200; i++ {
			if _, err := g.Request(context.Background(), b.RID(), spotRequest(b.RID(), uint64(i+1), nil)); err != nil {
				goodErr <- err
				return
			}
		}
		goodErr <- nil
	}()

	// The garbage peer: a real ZMTP DEALER that is admitted, then mixes
	// malformed records with valid ones.
	zc := dialAs(t, b, RID("garbage"))
	c := zc.raw
	send := func(frames [][]byte) {
		t.Helper()
		if err := zc.write(frames); err != nil {
			t.Fatal(err)
		}
		if _, err := flushWithin(zc, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Before admission valid records are dropped as not admitted.
	v, _ := router.Encode(seqSend(b.RID(), 999, nil))
	send(v)
	hello, _ := encodeInfra(&router.Hello{Admission: b.currentAdmission()})
	send(hello)
	recvCmd := func(want router.Command) *router.Record {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		frames, err := zc.recv()
		if err != nil {
			t.Fatalf("garbage peer recv: %v", err)
		}
		rec, err := router.Decode(frames)
		if err != nil || rec.Command != want {
			t.Fatalf("garbage peer got %v (%v), want %s", rec, err, want)
		}
		return rec
	}
	recvCmd(router.CmdAdmit)
	// A second hello on an admitted connection is a protocol error too.
	bad := malformedRecords(b.RID(), b.currentAdmission())
	bad["second hello"] = hello
	rng := rand.New(rand.NewSource(1))
	names := make([]string, 0, len(bad))
	for k := range bad {
		names = append(names, k)
	}
	const rounds = 20
	seq := uint64(0)
	wantErrors := 0
	for r := 0; r < rounds; r++ {
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for _, name := range names {
			send(bad[name])
			wantErrors++
			seq++
			f, _ := router.Encode(seqSend(b.RID(), seq, []byte(name)))
			send(f)
		}
	}
	// Still alive: a probe is acked on the same connection.
	probe, _ := encodeInfra(&router.LivenessProbe{ProbeID: 77})
	send(probe)
	if id := recvCmd(router.CmdLivenessAck).Body.(*router.LivenessAck).ProbeID; id != 77 {
		t.Fatalf("ack %d", id)
	}

	if err := <-goodErr; err != nil {
		t.Fatalf("good peer: %v", err)
	}
	select {
	case <-good.doneCh:
	case <-time.After(10 * time.Second):
		t.Fatalf("good peer: %d records arrived", good.total.Load())
	}
	mu.Lock()
	if len(fromGarbage) != int(seq) {
		t.Fatalf("garbage peer's valid records: got %d, want %d", len(fromGarbage), seq)
	}
	for i, s := range fromGarbage {
		if s != uint64(i+1) {
			t.Fatalf("garbage peer's valid records out of order at %d: %d", i, s)
		}
	}
	mu.Unlock()
	st := b.Stats()
	if got := st.Peers[RID("garbage").String()].ProtocolErrors; got != uint64(wantErrors) {
		t.Fatalf("protocol errors of garbage peer = %d, want %d", got, wantErrors)
	}
	if st.NotAdmitted != 1 {
		t.Fatalf("not-admitted drops = %d, want 1", st.NotAdmitted)
	}
	if gs := st.Peers[g.RID().String()]; gs.ProtocolErrors != 0 {
		t.Fatalf("good peer charged with protocol errors: %+v", gs)
	}

	// Connection-level garbage: each case ends only its own connection.
	framing := []struct {
		name  string
		bytes func() []byte
	}{
		{"frame declaring 2^50 bytes (zmq4 would makeslice-panic)", func() []byte {
			h := []byte{flagLong, 0, 0, 0, 0, 0, 0, 0, 0}
			binary.BigEndian.PutUint64(h[1:], 1<<50)
			return h
		}},
		{"frame declaring 1 GiB (zmq4 would allocate it)", func() []byte {
			h := []byte{flagLong, 0, 0, 0, 0, 0, 0, 0, 0}
			binary.BigEndian.PutUint64(h[1:], 1<<30)
			return h
		}},
		{"reserved flag bits", func() []byte { return []byte{0x80, 1, 'x'} }},
		{"17 frames in one message", func() []byte {
			var b []byte
			for i := 0; i < 17; i++ {
				b = append(b, rawFrame(true, []byte("f"))...)
			}
			return b
		}},
		{"command frame with MORE", func() []byte { return []byte{flagCommand | flagMore, 1, 'x'} }},
	}
	before := b.Stats().ProtocolErrors
	for _, tc := range framing {
		c := rawDealer(t, addr, "framing")
		if _, err := c.Write(tc.bytes()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The node closes the connection: our read ends.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("%s: connection not closed by the node", tc.name)
				}
				break
			}
		}
	}
	waitFor(t, 5*time.Second, "framing violations counted", func() bool {
		return b.Stats().ProtocolErrors == before+uint64(len(framing))
	})

	// Handshakes that crash stock zmq4 (panics in its goroutines) fail only
	// the connection here; the recovered panics count as protocol errors,
	// the plain failures as handshake failures.
	handshakes := []struct {
		name  string
		ready []byte
		panic bool
	}{
		{"unknown socket type", zmtpReady([2]string{"Socket-Type", "FOO"}, [2]string{"Identity", "x"}), true},
		{"no socket type", zmtpReady([2]string{"Identity", "x"}), true},
		{"truncated metadata property", truncatedReady(), true},
		{"not a READY", []byte{flagCommand, 5, 4, 'P', 'I', 'N', 'G'}, false},
		{"greeting with wrong major", nil, false},
	}
	st0 := b.Stats()
	wantPanics, wantFailures := 0, 0
	for _, hs := range handshakes {
		name, ready := hs.name, hs.ready
		if hs.panic {
			wantPanics++
		} else {
			wantFailures++
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		greet := zmtpGreeting()
		if ready == nil {
			greet[10] = 2
		}
		_, _ = c.Write(append(greet, ready...))
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("%s: handshake not failed by the node", name)
				}
				break
			}
		}
		_ = c.Close()
	}
	waitFor(t, 5*time.Second, "handshake outcomes counted", func() bool {
		st := b.Stats()
		return st.ProtocolErrors-st0.ProtocolErrors == uint64(wantPanics) &&
			st.HandshakeFailures-st0.HandshakeFailures == uint64(wantFailures)
	})

	// After all of it the node serves as before.
	for i := 0; i < 10; i++ {
		if _, err := g.Request(context.Background(), b.RID(), spotRequest(b.RID(), uint64(1000+i), nil)); err != nil {
			t.Fatalf("request after garbage: %v", err)
		}
	}
	t.Logf("stats after garbage: errors=%d handshakeFailures=%d notAdmitted=%d", b.Stats().ProtocolErrors, b.Stats().HandshakeFailures, b.Stats().NotAdmitted)
}

// TestGuardPingPong: a ZMTP PING from the peer is answered with a PONG by
// our writer (zmq4 would write it from the reading goroutine, racing the
// writer), and never disturbs the records around it.
func TestGuardPingPong(t *testing.T) {
	got := make(chan uint64, 8)
	cfgB := testConfig("b", 1)
	cfgB.Handler = echoHandler(func(_ PeerInfo, r *router.Record) { got <- seqOf(r) })
	b := startNode(t, cfgB)
	c, zc := admittedPinger(t, b)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r1, _ := router.Encode(seqSend(b.RID(), 1, nil))
	r2, _ := router.Encode(seqSend(b.RID(), 2, nil))
	_ = zc.write(r1)
	// PING with TTL 0 and context "ctx-1".
	if err := zc.z.SendCmd(zmq4.CmdPing, append([]byte{0, 0}, "ctx-1"...)); err != nil {
		t.Fatal(err)
	}
	_ = zc.write(r2)
	_, _ = flushWithin(zc, time.Second)
	for want := uint64(1); want <= 2; want++ {
		select {
		case s := <-got:
			if s != want {
				t.Fatalf("record %d, want %d", s, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("records around the PING not delivered")
		}
	}
	// Read the PONG at the ZMTP level (zc.recv skips commands).
	msg, err := zc.z.RecvMsg()
	if err != nil {
		t.Fatal(err)
	}
	if msg.Type != zmq4.CmdMsg {
		t.Fatalf("got %v, want a PONG command", msg)
	}
	if len(msg.Frames) != 1 || string(msg.Frames[0]) != "ctx-1" {
		t.Fatalf("PONG context %q, want ctx-1", msg.Frames)
	}
}

// TestGarbageOnOurDealer: a peer ROUTER answering our DEALER with malformed
// or misdirected records gets them dropped and counted; the session stays
// up and requests on it still complete.
func TestGarbageOnOurDealer(t *testing.T) {
	fake := newFakePeer(t, "bad-router", 1)
	a := startNode(t, testConfig("a", 1))
	if err := a.Connect(fake.rid, fake.endpoint()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := a.WaitAdmitted(ctx, fake.rid); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		rep, err := a.Request(ctx, fake.rid, spotRequest(fake.rid, 1, nil))
		if err == nil && rep.Command != router.CmdReply {
			err = fmt.Errorf("got %s", rep.Command)
		}
		errc <- err
	}()
	req := fake.next(router.CmdSpotRequest, 5*time.Second)
	sendRaw := func(frames [][]byte) {
		if err := req.ic.pc.enqueue(outItem{frames: frames, size: framesSize(frames)}); err != nil {
			t.Fatal(err)
		}
	}
	bad := [][][]byte{
		{[]byte("garbage")},
		{{'Z', 'M', 1, 20, 0, 0}},                              // truncated reply
		mustEncode(&router.Hello{Admission: fake.admission()}), // wrong direction
	}
	wrongWay, _ := router.Encode(seqSend(a.RID(), 1, nil)) // peers originate on their own DEALER
	bad = append(bad, wrongWay)
	for _, f := range bad {
		sendRaw(f)
	}
	corr, _ := RequestCorrelation(req.rec)
	fake.send(req.ic, &router.Reply{Correlation: corr, Result: router.ResultOK})
	if err := <-errc; err != nil {
		t.Fatalf("request across garbage: %v", err)
	}
	st := a.Stats()
	if got := st.Peers[fake.rid.String()].ProtocolErrors; got != uint64(len(bad)) {
		t.Fatalf("protocol errors %d, want %d", got, len(bad))
	}
	if !admitted(a, fake.rid) {
		t.Fatal("session dropped over garbage")
	}
}

func TestPeerMechanism(t *testing.T) {
	greeting := func(mech string) []byte {
		g := make([]byte, zmtpGreetingLen)
		g[0], g[9], g[10] = 0xff, 0x7f, 3
		copy(g[12:32], mech)
		return g
	}
	random := greeting("CURVE")
	random[0] = 0x16 // a TLS ClientHello, say
	tests := []struct {
		name   string
		read   []byte
		want   string
		wantOK bool
	}{
		{"NULL", greeting("NULL"), "NULL", true},
		{"CURVE", greeting("CURVE"), "CURVE", true},
		{"not read far enough", greeting("CURVE")[:20], "", false},
		{"not a ZMTP signature", random, "", false},
		{"not a mechanism name", greeting("cur\x01ve"), "", false},
		{"empty name", greeting(""), "", false},
	}
	for _, tc := range tests {
		g := &guardConn{greeting: tc.read}
		if got, ok := g.peerMechanism(); got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: peerMechanism = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// admittedPinger is a raw ZMTP DEALER ("pinger") connected to b and
// admitted by its hello, with no read deadline; closed at the test's end.
func admittedPinger(t *testing.T, b *Node) (net.Conn, *zconn) {
	t.Helper()
	return admittedPeer(t, b, "pinger")
}

// admittedPeer is a raw DEALER with identity ident whose hello b admitted.
func admittedPeer(t *testing.T, b *Node, ident string) (net.Conn, *zconn) {
	t.Helper()
	zc := dialAs(t, b, RID(ident))
	c := zc.raw
	hello, _ := encodeInfra(&router.Hello{Admission: b.currentAdmission()})
	_ = zc.write(hello)
	_, _ = flushWithin(zc, time.Second)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := zc.recv(); err != nil { // admit
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, zc
}
