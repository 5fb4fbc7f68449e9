package curve

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
)

// Command layouts (RFC 26), as whole ZMTP command bodies: name-size octet,
// name, fields.
const (
	helloSize    = 200
	welcomeSize  = 168
	cookieSize   = 96
	minInitiate  = 257
	minReady     = 30
	minMessage   = 33
	helloPadding = 72 // RFC 26's grammar says 72 zero octets (its prose says 70; 6+2+72+32+8+80 = 200)
)

var (
	nameHello    = []byte("\x05HELLO")
	nameWelcome  = []byte("\x07WELCOME")
	nameInitiate = []byte("\x08INITIATE")
	nameReady    = []byte("\x05READY")
	nameError    = []byte("\x05ERROR")
	nameMessage  = []byte("\x07MESSAGE")
)

func hasName(cmd, name []byte) bool {
	return len(cmd) >= len(name) && string(cmd[:len(name)]) == string(name)
}

// shortNonce is a 16-octet prefix plus an 8-octet big-endian counter.
func shortNonce(prefix string, n uint64) *[24]byte {
	var nonce [24]byte
	copy(nonce[:16], prefix)
	binary.BigEndian.PutUint64(nonce[16:], n)
	return &nonce
}

// longNonce is an 8-octet prefix plus 16 octets (random when sending).
func longNonce(prefix string, tail []byte) *[24]byte {
	var nonce [24]byte
	copy(nonce[:8], prefix)
	copy(nonce[8:], tail)
	return &nonce
}

func randomKeyPair(rnd io.Reader) (KeyPair, error) { return GenerateKeyPair(rnd) }

// Client is the client half of one CurveZMQ handshake. Use it once:
// Hello, then Initiate with the server's WELCOME, then Ready with its READY.
type Client struct {
	perm   KeyPair
	server Key // S
	rnd    io.Reader

	trans    KeyPair   // C', c'
	cnServer Key       // S'
	precom   *[32]byte // C'·S' for INITIATE, READY and MESSAGE
	nonce    uint64    // last short nonce sent
	step     int
}

// NewClient starts a handshake of perm with the server whose permanent
// public key is server; rnd is crypto/rand when nil.
func NewClient(perm KeyPair, server Key, rnd io.Reader) (*Client, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	trans, err := randomKeyPair(rnd)
	if err != nil {
		return nil, err
	}
	return &Client{perm: perm, server: server, rnd: rnd, trans: trans}, nil
}

func (c *Client) nextNonce() (uint64, error) {
	if c.nonce == ^uint64(0) {
		return 0, ErrNonceExhausted
	}
	c.nonce++
	return c.nonce, nil
}

// Hello returns the HELLO command.
func (c *Client) Hello() ([]byte, error) {
	if c.step != 0 {
		return nil, fmt.Errorf("%w: HELLO already sent", ErrState)
	}
	n, err := c.nextNonce()
	if err != nil {
		return nil, err
	}
	cmd := make([]byte, 0, helloSize)
	cmd = append(cmd, nameHello...)
	cmd = append(cmd, 1, 0)
	cmd = append(cmd, make([]byte, helloPadding)...)
	cmd = append(cmd, c.trans.Public[:]...)
	cmd = binary.BigEndian.AppendUint64(cmd, n)
	// Box [64 * %x0](C'->S): proves the sender holds c' for C'.
	cmd, err = box(cmd, make([]byte, 64), shortNonce("CurveZMQHELLO---", n), &c.server, &c.trans.Secret)
	if err != nil {
		return nil, err
	}
	c.step = 1
	return cmd, nil
}

