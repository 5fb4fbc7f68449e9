package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/router"
)

// Sentinel errors. Every error the Node returns wraps exactly one of them
// (plus the cause), so callers branch with errors.Is.
var (
	// ErrBackpressure: the peer's bounded send queue is full (records or
	// bytes). Nothing was queued; the caller decides whether to retry, shed
	// or fail. A slow or dead peer never makes Send block or grow memory.
	ErrBackpressure = errors.New("transport: backpressure")

	// ErrPeerDown: the connection a request or record was on has gone: the
	// peer missed its liveness deadline, the TCP connection closed, the peer
	// restarted with a new lifecycle generation, or it was disconnected.
	ErrPeerDown = errors.New("transport: peer down")

	// ErrPeerSilent: this node gave up on the peer — it answered no
	// liveness probe within PeerTimeout. Wrapped by the ErrPeerDown that
	// ends such a session, so a caller can tell it from the peer closing
	// the connection (a stopped process): a peer that is only slow may
	// still read what was sent to it before.
	ErrPeerSilent = errors.New("transport: peer silent")

	// ErrNotAdmitted: there is a link to the peer but it is not (yet, or no
	// longer) admitted; records are only sent over admitted connections.
	ErrNotAdmitted = errors.New("transport: peer not admitted")

	// ErrRunEnded: a record named the run of the peer it is meant for
	// (SendRun, SendWaitRun, Run), and the link has admitted a later run of
	// that peer: the run named ended (the peer stopped and started again).
	// Nothing was queued (*RunError says which runs).
	ErrRunEnded = errors.New("transport: the peer run named ended")

	// ErrUnknownPeer: no link to this peer was configured with Connect.
	ErrUnknownPeer = errors.New("transport: unknown peer")

	// ErrDeadlineExceeded: a request's deadline passed before its reply.
	// Errors carrying it also match context.DeadlineExceeded.
	ErrDeadlineExceeded = errors.New("transport: deadline exceeded")

	// ErrRejected: the peer answered our hello with reject (see *RejectError
	// for the reason), or we refused its admit (mesh or security identity
	// mismatch).
	ErrRejected = errors.New("transport: admission rejected")

	// ErrIdentityMismatch: the ROUTER we reached announced a ZMTP identity
	// other than the RID we dialled; it is another node (for example one
	// that restarted with a fresh random RID on the same port).
	ErrIdentityMismatch = errors.New("transport: peer identity mismatch")

	// ErrClosed: the Node is closed.
	ErrClosed = errors.New("transport: node closed")

	// ErrInvalidRecord: the record cannot be sent as asked (encode failure,
	// request without a correlation field, reply without correlation). The
	// codec's *router.ProtocolError is wrapped as well.
	ErrInvalidRecord = errors.New("transport: invalid record")

	// ErrConfig: the Config is invalid.
	ErrConfig = errors.New("transport: invalid config")
)

// RunError is the refusal of a record that names the run of the peer it is
// meant for (its lifecycle generation, Named) when the session it would be
// queued on was admitted with another run (Admitted). It matches
// ErrRunEnded when the admitted run is a later one (the run named ended),
// ErrNotAdmitted when it is an earlier one (the link still holds the
// session of the run before the one named, which it has not admitted yet).
type RunError struct {
	Peer            RID
	Named, Admitted uint64
}

func (e *RunError) Error() string {
	if e.Admitted > e.Named {
		return fmt.Sprintf("transport: the record names run %d of %s, which ended: the link admitted its run %d", e.Named, e.Peer, e.Admitted)
	}
	return fmt.Sprintf("transport: the record names run %d of %s; the link still holds its earlier run %d", e.Named, e.Peer, e.Admitted)
}

// Is matches ErrRunEnded or ErrNotAdmitted, as RunError says.
func (e *RunError) Is(target error) bool {
	switch target {
	case ErrRunEnded:
		return e.Admitted > e.Named
	case ErrNotAdmitted:
		return e.Admitted < e.Named
	}
	return false
}

