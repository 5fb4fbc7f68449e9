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
	return ExplainOpen(c.Ping(ctx).Err(), o.Addrs, o.TLSConfig != nil)
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

// TLS pointed at a Redis port that speaks plain text: Redis waits for a line
// end the ClientHello never sends, so the PING only times out. The error
// names the address as a plain-text Redis port (ErrPlainText, also ErrTLS)
// instead of a bare "context deadline exceeded" (operator try-out,
// 2026-12-07).
func TestPlainTextPortWithTLSIsNamed(t *testing.T) {
	certs := testredis.NewCerts(t)
	const secret = "s3cret-plain"
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: secret, TLS: certs.ServerTLS(false)})
	open := certs.ClientTLS(t)
	for _, tc := range []struct {
		name     string
		addr     string
		password string
	}{
		{"server with a password", s.Addr, secret},
		{"server without one", testredis.Addr(t), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := pingOpen(Options{Addrs: []string{tc.addr}, Password: tc.password, TLSConfig: open})
			if !errors.Is(err, ErrPlainText) || !errors.Is(err, ErrTLS) {
				t.Fatalf("err = %v, want %v (and %v)", err, ErrPlainText, ErrTLS)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tc.addr+" is a plain-text Redis port") {
				t.Errorf("err %q does not name %s as a plain-text Redis port", msg, tc.addr)
			}
			if !isTimeout(err) {
				t.Errorf("err %q lost the client's own error", err)
			}
		})
	}
	t.Run("the TLS port itself", func(t *testing.T) {
		if err := pingOpen(Options{Addrs: []string{s.TLSAddr}, Password: secret, TLSConfig: open}); err != nil {
			t.Fatalf("PING over TLS to the TLS port: %v", err)
		}
	})
	t.Run("silent server", func(t *testing.T) {
		err := pingOpen(Options{Addrs: []string{testredis.FakePort(t, nil)}, TLSConfig: open})
		if err == nil || errors.Is(err, ErrTLS) || !isTimeout(err) {
			t.Fatalf("err = %v, want the timeout alone", err)
		}
	})
}
