package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const token = "0123456789abcdef-token"

type fake struct {
	mu      sync.Mutex
	ready   error
	release chan struct{}
	runs    int
}

func newFake() *fake { return &fake{release: make(chan struct{})} }

func (f *fake) opts(tok string) Options {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "meshnode_test_total", Help: "test"})
	c.Add(3)
	reg.MustRegister(c)
	return Options{Listen: "127.0.0.1:0", Token: tok, Gatherer: reg,
		Ready:  func() error { f.mu.Lock(); defer f.mu.Unlock(); return f.ready },
		Status: func() Status { return Status{Mesh: "m", RID: "0101", State: "serving", Ready: true} },
		Relocate: func(_ context.Context, drain bool, progress func(Progress), _ func(Result)) (Result, error) {
			f.mu.Lock()
			f.runs++
			f.mu.Unlock()
			progress(Progress{Total: 2, Running: 1, Pending: 1})
			<-f.release
			return Result{End: "completed", Progress: Progress{Total: 2, Moved: 2, End: "completed"},
				Objects: []ObjectOutcome{{Kind: "actor", ID: "a", Outcome: "moved"}, {Kind: "actor", ID: "b", Outcome: "moved"}}}, nil
		}}
}

func do(t *testing.T, h http.Handler, method, path, tok, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// Probes need no token; everything else does when one is set, and a wrong
// or missing one is 401 whatever the endpoint.
func TestAuth(t *testing.T) {
	f := newFake()
	defer close(f.release)
	h := New(f.opts(token)).Handler()
	for _, tc := range []struct {
		method, path, tok string
		want              int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/readyz", "", 200},
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", "wrong-token-of-some-length", 401},
		{"GET", "/metrics", token + "x", 401},
		{"GET", "/metrics", token, 200},
		{"GET", "/v1/status", "", 401},
		{"GET", "/v1/status", token, 200},
		{"POST", "/v1/relocate", "", 401},
		{"GET", "/v1/relocate/x", "", 401},
		{"GET", "/v1/relocate/x", token, 404},
		{"GET", "/debug/pprof/", "", 401},
		{"GET", "/debug/pprof/", token, 200},
		{"POST", "/healthz", "", 405},
	} {
		if got, body := do(t, h, tc.method, tc.path, tc.tok, ""); got != tc.want {
			t.Errorf("%s %s (token %q) = %d, want %d: %s", tc.method, tc.path, tc.tok, got, tc.want, body)
		}
	}
	// Without a token (loopback only) the control endpoints are open.
	h = New(f.opts("")).Handler()
	if got, _ := do(t, h, "GET", "/metrics", "", ""); got != 200 {
		t.Errorf("metrics without a configured token = %d", got)
	}
}

func TestStartRefusesAnOpenNetworkListener(t *testing.T) {
	o := newFake().opts("")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		o.Listen = addr
		if _, err := Start(o); !errors.Is(err, ErrInsecure) {
			t.Errorf("Start(%s) without a token = %v, want ErrInsecure", addr, err)
		}
	}
	o.Listen = "127.0.0.1:0"
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz over TCP = %d", resp.StatusCode)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestReadyAndMetrics(t *testing.T) {
	f := newFake()
	defer close(f.release)
	h := New(f.opts(token)).Handler()
	f.mu.Lock()
	f.ready = errors.New("node is draining")
	f.mu.Unlock()
	if code, body := do(t, h, "GET", "/readyz", "", ""); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("readyz = %d %q", code, body)
	}
	if _, body := do(t, h, "GET", "/metrics", token, ""); !strings.Contains(body, "meshnode_test_total 3") {
		t.Fatalf("metrics body: %s", body)
	}
}

// POST /v1/relocate is idempotent by requestId; a second command while one
// runs is 409; the job's progress and result are readable.
func TestRelocateJobs(t *testing.T) {
	f := newFake()
	s := New(f.opts(token))
	h := s.Handler()
	code, body := do(t, h, "POST", "/v1/relocate", token, `{"requestId":"r1"}`)
	if code != 202 {
		t.Fatalf("first POST = %d %s", code, body)
	}
	if code, _ := do(t, h, "POST", "/v1/relocate", token, `{"requestId":"r1"}`); code != 200 {
		t.Fatalf("repeated POST = %d, want 200 (same job)", code)
	}
	if code, _ := do(t, h, "POST", "/v1/relocate", token, `{"requestId":"r1","drain":true}`); code != 400 {
		t.Fatalf("same id as a drain = %d, want 400", code)
	}
	if code, _ := do(t, h, "POST", "/v1/relocate", token, `{"requestId":"r2"}`); code != 409 {
		t.Fatalf("second command while one runs = %d, want 409", code)
	}
	if code, _ := do(t, h, "POST", "/v1/relocate", token, `{"bogus":1}`); code != 400 {
		t.Fatalf("unknown field = %d, want 400", code)
	}
	waitJob := func(cond func(Job) bool) Job {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, body := do(t, h, "GET", "/v1/relocate/r1", token, "")
			var j Job
			if err := json.Unmarshal([]byte(body), &j); err != nil {
				t.Fatalf("job body %q: %v", body, err)
			}
			if cond(j) {
				return j
			}
			if time.Now().After(deadline) {
				t.Fatalf("job stuck at %+v", j)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitJob(func(j Job) bool { return j.State == JobRunning && j.Progress.Total == 2 })
	if st := s.CurrentJob(); st == nil || st.ID != "r1" {
		t.Fatalf("current job %+v", st)
	}
	close(f.release)
	j := waitJob(func(j Job) bool { return j.State == JobDone })
	if j.Result == nil || j.Result.Progress.Moved != 2 || len(j.Result.Objects) != 2 {
		t.Fatalf("result %+v", j.Result)
	}
	if f.runs != 1 {
		t.Fatalf("%d runs, want 1", f.runs)
	}
	if code, _ := do(t, h, "POST", "/v1/relocate", token, `{"requestId":"r2"}`); code != 202 {
		t.Fatalf("new command after the first ended = %d", code)
	}
}

// promhttp's error log: a collector's failure is an ERROR, a scraper that
// closed its connection while the answer was written is DEBUG (it was an
// ERROR line per such scrape).
func TestMetricsErrorLogLevels(t *testing.T) {
	tests := []struct {
		name string
		v    []any
		want slog.Level
	}{
		{"broken pipe", []any{"error encoding and sending metric family:", fmt.Errorf("write tcp: %w", syscall.EPIPE)}, slog.LevelDebug},
		{"reset", []any{"error encoding and sending metric family:", &net.OpError{Op: "write", Err: syscall.ECONNRESET}}, slog.LevelDebug},
		{"collector failed", []any{"error gathering metrics:", errors.New("collector x failed")}, slog.LevelError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			slogAdapter{l}.Println(tc.v...)
			if want := "level=" + tc.want.String(); !strings.Contains(buf.String(), want) {
				t.Fatalf("logged %q, want %s", buf.String(), want)
			}
		})
	}
}
