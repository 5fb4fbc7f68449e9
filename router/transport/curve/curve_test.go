package curve

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// Example keys of libzmq's zmq_curve(7) manual page; libzmq 4.3.4's
// zmq_curve_public derives exactly these public keys from the secrets
// (checked with pyzmq's zmq.curve_public), so they pin our Curve25519 and
// Z85 to libzmq's.
const (
	manServerPublic = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
	manServerSecret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
	manClientPublic = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
	manClientSecret = "D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs"
)

func TestZ85(t *testing.T) {
	// RFC 32's test case.
	rfc := []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}
	tests := []struct {
		name string
		bin  []byte
		text string
	}{
		{"rfc32", rfc, "HelloWorld"},
		{"empty", nil, ""},
		{"zeros", make([]byte, 4), "00000"},
		{"ones", []byte{0xFF, 0xFF, 0xFF, 0xFF}, "%nSc0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Z85Encode(tc.bin)
			if err != nil || got != tc.text {
				t.Fatalf("encode: %q, %v; want %q", got, err, tc.text)
			}
			back, err := Z85Decode(tc.text)
			if err != nil || !bytes.Equal(back, tc.bin) && len(tc.bin) > 0 {
				t.Fatalf("decode: %x, %v; want %x", back, err, tc.bin)
			}
		})
	}
	bad := []struct{ name, text string }{
		{"length", "Hell"},
		{"character", "Hell\"World"},
		{"space", "Hello World"[:10]},
		{"overflow", "#####"},
	}
	for _, tc := range bad {
		if _, err := Z85Decode(tc.text); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %q decoded, err %v", tc.name, tc.text, err)
		}
	}
	if _, err := Z85Encode([]byte{1, 2, 3}); !errors.Is(err, ErrMalformed) {
		t.Errorf("3 bytes encoded: %v", err)
	}
}

