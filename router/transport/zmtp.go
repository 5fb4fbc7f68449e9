package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// ErrFraming is matched by every ZMTP framing violation the guard detects
// (oversized frame, too many frames, reserved flag bits, bad command). Such a
// stream cannot be resynchronised, so the connection is closed; it is counted
// as a protocol error of the peer.
var ErrFraming = errors.New("transport: ZMTP framing violation")

// zmtpGreetingLen is the fixed ZMTP 3.x greeting size.
const zmtpGreetingLen = 64

// ZMTP frame flag bits (RFC 23).
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	flagReserve = 0xF8
)

// frameLimits bounds what a peer may make us allocate. zmq4's Conn.read does
// make([]byte, size) with the peer-declared 64-bit size (only capped at
// MaxInt64), which panics in a zmq4 goroutine or exhausts memory; the guard
// checks the size before zmq4 ever sees the header.
type frameLimits struct {
	maxFrame   uint64 // one message frame
	maxMessage uint64 // all frames of one message
	maxFrames  int    // frames per message
	maxCommand uint64 // one ZMTP command frame (READY metadata, PING, ...)
}

// guardConn is the net.Conn handed to zmq4.Open. It sits between zmq4's ZMTP
// code and the socket and
//   - reads through a bufio.Reader (zmq4 issues one read per header and per
//     body, i.e. several syscalls per frame otherwise),
//   - validates every frame header before zmq4 allocates the body,
//   - strips ZMTP PING commands and reports them to onPing: zmq4 answers a
//     PING by writing a PONG from the reading goroutine, concurrently with the
//     writer goroutine, which can interleave bytes of two frames on the wire;
//     our writer sends the PONG instead,
//   - after the handshake, buffers writes so that the single writer goroutine
//     can coalesce records and flush once per batch.
type guardConn struct {
	net.Conn
	lim frameLimits

	br  *bufio.Reader
	src readSource // under br
	// read state (only the reading goroutine touches it)
	greetLeft int    // greeting bytes still to pass through
	greeting  []byte // the peer's greeting bytes read so far (peerMechanism)
	bodyLeft  uint64 // message-frame body bytes still to pass through
	out       []byte // header (and buffered command) bytes zmq4 has not read yet
	nFrames   int
	msgBytes  uint64
	hdr       [9]byte

	onPing func(context []byte)

	// asServer sets the greeting's as-server octet (CURVE server side).
	asServer  bool
	greetSent bool

	wmu      sync.Mutex
	bw       *bufio.Writer
	buffered atomic.Bool
	// in counts the bytes given to the socket or to bw, kernel those the
	// socket took (both from the connection's first byte): a record whose
	// last byte is at or below kernel has left this process whole
	// (peerConn.takeUnsent).
	in     int64
	kernel kernelCount
}

// kernelCount is the writer under bw: it counts what the socket accepted.
type kernelCount struct {
	c net.Conn
	n atomic.Int64
}

func (k *kernelCount) Write(p []byte) (int, error) {
	n, err := k.c.Write(p)
	k.n.Add(int64(n))
	return n, err
}

func newGuardConn(c net.Conn, lim frameLimits, bufSize int) *guardConn {
	g := &guardConn{
		Conn:      c,
		lim:       lim,
		greetLeft: zmtpGreetingLen,
	}
	g.src.c = c
	g.br = bufio.NewReaderSize(&g.src, bufSize)
	g.kernel.c = c
	g.bw = bufio.NewWriterSize(&g.kernel, bufSize)
	return g
}

// readSource is the reader under br: the socket, with an idle bound for a
// connection being read to its end (peerConn.readOut). While the bound is
// set, every read of the socket gets a deadline of that much from its
// start, so it measures silence of the peer while the reader waits for
// it — never the time the reader spends elsewhere (a handler that is
// slow or stuck), which an absolute deadline would count. When a read
// waited that long for nothing, the socket is cut (cutSocket) and read
// on: what the kernel acknowledged meanwhile is delivered, then the end
// of the stream.
type readSource struct {
	c    net.Conn
	idle atomic.Int64 // nanoseconds; 0: reads wait for the peer as long as it takes
}

