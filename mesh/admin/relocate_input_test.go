package admin

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A requestId POST /v1/relocate accepts can be read back at its Location
// (GET /v1/relocate/<id>); one it cannot be read at is refused (400),
// nothing started. Until 2026-12-07 (review R6) any id of at most 128
// bytes was taken and written into the Location unescaped: one holding
// '/', '?', '#' or a '%' escape named another path, the command ran on the
// node and no GET could ever read it — `ctl relocate --request-id` lost
// it at once (mesh/cli TestCtlRelocateRequestIDWithSlash), and a drain's
// Linger waited for a read that could not come. The ids of the documented
// character set ([A-Za-z0-9][A-Za-z0-9._-]*) are taken and readable.
func TestRequestIDAcceptedIsReadable(t *testing.T) {
	for _, id := range []string{"a/b", "x?y", "x#y", "a%2Fb", "a b", ".", "..", "-x", "é", "a.b_c-1", "0"} {
		t.Run(id, func(t *testing.T) {
			f := newFake()
			defer close(f.release)
			h := New(f.opts(token)).Handler()
			req := httptest.NewRequest("POST", "/v1/relocate", strings.NewReader(`{"requestId":"`+id+`"}`))
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 300 {
				if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "requestId") {
					t.Fatalf("POST requestId %q = %d, want 400 naming the requestId or an accepted job: %s", id, rec.Code, rec.Body.String())
				}
				f.mu.Lock()
				runs := f.runs
				f.mu.Unlock()
				if runs != 0 {
					t.Fatalf("POST requestId %q refused (%d) but the command ran", id, rec.Code)
				}
				return // refused as bad input: fine
			}
			// Follow the Location as an HTTP client does (ctl relocate
			// builds the same URL: base + "/v1/relocate/" + id).
			loc := rec.Header().Get("Location")
			srv := httptest.NewServer(h)
			defer srv.Close()
			if code, body := getOverHTTP(t, srv.URL+loc, token); code != http.StatusOK {
				t.Fatalf("POST requestId %q = %d (the command runs), but GET of its Location %q = %d: %s",
					id, rec.Code, loc, code, body)
			}
		})
	}
}

// POST /v1/relocate's body is one JSON object and nothing after it but
// blanks: trailing garbage, or a second object that asks for a drain, is
// 400 and starts nothing. Until 2026-12-07 (review R6) the first value was
// decoded and the rest ignored: such a body started a host Relocate. A
// body of one object followed by blanks past 4 KiB is taken whole (until
// then the read stopped at 4 KiB).
func TestRelocateBodyWithTrailingDataIsRefused(t *testing.T) {
	for _, body := range []string{`{"requestId":"r1"} garbage`, `{"drain":false}{"drain":true}`, `{"requestId":"r1"}` + strings.Repeat(" ", 5000) + "x"} {
		t.Run(body[:min(len(body), 40)], func(t *testing.T) {
			f := newFake()
			defer close(f.release)
			h := New(f.opts(token)).Handler()
			if code, resp := do(t, h, "POST", "/v1/relocate", token, body); code != http.StatusBadRequest || !strings.Contains(resp, "data after the object") {
				t.Fatalf("POST body %.60q = %d, want 400 (data after the object): %s", body, code, strings.TrimSpace(resp))
			}
		})
	}
	f := newFake()
	defer close(f.release)
	h := New(f.opts(token)).Handler()
	body := `{"requestId":"r1"}` + strings.Repeat(" ", 5000) + "\n"
	if code, resp := do(t, h, "POST", "/v1/relocate", token, body); code != http.StatusAccepted {
		t.Fatalf("POST of one object and 5000 blanks = %d, want 202: %s", code, strings.TrimSpace(resp))
	}
}

// getOverHTTP is a GET by a real HTTP client (URL parsing, header rules)
// with the bearer token tok.
func getOverHTTP(t *testing.T, url, tok string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatalf("GET %q: %v", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
