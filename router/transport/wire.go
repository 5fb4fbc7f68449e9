package transport

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// errZMTPPanic wraps a panic raised inside zmq4 while it parsed peer input.
// zmq4 v0.17.0 panics on some malformed handshakes (an unknown Socket-Type in
// READY reaches the panic in SocketType.IsCompatible; a truncated metadata
// property slices past its buffer). Inside zmq4's own goroutines that kills
// the process; we only ever call zmq4 from our goroutines, so we recover.
var errZMTPPanic = errors.New("transport: zmq4 panicked on peer input")

// zconn is one ZMTP connection: zmq4's Conn (handshake, framing) over our
// guardConn (limits, buffering, PING interception). With CURVE, zmq4 runs
// only the handshake and zconn frames the MESSAGE commands itself (see
// package curve for why zmq4's hooks cannot).
type zconn struct {
	z     *zmq4.Conn
	g     *guardConn
	raw   net.Conn
	ack   ackCount // what the peer's kernel acknowledged of raw's data
	ident []byte   // the peer's ZMTP Identity property (its RID), may be empty

	sess    *curve.Session // nil: NULL mechanism, zmq4 frames the data
	peerKey curve.Key      // CURVE: the peer's authenticated permanent key
	wbuf    []byte         // CURVE: the writer's sealed-command scratch
	rbuf    []byte         // CURVE: the reader's frame scratch
}

// openZMTP performs the ZMTP handshake on raw within timeout (real time: it is
// a socket deadline). The stock zmq4 sockets run this handshake with no
// deadline inside their accept loop, so one silent TCP client blocks every
// later connection (zmq4 issue #131); we run it per connection with a
// deadline.
//
// mech is the CURVE handshake of this connection, nil for the NULL
// mechanism.
func openZMTP(raw net.Conn, typ zmq4.SocketType, id []byte, server bool, lim frameLimits, bufSize int, timeout time.Duration, mech *curve.Mechanism) (zc *zconn, err error) {
	ack := newAckCount(raw) // before the greeting: nothing written yet
	g := newGuardConn(raw, lim, bufSize)
	var sec zmq4.Security = null.Security()
	if mech != nil {
		sec = mech
		// zmq4 always sends as-server 0; CURVE's roles are fixed by that
		// greeting field (RFC 25), so the server's guard sets it.
		g.asServer = server
	}
	if timeout > 0 {
		_ = raw.SetDeadline(time.Now().Add(timeout))
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: handshake: %v", errZMTPPanic, r)
		}
		if err != nil {
			_ = raw.Close()
		}
	}()
	z, err := zmq4.Open(g, sec, typ, zmq4.SocketIdentity(id), server, nil)
	if err != nil {
		if theirs, ok := g.peerMechanism(); ok && theirs != string(sec.Type()) {
			return nil, fmt.Errorf("transport: ZMTP handshake with %s: the peer uses the %s security mechanism, this node %s "+
				"(transport.curve.enabled must be the same on every node of a mesh): %w", raw.RemoteAddr(), theirs, sec.Type(), err)
		}
		if what, ok := g.notZMTP(); ok {
			return nil, fmt.Errorf("transport: ZMTP handshake with %s: %s: %w", raw.RemoteAddr(), what, err)
		}
		return nil, fmt.Errorf("transport: ZMTP handshake with %s: %w", raw.RemoteAddr(), err)
	}
	_ = raw.SetDeadline(time.Time{})
	g.startBuffering()
	zc = &zconn{z: z, g: g, raw: raw, ack: ack, ident: []byte(z.Peer.Meta["Identity"])}
	if mech != nil {
		zc.sess, zc.peerKey = mech.Session(), mech.PeerKey()
	}
	return zc, nil
}

// recv returns the frames of the next message, skipping ZMTP commands.
func (c *zconn) recv() (frames [][]byte, err error) {
	if c.sess != nil {
		return c.recvCurve()
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: read: %v", errZMTPPanic, r)
		}
	}()
	for {
		msg, err := c.z.RecvMsg()
		if err != nil {
			return nil, err
		}
		if msg.Type == zmq4.CmdMsg {
			continue // PONG and friends: not records
		}
		return msg.Frames, nil
	}
}

// write encodes one message into the write buffer (no syscall unless the
// buffer fills up; flush sends it).
func (c *zconn) write(frames [][]byte) (err error) {
	if c.sess != nil {
		for i, f := range frames {
			flags := byte(0)
			if i < len(frames)-1 {
				flags = curve.FlagMore
			}
			if err := c.writeSealed(flags, f); err != nil {
				return err
			}
		}
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: write: %v", errZMTPPanic, r)
		}
	}()
	return c.z.SendMsg(zmq4.NewMsgFrom(frames...))
}

func (c *zconn) pong(ctx []byte) error {
	if c.sess != nil {
		// With CURVE a command travels inside a MESSAGE with the command
		// flag (libzmq's encoding of ZMTP 3.1 PING/PONG).
		return c.writeSealed(curve.FlagCommand, append([]byte("\x04PONG"), ctx...))
	}
	return c.z.SendCmd(zmq4.CmdPong, ctx)
}

func (c *zconn) close() error { return c.raw.Close() }
