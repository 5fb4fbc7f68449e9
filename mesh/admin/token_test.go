package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Start refuses a token a client cannot send (CheckToken): blanks around
// it, a trailing newline, a control character. Until 2026-12-07 (review
// R6) Start took a token with blanks around it, and then no request could
// authenticate: the server trims the Authorization value before comparing
// it with "Bearer <token>", so every endpoint but the probes was 401 for
// good. The error does not print the token.
func TestTokenWithBlanksLocksEveryoneOut(t *testing.T) {
	for _, tok := range []string{token + " ", " " + token, token + "\n", "0123456789\tabcdef-token"} {
		f := newFake()
		o := f.opts(tok)
		s, err := Start(o)
		if err != nil {
			if strings.Contains(err.Error(), strings.TrimSpace(tok)) {
				t.Fatalf("Start(token %q) refused, but the error prints the token: %v", tok, err)
			}
			close(f.release)
			continue // refused: fine
		}
		code, body := getOverHTTP(t, "http://"+s.Addr()+"/v1/status", tok)
		_ = s.Close(context.Background())
		close(f.release)
		if code != http.StatusOK {
			t.Fatalf("Start accepted token %q, and GET /v1/status with exactly that token = %d: %s", tok, code, body)
		}
	}
}
