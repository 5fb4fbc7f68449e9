package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// ErrMeshPort is the cause when the address is a meshnode node's mesh port
// (its node.endpoint, which speaks ZMTP): the address answered with a ZMTP
// greeting. errors.Is also matches it as ErrNotRedis.
var ErrMeshPort = errors.New("a meshnode mesh port (node.endpoint), not a Redis server: it answered with a ZMTP greeting")

// ErrPlainText is the cause when TLS is on but the address is a Redis port
// that speaks plain text (its port, not its tls-port): it answered a PING
// sent in clear. errors.Is also matches it as ErrTLS.
var ErrPlainText = errors.New("a plain-text Redis port: it answered a PING sent in clear, so it cannot take TLS (Redis serves TLS on its tls-port)")

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
// port (ErrMeshPort). With TLS on (tlsOn) it sends each address a PING in
// clear instead: a RESP answer names it as a plain-text Redis port
// (ErrPlainText). Otherwise the error is returned as Explain returns it.
func ExplainOpen(err error, addrs []string, tlsOn bool) error {
	err = Explain(err)
	if err == nil || errors.Is(err, ErrNotRedis) || !isTimeout(err) {
		return err
	}
	// With TLS on, a mesh port normally fails the handshake at once
	// (Explain); what times out is a Redis port that speaks plain text: it
	// waits for the line end of a command the ClientHello never sends.
	found := make([]portKind, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found[i] = probePort(addr, probeWait, tlsOn)
		}()
	}
	wg.Wait()
	for i, addr := range addrs {
		switch found[i] {
		case meshPort:
			return &meshPortError{addr: addr, err: err}
		case plainRedis:
			return &plainTextError{addr: addr, err: err}
		}
	}
	return err
}

// portKind is what probePort found at an address.
type portKind int

const (
	unknownPort portKind = iota
	meshPort             // it greets in ZMTP
	plainRedis           // it answered a PING in clear
)

// plainTextError is ErrPlainText for one address, keeping the client's own
// error.
type plainTextError struct {
	addr string
	err  error
}

func (e *plainTextError) Error() string {
	return fmt.Sprintf("%s is %v (%v)", e.addr, ErrPlainText, e.err)
}

func (e *plainTextError) Is(target error) bool { return target == ErrPlainText || target == ErrTLS }
func (e *plainTextError) Unwrap() error        { return e.err }

// probePort connects to addr once, for at most wait. Without ping it only
// reads: a ZMTP signature sent unasked is a mesh port. With ping it first
// sends an inline PING in clear: a RESP simple string or error in answer
// (+PONG, or -NOAUTH when it wants a login first) is a Redis port without
// TLS; a TLS port ends the connection instead, and a mesh port still sends
// its greeting.
func probePort(addr string, wait time.Duration, ping bool) portKind {
	if !ping {
		if greetsWithZMTP(addr, wait) {
			return meshPort
		}
		return unknownPort
	}
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return unknownPort
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return unknownPort
	}
	var b [10]byte
	n, _ := io.ReadAtLeast(c, b[:], len("+PONG\r\n"))
	if n > 0 && b[0] == 0xFF && n < len(b) {
		m, _ := io.ReadFull(c, b[n:])
		n += m
	}
	reply := string(b[:n])
	switch {
	case zmtpSignature(b[:n]):
		return meshPort
	case strings.HasPrefix(reply, "+PONG") || (n >= 5 && reply[0] == '-' && isUpperWord(reply[1:5])):
		return plainRedis
	}
	return unknownPort
}

// isUpperWord reports whether s is all A-Z, as a Redis error code is.
func isUpperWord(s string) bool {
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return s != ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// IsMeshPort reports whether addr, connected to for at most wait, sends a
// ZMTP signature without being sent anything: a meshnode node's mesh port
// (node.endpoint). ctl uses it to name a mesh port given for an admin
// listener.
func IsMeshPort(addr string, wait time.Duration) bool { return greetsWithZMTP(addr, wait) }

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
