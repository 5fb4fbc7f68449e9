package transport

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// A client that is not a mesh node — an HTTP request (curl, a browser, a
// metrics scraper pointed at the mesh port instead of admin.listen) or
// other bytes — gets a handshake error that says so, not only zmq4's
// "invalid greeting" or "unexpected EOF".
func TestHandshakeNamesAClientThatIsNotZMTP(t *testing.T) {
	for _, tc := range []struct {
		name, sent, want string
	}{
		// Shorter than a ZMTP greeting (64 bytes): zmq4 sees only EOF.
		{"short HTTP request", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
			`the client sent an HTTP request ("GET /metrics HTT") to the mesh port`},
		{"long HTTP request", "POST /v1/relocate HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8\r\nContent-Length: 2\r\n\r\n{}",
			"HTTP (metrics, probes, status) is served on admin.listen"},
		// go-redis's first command, from a store address set to the mesh port.
		{"Redis client", "*2\r\n$5\r\nhello\r\n$1\r\n3\r\n",
			"the client sent a Redis command (\"*2\\r\\n$5\\r\\nhello\\r\\n$\") to the mesh port"},
		{"other bytes", "\x13\x37" + strings.Repeat("garbage ", 10),
			`the client's first bytes "\x137garbage garbag" are not a ZMTP greeting`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					return
				}
				defer c.Close()
				_, _ = c.Write([]byte(tc.sent))
				_ = c.(*net.TCPConn).CloseWrite()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Read(make([]byte, 256)) // until the node closes
			}()
			served, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			_, err = openZMTP(served, zmq4.Router, []byte("node"), true, frameLimits{1 << 20, 1 << 20, 16, 1 << 16}, 4096, 5*time.Second, nil)
			if err == nil {
				t.Fatal("handshake succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not a mesh node") {
				t.Fatalf("handshake error %q does not say %q", err, tc.want)
			}
		})
	}
}
