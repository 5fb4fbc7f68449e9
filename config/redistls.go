package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"time"
)

// certClockSkew is how far in the future a client certificate's NotBefore
// may be before the validation calls it not valid yet: clocks of hosts
// and CAs differ by seconds, and the server, whose clock decides, may
// already accept it.
const certClockSkew = 5 * time.Minute

// TLS versions accepted by RedisTLSConfig.MinVersion. Older versions are
// not offered at all (RFC 8996 deprecates TLS 1.0 and 1.1).
const (
	TLSVersion12 = "1.2"
	TLSVersion13 = "1.3"
)

// ClientConfig reads the files and returns the client TLS configuration,
// or nil when TLS is not enabled. prefix is the dotted key of t, e.g.
// "location_store.redis.tls", so that every problem names its key; they
// come back together as a *ValidationError (errors.Is(err, ErrInvalid)).
// Config.Validate reports the same problems for a redis store.
func (t RedisTLSConfig) ClientConfig(prefix string) (*tls.Config, error) {
	var ps problems
	c := t.build(&ps, prefix)
	if len(ps) > 0 {
		return nil, &ValidationError{Problems: ps}
	}
	return c, nil
}

func (t RedisTLSConfig) build(ps *problems, prefix string) *tls.Config {
	key := func(name string) string { return prefix + "." + name }
	if !t.Enabled {
		// Anything set here was meant to secure the connection; without
		// enabled it would silently stay plain text.
		set := map[string]bool{"ca_file": t.CAFile != "", "cert_file": t.CertFile != "", "key_file": t.KeyFile != "",
			"server_name": t.ServerName != "", "insecure_skip_verify": t.InsecureSkipVerify,
			"min_version": t.MinVersion != "" && t.MinVersion != TLSVersion12}
		for _, name := range []string{"ca_file", "cert_file", "key_file", "server_name", "min_version", "insecure_skip_verify"} {
			if set[name] {
				ps.add(key(name), "is set but %s is false, so the connection would not use TLS; set %s: true or remove it",
					key("enabled"), key("enabled"))
			}
		}
		return nil
	}
	c := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	switch t.MinVersion {
	case "", TLSVersion12:
		c.MinVersion = tls.VersionTLS12
	case TLSVersion13:
		c.MinVersion = tls.VersionTLS13
	default:
		ps.add(key("min_version"), "must be %q or %q, got %q", TLSVersion12, TLSVersion13, t.MinVersion)
	}
	if t.InsecureSkipVerify && t.CAFile != "" {
		ps.add(key("insecure_skip_verify"), "cannot be combined with %s: it would not verify the server against it (or at all)", key("ca_file"))
	}
	if t.CAFile != "" {
		if pemCA, err := os.ReadFile(t.CAFile); err != nil {
			ps.add(key("ca_file"), "cannot be read: %v", err)
		} else if c.RootCAs = x509.NewCertPool(); !c.RootCAs.AppendCertsFromPEM(pemCA) {
			ps.add(key("ca_file"), "%q holds no PEM certificate", t.CAFile)
		}
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.add(key("key_file"), "is required with %s (the client certificate's private key)", key("cert_file"))
	case t.CertFile == "" && t.KeyFile != "":
		ps.add(key("cert_file"), "is required with %s (the certificate of that private key)", key("key_file"))
	case t.CertFile != "":
		certPEM, certErr := os.ReadFile(t.CertFile)
		keyPEM, keyErr := os.ReadFile(t.KeyFile)
		if certErr != nil {
			ps.add(key("cert_file"), "cannot be read: %v", certErr)
		} else if !hasPEM(certPEM, "CERTIFICATE") {
			ps.add(key("cert_file"), "%q holds no PEM certificate", t.CertFile)
		}
		if keyErr != nil {
			ps.add(key("key_file"), "cannot be read: %v", keyErr)
		}
		if certErr != nil || keyErr != nil || !hasPEM(certPEM, "CERTIFICATE") {
			break
		}
		// The error text describes the mismatch, never the key itself.
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			ps.add(key("key_file"), "%q is not the private key of %s %q: %v", t.KeyFile, key("cert_file"), t.CertFile, err)
			break
		}
		// A server refuses a certificate out of its validity, and Redis
		// shows that to the client only as a reset connection: say it here.
		// The server's clock decides, so a certificate that begins less
		// than certClockSkew from now (one issued a moment ago by a CA
		// whose clock is ahead of this host's) is left to the server: a
		// node refused to start on it (review O, 2026-12-08).
		if leaf, err := x509.ParseCertificate(pair.Certificate[0]); err == nil {
			now := time.Now()
			switch {
			case now.After(leaf.NotAfter):
				ps.add(key("cert_file"), "%q expired at %s (valid from %s): the server would refuse it; renew it",
					t.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339), leaf.NotBefore.UTC().Format(time.RFC3339))
			case now.Add(certClockSkew).Before(leaf.NotBefore):
				ps.add(key("cert_file"), "%q is not valid before %s (now %s): the server would refuse it; check the clocks",
					t.CertFile, leaf.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
			}
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

// hasPEM reports whether data holds a PEM block of the type.
func hasPEM(data []byte, typ string) bool {
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return false
		}
		if b.Type == typ {
			return true
		}
	}
}
