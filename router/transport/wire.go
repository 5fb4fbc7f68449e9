package transport

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// errZMTPPanic wraps a panic raised inside zmq4 while it parsed peer input.
// zmq4 v0.17.0 panics on some malformed handshakes (an unknown Socket-Type in
// READY reaches the panic in SocketType.IsCompatible; a truncated metadata
// property slices past its buffer). Inside zmq4's own goroutines that kills
// the process; we only ever call zmq4 from our goroutines, so we recover.
var errZMTPPanic = errors.New("transport: zmq4 panicked on peer input")

// zconn is one ZMTP connection: zmq4's Conn (handshake, framing) over our
// guardConn (limits, buffering, PING interception).
type zconn struct {
	z     *zmq4.Conn
	g     *guardConn
	raw   net.Conn
	ident []byte // the peer's ZMTP Identity property (its RID), may be empty
}

// openZMTP performs the ZMTP handshake on raw within timeout (real time: it is
// a socket deadline). The stock zmq4 sockets run this handshake with no
// deadline inside their accept loop, so one silent TCP client blocks every
// later connection (zmq4 issue #131); we run it per connection with a
// deadline.
func openZMTP(raw net.Conn, typ zmq4.SocketType, id []byte, server bool, lim frameLimits, bufSize int, timeout time.Duration) (zc *zconn, err error) {
	g := newGuardConn(raw, lim, bufSize)
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
	z, err := zmq4.Open(g, null.Security(), typ, zmq4.SocketIdentity(id), server, nil)
	if err != nil {
		return nil, fmt.Errorf("transport: ZMTP handshake with %s: %w", raw.RemoteAddr(), err)
	}
	_ = raw.SetDeadline(time.Time{})
	g.startBuffering()
	return &zconn{z: z, g: g, raw: raw, ident: []byte(z.Peer.Meta["Identity"])}, nil
}

// recv returns the frames of the next message, skipping ZMTP commands.
func (c *zconn) recv() (frames [][]byte, err error) {
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
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: write: %v", errZMTPPanic, r)
		}
	}()
	return c.z.SendMsg(zmq4.NewMsgFrom(frames...))
}

func (c *zconn) pong(ctx []byte) error {
	return c.z.SendCmd(zmq4.CmdPong, ctx)
}

func (c *zconn) close() error { return c.raw.Close() }
