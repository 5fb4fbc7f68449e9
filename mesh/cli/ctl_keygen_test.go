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
