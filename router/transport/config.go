package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/meshnode/meshnode/router"
)

// RID is a node's RoutingId: 1..255 raw bytes, used as the ZMTP socket
// identity of every DEALER the node opens, so a peer's ROUTER can address
// replies to it.
type RID []byte

// String renders the RID in hex (RIDs are raw bytes, not text).
func (r RID) String() string { return hex.EncodeToString(r) }

// Equal reports byte equality.
func (r RID) Equal(o RID) bool { return string(r) == string(o) }

// NewRandomRID returns a random 16-byte RID. The first byte is never zero:
// libzmq reserves identities starting with 0x00 for the ones it generates.
func NewRandomRID() (RID, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("transport: random RID: %w", err)
	}
	if b[0] == 0 {
		b[0] = 1
	}
	return b, nil
}

func validRID(r []byte) error {
	if len(r) < 1 || len(r) > router.RIDBytes {
		return fmt.Errorf("RID must be 1..%d bytes, got %d", router.RIDBytes, len(r))
	}
	if r[0] == 0 {
		return fmt.Errorf("RID must not start with a zero byte (reserved by ZeroMQ)")
	}
	return nil
}

// Handler receives every inbound application or framework record from an
// admitted peer (infrastructure records — hello, admit, reject, liveness —
// are handled by the transport and never delivered). It is called on the
// peer's connection goroutine, one record at a time, in the order the peer
// sent them; a slow handler slows only that peer (TCP flow control), never
// others. reply sends a record back to the sender on the same connection
// (ROUTER → sender identity); it never blocks and fails with ErrBackpressure
// or ErrPeerDown. rec aliases the received frames and stays valid after the
// call returns (the transport does not reuse them).
type Handler func(ctx context.Context, from PeerInfo, rec *router.Record, reply func(*router.Record) error)

