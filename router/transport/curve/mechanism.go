package curve

import (
	"errors"
	"fmt"
	"io"

	"github.com/go-zeromq/zmq4"
)

// Config configures one connection's Mechanism.
type Config struct {
	// KeyPair is this side's permanent key pair.
	KeyPair KeyPair
	// ServerKey is, on the client side, the server's permanent public key
	// (CurveZMQ clients must know it before connecting).
	ServerKey Key
	// Authorize decides, on the server side, a client's authenticated
	// permanent public key; required there.
	Authorize func(Key) error
	// Rand is the randomness source (crypto/rand when nil).
	Rand io.Reader
}

// ErrDataPhase is returned by Mechanism's Encrypt and Decrypt after the
// handshake: the data phase is framed by the caller with Session, since
// zmq4's per-frame hooks cannot produce CURVE MESSAGE commands.
var ErrDataPhase = errors.New("curve: zmq4 framing used after the CURVE handshake")

// Mechanism runs the CURVE handshake as a zmq4.Security for zmq4.Open, one
// per connection. After a successful Open, Session and PeerKey give the
// data phase's session and the peer's authenticated permanent public key.
type Mechanism struct {
	cfg  Config
	sess *Session
	peer Key
}

// NewMechanism returns a Mechanism for one connection.
func NewMechanism(cfg Config) *Mechanism { return &Mechanism{cfg: cfg} }

// Type implements zmq4.Security.
func (*Mechanism) Type() zmq4.SecurityType { return zmq4.CurveSecurity }

// Session is the data-phase session, nil until the handshake succeeded.
func (m *Mechanism) Session() *Session { return m.sess }

// PeerKey is the peer's permanent public key: on the server side the
// client's, proven by its vouch; on the client side the configured server
// key, proven by the server's WELCOME and READY boxes.
func (m *Mechanism) PeerKey() Key { return m.peer }

// Encrypt implements zmq4.Security. Handshake commands travel in clear
// (their contents are boxes already); afterwards zmq4 must not frame data.
func (m *Mechanism) Encrypt(w io.Writer, data []byte) (int, error) {
	if m.sess != nil {
		return 0, ErrDataPhase
	}
	return w.Write(data)
}

// Decrypt implements zmq4.Security; see Encrypt.
func (m *Mechanism) Decrypt(w io.Writer, data []byte) (int, error) {
	if m.sess != nil {
		return 0, ErrDataPhase
	}
	return w.Write(data)
}

// Handshake implements zmq4.Security: HELLO, WELCOME, INITIATE, READY as
// ZMTP command frames, with zmq4's socket metadata (Socket-Type, Identity)
// in INITIATE and READY. The peer's metadata is validated here before
// zmq4 parses it, since zmq4's parser panics on a truncated property.
func (m *Mechanism) Handshake(conn *zmq4.Conn, server bool) error {
	meta, err := conn.Meta.MarshalZMTP()
	if err != nil {
		return fmt.Errorf("curve: own metadata: %w", err)
	}
	var peerMeta []byte
	if server {
		peerMeta, err = m.serve(conn, meta)
	} else {
		peerMeta, err = m.dial(conn, meta)
	}
	if err != nil {
		return err
	}
	if err := conn.Peer.Meta.UnmarshalZMTP(peerMeta); err != nil {
		return fmt.Errorf("%w: peer metadata: %v", ErrMalformed, err)
	}
	return nil
}

func (m *Mechanism) serve(conn *zmq4.Conn, meta []byte) ([]byte, error) {
	s, err := NewServer(m.cfg.KeyPair, m.cfg.Authorize, m.cfg.Rand)
	if err != nil {
		return nil, err
	}
	hello, err := recvCommand(conn)
	if err != nil {
		return nil, err
	}
	welcome, err := s.Welcome(hello)
	if err != nil {
		return nil, err
	}
	if err := sendCommand(conn, welcome); err != nil {
		return nil, err
	}
	initiate, err := recvCommand(conn)
	if err != nil {
		return nil, err
	}
	client, peerMeta, err := s.Accept(initiate)
	if errors.Is(err, ErrUnauthorized) {
		// RFC 26: a server SHALL indicate an authentication failure with
		// ERROR ("400" is the ZAP code libzmq sends for refused keys).
		_ = sendCommand(conn, ErrorCommand("400"))
	}
	if err != nil {
		return nil, err
	}
	ready, sess, err := s.Ready(meta)
	if err != nil {
		return nil, err
	}
	if err := sendCommand(conn, ready); err != nil {
		return nil, err
	}
	m.peer, m.sess = client, sess
	return peerMeta, nil
}

func (m *Mechanism) dial(conn *zmq4.Conn, meta []byte) ([]byte, error) {
	c, err := NewClient(m.cfg.KeyPair, m.cfg.ServerKey, m.cfg.Rand)
	if err != nil {
		return nil, err
	}
	hello, err := c.Hello()
	if err != nil {
		return nil, err
	}
	if err := sendCommand(conn, hello); err != nil {
		return nil, err
	}
	welcome, err := recvCommand(conn)
	if err != nil {
		return nil, err
	}
	initiate, err := c.Initiate(welcome, meta)
	if err != nil {
		return nil, err
	}
	if err := sendCommand(conn, initiate); err != nil {
		return nil, err
	}
	ready, err := recvCommand(conn)
	if err != nil {
		return nil, err
	}
	peerMeta, sess, err := c.Ready(ready)
	if err != nil {
		return nil, err
	}
	m.peer, m.sess = m.cfg.ServerKey, sess
	return peerMeta, nil
}

// sendCommand writes a whole command (name-size, name, body) through
// zmq4, which takes the name and body apart.
func sendCommand(conn *zmq4.Conn, cmd []byte) error {
	n := int(cmd[0])
	if err := conn.SendCmd(string(cmd[1:1+n]), cmd[1+n:]); err != nil {
		return fmt.Errorf("curve: send %s: %w", cmd[1:1+n], err)
	}
	return nil
}

// recvCommand reads one command frame and gives it back whole.
func recvCommand(conn *zmq4.Conn) ([]byte, error) {
	c, err := conn.RecvCmd()
	if err != nil {
		return nil, fmt.Errorf("curve: receive handshake command: %w", err)
	}
	if len(c.Name) > 255 {
		return nil, malformed("command name of %d octets", len(c.Name))
	}
	cmd := make([]byte, 0, 1+len(c.Name)+len(c.Body))
	cmd = append(cmd, byte(len(c.Name)))
	cmd = append(cmd, c.Name...)
	return append(cmd, c.Body...), nil
}
