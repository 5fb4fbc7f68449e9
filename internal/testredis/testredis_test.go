package testredis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSecuredServer checks the helper itself: the password and ACL users
// are in force, and the TLS listener serves the certificates NewCerts made.
func TestSecuredServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := NewSecuredServer(t, ServerOptions{Password: "pw-default",
		Users: [][]string{{"app", "on", ">pw-app", "~*", "+@all"}}})
	ping := func(o *redis.Options) error {
		o.MaxRetries = -1
		c := redis.NewClient(o)
		defer c.Close()
		return c.Ping(ctx).Err()
	}
	tests := []struct {
		name    string
		opts    redis.Options
		wantErr bool
	}{
		{"no password", redis.Options{Addr: s.Addr}, true},
		{"default user", redis.Options{Addr: s.Addr, Password: "pw-default"}, false},
		{"ACL user", redis.Options{Addr: s.Addr, Username: "app", Password: "pw-app"}, false},
		{"ACL user, wrong password", redis.Options{Addr: s.Addr, Username: "app", Password: "pw-default"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := ping(&tc.opts); (err != nil) != tc.wantErr {
				t.Fatalf("PING err = %v, want error %v", err, tc.wantErr)
			}
		})
	}

	t.Run("TLS", func(t *testing.T) {
		certs := NewCerts(t)
		ts := NewSecuredServer(t, ServerOptions{TLS: certs.ServerTLS(true)})
		pem, err := os.ReadFile(certs.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		cert, err := tls.LoadX509KeyPair(certs.ClientCertFile, certs.ClientKeyFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := ping(&redis.Options{Addr: ts.TLSAddr, TLSConfig: &tls.Config{RootCAs: roots,
			Certificates: []tls.Certificate{cert}}}); err != nil {
			t.Fatalf("PING over TLS with a client certificate: %v", err)
		}
		if err := ping(&redis.Options{Addr: ts.TLSAddr, TLSConfig: &tls.Config{RootCAs: roots}}); err == nil {
			t.Fatal("PING over TLS without the required client certificate succeeded")
		}
	})
}

// TestStoreACLDocumented keeps the ACL rule of docs/store-redis.md equal to
// StoreACL, whose rights the providers' contract suites run with.
func TestStoreACLDocumented(t *testing.T) {
	const doc = "../../docs/store-redis.md"
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	rule := "ACL SETUSER " + strings.Join(StoreACL("meshnode", "PASSWORD", "meshnode", "meshnode-reloc"), " ")
	if !strings.Contains(string(text), "\n"+rule+"\n") {
		t.Fatalf("%s does not show the rule the contract suites run with:\n%s", doc, rule)
	}
}
