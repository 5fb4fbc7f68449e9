package transport

import (
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// TestSupersededReadOutsAreBounded: a connection superseded by a newer one
// of the same peer run is read to its end (peerConn.readOut), bounded only
// by idleness — a read that waited PeerTimeout for nothing — and skipped by
// the silent sweep. A peer run that reconnects once its connection is out
// of the live window (no whole record for liveWindow) and keeps each old
// connection trickling one byte of an unfinished frame per interval keeps
// every one of them open: their number grows by one per reconnect, up to
// MaxInboundConns (each with its goroutine, buffers and the frame zmq4
// allocated at its header, up to MaxFrameBytes). Without CURVE any client
// that knows the mesh name and security identity can do it.
//
// Now one read-out per RID (routerSock.noteReadOut): the newest
// supersession cuts the read-out the one before it started; the
// connection a real peer's kernel still sends on, the one just superseded,
// is still read to its end (TestSupersededConnectionIsReadToItsEnd).
func TestSupersededReadOutsAreBounded(t *testing.T) {
	cfgB := testConfig("b", 1)
	cfgB.PeerTimeout = 2 * time.Second // the read-outs' idle bound
	b := startNode(t, cfgB)
	hello, err := encodeInfra(&router.Hello{Admission: b.currentAdmission()})
	if err != nil {
		t.Fatal(err)
	}
	const reconnects = 12
	var open []*zconn
	for i := 0; i < reconnects; i++ {
		z := dialAs(t, b, RID("trickler"))
		if rec := sayHello(t, z, hello); rec.Command != router.CmdAdmit {
			t.Fatalf("connection %d: %s, want admit", i, rec.Command)
		}
		_ = z.raw.SetDeadline(time.Time{}) // sayHello's
		// An unfinished frame: its header, then one body byte per
		// trickle below; no whole record ever follows the hello.
		if _, err := z.raw.Write([]byte{flagLong, 0, 0, 0, 0, 0, 0x10, 0, 0}); err != nil {
			t.Fatal(err)
		}
		open = append(open, z)
		// Past the live window, trickling on every connection so far.
		for end := time.Now().Add(2 * b.liveWindow()); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			for _, o := range open {
				_, _ = o.raw.Write([]byte{0})
			}
		}
	}
	if got := b.Stats().InboundConns; got > 2 {
		t.Fatalf("%d inbound connections open for one peer run after %d reconnects, want at most 2 "+
			"(the current one and one being read to its end)", got, reconnects)
	}
	// Each reconnect from the third on cut the read-out the one before
	// started.
	if got := b.Stats().ReadOutsCut; got != reconnects-2 {
		t.Fatalf("ReadOutsCut = %d, want %d", got, reconnects-2)
	}
}
