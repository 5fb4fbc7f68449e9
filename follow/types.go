package follow

import (
	"fmt"
	"unicode/utf8"
)

// Kind is the authority object kind. The values equal the wire's
// authority-object-kind (router.ObjectActor, router.ObjectSpot) so the caller
// can convert with a plain type conversion.
type Kind uint8

// Object kinds.
const (
	KindActor Kind = 1
	KindSpot  Kind = 2
)

// String returns "actor", "spot" or "kind(N)".
func (k Kind) String() string {
	switch k {
	case KindActor:
		return "actor"
	case KindSpot:
		return "spot"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Key identifies one object: an ActorId and a SpotId may be equal strings,
// so the kind is part of the key.
type Key struct {
	Kind Kind
	ID   string // ActorId or SpotId: UTF-8, 1..MaxIDBytes bytes, exact match
}

// String returns "kind/id" for logs and error messages.
func (k Key) String() string { return k.Kind.String() + "/" + k.ID }

// Limits taken from the spec and the wire format.
const (
	// MaxIDBytes is the longest ActorId/SpotId (spec §3.3).
	MaxIDBytes = 255
	// MaxRIDBytes is the longest node routing ID (wire: rid, 1..255 bytes).
	MaxRIDBytes = 255
	// MaxGeneration is the highest issued ObjectGeneration and
	// AuthorityOwnerGeneration: 2^63-1 is the exhausted sentinel and is
	// never issued (spec §3.2).
	MaxGeneration = 1<<63 - 2
	// MaxHops is the most times one message is forwarded (spec §7.3).
	MaxHops = 8
)

// Owner is the owner lease a route was read under: the host run that owns
// the object (spec §3.1).
type Owner struct {
	ID              string // OwnerId
	LeaseGeneration uint64 // OwnerLeaseGeneration, nonzero
}

// Route is where the owning node run is reached.
type Route struct {
	// NodeRID is the target node's routing ID (1..MaxRIDBytes bytes). Values
	// handed out by this package share their backing array with the stored
	// entry: treat them as read-only. Stored values are copies of the input.
	NodeRID []byte
	// NodeGeneration is the target node's run (lifecycle) generation, the
	// TargetNodeGeneration of a route fence; nonzero.
	NodeGeneration uint64
	// Endpoint is the address the caller dials (for example
	// "tcp://10.0.0.7:7400"). It is carried, not interpreted; it may be
	// empty when the caller resolves the endpoint from the RID.
	Endpoint string
}

func (k Key) validate() error {
	if k.Kind != KindActor && k.Kind != KindSpot {
		return fmt.Errorf("%w: object kind %s", ErrInvalidArgument, k.Kind)
	}
	if n := len(k.ID); n == 0 || n > MaxIDBytes {
		return fmt.Errorf("%w: %s id is %d bytes, want 1..%d", ErrInvalidArgument, k.Kind, n, MaxIDBytes)
	}
	if !utf8.ValidString(k.ID) {
		return fmt.Errorf("%w: %s id %q is not valid UTF-8", ErrInvalidArgument, k.Kind, k.ID)
	}
	return nil
}

func validGeneration(name string, g uint64) error {
	if g == 0 || g > MaxGeneration {
		return fmt.Errorf("%w: %s %d out of range 1..%d", ErrInvalidArgument, name, g, uint64(MaxGeneration))
	}
	return nil
}

func (o Owner) validate() error {
	if o.ID == "" {
		return fmt.Errorf("%w: empty OwnerId", ErrInvalidArgument)
	}
	if o.LeaseGeneration == 0 || o.LeaseGeneration > MaxGeneration {
		return fmt.Errorf("%w: OwnerLeaseGeneration %d out of range 1..%d", ErrInvalidArgument, o.LeaseGeneration, uint64(MaxGeneration))
	}
	return nil
}

func (r Route) validate() error {
	if n := len(r.NodeRID); n == 0 || n > MaxRIDBytes {
		return fmt.Errorf("%w: node RID is %d bytes, want 1..%d", ErrInvalidArgument, n, MaxRIDBytes)
	}
	if r.NodeGeneration == 0 {
		return fmt.Errorf("%w: node run generation 0", ErrInvalidArgument)
	}
	return nil
}

// clone returns r with its own copy of NodeRID, so a caller reusing its
// buffer cannot change a stored route.
func (r Route) clone() Route {
	r.NodeRID = append([]byte(nil), r.NodeRID...)
	return r
}

// newer reports whether generation pair (objA, ownA) is strictly later than
// (objB, ownB). ObjectGeneration comes from a store-wide increasing sequence,
// so a higher one is a later object; within one object the owner generation
// orders owner changes (spec §3.2).
func newer(objA, ownA, objB, ownB uint64) bool {
	if objA != objB {
		return objA > objB
	}
	return ownA > ownB
}
