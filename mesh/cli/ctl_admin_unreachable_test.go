package cli

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
)

// ctl status/relocate against an address where no admin listener answers
// say so in an operator's terms, not as a raw client error: nothing
// listening, and a listener that accepts but never answers (a paused node).
func TestAdminUnreachableSaysWhy(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	// A node's mesh port (node.endpoint) given for its admin listener
	// answers with a ZMTP greeting (operator try-out, 2026-12-07: before,
	// net/http's `malformed HTTP response "\xff\x00…"` alone).
	mesh := testredis.FakePort(t, testredis.ZMTPGreeting)
	for _, tc := range []struct{ addr, want string }{
		{mesh, "http://" + mesh + " is a meshnode mesh port (node.endpoint), not an admin listener: it answered with a ZMTP greeting; " +
			"give the node's admin.listen address"},
		{refused, "no admin listener at http://" + refused + " (connection refused): is the node running, with admin.listen set to that address?"},
		{silent.Addr().String(), "did not answer within 200ms: is the node paused or overloaded?"},
	} {
		c, err := newAdminClient(tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.http.Timeout = 200 * time.Millisecond
		_, err = c.do(context.Background(), "GET", "/v1/status", nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want it to say %q", tc.addr, err, tc.want)
		}
	}
}
