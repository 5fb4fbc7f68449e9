package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRunCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{"client role runs without the demo factories",
			[]string{"--location_store.provider", "memory", "--node.object_role", "client"}, ExitOK, "serving at tcp://127.0.0.1:", ""},
		{"server runs with both stores",
			[]string{"--location_store.provider", "memory", "--relocation_store.provider", "memory"}, ExitOK, "serving at", ""},
		{"server without a relocation store is a config error (demo factories need one)",
			[]string{"--location_store.provider", "memory"}, ExitUsage, "", "relocation_store"},
		{"no store at all lists every problem", []string{"--lease.ttl", "1s"}, ExitUsage, "", "location_store.provider"},
		{"unexpected argument", []string{"extra"}, ExitUsage, "", "unexpected argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var out, errb bytes.Buffer
			args := append([]string{"run", "--log.level", "warn"}, tc.args...)
			code := Main(ctx, args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.inStdout) || !strings.Contains(errb.String(), tc.inStderr) {
				t.Fatalf("stdout %q / stderr %q; want %q / %q", out.String(), errb.String(), tc.inStdout, tc.inStderr)
			}
		})
	}
}
