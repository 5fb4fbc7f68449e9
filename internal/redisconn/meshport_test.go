package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
)

// pingOpen is a provider's open: a PING within a short operation timeout,
// its failure explained by ExplainOpen.
func pingOpen(o Options) error {
	const op = 300 * time.Millisecond
	c := NewClient(o, op)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), op)
	defer cancel()
	return ExplainOpen(c.Ping(ctx).Err(), o.Addrs)
}

// A store address set to a node's mesh port: the port greets in ZMTP and
// then waits, so the PING only times out; the error names the address as a
// mesh port instead of a bare "i/o timeout".
func TestMeshPortIsNamed(t *testing.T) {
	mesh := testredis.FakePort(t, testredis.ZMTPGreeting)
	silent := testredis.FakePort(t, nil)
	for _, tc := range []struct {
		name  string
		addrs []string
	}{
		{"standalone", []string{mesh}},
		{"one seed of several", []string{silent, mesh}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pingOpen(Options{Addrs: tc.addrs})
			if !errors.Is(err, ErrMeshPort) || !errors.Is(err, ErrNotRedis) {
				t.Fatalf("err = %v, want %v (and %v)", err, ErrMeshPort, ErrNotRedis)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, mesh+" is a meshnode mesh port") || !strings.Contains(msg, "ZMTP greeting") {
				t.Errorf("err %q does not name %s as a mesh port", msg, mesh)
			}
			if !isTimeout(err) {
				t.Errorf("err %q lost the client's own error", err)
			}
		})
	}
	t.Run("with TLS", func(t *testing.T) {
		// The TLS handshake fails at once on the greeting; no probe needed.
		err := pingOpen(Options{Addrs: []string{mesh}, TLSConfig: &tls.Config{ServerName: "redis.test"}})
		if !errors.Is(err, ErrMeshPort) || errors.Is(err, ErrTLS) {
			t.Fatalf("err = %v, want %v (not %v)", err, ErrMeshPort, ErrTLS)
		}
	})
	// A server that only is slow or silent keeps its timeout.
	t.Run("silent server", func(t *testing.T) {
		err := pingOpen(Options{Addrs: []string{silent}})
		if err == nil || errors.Is(err, ErrNotRedis) || !isTimeout(err) {
			t.Fatalf("err = %v, want the timeout alone", err)
		}
	})
	t.Run("other bytes", func(t *testing.T) {
		addr := testredis.FakePort(t, []byte("\xFF not a greeting at all"))
		err := pingOpen(Options{Addrs: []string{addr}})
		if errors.Is(err, ErrMeshPort) {
			t.Fatalf("err = %v, want no %v", err, ErrMeshPort)
		}
	})
}
