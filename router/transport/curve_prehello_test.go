package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// TestCurveDialerRefusesOversizeFrameBeforeWelcome (a review, 2026-12-07):
// during the CURVE
// handshake only command frames (HELLO..READY, at most maxCommand) are
// valid, and before the WELCOME box opened the other end is not
// authenticated at all — anyone answering at the dialled endpoint, or on
// the path. The inbound side bounds this phase (preHelloLimits); the
// dialling side hands zmq4 the full frame limits (dialDealer passes p.lim),
// so a 10-byte LONG message-frame header makes zmq4 allocate the declared
// size (up to MaxFrameBytes, 64 MiB by default, and MaxMessageBytes over
// MORE frames) before one byte of body arrived. The frame must be refused
// at its header as a framing violation.
func TestCurveDialerRefusesOversizeFrameBeforeWelcome(t *testing.T) {
	ka, kb := mustKeyPair(t), mustKeyPair(t)
	cfg := curveTestConfig("a", ka, ka.Public, kb.Public)
	c, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := c.linkParams()
	const declared = 48 << 20
	if p.lim.maxFrame < declared {
		t.Fatalf("default frame limit %d below the test's frame", p.lim.maxFrame)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer conn.Close()
		// A CURVE server greeting (ZMTP 3.0, as-server 1).
		greet := make([]byte, zmtpGreetingLen)
		greet[0], greet[9], greet[10], greet[11] = 0xff, 0x7f, 3, 0
		copy(greet[12:32], "CURVE")
		greet[32] = 1
		if _, err := conn.Write(greet); err != nil {
			served <- err
			return
		}
		// The dialler's greeting, then its HELLO (a short command frame).
		in := make([]byte, zmtpGreetingLen+2+200)
		if _, err := io.ReadFull(conn, in); err != nil {
			served <- err
			return
		}
		// Instead of a WELCOME: a LONG message frame header and no body.
		hdr := []byte{flagLong, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint64(hdr[1:], declared)
		_, err = conn.Write(hdr)
		served <- err
	}()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	zc, err := dialDealer(ctx, "tcp://"+ln.Addr().String(), CurveRID(kb.Public), p)
	runtime.ReadMemStats(&after)
	if zc != nil {
		_ = zc.close()
	}
	if serr := <-served; serr != nil {
		t.Fatalf("fake server: %v", serr)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("dial error: %v; allocated %d bytes during the dial", err, allocated)
	if err == nil {
		t.Fatal("handshake succeeded against a fake server")
	}
	if allocated >= declared {
		t.Errorf("an unauthenticated endpoint made the dialler allocate %d bytes with a 9-byte frame header", allocated)
	}
	if !errIs(err, ErrFraming) {
		t.Errorf("a message frame of %d bytes during the CURVE handshake was not refused at its header: %v", declared, err)
	}
}

// Admitted, a dialled connection reads records as large as the frame
// limits allow, as an admitted inbound one does: link.connect raises the
// handshake's limits (dialDealer) at the admit. A 4 MiB reply — above the
// pre-admission frame limit — comes back on the caller's own connection.
func TestDialledConnectionTakesFullSizeRecordsOnceAdmitted(t *testing.T) {
	ka, kb := mustKeyPair(t), mustKeyPair(t)
	tests := []struct {
		name   string
		config func(name string, self curve.KeyPair) Config
	}{
		{"null", func(name string, _ curve.KeyPair) Config { return testConfig(name, 1) }},
		{"curve", func(name string, self curve.KeyPair) Config { return curveTestConfig(name, self, ka.Public, kb.Public) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfgB := tc.config("b", kb)
			cfgB.Handler = echoHandler(nil)
			b := startNode(t, cfgB)
			a := startNode(t, tc.config("a", ka))
			connectAndWait(t, a, b)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			data := make([]byte, 4<<20)
			for i := range data {
				data[i] = byte(i)
			}
			if uint64(len(data)) <= preHelloLimits(a.cfg.linkParams().lim).maxFrame {
				t.Fatalf("a %d-byte reply is within the pre-admission limit", len(data))
			}
			rep, err := a.Request(ctx, b.RID(), spotRequest(b.RID(), 1, data))
			if err != nil {
				t.Fatalf("request of %d bytes: %v", len(data), err)
			}
			if rep.Payload == nil || !bytes.Equal(rep.Payload.Data, data) {
				t.Fatal("the 4 MiB reply differs")
			}
		})
	}
}