func (s *readSource) Read(p []byte) (int, error) {
	for {
		if idle := s.idle.Load(); idle > 0 {
			_ = s.c.SetReadDeadline(time.Now().Add(time.Duration(idle)))
		}
		n, err := s.c.Read(p)
		// The bound is taken (Swap) by the one read that finds it passed:
		// a deadline set by anything else is that one's to report.
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || s.idle.Swap(0) <= 0 {
			return n, err
		}
		_ = s.c.SetReadDeadline(time.Time{})
		if !cutSocket(s.c) {
			return n, err // the socket is closed once the reader stops
		}
	}
}

// boundIdle gives the reads of the socket an idle bound (readSource),
// the one in progress included.
func (s *readSource) boundIdle(idle time.Duration) {
	s.idle.Store(int64(idle))
	_ = s.c.SetReadDeadline(time.Now().Add(idle))
}

func (g *guardConn) fail(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFraming, fmt.Sprintf(format, args...))
}

// Read implements io.Reader for zmq4. It never returns n > 0 together with a
// framing error: io.ReadFull would then report success for a full buffer and
// hand zmq4 the bad header.
func (g *guardConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if len(g.out) > 0 {
			n := copy(p, g.out)
			g.out = g.out[n:]
			return n, nil
		}
		if g.greetLeft > 0 {
			// The greeting itself is validated by zmq4 (signature, version,
			// mechanism); it has a fixed size, so nothing here can overflow.
			if len(p) > g.greetLeft {
				p = p[:g.greetLeft]
			}
			n, err := g.br.Read(p)
			g.greetLeft -= n
			g.greeting = append(g.greeting, p[:n]...)
			return n, err
		}
		if g.bodyLeft > 0 {
			if uint64(len(p)) > g.bodyLeft {
				p = p[:g.bodyLeft]
			}
			n, err := g.br.Read(p)
			g.bodyLeft -= uint64(n)
			return n, err
		}
		if err := g.nextHeader(); err != nil {
			return 0, err
		}
	}
}

// nextHeader reads and validates one frame header. Message frames queue the
// header in g.out and stream the body; command frames are read whole (they
// are small by construction) so that PING can be removed from the stream.
func (g *guardConn) nextHeader() error {
	flag, err := g.br.ReadByte()
	if err != nil {
		return err
	}
	if flag&flagReserve != 0 {
		return g.fail("reserved flag bits 0x%02x", flag)
	}
	g.hdr[0] = flag
	hlen := 2
	var size uint64
	if flag&flagLong != 0 {
		hlen = 9
		if _, err := io.ReadFull(g.br, g.hdr[1:9]); err != nil {
			return err
		}
		size = binary.BigEndian.Uint64(g.hdr[1:9])
	} else {
		b, err := g.br.ReadByte()
		if err != nil {
			return err
		}
		g.hdr[1] = b
		size = uint64(b)
	}
	if flag&flagCommand != 0 {
		if flag&flagMore != 0 {
			return g.fail("command frame with MORE flag")
		}
		if g.nFrames != 0 {
			return g.fail("command frame inside a multipart message")
		}
		if size > g.lim.maxCommand {
			return g.fail("command frame of %d bytes (limit %d)", size, g.lim.maxCommand)
		}
		buf := make([]byte, hlen+int(size))
		copy(buf, g.hdr[:hlen])
		if _, err := io.ReadFull(g.br, buf[hlen:]); err != nil {
			return err
		}
		body := buf[hlen:]
		if len(body) == 0 || body[0] == 0 || int(body[0]) > len(body)-1 {
			// RFC 23: a command is a 1..255-octet name and its data. zmq4
			// fails such a frame with an error of its own, which closed the
			// connection uncounted and unlogged.
			return g.fail("malformed command frame (%d bytes, name of %d)", len(body), nameLen(body))
		}
		if ctx, ok := pingContext(body); ok {
			if g.onPing != nil {
				g.onPing(ctx)
			}
			return nil // dropped: zmq4 never sees it, so never writes a PONG itself
		}
		if g.buffered.Load() && len(body) >= 5 && body[0] == 4 && string(body[1:5]) == zmq4.CmdPing {
			// A PING without its TTL: zmq4 would answer it from the
			// reading goroutine, racing the writer. Dropped unanswered.
			return nil
		}
		g.out = buf
		return nil
	}
	if size > g.lim.maxFrame {
		return g.fail("frame of %d bytes (limit %d)", size, g.lim.maxFrame)
	}
	g.nFrames++
	g.msgBytes += size
	if g.nFrames > g.lim.maxFrames {
		return g.fail("more than %d frames in one message", g.lim.maxFrames)
	}
	if g.msgBytes > g.lim.maxMessage {
		return g.fail("message of more than %d bytes", g.lim.maxMessage)
	}
	if flag&flagMore == 0 {
		g.nFrames, g.msgBytes = 0, 0
	}
	g.out = append(g.out[:0], g.hdr[:hlen]...)
	g.bodyLeft = size
	return nil
}

