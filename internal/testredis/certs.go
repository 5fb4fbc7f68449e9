package testredis

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ServerName is the DNS name in the server certificate NewCerts writes,
// beside the IP address 127.0.0.1.
const ServerName = "redis.test"

// Certs are PEM files of a throwaway CA, a server certificate it signed
// (for 127.0.0.1 and ServerName) and a client certificate it signed, in a
// test's temporary directory. Nothing is committed: every run makes new
// ones.
type Certs struct {
	CAFile                        string
	ServerCertFile, ServerKeyFile string
	ClientCertFile, ClientKeyFile string
	// ExpiredClientCertFile and NotYetValidClientCertFile are client
	// certificates for ClientKeyFile's key whose validity ended an hour
	// ago, or begins in a day.
	ExpiredClientCertFile, NotYetValidClientCertFile string
	// JustIssuedClientCertFile begins a minute from now: a certificate a
	// CA whose clock is ahead of this host's issued a moment ago.
	JustIssuedClientCertFile string
}

// ServerTLS returns the server side of a TLS listener using these files.
func (c *Certs) ServerTLS(requireClientCert bool) *TLSOptions {
	return &TLSOptions{CertFile: c.ServerCertFile, KeyFile: c.ServerKeyFile, CAFile: c.CAFile,
		RequireClientCert: requireClientCert}
}

// NewCerts writes a new CA, server and client certificate for this test.
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey := newKey(t)
	ca := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "meshnode test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	c := &Certs{CAFile: filepath.Join(dir, "ca.pem")}
	writePEM(t, c.CAFile, "CERTIFICATE", caDER)
	leafFor := func(key *ecdsa.PrivateKey, name string, from, until time.Time, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certFile, keyFile string) {
		tmpl := &x509.Certificate{
			SerialNumber: serial(t),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    from,
			NotAfter:     until,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
		return certFile, keyFile
	}
	leaf := func(name string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certFile, keyFile string) {
		return leafFor(newKey(t), name, now.Add(-time.Hour), now.Add(24*time.Hour), usage, dns, ips)
	}
	c.ServerCertFile, c.ServerKeyFile = leaf("server", x509.ExtKeyUsageServerAuth,
		[]string{ServerName}, []net.IP{net.IPv4(127, 0, 0, 1)})
	clientKey := newKey(t)
	c.ClientCertFile, c.ClientKeyFile = leafFor(clientKey, "client", now.Add(-time.Hour), now.Add(24*time.Hour),
		x509.ExtKeyUsageClientAuth, nil, nil)
	c.ExpiredClientCertFile, _ = leafFor(clientKey, "client-expired", now.Add(-48*time.Hour), now.Add(-time.Hour),
		x509.ExtKeyUsageClientAuth, nil, nil)
	c.JustIssuedClientCertFile, _ = leafFor(clientKey, "client-just-issued", now.Add(time.Minute), now.Add(48*time.Hour),
		x509.ExtKeyUsageClientAuth, nil, nil)
	c.NotYetValidClientCertFile, _ = leafFor(clientKey, "client-future", now.Add(24*time.Hour), now.Add(48*time.Hour),
		x509.ExtKeyUsageClientAuth, nil, nil)
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ClientTLS returns a client configuration trusting the CA and presenting
// the client certificate.
func (c *Certs) ClientTLS(t testing.TB) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("%s holds no certificate", c.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}
}
