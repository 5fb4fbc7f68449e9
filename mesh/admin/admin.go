// Package admin is a node's HTTP admin listener: Prometheus /metrics,
// /healthz and /readyz for orchestrators, a JSON /v1/status, /debug/pprof/,
// and the host-command control endpoints POST /v1/relocate and GET
// /v1/relocate/{id} (docs/OPERATIONS.md "Admin endpoint"). It knows nothing
// of the mesh: the node hands it functions (Options). Its JSON types are the
// contract `meshnode ctl status` and `ctl relocate` read.
package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshnode/meshnode/internal/bearer"
	"github.com/meshnode/meshnode/internal/listen"
)

// Errors of this package.
var (
	// ErrInsecure: a listener reachable from other hosts without a token.
	ErrInsecure = errors.New("admin: a non-loopback listener needs a token")
	// ErrBusy: a host command is already running on this node.
	ErrBusy = errors.New("admin: a host command is already running")
)

// Options is what a node gives its admin listener.
type Options struct {
	// Listen is host:port; port 0 picks one (Server.Addr says which).
	Listen string
	// Token, when set, is required as "Authorization: Bearer <token>" by
	// every endpoint but /healthz and /readyz.
	Token string
	// Ready reports nil when the node takes traffic (serving, owner lease
	// valid), else why not.
	Ready func() error
	// Status returns the node's status document.
	Status func() Status
	// Gatherer is the node's metrics registry.
	Gatherer prometheus.Gatherer
	// Relocate runs a host Relocate (drain false) or a drain (true),
	// reporting progress; nil disables POST /v1/relocate. A drain stops
	// the node, listener included, before it returns: it reports the
	// moves' result through early before the stop, so that the caller can
	// read it (see Linger).
	Relocate func(ctx context.Context, drain bool, progress func(Progress), early func(Result)) (Result, error)
	Logger   *slog.Logger

	// MaxConns bounds the listener's open connections (DefaultMaxConns
	// when 0); one more is closed right after accept. Without it, clients
	// holding connections open took the process's file descriptors, and
	// the mesh port's accepts then failed with "too many open files".
	MaxConns int
	// IdleTimeout closes a keep-alive connection that sends no next
	// request (DefaultIdleTimeout when 0); net/http keeps one forever
	// otherwise.
	IdleTimeout time.Duration
	// BodyTimeout bounds the read of a request's body (DefaultBodyTimeout
	// when 0); net/http's header timeout ends at the headers, so a client
	// sending a body byte by byte held its connection forever.
	BodyTimeout time.Duration
}

// Defaults of the listener's limits (Options). A scrape, a probe or a ctl
// command each needs one connection for well under a second.
const (
	DefaultMaxConns    = 64
	DefaultIdleTimeout = 30 * time.Second
	DefaultBodyTimeout = 10 * time.Second
	// headerTimeout bounds the read of a request's headers.
	headerTimeout = 10 * time.Second
	// maxBody bounds a request's body; the largest one read is a
	// POST /v1/relocate (a requestId of at most 128 bytes).
	maxBody = 64 << 10
)

// Server is a running admin listener.
type Server struct {
	opts Options
	ln   net.Listener
	srv  *http.Server
	log  *slog.Logger
	jobs jobs
	done chan struct{}
}

// Start binds opts.Listen and serves until Close. A listener on a host other
// than loopback without a token is ErrInsecure (config validation refuses
// it first; this is the last line).
func Start(opts Options) (*Server, error) {
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: listen address %q: %w", opts.Listen, err)
	}
	if opts.Token == "" && !loopback(host) {
		return nil, fmt.Errorf("%w (%s)", ErrInsecure, opts.Listen)
	}
	if err := CheckToken(opts.Token); err != nil {
		return nil, fmt.Errorf("admin: token %w", err)
	}
	ln, err := listen.TCP(opts.Listen, opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	s := New(opts)
	s.ln = newCapListener(ln, s.opts.MaxConns, s.log)
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		// net/http's own complaints (accept errors, malformed requests)
		// go to the node's log with its keys, not bare to stderr.
		ErrorLog: slog.NewLogLogger(s.log.With("listener", "admin").Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	s.log.Info("admin listener up", "addr", ln.Addr().String(), "token", opts.Token != "")
	return s, nil
}

// New returns a Server that does not listen: its Handler serves the
// endpoints (Start is New plus a listener).
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	s := &Server{opts: opts, log: opts.Logger, done: make(chan struct{})}
	s.jobs.m = map[string]*job{}
	return s
}

// Addr is the bound address (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, waiting for requests in flight until ctx ends.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

// CheckToken reports whether a client can send tok in an Authorization
// header (internal/bearer: no blank or control character; the error names
// the byte's position, never the token).
func CheckToken(tok string) error { return bearer.Check(tok) }

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler is the admin HTTP handler (also usable without Start, in tests).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.opts.Ready(); err != nil {
			writeText(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		writeText(w, http.StatusOK, "ready")
	})
	metrics := promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{ErrorLog: slogAdapter{s.log}})
	mux.Handle("GET /metrics", s.auth(metrics))
	mux.Handle("GET /v1/status", s.auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.opts.Status())
	})))
	mux.Handle("POST /v1/relocate", s.auth(http.HandlerFunc(s.postRelocate)))
	mux.Handle("GET /v1/relocate/{id}", s.auth(http.HandlerFunc(s.getRelocate)))
	mux.Handle("/debug/pprof/", s.auth(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", s.auth(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", s.auth(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", s.auth(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", s.auth(http.HandlerFunc(pprof.Trace)))
	return s.readBody(mux)
}

// readBody reads a request's whole body, at most maxBody bytes within
// BodyTimeout, before the handler runs: net/http bounds only the headers'
// read (ReadHeaderTimeout), and a whole-request ReadTimeout would also cut
// the long answers (/debug/pprof/profile runs 30 s). The deadline is lifted
// once the body is in. A body too slow is 408, too large 413; either ends
// the connection.
func (s *Server) readBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		// A ResponseWriter without deadlines (httptest) reads as before.
		_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeText(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", maxBody))
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeText(w, http.StatusRequestTimeout, fmt.Sprintf("request body not read within %s", s.opts.BodyTimeout))
			return
		case err != nil:
			writeText(w, http.StatusBadRequest, "body: "+err.Error())
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// auth requires the token when one is configured. The comparison takes the
// same time whatever the bytes (crypto/subtle), so a caller cannot find
// the token byte by byte from response times.
func (s *Server) auth(h http.Handler) http.Handler {
	if s.opts.Token == "" {
		return h
	}
	want := []byte("Bearer " + s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="meshnode admin"`)
			writeText(w, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer <admin.token>")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// slogAdapter lets promhttp log through slog.
type slogAdapter struct{ l *slog.Logger }

// Println logs at ERROR what promhttp reports — a collector that failed —
// except a scraper that went away while the answer was written (a broken
// pipe, a reset connection): that is the scraper's business, not the
// node's, and a scraper with a short timeout made it an ERROR line per
// scrape (operator try-out, 2026-12-07). It is DEBUG.
func (a slogAdapter) Println(v ...any) {
	msg := "metrics: " + strings.TrimSpace(fmt.Sprintln(v...))
	for _, x := range v {
		if err, ok := x.(error); ok && scraperGone(err) {
			a.l.Debug(msg+" (the scraper closed the connection)", "err", err)
			return
		}
	}
	a.l.Error(msg)
}

// scraperGone reports whether err is a write to a client that closed its
// connection.
func scraperGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
