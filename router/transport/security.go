package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// This file is link security: CURVE (package curve) on every connection
// when Config.Curve is set, and the rule binding a node's identity to its
// key.
//
// Identity ↔ key binding. With CURVE a node's RID is derived from its
// permanent public key: CurveRID(pub) = 'C' ‖ pub (33 bytes). Hence
//   - a server accepts a connection only if the client's ZMTP identity is
//     CurveRID of the key the client proved in its vouch, and the key is in
//     the allow-list; every record on the connection, the hello included,
//     travels in that connection's boxes, so the hello's RID is the key's
//     RID and a forged hello (another node's RID) is impossible;
//   - a client dialling RID r takes the server's key from r (KeyFromRID)
//     and refuses r if that key is not allowed; the CURVE handshake then
//     proves the server holds the secret of r's key, so the ROUTER reached
//     is r or the handshake fails.
// No table maps keys to RIDs, so there is nothing to keep in sync: the
// allow-list of public keys is the whole trust configuration, and a
// descriptor's routingIdHex names the key to use.

// ErrSecurity is matched by a CURVE violation on an established connection
// (a MESSAGE that does not open, a replayed nonce, bad flags): counted as a
// protocol error of the peer; the connection is closed.
var ErrSecurity = errors.New("transport: CURVE security violation")

// ErrUntrustedPeer: with CURVE, the peer's RID is not a CURVE RID or its key
// is not in the allow-list; we neither dial it nor accept it.
var ErrUntrustedPeer = errors.New("transport: peer key not trusted")

// CurveConfig enables CURVE (ZMTP RFC 25/26) on every connection of the
// Node, inbound and outbound; a node with it set speaks only CURVE, so a
// plain (NULL) peer cannot connect to it and it cannot connect to one.
type CurveConfig struct {
	// KeyPair is the node's permanent key pair. The node's RID is
	// CurveRID(KeyPair.Public).
	KeyPair curve.KeyPair
	// AllowedKeys are the public keys of the nodes this node talks to, in
	// both directions (a mesh-wide trusted set: one list for every node
	// may include the node's own key). Must not be empty.
	AllowedKeys []curve.Key
}

// curveRIDTag starts every CURVE RID; nonzero, as ZeroMQ requires of
// identities, whatever the key's first byte.
const curveRIDTag = 'C'

// CurveRID is the RID of the node whose permanent public key is pub.
func CurveRID(pub curve.Key) RID {
	return append(RID{curveRIDTag}, pub[:]...)
}

// KeyFromRID is the inverse of CurveRID; ok is false for other RIDs.
func KeyFromRID(r RID) (k curve.Key, ok bool) {
	if len(r) != 1+curve.KeySize || r[0] != curveRIDTag {
		return k, false
	}
	copy(k[:], r[1:])
	return k, true
}

// curveParams is the link layer's view of CurveConfig.
type curveParams struct {
	kp      curve.KeyPair
	allowed map[curve.Key]struct{}
}

func newCurveParams(c *CurveConfig) (*curveParams, error) {
	if c == nil {
		return nil, nil
	}
	pub, err := curve.PublicKey(c.KeyPair.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: curve secret key: %v", ErrConfig, err)
	}
	if c.KeyPair.Public != pub {
		return nil, fmt.Errorf("%w: curve public key %s does not belong to the secret key (its public key is %s)", ErrConfig, c.KeyPair.Public, pub)
	}
	if len(c.AllowedKeys) == 0 {
		return nil, fmt.Errorf("%w: curve needs a non-empty allow-list of peer keys", ErrConfig)
	}
	p := &curveParams{kp: c.KeyPair, allowed: make(map[curve.Key]struct{}, len(c.AllowedKeys))}
	for _, k := range c.AllowedKeys {
		p.allowed[k] = struct{}{}
	}
	return p, nil
}

func (p *curveParams) authorize(k curve.Key) error {
	if _, ok := p.allowed[k]; !ok {
		return ErrUntrustedPeer
	}
	return nil
}

// serverMechanism and clientMechanism return the per-connection handshake;
// nil when CURVE is off (NULL mechanism).
func (p *curveParams) serverMechanism() *curve.Mechanism {
	if p == nil {
		return nil
	}
	return curve.NewMechanism(curve.Config{KeyPair: p.kp, Authorize: p.authorize})
}

func (p *curveParams) clientMechanism(peer RID) (*curve.Mechanism, error) {
	if p == nil {
		return nil, nil
	}
	k, ok := KeyFromRID(peer)
	if !ok {
		return nil, fmt.Errorf("%w: RID %s is not a CURVE RID ('C' and a 32-byte key)", ErrUntrustedPeer, peer)
	}
	if err := p.authorize(k); err != nil {
		return nil, fmt.Errorf("%w: %s (RID %s)", err, k, peer)
	}
	return curve.NewMechanism(curve.Config{KeyPair: p.kp, ServerKey: k}), nil
}

// checkBinding enforces, on an inbound CURVE connection, that the ZMTP
// identity is the RID of the authenticated key.
func checkBinding(zc *zconn) error {
	if zc.sess == nil {
		return nil
	}
	if want := CurveRID(zc.peerKey); string(zc.ident) != string(want) {
		return fmt.Errorf("%w: identity %s is not the RID %s of its CURVE key %s", ErrIdentityMismatch, RID(zc.ident), want, zc.peerKey)
	}
	return nil
}

// isLoopbackEndpoint reports whether a tcp:// endpoint binds loopback only
// ("*", an empty host, 0.0.0.0 and names other than localhost are not).
func isLoopbackEndpoint(ep string) bool {
	addr, err := splitEndpoint(ep)
	if err != nil {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// isProtocolViolation: the peer broke the protocol on an established
// connection (counted as its protocol error), as opposed to a failed
// handshake.
func isProtocolViolation(err error) bool {
	return errors.Is(err, ErrFraming) || errors.Is(err, errZMTPPanic) || errors.Is(err, ErrSecurity)
}
