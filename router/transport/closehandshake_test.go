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
	// Held by the handshake, Close would take this long: far beyond the
	// bound below, which a loaded machine does not come near otherwise.
	cfg.HandshakeTimeout = 10 * time.Minute
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
	done := make(chan struct{})
	go func() { _ = b.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Close still running after %s: held by a connection that never sent its greeting", time.Since(start).Round(time.Millisecond))
	}
}
