package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// keyFiles writes a new key pair's secret key in dir twice: node.key (mode
// 0600) and open.key (0644, refused).
func keyFiles(t *testing.T, dir string) (kp curve.KeyPair, secretFile, openFile string) {
	t.Helper()
	kp, _ = curve.GenerateKeyPair(nil)
	secretFile, openFile = filepath.Join(dir, "node.key"), filepath.Join(dir, "open.key")
	for file, mode := range map[string]os.FileMode{secretFile: 0o600, openFile: 0o644} {
		if err := os.WriteFile(file, []byte(kp.Secret.String()+"\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return kp, secretFile, openFile
}

func TestCurveConfig(t *testing.T) {
	dir := t.TempDir()
	kp, secretFile, openFile := keyFiles(t, dir)
	peer, _ := curve.GenerateKeyPair(nil)
	allowFile := filepath.Join(dir, "allowed")
	if err := os.WriteFile(allowFile, []byte("# mesh\n"+kp.Public.String()+" me\n"+peer.Public.String()+" peer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	openAllow := filepath.Join(dir, "allowed-ww")
	if err := os.WriteFile(openAllow, []byte(peer.Public.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(openAllow, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	on := func(f func(*CurveConfig)) Config {
		c := valid()
		c.Transport.Curve = CurveConfig{Enabled: true, SecretKeyFile: secretFile, AllowedKeysFile: allowFile}
		f(&c.Transport.Curve)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" = valid; else a substring of the problem
	}{
		{"file and list", on(func(*CurveConfig) {}), ""},
		{"inline", on(func(c *CurveConfig) {
			c.SecretKeyFile, c.SecretKey, c.AllowedKeysFile = "", kp.Secret.String(), ""
			c.AllowedKeys = []string{peer.Public.String()}
			c.PublicKey = kp.Public.String()
		}), ""},
		{"off refuses keys", func() Config { c := valid(); c.Transport.Curve.SecretKey = "junk"; return c }(),
			"transport.curve.secret_key: is set but transport.curve.enabled is false"},
		{"off refuses an allow-list", func() Config { c := valid(); c.Transport.Curve.AllowedKeysFile = allowFile; return c }(),
			"transport.curve.allowed_keys_file: is set but transport.curve.enabled is false"},
		{"no secret", on(func(c *CurveConfig) { c.SecretKeyFile = "" }), "secret_key_file or"},
		{"both secrets", on(func(c *CurveConfig) { c.SecretKey = kp.Secret.String() }), "not both"},
		{"group-readable secret", on(func(c *CurveConfig) { c.SecretKeyFile = openFile }), "mode"},
		{"missing file", on(func(c *CurveConfig) { c.SecretKeyFile = filepath.Join(dir, "none") }), "no such file"},
		{"wrong public key", on(func(c *CurveConfig) { c.PublicKey = peer.Public.String() }), "not the secret key's"},
		{"world-writable allow-list", on(func(c *CurveConfig) { c.AllowedKeysFile = openAllow }), "writable by any user"},
		{"no allowed keys", on(func(c *CurveConfig) { c.AllowedKeysFile = "" }), "trusted node keys"},
		{"bad allowed key", on(func(c *CurveConfig) { c.AllowedKeys = []string{"nope"} }), "transport.curve.allowed_keys: entry 1"},
		{"low-order allowed key", on(func(c *CurveConfig) { c.AllowedKeys = []string{strings.Repeat("0", 40)} }),
			"transport.curve.allowed_keys: entry 1: curve: malformed input: public key 0000000000000000000000000000000000000000 is a low-order point"},
		{"routing id", func() Config { c := on(func(*CurveConfig) {}); c.Node.RoutingID = "a1b2"; return c }(), "derived from the node's public key"},
	} {
		err := tc.cfg.Validate(nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a problem with %q", tc.name, err, tc.want)
		}
	}
	// Every problem is listed, each on its own line: the key pair's and
	// the allow-list's (before, the first one hid the others).
	both := on(func(c *CurveConfig) {
		c.SecretKeyFile, c.AllowedKeysFile = filepath.Join(dir, "none"), filepath.Join(dir, "none.keys")
	})
	var curveProblems []string
	for _, p := range problemsOf(t, both.Validate(nil)) {
		if strings.HasPrefix(p.Key, "transport.curve") {
			curveProblems = append(curveProblems, p.Key)
		}
	}
	if strings.Join(curveProblems, ",") != "transport.curve.secret_key_file,transport.curve.allowed_keys_file" {
		t.Errorf("a missing key file and a missing allow-list: problems %q, want both", curveProblems)
	}
	if _, err := curve.ReadSecretKeyFile(openFile); !errors.Is(err, curve.ErrKeyFileMode) {
		t.Errorf("open key file: %v", err)
	}

	// The environment carries the secret and the list, as documented.
	c := mustLoad(t, nil, LoadOptions{Environ: []string{
		"MESHNODE_TRANSPORT__CURVE__ENABLED=true",
		"MESHNODE_TRANSPORT__CURVE__SECRET_KEY=" + kp.Secret.String(),
		"MESHNODE_TRANSPORT__CURVE__ALLOWED_KEYS=" + kp.Public.String() + "," + peer.Public.String(),
	}})
	got, allowed, err := c.Transport.Curve.Keys()
	if err != nil || got != kp || len(allowed) != 2 || allowed[1] != peer.Public {
		t.Fatalf("from the environment: %v %v %v", got.Public, allowed, err)
	}
	if r := c.Redacted(); r.Transport.Curve.SecretKey == kp.Secret.String() {
		t.Fatal("Redacted keeps the secret key")
	}
}

// Each CURVE problem names its key and where the value came from, as every
// other problem does (operator try-out 6: a missing key file set in the
// environment read `transport.curve: curve: secret key file: stat …`, and
// a bad allow-list entry named no variable).
func TestCurveProblemsNameTheirKeyAndSource(t *testing.T) {
	dir := t.TempDir()
	kp, secretFile, openFile := keyFiles(t, dir)
	env := func(kv ...string) []string {
		base := map[string]string{"ENABLED": "true", "SECRET_KEY_FILE": secretFile, "ALLOWED_KEYS": kp.Public.String()}
		for i := 0; i < len(kv); i += 2 {
			base[kv[i]] = kv[i+1]
		}
		var out []string
		for k, v := range base {
			if v != "" {
				out = append(out, "MESHNODE_TRANSPORT__CURVE__"+k+"="+v)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		environ []string
		key     string // the problem's key
		want    string // in its message
	}{
		{"missing secret key file", env("SECRET_KEY_FILE", filepath.Join(dir, "none")), "transport.curve.secret_key_file",
			"no such file or directory (from environment variable MESHNODE_TRANSPORT__CURVE__SECRET_KEY_FILE)"},
		{"secret key file readable by others", env("SECRET_KEY_FILE", openFile), "transport.curve.secret_key_file",
			"want mode 0600): " + openFile + " has mode 0644 (from environment variable MESHNODE_TRANSPORT__CURVE__SECRET_KEY_FILE)"},
		{"malformed inline secret", env("SECRET_KEY_FILE", "", "SECRET_KEY", "abc"), "transport.curve.secret_key",
			"got 3 (from environment variable MESHNODE_TRANSPORT__CURVE__SECRET_KEY)"},
		{"no secret at all", env("SECRET_KEY_FILE", ""), "transport.curve.secret_key_file", "not set: CURVE needs the node's secret key"},
		{"bad allow-list entry", env("ALLOWED_KEYS", kp.Public.String()+",zzz"), "transport.curve.allowed_keys",
			"entry 2: curve: malformed input: key must be 40 Z85 characters, got 3 (from environment variable MESHNODE_TRANSPORT__CURVE__ALLOWED_KEYS)"},
		{"missing allow-list file", env("ALLOWED_KEYS", "", "ALLOWED_KEYS_FILE", filepath.Join(dir, "none.keys")), "transport.curve.allowed_keys_file",
			"no such file or directory (from environment variable MESHNODE_TRANSPORT__CURVE__ALLOWED_KEYS_FILE)"},
		{"public key of another node", env("PUBLIC_KEY", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"), "transport.curve.public_key",
			"is not the secret key's public key " + kp.Public.String() + " (from environment variable MESHNODE_TRANSPORT__CURVE__PUBLIC_KEY)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			loaded := mustLoad(t, nil, LoadOptions{Environ: tc.environ})
			c.Transport = loaded.Transport
			c.origins = loaded.origins
			var got []string
			for _, p := range problemsOf(t, c.Validate(nil)) {
				got = append(got, p.Key+": "+p.Message)
				if p.Key == tc.key && strings.Contains(p.Message, tc.want) {
					return
				}
			}
			t.Fatalf("problems %q, want one of %s with %q", got, tc.key, tc.want)
		})
	}
}

// A switch that does not decode (enabled=maybe) is reported alone: the
// keys of its section are not also listed as "set but … enabled is false",
// as if it had been set to false. A switch set to false still lists them.
func TestUndecidedSwitchDoesNotListItsSectionAsOff(t *testing.T) {
	for _, tc := range []struct {
		name, enabled, prefix string
		keys                  []string
		wantOff               bool
	}{
		{"curve undecided", "maybe", "MESHNODE_TRANSPORT__CURVE__", []string{"SECRET_KEY_FILE=/k", "ALLOWED_KEYS_FILE=/a"}, false},
		{"curve off", "false", "MESHNODE_TRANSPORT__CURVE__", []string{"SECRET_KEY_FILE=/k", "ALLOWED_KEYS_FILE=/a"}, true},
		{"redis tls undecided", "sure", "MESHNODE_LOCATION_STORE__REDIS__TLS__", []string{"CA_FILE=/ca"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			environ := []string{tc.prefix + "ENABLED=" + tc.enabled}
			for _, kv := range tc.keys {
				environ = append(environ, tc.prefix+kv)
			}
			c, err := Load(nil, LoadOptions{Environ: environ})
			if err != nil {
				t.Fatal(err)
			}
			var off, decode int
			for _, p := range problemsOf(t, c.Validate(nil)) {
				switch {
				case strings.Contains(p.Message, "enabled is false"):
					off++
				case strings.HasSuffix(p.Key, ".enabled"):
					decode++
				}
			}
			if tc.wantOff && off != len(tc.keys) || !tc.wantOff && (off != 0 || decode != 1) {
				t.Fatalf("%d \"enabled is false\" problems and %d for the switch", off, decode)
			}
		})
	}
}
