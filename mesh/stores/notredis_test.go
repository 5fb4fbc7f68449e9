package stores

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	locredis "github.com/meshnode/meshnode/locstore/redis"
	relredis "github.com/meshnode/meshnode/relocstore/redis"
)

// greetingPort stands for a node's mesh port: it sends a ZMTP greeting on
// every connection and then waits for the client's, as a node does.
func greetingPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	greeting := append([]byte{0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0, 'N', 'U', 'L', 'L'}, make([]byte, 48)...)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write(greeting)
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, _ = c.Read(make([]byte, 512))
				_, _ = c.Read(make([]byte, 512))
			}()
		}
	}()
	return ln.Addr().String()
}

// TestOpenAtAnotherService: a store address that is a node's mesh port or
// an HTTP listener fails the open with ErrNotRedis (ErrMeshPort for the
// mesh port, which only times out at the protocol level) and names the key
// to check, not a bare "i/o timeout" or parse error.
func TestOpenAtAnotherService(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	mesh := greetingPort(t)
	for _, tc := range []struct {
		name, addr string
		want       error
		wantText   string
	}{
		{"mesh port", mesh, locredis.ErrMeshPort, mesh + " is a meshnode mesh port"},
		{"HTTP listener", strings.TrimPrefix(web.URL, "http://"), locredis.ErrNotRedis, "does not speak the Redis protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, _ := newLog(t)
			loc, rel := redisStores(t, tc.addr)
			loc.Redis.OperationTimeout, rel.Redis.OperationTimeout = 300*time.Millisecond, 300*time.Millisecond
			locErr, relErr := openBoth(t, loc, rel, log)
			for _, c := range []struct {
				err    error
				prefix string
			}{{locErr, "location_store"}, {relErr, "relocation_store"}} {
				if !errors.Is(c.err, tc.want) || !errors.Is(c.err, relredis.ErrNotRedis) {
					t.Fatalf("open %s: err = %v, want %v", c.prefix, c.err, tc.want)
				}
				msg := c.err.Error()
				for _, part := range []string{tc.wantText, "check " + c.prefix + ".redis.addrs"} {
					if !strings.Contains(msg, part) {
						t.Errorf("open %s: error %q does not contain %q", c.prefix, msg, part)
					}
				}
			}
		})
	}
}
