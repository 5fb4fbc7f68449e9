package transport

import (
	"net"
	"testing"
	"time"
)

// One TCP connection that never sends its ZMTP greeting does not hold
// Node.Close: connections still in their handshake are closed with the
// others. Before, routerSock.close closed only admitted connections and
// waited for the handshaking one's goroutine until HandshakeTimeout (5 s):
// any stranger on the port delayed every shutdown.
func TestCloseNotHeldBySilentHandshake(t *testing.T) {
	cfg := testConfig("b", 1)
	cfg.HandshakeTimeout = 5 * time.Second
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", b.rt.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	_ = b.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %s: held by a connection that never sent its greeting", d.Round(time.Millisecond))
	}
}
