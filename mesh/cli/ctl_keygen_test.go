package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/router/transport/curve"
)

func TestCtlKeygen(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"ctl", "keygen"}, &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	fields := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		fields[k] = v
	}
	sec, err := curve.ParseKey(fields["secret-key"])
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := curve.KeyPairFromSecret(sec)
	if kp.Public.String() != fields["public-key"] || transport.CurveRID(kp.Public).String() != fields["routing-id"] {
		t.Fatalf("inconsistent output:\n%s", out.String())
	}

	path := filepath.Join(t.TempDir(), "node")
	out.Reset()
	if code := Main(context.Background(), []string{"ctl", "keygen", "--out", path}, &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret key file: %v %v", fi, err)
	}
	secret, err := curve.ReadSecretKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pubText, _ := os.ReadFile(path + ".pub")
	pub, err := curve.ParseKey(string(pubText))
	if want, _ := curve.PublicKey(secret); err != nil || pub != want || !strings.Contains(out.String(), pub.String()) {
		t.Fatalf("public key file %q does not match the secret key (%v)", pubText, err)
	}
	if strings.Contains(out.String(), secret.String()) {
		t.Fatal("--out printed the secret key")
	}
	if code := Main(context.Background(), []string{"ctl", "keygen", "--out", path}, &out, &errb); code != ExitError {
		t.Fatalf("an existing key file was overwritten (exit %d)", code)
	}
}

// --out never replaces a key file: neither PATH nor PATH.pub. An existing
// PATH.pub — the public key of a node whose secret now lives elsewhere,
// listed in the others' allowed keys — was silently overwritten with the
// new key's. And a PATH.pub that cannot be written left PATH behind, a
// secret key without its public key that the next try then refused to
// replace ("file exists").
func TestCtlKeygenNeverReplacesAPublicKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node-a")
	const old = "the public key of a running node\n"
	if err := os.WriteFile(path+".pub", []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"ctl", "keygen", "--out", path}, &out, &errb)
	if got, _ := os.ReadFile(path + ".pub"); string(got) != old {
		t.Errorf("%s.pub was replaced: %q", path, got)
	}
	if code != ExitError || !strings.Contains(errb.String(), "node-a.pub") {
		t.Errorf("exit %d, stderr %q; want 1 and a message naming %s.pub", code, errb.String(), path)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a secret key file without its public key was left at %s (%v)", path, err)
	}

	// PATH.pub cannot be created (here a directory holds the name): no
	// secret key file is left behind, and the same command succeeds once
	// the name is free.
	path = filepath.Join(dir, "node-b")
	if err := os.Mkdir(path+".pub", 0o755); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), []string{"ctl", "keygen", "--out", path}, &out, &errb); code != ExitError {
		t.Fatalf("exit %d with %s.pub a directory, want 1", code, path)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a secret key file without its public key was left at %s (%v)", path, err)
	}
	if err := os.Remove(path + ".pub"); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"ctl", "keygen", "--out", path}, &out, &errb); code != ExitOK {
		t.Fatalf("exit %d once %s.pub was free: %s", code, path, errb.String())
	}
}
