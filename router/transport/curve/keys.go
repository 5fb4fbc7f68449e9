package curve

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/crypto/curve25519"
	naclbox "golang.org/x/crypto/nacl/box"
	"golang.org/x/crypto/nacl/secretbox"
)

// KeySize is the size of every Curve25519 key, public or secret.
const KeySize = 32

// Key is a Curve25519 public or secret key. Its text form is Z85 (40
// characters), as libzmq's zmq_curve_keypair and pyzmq's curve_keypair
// print it.
type Key [KeySize]byte

// String renders the key in Z85.
func (k Key) String() string {
	s, _ := Z85Encode(k[:]) // 32 is a multiple of 4: never fails
	return s
}

// IsZero reports whether k is all zero (an unset key).
func (k Key) IsZero() bool { return k == Key{} }

// ParseKey decodes a 40-character Z85 key; surrounding white space is
// ignored.
func ParseKey(s string) (Key, error) {
	var k Key
	s = strings.TrimSpace(s)
	if len(s) != 40 {
		return k, malformed("key must be 40 Z85 characters, got %d", len(s))
	}
	b, err := Z85Decode(s)
	if err != nil {
		return k, err
	}
	copy(k[:], b)
	return k, nil
}

// ParsePublicKey is ParseKey for a peer's public key (an allow-list
// entry): a low-order point — the all-zero key among them — is refused, as
// every handshake with it would be (sharedKey), so that an entry that can
// never work is said when the list is loaded, not at the first handshake.
func ParsePublicKey(s string) (Key, error) {
	k, err := ParseKey(s)
	if err != nil {
		return k, err
	}
	// Any scalar shows it: X25519 clamps it to a multiple of the
	// cofactor, which takes a low-order point to zero, and refuses zero.
	probe := Key{9}
	if _, err := curve25519.X25519(probe[:], k[:]); err != nil {
		return k, malformed("public key %s is a low-order point: no node holds its secret, and no handshake with it can succeed", k)
	}
	return k, nil
}

// KeyPair is a permanent key pair. Printed (fmt's %v, %+v, %#v, %s) or
// logged (slog) it shows its public key only: the secret never reaches a
// log line through it.
type KeyPair struct {
	Public Key
	Secret Key
}

// String shows the public key; the secret is redacted.
func (kp KeyPair) String() string {
	return "KeyPair{Public: " + kp.Public.String() + ", Secret: <redacted>}"
}

// GoString is String for %#v.
func (kp KeyPair) GoString() string { return kp.String() }

// LogValue is the key pair as slog shows it: the public key only.
func (kp KeyPair) LogValue() slog.Value {
	return slog.GroupValue(slog.String("public", kp.Public.String()), slog.String("secret", "<redacted>"))
}

// GenerateKeyPair returns a new permanent key pair from rnd (crypto/rand
// when nil).
func GenerateKeyPair(rnd io.Reader) (KeyPair, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var kp KeyPair
	if _, err := io.ReadFull(rnd, kp.Secret[:]); err != nil {
		return kp, fmt.Errorf("curve: random key: %w", err)
	}
	pub, err := PublicKey(kp.Secret)
	if err != nil {
		return kp, err
	}
	kp.Public = pub
	return kp, nil
}

// PublicKey derives the public key of a secret key.
func PublicKey(secret Key) (Key, error) {
	var k Key
	p, err := curve25519.X25519(secret[:], curve25519.Basepoint)
	if err != nil {
		return k, fmt.Errorf("%w: %v", ErrCrypto, err)
	}
	copy(k[:], p)
	return k, nil
}

// KeyPairFromSecret completes a key pair from its secret half.
func KeyPairFromSecret(secret Key) (KeyPair, error) {
	pub, err := PublicKey(secret)
	return KeyPair{Public: pub, Secret: secret}, err
}

// ErrKeyFileMode: a secret key file readable by group or others.
var ErrKeyFileMode = errors.New("curve: secret key file is accessible by group or others (want mode 0600)")

// ReadSecretKeyFile reads a secret key (Z85, one line) from path. Like
// ssh, it refuses a file that group or others may read or write: a leaked
// secret key lets anyone be this node.
func ReadSecretKeyFile(path string) (Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("curve: secret key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("%w: %s has mode %04o", ErrKeyFileMode, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("curve: secret key file: %w", err)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("curve: secret key file %s: %w", path, err)
	}
	return k, nil
}

// ParseKeyList reads an allow-list: one Z85 public key per line, optionally
// followed by white space and a free-text label (a node name, for people);
// blank lines and lines starting with '#' are skipped. Duplicates are
// harmless.
func ParseKeyList(r io.Reader) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		field, _, _ := strings.Cut(text, " ")
		field, _, _ = strings.Cut(field, "\t")
		k, err := ParsePublicKey(field)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("curve: key list: %w", err)
	}
	return keys, nil
}

// sharedKey is crypto_box_beforenm (nacl/box's Precompute: X25519 then
// HSalsa20) except that it refuses a low-order peer key: with one, the
// shared secret is a known constant, so anybody could forge boxes "from"
// that key — e.g. a vouch from a client key nobody holds. Precompute does
// not check, so X25519 (which does) runs first; the handshake pays the
// scalar multiplication twice, once per connection.
func sharedKey(peer, secret *Key) (*[32]byte, error) {
	if _, err := curve25519.X25519(secret[:], peer[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCrypto, err)
	}
	var out [32]byte
	naclbox.Precompute(&out, (*[32]byte)(peer), (*[32]byte)(secret))
	return &out, nil
}

// boxOverhead is the Poly1305 tag a box adds to its plaintext.
const boxOverhead = secretbox.Overhead

// seal is crypto_box with a precomputed key; open is its inverse.
func seal(out, msg []byte, nonce *[24]byte, key *[32]byte) []byte {
	return secretbox.Seal(out, msg, nonce, key)
}

func open(out, box []byte, nonce *[24]byte, key *[32]byte) ([]byte, error) {
	m, ok := secretbox.Open(out, box, nonce, key)
	if !ok {
		return nil, ErrCrypto
	}
	return m, nil
}

// box seals msg from secret to peer in one go (handshake boxes).
func box(out, msg []byte, nonce *[24]byte, peer, secret *Key) ([]byte, error) {
	k, err := sharedKey(peer, secret)
	if err != nil {
		return nil, err
	}
	return seal(out, msg, nonce, k), nil
}

func unbox(out, b []byte, nonce *[24]byte, peer, secret *Key) ([]byte, error) {
	k, err := sharedKey(peer, secret)
	if err != nil {
		return nil, err
	}
	return open(out, b, nonce, k)
}
