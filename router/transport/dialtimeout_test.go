package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A link attempt whose TCP connect gets no connection within the handshake
// timeout is a *DialTimeoutError saying so ("no connection to … within …"),
// whichever of Go's two timeout errors the dial met (only one of them
// matches context.DeadlineExceeded). Before, it was the bare dial error: a
// route switch's barrier read it as a deadline — "the previous owner did
// not answer the barrier in time" — when the link to it could not be
// re-established, and half the time not even that.
func TestDialTimeoutSaysTheLinkCouldNotBeEstablished(t *testing.T) {
	ep := fullListenQueue(t)
	cfg := testConfig("a", 1)
	p := cfg.linkParams()
	p.handshakeTimeout = 200 * time.Millisecond
	for i := range 4 {
		_, err := dialDealer(context.Background(), ep, []byte("b"), p)
		var dte *DialTimeoutError
		if !errors.As(err, &dte) {
			t.Fatalf("dial %d: %v (%T), want a *DialTimeoutError", i, err, err)
		}
		if dte.Endpoint != ep || dte.Timeout != p.handshakeTimeout {
			t.Errorf("dial %d: endpoint %q timeout %s, want %q %s", i, dte.Endpoint, dte.Timeout, ep, p.handshakeTimeout)
		}
		if want := fmt.Sprintf("no connection to %s within 200ms", ep); !strings.Contains(err.Error(), want) {
			t.Errorf("dial %d: %q does not say %q", i, err, want)
		}
	}

	// A dial the link's own context ended is not a timeout of the peer.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p.handshakeTimeout = time.Minute
	_, err := dialDealer(ctx, ep, []byte("b"), p)
	var dte *DialTimeoutError
	if err == nil || errors.As(err, &dte) {
		t.Fatalf("dial ended by its context: %v, want an error that is no *DialTimeoutError", err)
	}
}

// fullListenQueue returns the endpoint of a loopback socket that listens
// with the smallest queue, never accepts, and whose queue holds one
// connection already: the kernel drops further SYNs, and a connect gets no
// answer.
func fullListenQueue(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return "tcp://" + addr
}

// A *DialTimeoutError never matches context.DeadlineExceeded, whichever of
// Go's timeout errors it carries: the link's own bound passed, not a
// caller's deadline (a not-sent message failed so is safe to repeat). What
// else the dial's error matches or holds is still found.
func TestDialTimeoutIsNotTheCallersDeadline(t *testing.T) {
	for _, cause := range []error{context.DeadlineExceeded, os.ErrDeadlineExceeded} {
		op := &net.OpError{Op: "dial", Net: "tcp", Err: cause}
		err := fmt.Errorf("%w: b (%w)", ErrNotAdmitted, &DialTimeoutError{Endpoint: "tcp://10.0.0.7:7791", Timeout: 5 * time.Second, Err: op})
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v matches context.DeadlineExceeded", err)
		}
		var ne net.Error
		var oe *net.OpError
		var dte *DialTimeoutError
		if !errors.Is(err, ErrNotAdmitted) || !errors.As(err, &dte) || !errors.As(err, &oe) || oe != op || !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%v: want ErrNotAdmitted, the *DialTimeoutError and its timed-out *net.OpError", err)
		}
		if cause == os.ErrDeadlineExceeded && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%v does not match the dial's own os.ErrDeadlineExceeded", err)
		}
	}
}