// Config configures a Node. Zero durations and sizes take the defaults noted.
type Config struct {
	// RID is this node's RoutingId; nil means a random one (NewRandomRID).
	RID RID
	// Endpoint is where the ROUTER binds: "tcp://host:port" (port 0 picks a
	// free port; Node.Endpoint reports the real one).
	Endpoint string
	// AdvertisedEndpoint is the endpoint sent in hello/admit; empty means the
	// bound endpoint with its real port.
	AdvertisedEndpoint string

	// Admission identity (route-mesh-admission). A peer with another mesh
	// name or security identity is rejected.
	MeshName         string
	SecurityIdentity string
	// LifecycleGeneration (nonzero) names this node run; a restart with
	// the same RID should present a higher one (the mesh takes its lease's
	// generation): a lower one is refused as stale. (An equal one is
	// admitted; what peers delivered of the earlier process's numbered
	// messages does not apply to it, router.LinkSequence.Run.)
	LifecycleGeneration uint64
	DescriptorRevision  uint64 // nonzero: the published descriptor's revision
	// Admission optionally supplies the rest of the route-mesh admission
	// (channels, descriptor extension: runtime state, capacity, ...). Its
	// mesh name, security identity, generation, revision and endpoint are
	// overwritten from the fields above. Nil: neutral defaults.
	Admission *router.RouteMeshAdmission
	// Capabilities are protocol capabilities this node lists beside
	// router.RequiredProtocolCapability when Admission is nil (peers read
	// them with PeerInfo.Has): what a peer of another version must know
	// before it is sent a project message it would otherwise misread.
	Capabilities []string

	// Liveness (schema livenessProfile): a probe every ProbeInterval (5 s)
	// whether or not there is traffic; the peer is down after PeerTimeout
	// (15 s) without the ack of the outstanding probe.
	ProbeInterval time.Duration
	PeerTimeout   time.Duration
	// RequestTimeout is the deadline of a Request whose context has none
	// (default 30 s).
	RequestTimeout time.Duration
	// HandshakeTimeout bounds the ZMTP handshake and hello→admit (5 s).
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one stalled flush to a peer (default PeerTimeout).
	WriteTimeout time.Duration
	// PortableGrace is how long a portable request whose connection was
	// lost still waits for its reply from another node (a previous owner
	// that passed it on and then stopped, spec §7.3) before it fails with
	// ErrPeerDown (default 2 s).
	PortableGrace time.Duration
	// KeepUnsent is how long the one-way application messages a link had
	// not sent when its connection ended wait for its next connection to
	// the same peer run (default twice PeerTimeout; see Node.keepUnsent).
	KeepUnsent time.Duration
	// ReconnectMin/ReconnectMax bound the exponential redial backoff
	// (100 ms, 5 s).
	ReconnectMin time.Duration
	ReconnectMax time.Duration

	// SendQueueRecords / SendQueueBytes bound each peer connection's send
	// queue (1024 records, 64 MiB); the reply queue of an inbound connection
	// has the same bounds.
	SendQueueRecords int
	SendQueueBytes   int64
	// MaxFrameBytes bounds one ZMTP frame a peer may send (64 MiB + 64 KiB,
	// enough for a relocation chunk and its envelope); MaxMessageBytes bounds
	// all frames of one message (2×MaxFrameBytes); MaxFramesPerMessage (16).
	// Values above MaxFrameBytesLimit (1 GiB) and MaxMessageBytesLimit
	// (2 GiB) are refused by New with a *LimitError.
	MaxFrameBytes       uint64
	MaxMessageBytes     uint64
	MaxFramesPerMessage int
	// MaxInboundConns bounds concurrent inbound connections, handshaking
	// ones included (4096).
	MaxInboundConns int
	// MaxUnadmitted bounds inbound connections that have not completed
	// hello (ZMTP handshake included); a connection accepted beyond it is
	// closed at once (64) — unless its source address holds fewer of them
	// than the address holding most: then that address's oldest is closed
	// instead (docs/TRANSPORT.md "Limits before admission"). Until its hello is admitted a connection may send
	// only hello-sized messages (router.HelloMaxFrameBytes) and must say
	// hello within HandshakeTimeout of its ZMTP handshake.
	MaxUnadmitted int
	// MaxPeers bounds admitted inbound peers (distinct RIDs); a hello from a
	// new RID beyond it is rejected with resourceLimit (1024).
	MaxPeers int
	// IOBufferBytes is the read and write buffer per connection
	// (DefaultIOBufferBytes).
	IOBufferBytes int

	// Curve enables CURVE authentication and encryption on every
	// connection (security.go); nil: the NULL mechanism (no
	// authentication, no encryption). With it, RID nil means
	// CurveRID(Curve.KeyPair.Public), and any other RID is refused.
	Curve *CurveConfig
	curve *curveParams // derived by withDefaults

	// Handler receives inbound records (nil: they are dropped and counted).
	Handler Handler
	// UnawaitedReady receives a relocationReady (53) from peer from that
	// no call awaits: the Restore request's call already has its answer.
	// A target that answered relay-ready and then stopped sends a second
	// one, failed, once its owner sweep made the move unable to commit
	// (docs/RELOCATION.md §9), so that its source stops waiting for the
	// commit at once. It reports whether it took the record; one it does
	// not take (or with none set) is counted late and dropped, as any late
	// reply. Called on the connection's reader: it must not block.
	UnawaitedReady func(from RID, rec *router.Record) bool
	// OnEvent receives peer events; it is called synchronously from the
	// goroutine that observed the change and must not block for long.
	OnEvent func(Event)
	// Clock drives liveness and request deadlines (default SystemClock).
	Clock Clock
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&out.ProbeInterval, 5*time.Second)
	def(&out.PeerTimeout, 15*time.Second)
	def(&out.RequestTimeout, 30*time.Second)
	def(&out.HandshakeTimeout, 5*time.Second)
	def(&out.WriteTimeout, out.PeerTimeout)
	def(&out.PortableGrace, 2*time.Second)
	def(&out.KeepUnsent, 2*out.PeerTimeout)
	def(&out.ReconnectMin, 100*time.Millisecond)
	def(&out.ReconnectMax, 5*time.Second)
	if out.SendQueueRecords <= 0 {
		out.SendQueueRecords = 1024
	}
	if out.SendQueueBytes <= 0 {
		out.SendQueueBytes = 64 << 20
	}
	if out.MaxFrameBytes == 0 {
		out.MaxFrameBytes = 64<<20 + 64<<10
	}
	if out.MaxFrameBytes > MaxFrameBytesLimit {
		// Checked before the message bound is derived from it: twice a
		// value near 2^64 wrapped to a small one.
		return out, &LimitError{Field: "MaxFrameBytes", Value: out.MaxFrameBytes, Max: MaxFrameBytesLimit}
	}
	if out.MaxMessageBytes == 0 {
		out.MaxMessageBytes = 2 * out.MaxFrameBytes
	}
	if out.MaxMessageBytes > MaxMessageBytesLimit {
		return out, &LimitError{Field: "MaxMessageBytes", Value: out.MaxMessageBytes, Max: MaxMessageBytesLimit}
	}
	if out.MaxFramesPerMessage <= 0 {
		out.MaxFramesPerMessage = 16
	}
	if out.MaxInboundConns <= 0 {
		out.MaxInboundConns = 4096
	}
	if out.MaxUnadmitted <= 0 {
		out.MaxUnadmitted = DefaultMaxUnadmitted
	}
	if out.MaxPeers <= 0 {
		out.MaxPeers = DefaultMaxPeers
	}
	if out.IOBufferBytes <= 0 {
		out.IOBufferBytes = DefaultIOBufferBytes
	}
	if out.Clock == nil {
		out.Clock = SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	var errs []string
	if out.Curve != nil {
		p, err := newCurveParams(out.Curve)
		if err != nil {
			return out, err
		}
		out.curve = p
		want := CurveRID(out.Curve.KeyPair.Public)
		if out.RID == nil {
			out.RID = want
		} else if !out.RID.Equal(want) {
			errs = append(errs, fmt.Sprintf("with CURVE the RID must be %s, derived from the public key (got %s)", want, out.RID))
		}
	}
	if out.RID == nil {
		r, err := NewRandomRID()
		if err != nil {
			return out, err
		}
		out.RID = r
	}
	if err := validRID(out.RID); err != nil {
		errs = append(errs, err.Error())
	}
	if !strings.HasPrefix(out.Endpoint, "tcp://") {
		errs = append(errs, fmt.Sprintf("endpoint %q: only tcp://host:port is supported", out.Endpoint))
	}
	if out.MeshName == "" || len(out.MeshName) > router.ShortTextBytes {
		errs = append(errs, "mesh name must be 1..255 bytes")
	}
	if out.SecurityIdentity == "" || len(out.SecurityIdentity) > router.ShortTextBytes {
		errs = append(errs, "security identity must be 1..255 bytes")
	}
	if out.LifecycleGeneration == 0 || out.LifecycleGeneration > router.MaxGeneration {
		errs = append(errs, "lifecycle generation must be 1..2^63-1")
	}
	if out.DescriptorRevision == 0 || out.DescriptorRevision > router.MaxGeneration {
		errs = append(errs, "descriptor revision must be 1..2^63-1")
	}
	if out.PeerTimeout < out.ProbeInterval {
		errs = append(errs, "peer timeout must not be shorter than the probe interval")
	}
	if out.ReconnectMax < out.ReconnectMin {
		errs = append(errs, "reconnect max must not be below reconnect min")
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	return out, nil
}

func (c *Config) limits() frameLimits {
	return frameLimits{
		maxFrame:   c.MaxFrameBytes,
		maxMessage: c.MaxMessageBytes,
		maxFrames:  c.MaxFramesPerMessage,
		maxCommand: 64 << 10,
	}
}