// nameLen is the declared name length of a command body, 0 when empty.
func nameLen(body []byte) int {
	if len(body) == 0 {
		return 0
	}
	return int(body[0])
}

// pingContext recognises a ZMTP 3.1 PING command body: name length 4, "PING",
// a 16-bit TTL, then up to 16 context bytes echoed by PONG.
func pingContext(body []byte) ([]byte, bool) {
	if len(body) < 1+4+2 || body[0] != 4 || string(body[1:5]) != zmq4.CmdPing {
		return nil, false
	}
	ctx := body[7:]
	if len(ctx) > 16 {
		ctx = ctx[:16]
	}
	return append([]byte(nil), ctx...), true
}

// Write is used by zmq4 for the handshake (write-through, it waits for the
// peer's answer) and afterwards, from the single writer goroutine, for
// records (buffered until flush).
func (g *guardConn) Write(p []byte) (int, error) {
	if !g.buffered.Load() {
		if !g.greetSent {
			// zmq4 writes its greeting in one Write, first.
			g.greetSent = true
			if g.asServer && len(p) == zmtpGreetingLen {
				q := append([]byte(nil), p...)
				q[32] = 1 // as-server
				return g.direct(q)
			}
		}
		return g.direct(p)
	}
	g.wmu.Lock()
	defer g.wmu.Unlock()
	n, err := g.bw.Write(p)
	g.in += int64(n)
	return n, err
}

// direct writes a handshake message straight to the socket. It counts in
// in and kernel too, so that both are offsets in the connection's whole
// byte stream, as the peer's acknowledgements are (peerConn.acked).
func (g *guardConn) direct(p []byte) (int, error) {
	n, err := g.kernel.Write(p)
	g.in += int64(n)
	return n, err
}

// written is how many bytes were given to the write buffer so far. Only
// the connection's writer goroutine writes once buffering began, and only
// it calls this (after each record), so no lock is taken.
func (g *guardConn) written() int64 { return g.in }

// left is how many of those the kernel has taken.
func (g *guardConn) left() int64 { return g.kernel.n.Load() }

