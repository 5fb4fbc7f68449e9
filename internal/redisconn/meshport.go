package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ErrMeshPort is the cause when the address is a meshnode node's mesh port
// (its node.endpoint, which speaks ZMTP): the address answered with a ZMTP
// greeting. errors.Is also matches it as ErrNotRedis.
var ErrMeshPort = errors.New("a meshnode mesh port (node.endpoint), not a Redis server: it answered with a ZMTP greeting")

// meshPortError is ErrMeshPort for one address (or "" when only the TLS
// handshake showed it), keeping the client's own error.
type meshPortError struct {
	addr string
	err  error
}

func (e *meshPortError) Error() string {
	who := "the server"
	if e.addr != "" {
		who = e.addr
	}
	return fmt.Sprintf("%s is %v (%v)", who, ErrMeshPort, e.err)
}

func (e *meshPortError) Is(target error) bool { return target == ErrMeshPort || target == ErrNotRedis }
func (e *meshPortError) Unwrap() error        { return e.err }

// probeWait bounds the look at one address's first bytes.
const probeWait = time.Second

// ExplainOpen is Explain for the failure of a new client's first command
// to addrs. A mesh port sends its ZMTP greeting first and then waits for
// the client's; go-redis waits for a line end the greeting never has, so
// the command only times out. On a timeout, ExplainOpen therefore connects
// to each address once more for at most a second and reads its first ten
// bytes: a ZMTP signature (0xFF, 8 bytes, 0x7F) names the address as a mesh
// port (ErrMeshPort). Otherwise the error is returned as Explain returns it.
func ExplainOpen(err error, addrs []string) error {
	err = Explain(err)
	if err == nil || errors.Is(err, ErrNotRedis) || !isTimeout(err) {
		return err
	}
	found := make([]bool, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = greetsWithZMTP(addr, probeWait)
		}()
	}
	wg.Wait()
	for i, addr := range addrs {
		if found[i] {
			return &meshPortError{addr: addr, err: err}
		}
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// greetsWithZMTP reports whether addr, connected to, sends a ZMTP
// signature without being sent anything.
func greetsWithZMTP(addr string, wait time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [10]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return false
	}
	return zmtpSignature(b[:])
}

// zmtpSignature reports whether b starts with the 10-byte signature every
// ZMTP 3 greeting opens with.
func zmtpSignature(b []byte) bool {
	return len(b) >= 10 && b[0] == 0xFF && b[9] == 0x7F
}

// tlsFromMeshPort reports whether a TLS handshake failed on a ZMTP greeting:
// the record header TLS read is the signature's first five bytes (0xFF is
// no TLS record type).
func tlsFromMeshPort(err error) bool {
	var header tls.RecordHeaderError
	return errors.As(err, &header) && header.RecordHeader == [5]byte{0xFF, 0, 0, 0, 0}
}
