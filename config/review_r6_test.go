package config

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// Review R6: admin.token is taken verbatim, whatever surrounds it. A token
// with a trailing newline — what an environment variable filled from a
// secret file holds (Kubernetes secretKeyRef of a file written with echo) —
// or with blanks around it passes Load and Validate (it is over 16 bytes),
// but no HTTP client can present it: net/http trims the blanks around a
// header value before the listener compares it, and a client refuses to
// send a newline in one. Every endpoint but the probes then answers 401 for
// good, and ctl status says "MESHNODE_ADMIN__TOKEN does not match the
// node's admin.token" (blanks) or fails with net/http's "invalid header
// field value" (newline) with the very value the node has. Either the
// configuration refuses such a token, or it is one a client can send.
func TestReviewR6AdminTokenAClientCannotSendIsNotAccepted(t *testing.T) {
	for _, tok := range []string{"0123456789abcdef-token\n", "0123456789abcdef-token ", " 0123456789abcdef-token"} {
		t.Run(fmt.Sprintf("%q", tok), func(t *testing.T) {
			env := []string{"MESHNODE_ADMIN__LISTEN=127.0.0.1:9464", "MESHNODE_ADMIN__TOKEN=" + tok,
				"MESHNODE_LOCATION_STORE__PROVIDER=memory", "MESHNODE_RELOCATION_STORE__PROVIDER=memory"}
			c, err := Load(nil, LoadOptions{Environ: env})
			if err == nil {
				err = c.Validate(nil)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "admin.token") {
					t.Fatalf("refused, but not for admin.token: %v", err)
				}
				return // refused: fine
			}
			if c.Admin.Token != strings.TrimSpace(c.Admin.Token) || strings.IndexFunc(c.Admin.Token, unicode.IsControl) >= 0 {
				t.Fatalf("admin.token %q accepted: no client can send it as a header value (net/http trims blanks, refuses control characters)", c.Admin.Token)
			}
		})
	}
}