// RejectError reports a refused admission with the schema's reject reason.
// Local is true when this node refused the peer's admit (the peer answered
// from another mesh or security identity); otherwise the peer sent reject.
type RejectError struct {
	Peer   RID
	Reason router.RejectReason
	Local  bool
}

func (e *RejectError) Error() string {
	who := "peer"
	if e.Local {
		who = "local"
	}
	return fmt.Sprintf("transport: admission of %s rejected (%s): %s", e.Peer, who, e.Reason)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

// deadlineErr builds the error of a request whose deadline passed; it matches
// both ErrDeadlineExceeded and context.DeadlineExceeded.
func deadlineErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrDeadlineExceeded, context.DeadlineExceeded, fmt.Sprintf(format, args...))
}

// DialTimeoutError is a link attempt whose TCP connect got no connection
// within Config.HandshakeTimeout: nothing answered at the peer's endpoint
// (its host down or unreachable, or its listen queue full) — the link
// could not be (re-)established, which is not a peer that answered late.
// A link that is down wraps it in ErrNotAdmitted until its next attempt.
//
// Err is the dial's own error. Go reports a connect timeout as one of two
// errors, only one of which matches context.DeadlineExceeded; callers tell
// this case by the type (errors.As), not by that match — and it never
// matches context.DeadlineExceeded (Is): the bound that passed is the
// link's own, not any caller's deadline. Until 2026-12-06 it did half the
// time, and a message the mesh layer failed as not sent (ErrUnavailable,
// safe to repeat) also matched context.DeadlineExceeded, which a caller
// takes for its own deadline having passed.
type DialTimeoutError struct {
	Endpoint string
	Timeout  time.Duration
	Err      error
}

func (e *DialTimeoutError) Error() string {
	return fmt.Sprintf("transport: no connection to %s within %s (%v)", e.Endpoint, e.Timeout, e.Err)
}

// Is matches what the dial's error matches, except context.DeadlineExceeded.
// There is no Unwrap: a chain through it would match that too.
func (e *DialTimeoutError) Is(target error) bool {
	return target != context.DeadlineExceeded && errors.Is(e.Err, target)
}

// As finds a type in the dial's error chain (a *net.OpError, a net.Error).
func (e *DialTimeoutError) As(target any) bool { return errors.As(e.Err, target) }

// Upper bounds of Config.MaxFrameBytes and Config.MaxMessageBytes. The
// limits are added to and doubled in uint64 arithmetic (the default message
// bound is twice the frame bound; a CURVE frame may carry its box overhead
// on top; a message's running total may pass the bound by one frame before
// it is refused), which wrapped for values near 2^64: a limit meant as "no
// limit" became a tiny one, or a frame header declaring any size was taken.
// A frame is allocated whole when its header is read, so a bound above
// what one process can allocate protects nothing anyway.
const (
	// MaxFrameBytesLimit is the largest Config.MaxFrameBytes: 1 GiB, 16
	// times the default and still an amount one allocation can take on a
	// 32-bit platform.
	MaxFrameBytesLimit = 1 << 30
	// MaxMessageBytesLimit is the largest Config.MaxMessageBytes, given
	// or derived: 2 GiB, twice MaxFrameBytesLimit, so that the default
	// message bound (2 × MaxFrameBytes) of any frame bound taken is taken.
	MaxMessageBytesLimit = 2 * MaxFrameBytesLimit
)

// LimitError is the refusal of a Config whose Field (MaxFrameBytes or
// MaxMessageBytes) is Value, above Max (MaxFrameBytesLimit,
// MaxMessageBytesLimit). It matches ErrConfig.
type LimitError struct {
	Field      string
	Value, Max uint64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s %d is above its maximum %d", ErrConfig, e.Field, e.Value, e.Max)
}

// Is makes errors.Is(err, ErrConfig) true.
func (e *LimitError) Is(target error) bool { return target == ErrConfig }
