package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestWireDecode(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		// Byte vectors from the reference decoder fixtures (livenessProbe).
		{"probe", []string{"decode", "5a4d0105000102030405060708"}, ExitOK, `"probeId": "72623859790382856"`, ""},
		{"separators allowed", []string{"decode", "5a:4d:01:05:00 0102030405060708"}, ExitOK, `livenessProbe`, ""},
		{"wrong magic", []string{"decode", "004d0105000102030405060708"}, ExitError, "", "invalid-magic"},
		{"trailing byte", []string{"decode", "5a4d010500010203040506070800"}, ExitError, "", "trailing-byte"},
		{"not hex", []string{"decode", "zz"}, ExitError, "", "not hex"},
		{"no frames", []string{"decode"}, ExitUsage, "", "usage"},
		{"no subcommand", nil, ExitUsage, "", "usage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"wire"}, tc.args...), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.inStdout) || !strings.Contains(errb.String(), tc.inStderr) {
				t.Fatalf("stdout %q / stderr %q; want %q / %q", out.String(), errb.String(), tc.inStdout, tc.inStderr)
			}
		})
	}
}
