package admin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitLimit bounds how long a test waits for the listener to end a
// connection; the limits under test are milliseconds, so only a connection
// that is never ended reaches it.
const waitLimit = 20 * time.Second

func startLimited(t *testing.T, mod func(*Options)) *Server {
	t.Helper()
	f := newFake()
	t.Cleanup(func() { close(f.release) })
	o := f.opts("")
	mod(&o)
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// get sends one keep-alive GET on c and reads its answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// endedByServer reports whether the server closes c (EOF or reset) before
// waitLimit, having sent nothing more than the returned bytes.
func endedByServer(c net.Conn) (bool, []byte) {
	_ = c.SetReadDeadline(time.Now().Add(waitLimit))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, b
	}
	return true, b
}

func dialAdmin(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A keep-alive connection that sends no next request is closed: net/http
// keeps one forever without IdleTimeout, and enough of them took the
// process's file descriptors (the mesh port then failed to accept peers).
func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	s := startLimited(t, func(o *Options) { o.IdleTimeout = 20 * time.Millisecond })
	c := dialAdmin(t, s)
	if code := get(t, c, bufio.NewReader(c), "/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	if ended, _ := endedByServer(c); !ended {
		t.Fatalf("an idle keep-alive connection was still open after %s (IdleTimeout 20ms)", waitLimit)
	}
}

// A body sent byte by byte is cut off with 408 and the connection ends:
// the header timeout ends at the headers, and a slow body held its
// connection (and, under the cap, its slot) forever.
func TestSlowBodyIsCutOff(t *testing.T) {
	s := startLimited(t, func(o *Options) { o.BodyTimeout = 20 * time.Millisecond })
	for _, path := range []string{"/v1/relocate", "/healthz"} {
		t.Run(path, func(t *testing.T) {
			c := dialAdmin(t, s)
			if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"); err != nil {
				t.Fatal(err)
			}
			ended, b := endedByServer(c)
			if !ended {
				t.Fatalf("a connection whose body stopped after one byte was still open after %s (BodyTimeout 20ms); got %q", waitLimit, b)
			}
			if path == "/v1/relocate" && !bytes.HasPrefix(b, []byte("HTTP/1.1 408")) {
				t.Fatalf("answer %q, want 408", b)
			}
		})
	}
}

// The body limits leave ordinary requests alone: a body in time runs the
// handler, an oversized one is 413.
func TestBodyLimitsPassOrdinaryRequests(t *testing.T) {
	s := startLimited(t, func(*Options) {})
	url := "http://" + s.Addr() + "/v1/relocate"
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"relocate", `{"requestId":"r1"}`, http.StatusAccepted},
		{"over maxBody", `{"requestId":"` + strings.Repeat("x", maxBody) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(url, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("POST = %d %s, want %d", resp.StatusCode, b, tc.want)
			}
		})
	}
}

// Connections beyond MaxConns are closed at accept; the ones held are
// served, and a slot comes back when one of them ends.
func TestConnectionsOverTheCapAreClosedAtAccept(t *testing.T) {
	var logs bytes.Buffer
	s := startLimited(t, func(o *Options) {
		o.MaxConns = 2
		o.IdleTimeout = time.Hour
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	held := make([]net.Conn, 2)
	for i := range held {
		held[i] = dialAdmin(t, s)
		if code := get(t, held[i], bufio.NewReader(held[i]), "/healthz"); code != 200 {
			t.Fatalf("healthz on held connection %d = %d", i, code)
		}
	}
	over := dialAdmin(t, s)
	_, _ = io.WriteString(over, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if ended, b := endedByServer(over); !ended || len(b) != 0 {
		t.Fatalf("connection over the cap: ended %v, answer %q; want closed unanswered", ended, b)
	}
	// The held connections are still served.
	br := bufio.NewReader(held[0])
	if code := get(t, held[0], br, "/healthz"); code != 200 {
		t.Fatalf("held connection after the refusal = %d", code)
	}
	// Ending one gives its slot back once the server has seen the end.
	held[1].Close()
	deadline := time.Now().Add(waitLimit)
	for {
		c := dialAdmin(t, s)
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if _, b := endedByServer(c); bytes.HasPrefix(b, []byte("HTTP/1.1 200")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no slot came back after a held connection ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "the listener holds its maximum of open connections") {
		t.Fatalf("no WARN for the refusal; log:\n%s", logs.String())
	}
}

// A flood at the cap logs one WARN per capLogEvery, with the count.
func TestCapRefusalsAreLoggedOncePerWindow(t *testing.T) {
	var logs bytes.Buffer
	now := time.Unix(1000, 0)
	l := newCapListener(nil, 1, slog.New(slog.NewTextHandler(&logs, nil)))
	l.now = func() time.Time { return now }
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	for i := 0; i < 500; i++ {
		l.noteRefused(addr)
	}
	now = now.Add(capLogEvery)
	l.noteRefused(addr)
	out := logs.String()
	if n := strings.Count(out, "maximum of open connections"); n != 2 {
		t.Fatalf("%d WARN lines for 501 refusals over two windows, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "refused=500") {
		t.Fatalf("second WARN does not count the 500 refused since the first:\n%s", out)
	}
}
