package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/router/transport/curve"
)

const keygenUsage = `usage: meshnode ctl keygen [--out PATH]

  Generate a CURVE key pair for transport.curve (Z85, as libzmq prints keys).
  Without --out: print "public-key", "secret-key" and the node's RID (hex).
  With --out PATH: write the secret key to PATH (mode 0600) and the public
  key to PATH.pub, and print the public key and RID; an existing PATH or
  PATH.pub is never overwritten (the command fails and writes nothing). Add the public key to every node's allowed keys.`

// ctlKeygen is `meshnode ctl keygen`.
func ctlKeygen(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("meshnode ctl keygen")
	out := fs.String("out", "", "write the secret key to this file (0600) and the public key to FILE.pub")
	if code, done := parseFlags(fs, args, helpText(fs, keygenUsage, false), stdout, stderr); done {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(stderr, fs.Name(), "unexpected argument %q", fs.Arg(0))
	}
	kp, err := curve.GenerateKeyPair(nil)
	if err != nil {
		fmt.Fprintf(stderr, "meshnode ctl keygen: %v\n", err)
		return ExitError
	}
	rid := transport.CurveRID(kp.Public)
	if *out == "" {
		fmt.Fprintf(stdout, "public-key: %s\nsecret-key: %s\nrouting-id: %s\n", kp.Public, kp.Secret, rid)
		return ExitOK
	}
	if err := writeKeyFiles(*out, kp); err != nil {
		fmt.Fprintf(stderr, "meshnode ctl keygen: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(stdout, "public-key: %s\nrouting-id: %s\nsecret key written to %s (mode 0600), public key to %s.pub\n",
		kp.Public, rid, *out, *out)
	return ExitOK
}

// writeKeyFiles creates path (0600) and path.pub (0644), replacing
// neither: losing a node's secret key changes its identity, and an
// existing .pub may be a running node's, listed in the others' allowed
// keys (until 2026-12-07 path.pub was overwritten). Both are created
// before either is written; on any failure the files this call created
// are removed, so that a retry is not refused by a secret key left without
// its public key.
func writeKeyFiles(path string, kp curve.KeyPair) (err error) {
	sec, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("secret key file: %w", err)
	}
	pub, err := os.OpenFile(path+".pub", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		_ = sec.Close()
		_ = os.Remove(path)
		return fmt.Errorf("public key file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(path)
			_ = os.Remove(path + ".pub")
		}
	}()
	_, err = fmt.Fprintln(sec, kp.Secret)
	if cerr := sec.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = pub.Close()
		return fmt.Errorf("secret key file: %w", err)
	}
	_, err = fmt.Fprintln(pub, kp.Public.String())
	if cerr := pub.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("public key file: %w", err)
	}
	return nil
}
