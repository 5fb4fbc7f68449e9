package transport

import (
	"net"
	"sync"
	"testing"
)

// proxyConns are the connections a test's TCP proxy made (both sides),
// closed with its listener at the test's end (listenProxy).
type proxyConns struct {
	mu  sync.Mutex
	all []net.Conn
}

func (c *proxyConns) track(cs ...net.Conn) {
	c.mu.Lock()
	c.all = append(c.all, cs...)
	c.mu.Unlock()
}

// listenProxy listens on loopback for a test's proxy; the listener and
// every connection tracked are closed when the test ends.
func listenProxy(t testing.TB) (net.Listener, *proxyConns) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := &proxyConns{}
	t.Cleanup(func() {
		_ = ln.Close()
		conns.mu.Lock()
		for _, c := range conns.all {
			_ = c.Close()
		}
		conns.mu.Unlock()
	})
	return ln, conns
}