func TestKeysMatchLibzmq(t *testing.T) {
	for _, pair := range [][2]string{{manServerSecret, manServerPublic}, {manClientSecret, manClientPublic}} {
		sec, err := ParseKey(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		pub, err := PublicKey(sec)
		if err != nil {
			t.Fatal(err)
		}
		if pub.String() != pair[1] {
			t.Errorf("public of %s = %s, libzmq says %s", pair[0], pub, pair[1])
		}
	}
	if _, err := ParseKey("short"); !errors.Is(err, ErrMalformed) {
		t.Errorf("short key parsed: %v", err)
	}
}

func TestParseKeyList(t *testing.T) {
	in := "# mesh keys\n\n" + manServerPublic + " node-a\n  " + manClientPublic + "\tnode-b # b\n"
	keys, err := ParseKeyList(strings.NewReader(in))
	if err != nil || len(keys) != 2 || keys[0].String() != manServerPublic || keys[1].String() != manClientPublic {
		t.Fatalf("%v %v", keys, err)
	}
	if _, err := ParseKeyList(strings.NewReader("not-a-key\n")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad line accepted: %v", err)
	}
}

type pair struct {
	c        *Client
	s        *Server
	hello    []byte
	welcome  []byte
	initiate []byte
}

func mustPair(t testing.TB) (server, client KeyPair) {
	t.Helper()
	var err error
	if server, err = GenerateKeyPair(nil); err != nil {
		t.Fatal(err)
	}
	if client, err = GenerateKeyPair(nil); err != nil {
		t.Fatal(err)
	}
	return server, client
}

func allowOnly(keys ...Key) func(Key) error {
	return func(k Key) error {
		for _, a := range keys {
			if a == k {
				return nil
			}
		}
		return errors.New("not in the allow-list")
	}
}

// handshake runs HELLO..INITIATE and returns the state for the last step.
func handshake(t testing.TB, server, client KeyPair, auth func(Key) error) pair {
	t.Helper()
	var p pair
	var err error
	if p.c, err = NewClient(client, server.Public, nil); err != nil {
		t.Fatal(err)
	}
	if p.s, err = NewServer(server, auth, nil); err != nil {
		t.Fatal(err)
	}
	if p.hello, err = p.c.Hello(); err != nil {
		t.Fatal(err)
	}
	if len(p.hello) != helloSize {
		t.Fatalf("HELLO %d octets", len(p.hello))
	}
	if p.welcome, err = p.s.Welcome(p.hello); err != nil {
		t.Fatal(err)
	}
	if len(p.welcome) != welcomeSize {
		t.Fatalf("WELCOME %d octets", len(p.welcome))
	}
	if p.initiate, err = p.c.Initiate(p.welcome, []byte("\x0bSocket-Type\x00\x00\x00\x06DEALER")); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHandshakeAndMessages(t *testing.T) {
	server, client := mustPair(t)
	p := handshake(t, server, client, allowOnly(client.Public))
	got, meta, err := p.s.Accept(p.initiate)
	if err != nil {
		t.Fatal(err)
	}
	if got != client.Public || string(meta) != "\x0bSocket-Type\x00\x00\x00\x06DEALER" {
		t.Fatalf("server saw key %s meta %q", got, meta)
	}
	ready, ss, err := p.s.Ready([]byte("\x0bSocket-Type\x00\x00\x00\x06ROUTER"))
	if err != nil {
		t.Fatal(err)
	}
	smeta, cs, err := p.c.Ready(ready)
	if err != nil || string(smeta) != "\x0bSocket-Type\x00\x00\x00\x06ROUTER" {
		t.Fatalf("client READY: %q %v", smeta, err)
	}
	for i, tc := range []struct {
		from, to *Session
		flags    byte
		data     string
	}{
		{cs, ss, FlagMore, "first"}, {cs, ss, 0, ""}, {ss, cs, 0, "reply"}, {ss, cs, FlagCommand, "\x04PING"},
		{cs, ss, 0, strings.Repeat("x", 100000)},
	} {
		msg, err := tc.from.Seal(nil, tc.flags, []byte(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg) != MessageOverhead+len(tc.data) {
			t.Fatalf("%d: MESSAGE of %d octets for %d", i, len(msg), len(tc.data))
		}
		flags, data, err := tc.to.Open(nil, msg)
		if err != nil || flags != tc.flags || string(data) != tc.data {
			t.Fatalf("%d: open: flags %x data %.20q err %v", i, flags, data, err)
		}
	}
}

func TestTampering(t *testing.T) {
	server, client := mustPair(t)
	stranger, _ := mustPair(t)
	t.Run("hello to another server key", func(t *testing.T) {
		p := handshake(t, stranger, client, allowOnly(client.Public))
		s2, _ := NewServer(server, allowOnly(client.Public), nil)
		if _, err := s2.Welcome(p.hello); !errors.Is(err, ErrCrypto) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("hello version", func(t *testing.T) {
		p := handshake(t, server, client, allowOnly(client.Public))
		p.hello[6] = 2
		s2, _ := NewServer(server, allowOnly(client.Public), nil)
		if _, err := s2.Welcome(p.hello); !errors.Is(err, ErrVersion) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("welcome box", func(t *testing.T) {
		c, _ := NewClient(client, server.Public, nil)
		s, _ := NewServer(server, allowOnly(client.Public), nil)
		h, _ := c.Hello()
		w, _ := s.Welcome(h)
		w[100] ^= 1
		if _, err := c.Initiate(w, nil); !errors.Is(err, ErrCrypto) {
			t.Fatalf("err %v", err)
		}
	})
	// Each region of INITIATE: cookie nonce, cookie box, short nonce, box.
	for _, off := range []int{12, 50, 110, 150, 240} {
		t.Run(fmt.Sprintf("initiate byte %d", off), func(t *testing.T) {
			p := handshake(t, server, client, allowOnly(client.Public))
			p.initiate[off] ^= 0x10
			if _, _, err := p.s.Accept(p.initiate); !errors.Is(err, ErrCrypto) && !errors.Is(err, ErrReplay) {
				t.Fatalf("offset %d: err %v", off, err)
			}
		})
	}
	t.Run("initiate replayed nonce", func(t *testing.T) {
		p := handshake(t, server, client, allowOnly(client.Public))
		copy(p.initiate[105:113], p.hello[112:120]) // INITIATE nonce = HELLO nonce
		if _, _, err := p.s.Accept(p.initiate); !errors.Is(err, ErrReplay) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unknown client key", func(t *testing.T) {
		p := handshake(t, server, client, allowOnly(stranger.Public))
		if _, _, err := p.s.Accept(p.initiate); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("err %v", err)
		}
		if _, _, err := p.s.Ready(nil); !errors.Is(err, ErrState) {
			t.Fatalf("READY after a refused INITIATE: %v", err)
		}
	})
	t.Run("error command", func(t *testing.T) {
		c, _ := NewClient(client, server.Public, nil)
		_, _ = c.Hello()
		_, err := c.Initiate(ErrorCommand("400"), nil)
		var rej *RejectedError
		if !errors.Is(err, ErrRejected) || !errors.As(err, &rej) || rej.Reason != "400" {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("low-order key", func(t *testing.T) {
		var zero Key
		if _, err := sharedKey(&zero, &server.Secret); !errors.Is(err, ErrCrypto) {
			t.Fatalf("err %v", err)
		}
	})

	p := handshake(t, server, client, allowOnly(client.Public))
	if _, _, err := p.s.Accept(p.initiate); err != nil {
		t.Fatal(err)
	}
	ready, ss, _ := p.s.Ready(nil)
	_, cs, err := p.c.Ready(ready)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := cs.Seal(nil, 0, []byte("one"))
	m2, _ := cs.Seal(nil, 0, []byte("two"))
	bad := append([]byte(nil), m1...)
	bad[len(bad)-1] ^= 1
	if _, _, err := ss.Open(nil, bad); !errors.Is(err, ErrCrypto) {
		t.Fatalf("tampered box: %v", err)
	}
	if _, _, err := ss.Open(nil, m2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ss.Open(nil, m1); !errors.Is(err, ErrReplay) {
		t.Fatalf("older nonce: %v", err)
	}
	if _, _, err := ss.Open(nil, m2); !errors.Is(err, ErrReplay) {
		t.Fatalf("replayed MESSAGE: %v", err)
	}
	// A server MESSAGE reflected back to the server does not open: each
	// direction has its own nonce prefix.
	ms, _ := ss.Seal(nil, 0, []byte("reflect"))
	ms[15] = 0xFF // a nonce above everything seen, to get past the replay check
	if _, _, err := ss.Open(nil, ms); !errors.Is(err, ErrCrypto) {
		t.Fatalf("reflected MESSAGE: %v", err)
	}
	if _, err := cs.Seal(nil, 0x80, nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("reserved flag sealed: %v", err)
	}
	if _, _, err := ss.Open(nil, []byte("\x07MESSAGE")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short MESSAGE: %v", err)
	}
}

func TestValidateMetadata(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"", true},
		{"\x08Identity\x00\x00\x00\x00", true},
		{"\x00\x00\x00\x00\x00", false},
		{"\x08Identity\x00\x00", false},
		{"\x08Identity\x00\x00\x00\x05abc", false},
		{"\x08Identity\xff\xff\xff\xff", false},
	} {
		if err := ValidateMetadata([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.in, err)
		}
	}
}

// FuzzServerCommands feeds arbitrary HELLO and INITIATE commands to the
// server and arbitrary MESSAGE commands to a session: only typed errors,
// never a panic.
func FuzzServerCommands(f *testing.F) {
	server, client := mustPair(f)
	p := handshake(f, server, client, allowOnly(client.Public))
	f.Add(p.hello, p.initiate, []byte("\x07MESSAGE"))
	f.Add([]byte("\x05HELLO"), []byte{}, []byte{})
	f.Add(make([]byte, 200), make([]byte, 300), make([]byte, 40))
	f.Fuzz(func(t *testing.T, hello, initiate, message []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			for _, e := range []error{ErrMalformed, ErrVersion, ErrCrypto, ErrReplay, ErrUnauthorized, ErrState} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("untyped error: %v", err)
		}
		s, _ := NewServer(server, allowOnly(client.Public), nil)
		_, err := s.Welcome(hello)
		check(err)
		// INITIATE against a server that accepted a genuine HELLO.
		s2, _ := NewServer(server, allowOnly(client.Public), nil)
		if _, err := s2.Welcome(p.hello); err != nil {
			t.Fatal(err)
		}
		_, _, err = s2.Accept(initiate)
		check(err)
		sess := newSession(new([32]byte), "CurveZMQMESSAGES", "CurveZMQMESSAGEC", 1, 0)
		_, _, err = sess.Open(nil, message)
		check(err)
	})
}

// A refused key reads as what it is on the client (ZAP 400), other
// reasons verbatim.
func TestRejectedErrorText(t *testing.T) {
	for _, tc := range []struct{ reason, want string }{
		{"400", `curve: server sent ERROR "400": it refused this node's public key (not in its allowed keys?)`},
		{"500", `curve: server sent ERROR "500"`},
	} {
		if got := (&RejectedError{Reason: tc.reason}).Error(); got != tc.want {
			t.Errorf("reason %q: %q, want %q", tc.reason, got, tc.want)
		}
	}
}

// An allow-list entry that is a low-order point can never complete a
// handshake (sharedKey refuses it); ParsePublicKey says so when the list
// is loaded. Security review, 2026-12-07.
func TestParsePublicKeyRefusesLowOrderPoints(t *testing.T) {
	enc := func(b [32]byte) string {
		s, err := Z85Encode(b[:])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	one := [32]byte{1}
	tests := []struct {
		name, key string
		ok        bool
	}{
		{"libzmq's example server key", manServerPublic, true},
		{"libzmq's example client key", manClientPublic, true},
		{"all zero", enc([32]byte{}), false},
		{"u = 1", enc(one), false},
		{"not a key", "short", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePublicKey(tc.key)
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("ParsePublicKey(%q) = %v; want ok %v (else ErrMalformed)", tc.key, err, tc.ok)
			}
		})
	}
	if _, err := ParseKeyList(strings.NewReader(enc([32]byte{}) + " nobody\n")); err == nil || !strings.Contains(err.Error(), "line 1: ") || !strings.Contains(err.Error(), "low-order") {
		t.Fatalf("a low-order key in a key list: %v", err)
	}
}

// A key pair printed or logged shows its public key, never its secret;
// a malformed key's error names the position, not the character.
func TestSecretKeyIsNotPrinted(t *testing.T) {
	kp, _ := mustPair(t)
	secret := kp.Secret.String()
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("keys", "pair", kp, "cfg", struct{ Pair KeyPair }{kp})
	for _, out := range []string{
		fmt.Sprintf("%v", kp), fmt.Sprintf("%+v", kp), fmt.Sprintf("%#v", kp), fmt.Sprint(kp),
		fmt.Sprintf("%v", struct{ Pair KeyPair }{kp}), fmt.Sprintf("%+v", &struct{ Pair KeyPair }{kp}),
		logged.String(),
	} {
		if strings.Contains(out, secret) || !strings.Contains(out, kp.Public.String()) {
			t.Errorf("printed %q: the secret shown, or the public key not", out)
		}
	}
	bad := []byte(secret)
	bad[7] = '"'
	if _, err := ParseKey(string(bad)); err == nil || strings.Contains(err.Error(), `'"'`) || !strings.Contains(err.Error(), "at 7") {
		t.Errorf("malformed secret: %v; want the position only", err)
	}
}
