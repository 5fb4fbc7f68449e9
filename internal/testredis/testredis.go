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
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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
	s, err := startServer()
	if err != nil {
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
	cmd  *exec.Cmd
	once sync.Once
}

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

// Pause stops the server process (SIGSTOP): connections stay open but
// nothing is answered, as during a network outage; its keys' expiry keeps
// following the wall clock. Resume continues it (SIGCONT).
func (s *Server) Pause() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

func start() (string, error) {
	s, err := startServer()
	if err != nil {
		return "", err
	}
	return s.Addr, nil
}

func startServer() (*Server, error) {
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
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning")
		// The server must not outlive the test binary, even on a crash.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
		if lastErr = waitReady(s.Addr, 5*time.Second); lastErr == nil {
			return s, nil
		}
		s.Stop()
	}
	return nil, fmt.Errorf("redis-server did not become ready: %w", lastErr)
}

func waitReady(addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
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
		time.Sleep(20 * time.Millisecond)
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
