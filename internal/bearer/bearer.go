// Package bearer holds the one rule for an admin bearer token that both the
// configuration (admin.token) and the admin listener apply: it must be a
// value an HTTP client can send in an Authorization header.
package bearer

import "fmt"

// Check reports whether a client can send tok in an Authorization header:
// a token holding a blank or a control character (a secret file's
// trailing newline, blanks around it) cannot be — net/http trims the
// blanks around a header value before the listener compares it, and a
// client refuses to send a control character — so every request would be
// 401 for good (until 2026-12-07 such a token was taken). The error names
// the byte's position, never the token; it reads after the token's name
// ("admin.token holds …").
func Check(tok string) error {
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c > ' ' && c != 0x7f {
			continue
		}
		what := ""
		if i == len(tok)-1 && tok[i] == '\n' {
			what = " (a trailing newline: a secret file written with echo?)"
		}
		return fmt.Errorf("holds a blank or control character at byte %d of %d%s: no HTTP client can send it in an Authorization header; remove it",
			i+1, len(tok), what)
	}
	return nil
}
