package curve

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed: a command or key of the wrong size, name or shape.
	ErrMalformed = errors.New("curve: malformed input")
	// ErrVersion: a HELLO of another CurveZMQ version than 1.0.
	ErrVersion = errors.New("curve: unsupported CurveZMQ version")
	// ErrCrypto: a box did not open (wrong key, tampered or forged data),
	// a cookie or vouch did not match, or a peer key is a low-order point.
	ErrCrypto = errors.New("curve: cryptographic check failed")
	// ErrReplay: a short nonce that is not above the last one accepted
	// (a replayed or reordered command).
	ErrReplay = errors.New("curve: nonce not increasing (replay)")
	// ErrUnauthorized: the client's permanent key is not allowed.
	ErrUnauthorized = errors.New("curve: client key not authorized")
	// ErrRejected: the server answered with an ERROR command.
	ErrRejected = errors.New("curve: rejected by server")
	// ErrState: a call out of handshake order (a caller bug, or a command
	// the peer sent at the wrong time).
	ErrState = errors.New("curve: command out of order")
	// ErrNonceExhausted: 2^64-1 commands were sent on one connection.
	ErrNonceExhausted = errors.New("curve: nonce space exhausted")
)

// RejectedError is the server's ERROR command: Reason is its text (libzmq
// sends a ZAP status code such as "400").
type RejectedError struct{ Reason string }

func (e *RejectedError) Error() string {
	if e.Reason == "400" {
		// ZAP 400: the server does not accept this client's key — on a
		// mesh, it is missing from that node's allowed keys.
		return `curve: server sent ERROR "400": it refused this node's public key (not in its allowed keys?)`
	}
	return fmt.Sprintf("curve: server sent ERROR %q", e.Reason)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
