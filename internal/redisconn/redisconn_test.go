package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/testredis"
)

const opTimeout = 2 * time.Second

// ping opens a client as NewClient builds it and explains its first
// command's failure, as the providers do at startup. Unless slowOK, it
// also checks a failure came well within the operation timeout: a refused
// login or certificate must be reported, not waited out.
func ping(t *testing.T, o Options, slowOK bool) error {
	t.Helper()
	c := NewClient(o, opTimeout)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	start := time.Now()
	err := Explain(c.Ping(ctx).Err())
	if d := time.Since(start); err != nil && !slowOK && d > opTimeout/2 {
		t.Errorf("PING took %v to fail (%v): it should fail at once", d, err)
	}
	return err
}

// errAny, as an expected error, accepts any failure.
var errAny = errors.New("any error")

func matches(err, want error) bool {
	switch want {
	case nil:
		return err == nil
	case errAny:
		return err != nil
	}
	return errors.Is(err, want)
}

func TestAuth(t *testing.T) {
	const secret = "s3cret-default"
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: secret, Users: [][]string{
		{"app", "on", ">s3cret-app", "~*", "&*", "+@all"},
		{"off", "off", ">s3cret-off", "~*", "+@all"},
	}})
	plain := testredis.Addr(t) // a server without any password
	tests := []struct {
		name               string
		addr               string
		username, password string
		want               error
	}{
		{"default user", s.Addr, "", secret, nil},
		{"ACL user", s.Addr, "app", "s3cret-app", nil},
		{"no password", s.Addr, "", "", ErrAuth},
		{"wrong password", s.Addr, "", "wrong", ErrAuth},
		{"ACL user, wrong password", s.Addr, "app", "wrong", ErrAuth},
		{"unknown ACL user", s.Addr, "nobody", "s3cret-app", ErrAuth},
		{"disabled ACL user", s.Addr, "off", "s3cret-off", ErrAuth},
		// Redis 6+ lets the default user of a server without a password
		// log in with any password (HELLO … AUTH default <any>).
		{"password to a server without one", plain, "", "unexpected", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ping(t, Options{Addrs: []string{tc.addr}, Username: tc.username, Password: tc.password}, false)
			if !matches(err, tc.want) {
				t.Fatalf("PING err = %v, want %v", err, tc.want)
			}
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "authentication failed") {
				t.Errorf("error %q does not say authentication failed", err)
			}
			if tc.password != "" && strings.Contains(err.Error(), tc.password) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	certs := testredis.NewCerts(t)
	const secret = "s3cret-tls"
	s := testredis.NewSecuredServer(t, testredis.ServerOptions{Password: secret, TLS: certs.ServerTLS(true)})
	other := testredis.NewCerts(t) // a CA the server does not know
	clientCert := loadPair(t, certs.ClientCertFile, certs.ClientKeyFile)
	tests := []struct {
		name string
		addr string
		tls  *tls.Config
		want error
	}{
		{"CA and client certificate", s.TLSAddr,
			&tls.Config{RootCAs: pool(t, certs.CAFile), Certificates: []tls.Certificate{clientCert}}, nil},
		{"server name in the certificate", s.TLSAddr,
			&tls.Config{RootCAs: pool(t, certs.CAFile), Certificates: []tls.Certificate{clientCert}, ServerName: testredis.ServerName}, nil},
		{"TLS 1.3 minimum", s.TLSAddr,
			&tls.Config{RootCAs: pool(t, certs.CAFile), Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS13}, nil},
		{"server name not in the certificate", s.TLSAddr,
			&tls.Config{RootCAs: pool(t, certs.CAFile), Certificates: []tls.Certificate{clientCert}, ServerName: "other.test"}, ErrTLS},
		{"untrusted server certificate", s.TLSAddr,
			&tls.Config{RootCAs: pool(t, other.CAFile), Certificates: []tls.Certificate{clientCert}}, ErrTLS},
		// With TLS 1.3 the server judges the client certificate after the
		// client finished its handshake: the client sees the server's
		// alert, or only the reset connection when its PING races it.
		{"no client certificate", s.TLSAddr, &tls.Config{RootCAs: pool(t, certs.CAFile)}, errAny},
		{"client certificate of another CA", s.TLSAddr,
			&tls.Config{RootCAs: pool(t, certs.CAFile), Certificates: []tls.Certificate{loadPair(t, other.ClientCertFile, other.ClientKeyFile)}}, errAny},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ping(t, Options{Addrs: []string{tc.addr}, Password: secret, TLSConfig: tc.tls}, false)
			if !matches(err, tc.want) {
				t.Fatalf("PING err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("wrong password over TLS", func(t *testing.T) {
		err := ping(t, Options{Addrs: []string{s.TLSAddr}, Password: "wrong",
			TLSConfig: &tls.Config{RootCAs: pool(t, certs.CAFile), Certificates: []tls.Certificate{clientCert}}}, false)
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("PING err = %v, want %v", err, ErrAuth)
		}
	})
	// A mismatch of TLS and plain text is not always recognizable: Redis
	// closes a plain connection to its TLS port at once, but waits for a
	// line end that a ClientHello sent to its plain port never has, so
	// that PING only ends at the operation timeout.
	t.Run("plain text to the TLS port", func(t *testing.T) {
		if err := ping(t, Options{Addrs: []string{s.TLSAddr}, Password: secret}, false); err == nil {
			t.Fatal("a plain-text PING to the TLS port succeeded")
		}
	})
	t.Run("TLS to the plain port", func(t *testing.T) {
		err := ping(t, Options{Addrs: []string{s.Addr}, Password: secret,
			TLSConfig: &tls.Config{RootCAs: pool(t, certs.CAFile)}}, true)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTLS) {
			t.Fatalf("PING err = %v, want the operation timeout or %v", err, ErrTLS)
		}
	})
}

// serverError is a server reply as go-redis reports it.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// TestExplain covers replies no local server gives: those of the AUTH
// fallback for servers without HELLO.
func TestExplain(t *testing.T) {
	tests := []struct {
		err  error
		want error
	}{
		{serverError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"), ErrAuth},
		{serverError("ERR invalid password"), ErrAuth},
		{serverError("WRONGPASS invalid username-password pair or user is disabled."), ErrAuth},
		{serverError("NOAUTH Authentication required."), ErrAuth},
		{serverError("ERR unknown command 'PING'"), nil},
		// An HTTP server answering go-redis's HELLO (a node's admin
		// listener given as the store address).
		{errors.New(`redis: can't parse map reply: "HTTP/1.1 400 Bad Request"`), ErrNotRedis},
		{context.DeadlineExceeded, nil},
	}
	for _, tc := range tests {
		got := Explain(tc.err)
		if tc.want == nil {
			if got != tc.err {
				t.Errorf("Explain(%v) = %v, want it unchanged", tc.err, got)
			}
			continue
		}
		if !errors.Is(got, tc.want) || !errors.Is(got, tc.err) {
			t.Errorf("Explain(%v) = %v, want %v wrapping it", tc.err, got, tc.want)
		}
	}
	if Explain(nil) != nil {
		t.Error("Explain(nil) != nil")
	}
}

func pool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", caFile)
	}
	return p
}

func loadPair(t *testing.T, certFile, keyFile string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
