package config

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
)

// TestRedisTLSLayers: the tls keys of both stores come from the file, the
// environment and flags like every other key, and a complete setting
// validates and builds a client configuration.
func TestRedisTLSLayers(t *testing.T) {
	certs := testredis.NewCerts(t)
	file := writeYAML(t, `
location_store:
  provider: redis
  redis:
    addrs: [redis.test:6380]
    username: meshnode
    tls:
      enabled: true
      ca_file: `+certs.CAFile+`
      cert_file: `+certs.ClientCertFile+`
      key_file: `+certs.ClientKeyFile+`
      min_version: "1.3"
`)
	env := []string{
		"MESHNODE_LOCATION_STORE__REDIS__PASSWORD=from-env",
		"MESHNODE_RELOCATION_STORE__PROVIDER=redis",
		"MESHNODE_RELOCATION_STORE__REDIS__ADDRS=redis.test:6380",
		"MESHNODE_RELOCATION_STORE__REDIS__TLS__ENABLED=true",
		"MESHNODE_RELOCATION_STORE__REDIS__TLS__CA_FILE=" + certs.CAFile,
		"MESHNODE_RELOCATION_STORE__REDIS__TLS__INSECURE_SKIP_VERIFY=false",
	}
	args := []string{"--location_store.redis.tls.server_name=" + testredis.ServerName,
		"--relocation_store.redis.tls.server_name=other.test"}
	c := mustLoad(t, args, LoadOptions{File: file, Environ: env})
	wantLoc := RedisTLSConfig{Enabled: true, CAFile: certs.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile,
		ServerName: testredis.ServerName, MinVersion: TLSVersion13}
	wantRel := RedisTLSConfig{Enabled: true, CAFile: certs.CAFile, ServerName: "other.test", MinVersion: TLSVersion12}
	if got := c.LocationStore.Redis.TLS; got != wantLoc {
		t.Errorf("location_store.redis.tls = %+v, want %+v", got, wantLoc)
	}
	if got := c.RelocationStore.Redis.TLS; got != wantRel {
		t.Errorf("relocation_store.redis.tls = %+v, want %+v", got, wantRel)
	}
	if r := c.LocationStore.Redis; r.Username != "meshnode" || r.Password != "from-env" {
		t.Errorf("location_store.redis user %q password %q, want meshnode, from-env", r.Username, r.Password)
	}
	if err := c.Validate(nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	tc, err := c.LocationStore.Redis.TLS.ClientConfig("location_store.redis.tls")
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != testredis.ServerName ||
		tc.MinVersion != tls.VersionTLS13 || tc.InsecureSkipVerify {
		t.Errorf("ClientConfig = %+v", tc)
	}
}

// TestRedisTLSProblems: every unusable TLS setting is a problem naming its
// key, all at once, before anything is dialled.
func TestRedisTLSProblems(t *testing.T) {
	certs := testredis.NewCerts(t)
	other := testredis.NewCerts(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	const pre = "location_store.redis.tls"
	on := func(t RedisTLSConfig) RedisTLSConfig { t.Enabled = true; return t }
	tests := []struct {
		name string
		tls  RedisTLSConfig
		want map[string]string // key -> part of its message
	}{
		{"off", RedisTLSConfig{MinVersion: TLSVersion12}, nil},
		{"on, system roots", on(RedisTLSConfig{}), nil},
		{"on, everything", on(RedisTLSConfig{CAFile: certs.CAFile, CertFile: certs.ClientCertFile, KeyFile: certs.ClientKeyFile,
			ServerName: "x", MinVersion: TLSVersion13}), nil},
		{"on, insecure", on(RedisTLSConfig{InsecureSkipVerify: true}), nil},
		{"ca_file without enabled", RedisTLSConfig{CAFile: certs.CAFile},
			map[string]string{pre + ".ca_file": "is set but " + pre + ".enabled is false"}},
		{"insecure_skip_verify without enabled", RedisTLSConfig{InsecureSkipVerify: true},
			map[string]string{pre + ".insecure_skip_verify": "enabled is false"}},
		{"min_version without enabled", RedisTLSConfig{MinVersion: TLSVersion13},
			map[string]string{pre + ".min_version": "enabled is false"}},
		{"missing CA file", on(RedisTLSConfig{CAFile: missing}),
			map[string]string{pre + ".ca_file": "cannot be read: open " + missing}},
		{"CA file is a directory", on(RedisTLSConfig{CAFile: dir}),
			map[string]string{pre + ".ca_file": "cannot be read"}},
		{"CA file without a certificate", on(RedisTLSConfig{CAFile: garbage}),
			map[string]string{pre + ".ca_file": "holds no PEM certificate"}},
		{"certificate without key", on(RedisTLSConfig{CertFile: certs.ClientCertFile}),
			map[string]string{pre + ".key_file": "is required with " + pre + ".cert_file"}},
		{"key without certificate", on(RedisTLSConfig{KeyFile: certs.ClientKeyFile}),
			map[string]string{pre + ".cert_file": "is required with " + pre + ".key_file"}},
		{"missing certificate and key", on(RedisTLSConfig{CertFile: missing, KeyFile: missing + "2"}),
			map[string]string{pre + ".cert_file": "cannot be read", pre + ".key_file": "cannot be read"}},
		{"key file given as certificate", on(RedisTLSConfig{CertFile: certs.ClientKeyFile, KeyFile: certs.ClientKeyFile}),
			map[string]string{pre + ".cert_file": "holds no PEM certificate"}},
		{"key of another certificate", on(RedisTLSConfig{CertFile: certs.ClientCertFile, KeyFile: other.ClientKeyFile}),
			map[string]string{pre + ".key_file": "is not the private key of " + pre + ".cert_file"}},
		// A client certificate out of its validity is refused by the
		// server, which Redis shows only as a reset connection: caught
		// here, naming the key and the dates (try-out, 2026-12-07).
		{"expired client certificate", on(RedisTLSConfig{CertFile: certs.ExpiredClientCertFile, KeyFile: certs.ClientKeyFile}),
			map[string]string{pre + ".cert_file": "expired at "}},
		{"client certificate not yet valid", on(RedisTLSConfig{CertFile: certs.NotYetValidClientCertFile, KeyFile: certs.ClientKeyFile}),
			map[string]string{pre + ".cert_file": "is not valid before "}},
		// The server's clock decides: one issued a moment ago by a CA
		// whose clock is ahead is not refused here (review O).
		{"client certificate issued a moment ago, clocks apart", on(RedisTLSConfig{CertFile: certs.JustIssuedClientCertFile, KeyFile: certs.ClientKeyFile}),
			map[string]string{}},
		{"TLS 1.1", on(RedisTLSConfig{MinVersion: "1.1"}),
			map[string]string{pre + ".min_version": `must be "1.2" or "1.3", got "1.1"`}},
		{"insecure with a CA", on(RedisTLSConfig{InsecureSkipVerify: true, CAFile: certs.CAFile}),
			map[string]string{pre + ".insecure_skip_verify": "cannot be combined with " + pre + ".ca_file"}},
		{"several at once", on(RedisTLSConfig{CAFile: missing, CertFile: certs.ClientCertFile, MinVersion: "tls1.3"}),
			map[string]string{pre + ".ca_file": "cannot be read", pre + ".key_file": "is required", pre + ".min_version": "must be"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.tls.ClientConfig(pre)
			got := map[string]string{}
			for _, p := range problemsOf(t, err) {
				got[p.Key] = p.Message
			}
			for key, part := range tc.want {
				if !strings.Contains(got[key], part) {
					t.Errorf("problem of %s = %q, want it to contain %q (all: %v)", key, got[key], part, err)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("problems %v, want keys %v", got, tc.want)
			}
			if err == nil && (cfg != nil) != tc.tls.Enabled {
				t.Errorf("ClientConfig = %v for enabled=%v", cfg, tc.tls.Enabled)
			}
			if err != nil && cfg != nil {
				t.Errorf("ClientConfig returned a configuration beside %v", err)
			}

			// Validate reports the same problems for a redis store, and
			// none when the store is not on Redis (nothing is read).
			c := valid()
			c.LocationStore.Provider = ProviderRedis
			c.LocationStore.Redis.Addrs = []string{"redis.test:6380"}
			c.LocationStore.Redis.TLS = tc.tls
			vps := problemsOf(t, c.Validate(nil))
			if len(vps) != len(tc.want) {
				t.Errorf("Validate problems %v, want keys %v", vps, tc.want)
			}
			for _, p := range vps {
				if _, ok := tc.want[p.Key]; !ok {
					t.Errorf("Validate problem %v not expected", p)
				}
			}
			c.LocationStore.Provider = ProviderMemory
			if err := c.Validate(nil); err != nil {
				t.Errorf("Validate with provider memory: %v", err)
			}
		})
	}
}

// TestRedisTLSProblemsShowNoKey: a key file that does not match shows its
// path, never its content.
func TestRedisTLSProblemsShowNoKey(t *testing.T) {
	certs, other := testredis.NewCerts(t), testredis.NewCerts(t)
	key, err := os.ReadFile(other.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	_, err = RedisTLSConfig{Enabled: true, CertFile: certs.ClientCertFile, KeyFile: other.ClientKeyFile}.ClientConfig("x")
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ValidationError", err)
	}
	body := strings.Split(string(key), "\n")[1] // first base64 line of the PEM
	if strings.Contains(err.Error(), body) {
		t.Fatalf("problem %q shows the private key", err)
	}
}
