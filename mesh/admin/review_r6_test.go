package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Review R6: POST /v1/relocate takes any requestId of at most 128 bytes and
// answers 202 with Location /v1/relocate/<id>, the id written into the path
// unescaped. An id holding '/', '?', '#' or a '%' escape names another path
// (or the same path without the id's tail): the command runs on the node,
// and no GET can ever read it — `ctl relocate --request-id` loses it at
// once (see mesh/cli review test), and a drain's Linger waits for a read
// that cannot come. docs/OPERATIONS.md: "the same requestId again returns
// the same job", "GET /v1/relocate/{id} | the job". Bad input must get a
// clear error, not an unreadable job.
func TestReviewR6RequestIDAcceptedIsReadable(t *testing.T) {
	for _, id := range []string{"a/b", "x?y", "x#y", "a%2Fb"} {
		t.Run(id, func(t *testing.T) {
			f := newFake()
			defer close(f.release)
			h := New(f.opts(token)).Handler()
			req := httptest.NewRequest("POST", "/v1/relocate", strings.NewReader(`{"requestId":"`+id+`"}`))
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 300 {
				if rec.Code != http.StatusBadRequest {
					t.Fatalf("POST requestId %q = %d, want 400 or an accepted job", id, rec.Code)
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

// Review R6: POST /v1/relocate decodes the first JSON value of its body and
// ignores what follows, so a malformed body — trailing garbage, or a second
// object that asks for a drain — starts a host Relocate instead of being
// refused (docs/OPERATIONS.md: body {"requestId": "…", "drain": false}; the
// rules: a malformed request gets a clear error).
func TestReviewR6RelocateBodyWithTrailingDataIsRefused(t *testing.T) {
	for _, body := range []string{`{"requestId":"r1"} garbage`, `{"drain":false}{"drain":true}`} {
		t.Run(body, func(t *testing.T) {
			f := newFake()
			defer close(f.release)
			h := New(f.opts(token)).Handler()
			if code, resp := do(t, h, "POST", "/v1/relocate", token, body); code != http.StatusBadRequest {
				t.Fatalf("POST body %q = %d, want 400: %s", body, code, strings.TrimSpace(resp))
			}
		})
	}
}

// Review R6: Start takes a token with blanks around it (config accepts one,
// see config review test), and then no request can authenticate: the
// server trims the Authorization value before comparing it with
// "Bearer <token>". Either the token is refused at Start, or a client
// sending exactly the configured token is let in.
func TestReviewR6TokenWithBlanksLocksEveryoneOut(t *testing.T) {
	f := newFake()
	defer close(f.release)
	tok := token + " "
	o := f.opts(tok)
	s, err := Start(o)
	if err != nil {
		return // refused: fine
	}
	defer s.Close(context.Background())
	if code, body := getOverHTTP(t, "http://"+s.Addr()+"/v1/status", tok); code != http.StatusOK {
		t.Fatalf("Start accepted token %q, and GET /v1/status with exactly that token = %d: %s", tok, code, body)
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