// readSealed reads one whole frame of the CURVE data phase (a MESSAGE
// command) into buf, reusing it when large enough. The bound is the
// largest frame plus the MESSAGE overhead, checked before allocating.
func (g *guardConn) readSealed(buf []byte) ([]byte, error) {
	flag, err := g.br.ReadByte()
	if err != nil {
		return nil, err
	}
	if flag&flagReserve != 0 {
		return nil, g.fail("reserved flag bits 0x%02x", flag)
	}
	if flag&flagMore != 0 {
		return nil, g.fail("MORE flag on a CURVE MESSAGE frame")
	}
	var size uint64
	if flag&flagLong != 0 {
		if _, err := io.ReadFull(g.br, g.hdr[1:9]); err != nil {
			return nil, err
		}
		size = binary.BigEndian.Uint64(g.hdr[1:9])
	} else {
		b, err := g.br.ReadByte()
		if err != nil {
			return nil, err
		}
		size = uint64(b)
	}
	if size > g.lim.maxFrame+curve.MessageOverhead {
		return nil, g.fail("CURVE frame of %d bytes (limit %d)", size, g.lim.maxFrame+curve.MessageOverhead)
	}
	if uint64(cap(buf)) >= size {
		buf = buf[:size]
	} else {
		buf = make([]byte, size)
	}
	if _, err := io.ReadFull(g.br, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// startBuffering switches writes to the buffer once the handshake is done.
func (g *guardConn) startBuffering() { g.buffered.Store(true) }

// flush writes buffered bytes, under the write deadline the caller armed
// (peerConn.armWrite) so that a peer that stopped reading cannot hold the
// writer forever.
func (g *guardConn) flush() (wrote bool, err error) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if g.bw.Buffered() == 0 {
		return false, nil
	}
	return true, g.bw.Flush()
}

// notZMTP describes a client that is not a ZMTP peer at all, from the
// first bytes it sent (a ZMTP greeting starts with 0xff): an HTTP request —
// someone pointed a browser, curl or a metrics scraper at the mesh port
// instead of admin.listen — or other bytes, shown quoted. False when
// nothing was read or the bytes start like a greeting.
func (g *guardConn) notZMTP() (string, bool) {
	if len(g.greeting) == 0 || g.greeting[0] == 0xff {
		return "", false
	}
	head := g.greeting[:min(len(g.greeting), 16)]
	for _, m := range []string{"GET ", "POST ", "HEAD ", "PUT ", "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ", "TRACE ", "PRI * HTTP/2"} {
		if strings.HasPrefix(string(g.greeting), m) {
			return fmt.Sprintf("not a mesh node: the client sent an HTTP request (%q) to the mesh port, "+
				"which speaks ZMTP to other nodes only; HTTP (metrics, probes, status) is served on admin.listen", head), true
		}
	}
	if respCommand(g.greeting) {
		return fmt.Sprintf("not a mesh node: the client sent a Redis command (%q) to the mesh port; "+
			"is a store address (location_store.redis.addrs, relocation_store.redis.addrs) this node's endpoint?", head), true
	}
	return fmt.Sprintf("not a mesh node: the client's first bytes %q are not a ZMTP greeting", head), true
}

// respCommand reports whether b starts like a Redis (RESP) command: an
// array header "*<n>\r\n" followed by a bulk string "$".
func respCommand(b []byte) bool {
	if len(b) < 4 || b[0] != '*' {
		return false
	}
	i := 1
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i > 1 && strings.HasPrefix(string(b[i:]), "\r\n$")
}

// peerMechanism is the security mechanism the peer's greeting names
// ("NULL", "CURVE", …; ZMTP 3 greeting octets 12–31), once that much of
// the greeting was read: a handshake that failed on a mechanism mismatch
// can then say so.
func (g *guardConn) peerMechanism() (string, bool) {
	const from, to = 12, 32
	if len(g.greeting) < to || g.greeting[0] != 0xff || g.greeting[9] != 0x7f {
		return "", false // not a ZMTP greeting (random bytes on the port)
	}
	m := strings.TrimRight(string(g.greeting[from:to]), "\x00")
	for _, c := range []byte(m) {
		if c < 'A' || c > 'Z' {
			return "", false // NULL, PLAIN, CURVE: anything else gets the generic error
		}
	}
	return m, m != ""
}