// Initiate reads the server's WELCOME (or ERROR) and returns the INITIATE
// command carrying metadata (ZMTP properties, e.g. Socket-Type and
// Identity).
func (c *Client) Initiate(welcome, metadata []byte) ([]byte, error) {
	if c.step != 1 {
		return nil, fmt.Errorf("%w: INITIATE before HELLO", ErrState)
	}
	if hasName(welcome, nameError) {
		return nil, parseError(welcome)
	}
	if !hasName(welcome, nameWelcome) {
		return nil, malformed("expected WELCOME")
	}
	if len(welcome) != welcomeSize {
		return nil, malformed("WELCOME of %d octets, want %d", len(welcome), welcomeSize)
	}
	// Box [S' + cookie](S->C'): only the holder of s (the real server) can
	// make it.
	plain, err := unbox(nil, welcome[24:], longNonce("WELCOME-", welcome[8:24]), &c.server, &c.trans.Secret)
	if err != nil {
		return nil, fmt.Errorf("WELCOME: %w", err)
	}
	copy(c.cnServer[:], plain[:32])
	cookie := plain[32 : 32+cookieSize]
	if c.precom, err = sharedKey(&c.cnServer, &c.trans.Secret); err != nil {
		return nil, fmt.Errorf("WELCOME: server transient key: %w", err)
	}

	// vouch = Box [C',S](C->S'): binds our permanent key to this
	// connection's transient key and to this server.
	var vouchNonce [16]byte
	if _, err := io.ReadFull(c.rnd, vouchNonce[:]); err != nil {
		return nil, fmt.Errorf("curve: random nonce: %w", err)
	}
	vouchPlain := make([]byte, 0, 64)
	vouchPlain = append(append(vouchPlain, c.trans.Public[:]...), c.server[:]...)
	vouch, err := box(nil, vouchPlain, longNonce("VOUCH---", vouchNonce[:]), &c.cnServer, &c.perm.Secret)
	if err != nil {
		return nil, err
	}
	plainInit := make([]byte, 0, 32+16+len(vouch)+len(metadata))
	plainInit = append(plainInit, c.perm.Public[:]...)
	plainInit = append(plainInit, vouchNonce[:]...)
	plainInit = append(plainInit, vouch...)
	plainInit = append(plainInit, metadata...)

	n, err := c.nextNonce()
	if err != nil {
		return nil, err
	}
	cmd := make([]byte, 0, 113+len(plainInit)+boxOverhead)
	cmd = append(cmd, nameInitiate...)
	cmd = append(cmd, cookie...)
	cmd = binary.BigEndian.AppendUint64(cmd, n)
	cmd = seal(cmd, plainInit, shortNonce("CurveZMQINITIATE", n), c.precom)
	c.step = 2
	return cmd, nil
}

// Ready reads the server's READY (or ERROR) and returns the server's
// metadata and the session of the data phase.
func (c *Client) Ready(ready []byte) (metadata []byte, s *Session, err error) {
	if c.step != 2 {
		return nil, nil, fmt.Errorf("%w: READY before INITIATE", ErrState)
	}
	if hasName(ready, nameError) {
		return nil, nil, parseError(ready)
	}
	if !hasName(ready, nameReady) {
		return nil, nil, malformed("expected READY")
	}
	if len(ready) < minReady {
		return nil, nil, malformed("READY of %d octets, want at least %d", len(ready), minReady)
	}
	n := binary.BigEndian.Uint64(ready[6:14])
	meta, err := open(nil, ready[14:], shortNonce("CurveZMQREADY---", n), c.precom)
	if err != nil {
		return nil, nil, fmt.Errorf("READY: %w", err)
	}
	if err := ValidateMetadata(meta); err != nil {
		return nil, nil, fmt.Errorf("READY: %w", err)
	}
	c.step = 3
	s = newSession(c.precom, "CurveZMQMESSAGEC", "CurveZMQMESSAGES", c.nonce, n)
	return meta, s, nil
}

func parseError(cmd []byte) error {
	if len(cmd) < 7 || int(cmd[6]) > len(cmd)-7 {
		return malformed("ERROR command of %d octets", len(cmd))
	}
	return &RejectedError{Reason: string(cmd[7 : 7+int(cmd[6])])}
}

// Server is the server half of one CurveZMQ handshake: Welcome with the
// client's HELLO, then Accept with its INITIATE, then Ready.
type Server struct {
	perm      KeyPair
	authorize func(Key) error
	rnd       io.Reader

	cnClient  Key // C'
	helloN    uint64
	cookieKey *[32]byte // per connection, dropped after INITIATE
	trans     KeyPair   // S', s' (also inside the cookie)
	precom    *[32]byte
	initN     uint64
	step      int
}

