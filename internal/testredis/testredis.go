// Package testredis gives tests a real redis-server on loopback.
//
// Tests that need Redis call Addr. It uses MESHNODE_TEST_REDIS_ADDR when set
// (make test starts one throwaway server and exports it); otherwise it starts
// one redis-server per test binary from PATH. When neither is possible the
// test fails, unless MESHNODE_SKIP_REDIS=1 is set, in which case it is
// skipped with a loud message: a missing service never silently passes.
package testredis

import (
	"context"
	"errors"
	"fmt"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvAddr names the environment variable holding a running server's address.
const EnvAddr = "MESHNODE_TEST_REDIS_ADDR"

// EnvSkip, set to 1, turns "no Redis available" into a skip instead of a failure.
const EnvSkip = "MESHNODE_SKIP_REDIS"

var (
	shared     string
	sharedErr  error
	sharedOnce sync.Once
)

// Addr returns the address of a real Redis server for this test binary.
func Addr(t testing.TB) string {
	t.Helper()
	if a := os.Getenv(EnvAddr); a != "" {
		return a
	}
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		unavailable(t, sharedErr)
	}
	return shared
}

// NewServer starts a dedicated redis-server for this test and stops it at
// cleanup. Use it when a test needs a second server or must stop one.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s, err := startServer(ServerOptions{})
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// ServerOptions describe a secured server for NewSecuredServer.
type ServerOptions struct {
	// Password is the default user's password (requirepass); the server
	// then refuses unauthenticated clients.
	Password string
	// Users are ACL users created once the server is up, each an ACL
	// SETUSER argument list whose first entry is the user name, e.g.
	// {"app", "on", ">secret", "~*", "+@all"}.
	Users [][]string
	// TLS, when set, adds a TLS listener (Server.TLSAddr). The plain port
	// stays open on loopback: the helper configures the server through it,
	// and a test can use it to show the same server in plain text.
	TLS *TLSOptions
	// ReplicaOf, when set, is the host:port of the master this server
	// replicates (NewReplica).
	ReplicaOf string
}

// NewReplica starts a dedicated redis-server replicating master, waits
// until its link to the master is up and stops it at cleanup.
func NewReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	s, err := startServer(ServerOptions{ReplicaOf: master.Addr})
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("testredis: replica %s never linked to %s: %v\n%s", s.Addr, master.Addr, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TLSOptions are the server side of a TLS listener; NewCerts writes files
// that fit (Certs.ServerTLS).
type TLSOptions struct {
	CertFile, KeyFile string
	// CAFile verifies client certificates.
	CAFile string
	// RequireClientCert refuses clients without a certificate signed by
	// CAFile (tls-auth-clients yes); otherwise one is optional.
	RequireClientCert bool
}

// ErrNoTLS means the redis-server on PATH was built without TLS support.
var ErrNoTLS = errors.New("redis-server was built without TLS support")

// errSetup marks a server that started but refused the test's options.
var errSetup = errors.New("testredis: server setup")

// NewSecuredServer starts a dedicated redis-server as opts describe and
// stops it at cleanup. Redis being unavailable is handled as by Addr. A
// server built without TLS makes a test asking for TLS skip, loudly: that
// is a limitation of the machine's Redis, not a missing service, and tests
// without TLS still run.
func NewSecuredServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	s, err := startServer(opts)
	switch {
	case errors.Is(err, errSetup):
		t.Fatal(err) // the test's own options are wrong, not the machine
	case errors.Is(err, ErrNoTLS):
		t.Skipf("!!! SKIPPED: %v; the Redis TLS connection was NOT tested (install a redis-server built with BUILD_TLS=yes, as Debian's is) !!!", err)
	case err != nil:
		unavailable(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("!!! SKIPPED: no Redis available (%v) and %s=1 is set; the Redis provider was NOT tested !!!", err, EnvSkip)
	}
	t.Fatalf("no Redis available: %v (install redis-server, set %s, or set %s=1 to skip Redis tests)", err, EnvAddr, EnvSkip)
}

// Server is a redis-server child process.
type Server struct {
	Addr string
	// TLSAddr is the TLS listener's address when ServerOptions.TLS was set.
	TLSAddr string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	once    sync.Once
	dir     string // the server's working directory (its --dir), removed by Stop
}

// Stop kills the server, waits for it and removes its directory.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		_ = os.RemoveAll(s.dir)
	})
}

// Pause stops the server process (SIGSTOP): connections stay open but
// nothing is answered, as during a network outage; its keys' expiry keeps
// following the wall clock. Resume continues it (SIGCONT).
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

func start() (string, error) {
	s, err := startServer(ServerOptions{})
	if err != nil {
		return "", err
	}
	return s.Addr, nil
}

