// Package curve implements the CURVE security mechanism of ZMTP 3.x
// (ZeroMQ RFC 25) with the CurveZMQ handshake and message boxes of RFC 26:
// Curve25519 key agreement and XSalsa20-Poly1305 boxes
// (golang.org/x/crypto/nacl), the printable Z85 key encoding (RFC 32), and
// an adapter to github.com/go-zeromq/zmq4's Security interface for the
// handshake.
//
// The package is a "black box that accepts and produces commands" (RFC 26):
// Client and Server are the two handshake state machines, each command in
// and out is the body of one ZMTP command frame (name included), and a
// Session seals and opens the MESSAGE commands of the data phase. It does no
// I/O of its own except through Mechanism, so the handshake can be tested
// without sockets and the data phase can be framed by the caller.
//
// zmq4's Security hooks (Encrypt/Decrypt per frame body) cannot express
// CURVE's data phase: zmq4 writes the frame header with the plaintext size
// before calling Encrypt, and CURVE carries the MORE flag inside the box
// while the outer frame never has it. So Mechanism runs only the handshake
// through zmq4; the caller (package transport) frames MESSAGE commands
// itself with Session.Seal and Session.Open.
//
// Every error returned for peer input wraps one of the Err* values of this
// package (match with errors.Is); no input makes the package panic.
package curve
