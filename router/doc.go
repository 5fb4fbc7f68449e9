// Package router is meshnode's service-record codec: the byte layout of every
// record two nodes exchange over their ZeroMQ ROUTER/DEALER connections.
//
// A record is a multipart message. Frame 0 is the 5-byte head prefix ('Z'
// 'M', wire major 1, command id, flags) followed by the command body; frame 1
// is the metadata frame when flag 0x01 is set; the application payload
// envelope follows as the last frame for commands that carry one. Integers
// are big-endian. The layouts of commands 1–50 follow ZLink's service wire
// v1 schema exactly; the relocation handoff records (40, 52–55) are the
// project's own (docs/PROTOCOL.md has every layout, direction and origin).
//
// Decode rejects any malformed input with a *ProtocolError (errors.Is(err,
// ErrProtocol)) whose Kind says what was wrong. It is meant to run on bytes
// straight from the network: every declared length and count is checked
// against the schema bound and against the bytes actually present before
// anything is sliced or allocated, so a record cannot make the decoder
// allocate more than a small multiple of its own size. A protocol error
// concerns one record only; the caller drops it, logs and counts it, and
// keeps serving the connection and every other peer.
//
// Encode applies the same rules (one walk per type serves decoding, encoding
// and DescribeJSON), so Decode(Encode(r)) reproduces r and Encode(Decode(b))
// reproduces b.
//
// The sockets themselves live in router/transport; this package does no I/O.
package router