func startServer(opts ServerOptions) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not on PATH: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		// A directory of its own: a test that turns persistence on (CONFIG
		// SET appendonly yes) makes the server write there, and the
		// working directory was the test's package directory (an
		// appendonlydir once ended up committed). The process-wide shared
		// server is never stopped (the kernel kills it with the test
		// binary), so its directory stays in the temp dir, small.
		dir, err := os.MkdirTemp("", "testredis-")
		if err != nil {
			return nil, err
		}
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning"}
		if opts.Password != "" {
			args = append(args, "--requirepass", opts.Password)
		}
		if opts.ReplicaOf != "" {
			host, mport, err := net.SplitHostPort(opts.ReplicaOf)
			if err != nil {
				return nil, fmt.Errorf("%w: ReplicaOf %q: %w", errSetup, opts.ReplicaOf, err)
			}
			args = append(args, "--replicaof", host, mport)
		}
		tlsPort := 0
		if o := opts.TLS; o != nil {
			if tlsPort, err = freePort(); err != nil {
				return nil, err
			}
			auth := "optional"
			if o.RequireClientCert {
				auth = "yes"
			}
			args = append(args, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", o.CertFile,
				"--tls-key-file", o.KeyFile, "--tls-ca-cert-file", o.CAFile, "--tls-auth-clients", auth)
		}
		cmd := exec.Command(bin, args...)
		// Kept to explain a server that exits at startup.
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		// The server must not outlive the test binary, even on a crash
		// (where the system allows it: procAttr).
		cmd.SysProcAttr = procAttr()
		if err := cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, exited: make(chan struct{}), dir: dir}
		if tlsPort != 0 {
			s.TLSAddr = "127.0.0.1:" + strconv.Itoa(tlsPort)
		}
		// One waiter, so that readiness can stop at once when the server
		// exits (a bad option, a port taken meanwhile).
		go func() { _ = cmd.Wait(); close(s.exited) }()
		if lastErr = waitReady(s.Addr, opts.Password, 5*time.Second, s.exited); lastErr == nil {
			if err := addUsers(s.Addr, opts.Password, opts.Users); err != nil {
				s.Stop()
				return nil, err
			}
			return s, nil
		}
		s.Stop()
		if opts.TLS != nil && noTLS(out.String()) {
			return nil, ErrNoTLS
		}
		if text := strings.TrimSpace(out.String()); text != "" {
			lastErr = fmt.Errorf("%w; redis-server said: %s", lastErr, text)
		}
	}
	return nil, fmt.Errorf("redis-server did not become ready: %w", lastErr)
}

// noTLS recognizes a redis-server that cannot serve TLS: a build without
// it does not know the tls-* directives.
func noTLS(output string) bool {
	o := strings.ToLower(output)
	return strings.Contains(o, "tls") && (strings.Contains(o, "bad directive") || strings.Contains(o, "not supported"))
}

// addUsers creates the ACL users through the plain port.
func addUsers(addr, password string, users [][]string) error {
	if len(users) == 0 {
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, u := range users {
		args := []any{"ACL", "SETUSER"}
		for _, a := range u {
			args = append(args, a)
		}
		if err := c.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("%w: ACL SETUSER %s: %w", errSetup, u[0], err)
		}
	}
	return nil
}

func waitReady(addr, password string, within time.Duration, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited at startup (last ping: %w)", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Namespace returns a namespace unique to this test, so tests sharing one
// server never see each other's keys.
func Namespace(t testing.TB) string {
	return fmt.Sprintf("t%d-%s", time.Now().UnixNano(), sanitize(t.Name()))
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	if len(b) > 60 {
		b = b[len(b)-60:]
	}
	return string(b)
}

// NewSentinel starts a Sentinel monitoring master under the name
// "meshmaster" (password, when not empty, is the Sentinel's own
// requirepass; conf, more sentinel.conf lines, e.g. "sentinel
// down-after-milliseconds meshmaster 500"), waits until it reports the
// master, and stops it at cleanup. It returns the Sentinel's address.
func NewSentinel(t testing.TB, master *Server, password string, conf ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, err)
	}
	host, mport, err := net.SplitHostPort(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor meshmaster %s %s 1\n", port, dir, host, mport)
	if password != "" {
		text += "requirepass " + password + "\n"
	}
	for _, l := range conf {
		text += l + "\n"
	}
	if err := os.WriteFile(dir+"/sentinel.conf", []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, dir+"/sentinel.conf", "--sentinel", "--loglevel", "warning")
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("testredis: start sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
	defer sc.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		a, err := sc.GetMasterAddrByName(context.Background(), "meshmaster").Result()
		if err == nil && len(a) == 2 && a[1] == mport {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("testredis: sentinel at %s never reported the master: %v %v", addr, a, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
