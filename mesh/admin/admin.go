// Package admin is a node's HTTP admin listener: Prometheus /metrics,
// /healthz and /readyz for orchestrators, a JSON /v1/status, /debug/pprof/,
// and the host-command control endpoints POST /v1/relocate and GET
// /v1/relocate/{id} (docs/OPERATIONS.md "Admin endpoint"). It knows nothing
// of the mesh: the node hands it functions (Options). Its JSON types are the
// contract `meshnode ctl status` and `ctl relocate` read.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
}

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
	ln, err := listen.TCP(opts.Listen, opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	s := New(opts)
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
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
	return mux
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

func (a slogAdapter) Println(v ...any) {
	a.l.Error("metrics: " + strings.TrimSpace(fmt.Sprintln(v...)))
}