// NewServer starts the server side for perm. authorize decides a client's
// permanent public key after it proved holding the secret half; it must
// not be nil (a server that admits any key must say so explicitly).
func NewServer(perm KeyPair, authorize func(Key) error, rnd io.Reader) (*Server, error) {
	if authorize == nil {
		return nil, fmt.Errorf("%w: server without an authorize function", ErrState)
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	return &Server{perm: perm, authorize: authorize, rnd: rnd}, nil
}

// Welcome validates the client's HELLO and returns the WELCOME command.
func (s *Server) Welcome(hello []byte) ([]byte, error) {
	if s.step != 0 {
		return nil, fmt.Errorf("%w: second HELLO", ErrState)
	}
	if !hasName(hello, nameHello) {
		return nil, malformed("expected HELLO")
	}
	if len(hello) != helloSize {
		return nil, malformed("HELLO of %d octets, want %d", len(hello), helloSize)
	}
	if hello[6] != 1 || hello[7] != 0 {
		return nil, fmt.Errorf("%w: %d.%d", ErrVersion, hello[6], hello[7])
	}
	for _, b := range hello[8 : 8+helloPadding] {
		if b != 0 {
			return nil, malformed("HELLO padding is not zero")
		}
	}
	copy(s.cnClient[:], hello[80:112])
	s.helloN = binary.BigEndian.Uint64(hello[112:120])
	if _, err := unbox(nil, hello[120:200], shortNonce("CurveZMQHELLO---", s.helloN), &s.cnClient, &s.perm.Secret); err != nil {
		return nil, fmt.Errorf("HELLO signature (client uses another server key?): %w", err)
	}

	var err error
	if s.trans, err = randomKeyPair(s.rnd); err != nil {
		return nil, err
	}
	// A fresh cookie key per connection: the server keeps no state across
	// connections, and the cookie key dies with this handshake (RFC 26:
	// discard it after a short interval or at INITIATE).
	s.cookieKey = new([32]byte)
	var nonces [32]byte
	if _, err := io.ReadFull(s.rnd, s.cookieKey[:]); err != nil {
		return nil, fmt.Errorf("curve: random cookie key: %w", err)
	}
	if _, err := io.ReadFull(s.rnd, nonces[:]); err != nil {
		return nil, fmt.Errorf("curve: random nonce: %w", err)
	}
	cookiePlain := append(append(make([]byte, 0, 64), s.cnClient[:]...), s.trans.Secret[:]...)
	cookie := append(make([]byte, 0, cookieSize), nonces[:16]...)
	cookie = seal(cookie, cookiePlain, longNonce("COOKIE--", nonces[:16]), s.cookieKey)

	welcomePlain := append(append(make([]byte, 0, 128), s.trans.Public[:]...), cookie...)
	cmd := make([]byte, 0, welcomeSize)
	cmd = append(cmd, nameWelcome...)
	cmd = append(cmd, nonces[16:]...)
	cmd, err = box(cmd, welcomePlain, longNonce("WELCOME-", nonces[16:]), &s.cnClient, &s.perm.Secret)
	if err != nil {
		return nil, err
	}
	s.step = 1
	return cmd, nil
}

// Accept validates the client's INITIATE (cookie, box, vouch), authorizes
// the client's permanent key and returns it with the client's metadata.
// An error wrapping ErrUnauthorized means the client proved its key but
// the key is not allowed: the caller should send ErrorCommand.
func (s *Server) Accept(initiate []byte) (client Key, metadata []byte, err error) {
	if s.step != 1 {
		return client, nil, fmt.Errorf("%w: INITIATE before HELLO", ErrState)
	}
	s.step = -1 // one attempt: any failure ends the handshake
	cookieKey := s.cookieKey
	s.cookieKey = nil
	if !hasName(initiate, nameInitiate) {
		return client, nil, malformed("expected INITIATE")
	}
	if len(initiate) < minInitiate {
		return client, nil, malformed("INITIATE of %d octets, want at least %d", len(initiate), minInitiate)
	}
	// The cookie proves this INITIATE answers our WELCOME on this
	// connection and gives back s'.
	cookie, err := open(nil, initiate[25:105], longNonce("COOKIE--", initiate[9:25]), cookieKey)
	if err != nil {
		return client, nil, fmt.Errorf("INITIATE cookie: %w", err)
	}
	if string(cookie[:32]) != string(s.cnClient[:]) || string(cookie[32:64]) != string(s.trans.Secret[:]) {
		return client, nil, fmt.Errorf("%w: INITIATE cookie of another handshake", ErrCrypto)
	}
	s.initN = binary.BigEndian.Uint64(initiate[105:113])
	if s.initN <= s.helloN {
		return client, nil, fmt.Errorf("%w: INITIATE nonce %d after HELLO nonce %d", ErrReplay, s.initN, s.helloN)
	}
	if s.precom, err = sharedKey(&s.cnClient, &s.trans.Secret); err != nil {
		return client, nil, fmt.Errorf("INITIATE: client transient key: %w", err)
	}
	plain, err := open(nil, initiate[113:], shortNonce("CurveZMQINITIATE", s.initN), s.precom)
	if err != nil {
		return client, nil, fmt.Errorf("INITIATE box: %w", err)
	}
	copy(client[:], plain[:32])
	vouch, err := unbox(nil, plain[48:128], longNonce("VOUCH---", plain[32:48]), &client, &s.trans.Secret)
	if err != nil {
		return client, nil, fmt.Errorf("INITIATE vouch: %w", err)
	}
	// The vouch must name this connection's C' and our S: a vouch lifted
	// from another connection or made for another server is refused.
	if string(vouch[:32]) != string(s.cnClient[:]) || string(vouch[32:64]) != string(s.perm.Public[:]) {
		return client, nil, fmt.Errorf("%w: vouch for another connection or server", ErrCrypto)
	}
	metadata = plain[128:]
	if err := ValidateMetadata(metadata); err != nil {
		return client, nil, fmt.Errorf("INITIATE: %w", err)
	}
	if err := s.authorize(client); err != nil {
		return client, nil, fmt.Errorf("%w: %s: %w", ErrUnauthorized, client, err)
	}
	s.step = 2
	return client, metadata, nil
}

// Ready returns the READY command carrying metadata and the session of
// the data phase.
func (s *Server) Ready(metadata []byte) ([]byte, *Session, error) {
	if s.step != 2 {
		return nil, nil, fmt.Errorf("%w: READY before a valid INITIATE", ErrState)
	}
	const readyNonce = 1
	cmd := make([]byte, 0, 14+len(metadata)+boxOverhead)
	cmd = append(cmd, nameReady...)
	cmd = binary.BigEndian.AppendUint64(cmd, readyNonce)
	cmd = seal(cmd, metadata, shortNonce("CurveZMQREADY---", readyNonce), s.precom)
	s.step = 3
	return cmd, newSession(s.precom, "CurveZMQMESSAGES", "CurveZMQMESSAGEC", readyNonce, s.initN), nil
}

// ErrorCommand returns an ERROR command with reason (cut to 255 octets).
// libzmq's clients read a 3-digit ZAP status code; "400" means the
// credentials were refused.
func ErrorCommand(reason string) []byte {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	cmd := append([]byte(nil), nameError...)
	cmd = append(cmd, byte(len(reason)))
	return append(cmd, reason...)
}

// ValidateMetadata checks the ZMTP property list grammar (RFC 23/26):
// name-size (1..255), name, 4-octet value size, value — all within b.
func ValidateMetadata(b []byte) error {
	for i := 0; i < len(b); {
		n := int(b[i])
		if n == 0 {
			return malformed("metadata: empty property name")
		}
		i++
		if len(b)-i < n+4 {
			return malformed("metadata: truncated property")
		}
		i += n
		v := binary.BigEndian.Uint32(b[i : i+4])
		i += 4
		if v > uint32(len(b)-i) {
			return malformed("metadata: value of %d octets past the end", v)
		}
		i += int(v)
	}
	return nil
}
