package curve

import (
	"encoding/binary"
	"fmt"
)

// MESSAGE payload flags (RFC 26; bit 1 is libzmq's: the frame is a ZMTP
// command such as PING, carried inside the box once CURVE is up).
const (
	FlagMore    = 0x01
	FlagCommand = 0x02
	flagsKnown  = FlagMore | FlagCommand
)

// MessageOverhead is what a MESSAGE command adds to a frame's payload:
// name (8), short nonce (8), flags (1) and the box tag (16).
const MessageOverhead = 8 + 8 + 1 + boxOverhead

// Session seals and opens the MESSAGE commands of one connection after the
// handshake. Seal and Open keep separate state, so one goroutine may send
// while another receives; neither is safe for concurrent use by itself.
type Session struct {
	key        *[32]byte
	sendPrefix string
	recvPrefix string
	sent       uint64 // last short nonce sent
	recvd      uint64 // last short nonce accepted
	plain      []byte // Seal's scratch plaintext
}

func newSession(key *[32]byte, sendPrefix, recvPrefix string, sent, recvd uint64) *Session {
	return &Session{key: key, sendPrefix: sendPrefix, recvPrefix: recvPrefix, sent: sent, recvd: recvd}
}

// Seal appends to dst the MESSAGE command carrying one frame: data with
// flags (FlagMore, FlagCommand).
func (s *Session) Seal(dst []byte, flags byte, data []byte) ([]byte, error) {
	if flags&^flagsKnown != 0 {
		return dst, malformed("flags 0x%02x", flags)
	}
	if s.sent == ^uint64(0) {
		return dst, ErrNonceExhausted
	}
	s.sent++
	s.plain = append(append(s.plain[:0], flags), data...)
	dst = append(dst, nameMessage...)
	dst = binary.BigEndian.AppendUint64(dst, s.sent)
	dst = seal(dst, s.plain, shortNonce(s.sendPrefix, s.sent), s.key)
	if cap(s.plain) > 64<<10 {
		s.plain = nil // do not pin a large frame's buffer
	}
	return dst, nil
}

// Open authenticates and decrypts one MESSAGE command, appending its data
// to dst. It refuses a nonce not above the last accepted one (replay or
// reordering), a box that does not open, and reserved flag bits.
func (s *Session) Open(dst []byte, msg []byte) (flags byte, data []byte, err error) {
	if !hasName(msg, nameMessage) {
		return 0, nil, malformed("expected MESSAGE")
	}
	if len(msg) < minMessage {
		return 0, nil, malformed("MESSAGE of %d octets, want at least %d", len(msg), minMessage)
	}
	n := binary.BigEndian.Uint64(msg[8:16])
	if n <= s.recvd {
		return 0, nil, fmt.Errorf("%w: MESSAGE nonce %d, last %d", ErrReplay, n, s.recvd)
	}
	start := len(dst)
	out, err := open(dst, msg[16:], shortNonce(s.recvPrefix, n), s.key)
	if err != nil {
		return 0, nil, fmt.Errorf("MESSAGE box: %w", err)
	}
	s.recvd = n
	flags = out[start]
	if flags&^flagsKnown != 0 {
		return 0, nil, malformed("MESSAGE flags 0x%02x", flags)
	}
	return flags, out[start+1:], nil
}
