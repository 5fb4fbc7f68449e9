package config

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
)

// admin.token must be a value a client can send as a header: a token
// with a trailing newline — what an environment variable filled from a
// secret file holds (Kubernetes secretKeyRef of a file written with echo)
// — or with blanks around it is refused, naming the key and never
// printing the token. Until 2026-12-07 (review R6) such a token passed
// Load and Validate (it is over 16 bytes), but no HTTP client could
// present it: net/http trims the blanks around a header value before the
// listener compares it, and a client refuses to send a newline in one.
// Every endpoint but the probes then answered 401 for good.
func TestAdminTokenAClientCannotSendIsNotAccepted(t *testing.T) {
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
				if strings.Contains(err.Error(), strings.TrimSpace(tok)) {
					t.Fatalf("refused, but the error prints the token: %v", err)
				}
				t.Log(err)
				return // refused: fine
			}
			if c.Admin.Token != strings.TrimSpace(c.Admin.Token) || strings.IndexFunc(c.Admin.Token, unicode.IsControl) >= 0 {
				t.Fatalf("admin.token %q accepted: no client can send it as a header value (net/http trims blanks, refuses control characters)", c.Admin.Token)
			}
		})
	}
}
