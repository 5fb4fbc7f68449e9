package record

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Logical key preimages (spec §3.4). Values are UTF-8 bytes concatenated
// as-is, separated by a single \0 byte; only the \0 fixes the boundaries,
// which is why no value may contain one. RoutingIds appear as lowercase hex
// of their raw bytes.

// MeshNodePreimage is mesh-node\0{MeshName}\0{hex(RoutingId)}.
func MeshNodePreimage(meshName string, routingID []byte) ([]byte, error) {
	if err := textErr(KindMeshNode, "meshName", meshName, MaxNameBytes); err != nil {
		return nil, err
	}
	if r := checkRoutingID(routingID); r != "" {
		return nil, &FieldError{Kind: KindMeshNode, Field: "routingId", Reason: r}
	}
	return join(string(KindMeshNode), meshName, hex.EncodeToString(routingID)), nil
}

// OwnerLeasePreimage is owner-lease\0{OwnerId}.
func OwnerLeasePreimage(ownerID string) ([]byte, error) {
	if err := textErr(KindOwnerLease, "ownerId", ownerID, MaxNameBytes); err != nil {
		return nil, err
	}
	return join(string(KindOwnerLease), ownerID), nil
}

// ownerLeaseKey is Key(OwnerLeasePreimage(ownerID)) with the preimage on
// the stack.
func ownerLeaseKey(ownerID string) (string, error) {
	if err := textErr(KindOwnerLease, "ownerId", ownerID, MaxNameBytes); err != nil {
		return "", err
	}
	var buf [stackPreimage]byte
	return Key(appendJoin(buf[:0], string(KindOwnerLease), ownerID)), nil
}

// ClientServerPreimage is client-server\0{ChannelName}\0{hex(RoutingId)}.
func ClientServerPreimage(channelName string, serverRoutingID []byte) ([]byte, error) {
	return channelPreimage(KindClientServer, channelName, serverRoutingID)
}

// FanoutPublisherPreimage is fanout-publisher\0{ChannelName}\0{hex(RoutingId)}.
func FanoutPublisherPreimage(channelName string, publisherRoutingID []byte) ([]byte, error) {
	return channelPreimage(KindFanoutPublisher, channelName, publisherRoutingID)
}

func channelPreimage(kind Kind, channelName string, rid []byte) ([]byte, error) {
	if err := textErr(kind, "channelName", channelName, MaxNameBytes); err != nil {
		return nil, err
	}
	if r := checkRoutingID(rid); r != "" {
		return nil, &FieldError{Kind: kind, Field: "routingId", Reason: r}
	}
	return join(string(kind), channelName, hex.EncodeToString(rid)), nil
}

// AuthorityPreimage is authority\0{actor|spot}\0{Id}. The same Id is a
// different key for an actor and for a spot; Ids differing only in case or
// Unicode normalisation are different keys.
func AuthorityPreimage(kind IdentityKind, id string) ([]byte, error) {
	if err := checkAuthorityKey(kind, id); err != nil {
		return nil, err
	}
	return join(string(KindAuthority), string(kind), id), nil
}

func checkAuthorityKey(kind IdentityKind, id string) error {
	if kind != IdentityActor && kind != IdentitySpot {
		return &FieldError{Kind: KindAuthority, Field: "kind", Reason: "must be actor or spot, got " + quote(string(kind))}
	}
	return textErr(KindAuthority, "id", id, MaxIDBytes)
}

// CounterName names one of the framework's counters in the Location Store.
// Counters are project-specific: spec §3.4 does not list them (02 §8, which
// does, is not part of this project's material). See docs/RECORDS.md.
type CounterName string

// Counters. The value is the part of the preimage after "counter\0".
const (
	// CounterObjectGeneration is the store-wide ObjectGeneration sequence
	// (spec §3.4: issued from one Store-wide monotonic sequence).
	CounterObjectGeneration CounterName = "object-generation"
	// CounterLeaseGeneration is the single global LeaseGeneration counter
	// (spec §3.1); OwnerIds are never reused, so a per-owner counter would
	// not distinguish anything.
	CounterLeaseGeneration CounterName = "lease-generation"
	// CounterMeshNodeDescriptors, CounterClientServerDescriptors and
	// CounterFanoutPublisherDescriptors are the descriptor-list change
	// numbers read before and after a descriptor page walk (spec §4), one per
	// descriptor kind so that a fanout change does not restart a MeshNode
	// topology read.
	CounterMeshNodeDescriptors        CounterName = "descriptor-change\x00mesh-node"
	CounterClientServerDescriptors    CounterName = "descriptor-change\x00client-server"
	CounterFanoutPublisherDescriptors CounterName = "descriptor-change\x00fanout-publisher"
)

// CounterNames returns every counter name, in a fixed order (a fresh slice
// each call, so callers cannot change the package's list).
func CounterNames() []CounterName {
	return []CounterName{
		CounterObjectGeneration,
		CounterLeaseGeneration,
		CounterMeshNodeDescriptors,
		CounterClientServerDescriptors,
		CounterFanoutPublisherDescriptors,
	}
}

// DescriptorCounter returns the change-number counter of a descriptor kind.
func DescriptorCounter(kind Kind) (CounterName, error) {
	switch kind {
	case KindMeshNode:
		return CounterMeshNodeDescriptors, nil
	case KindClientServer:
		return CounterClientServerDescriptors, nil
	case KindFanoutPublisher:
		return CounterFanoutPublisherDescriptors, nil
	}
	return "", &FieldError{Kind: KindCounter, Field: "kind", Reason: quote(string(kind)) + " is not a descriptor kind"}
}

// CounterPreimage is counter\0{name}, for example counter\0object-generation.
func CounterPreimage(name CounterName) ([]byte, error) {
	for _, c := range CounterNames() {
		if c == name {
			return join(string(KindCounter), string(name)), nil
		}
	}
	return nil, &FieldError{Kind: KindCounter, Field: "counter", Reason: "unknown counter " + quote(string(name))}
}

// Key is the store key of a preimage: the record kind (the preimage's first
// segment, e.g. "mesh-node"), a colon, and the lowercase hex SHA-256 of the
// whole preimage (64 characters), e.g. "authority:644fc59a…c750". This is the
// key the framework passes to the Location Store SPI; a provider may prefix
// it (see RedisKey).
//
// Why the kind segment: the Location Store SPI lists keys by prefix only, so
// discovery (§4, every MeshNode descriptor) and the operational list (§7.4,
// every authority) scan "mesh-node:" or "authority:" instead of the whole
// namespace. The digest stays the key's last segment, as §3.4 requires.
func Key(preimage []byte) string {
	kind := preimage
	for i, b := range preimage {
		if b == 0 {
			kind = preimage[:i]
			break
		}
	}
	sum := sha256.Sum256(preimage)
	var digest [2 * sha256.Size]byte
	hex.Encode(digest[:], sum[:])
	// One allocation: every operation computes several keys.
	var b strings.Builder
	b.Grow(len(kind) + 1 + len(digest))
	b.Write(kind)
	b.WriteByte(':')
	b.Write(digest[:])
	return b.String()
}

// KindPrefix is the store-key prefix shared by every record of a kind, for
// Location Store scans: "mesh-node:", "authority:", ...
func KindPrefix(kind Kind) string { return string(kind) + ":" }

// RedisKey is the full Redis key the official Redis Location Store provider
// uses for a record: "{" + namespace + "}:k:" + Key(preimage), for example
// "{meshnode}:k:authority:644fc59a…c750". The braces are
// a Redis Cluster hash tag, so every key of a namespace lives in one slot
// and a batch write is single-slot. The namespace is the provider's
// configuration (this project's default is "meshnode"); validating it is the
// provider's job.
func RedisKey(namespace string, preimage []byte) string {
	return "{" + namespace + "}:k:" + Key(preimage)
}

// Convenience: the store key (Key of the preimage) of each record.

// MeshNodeKey is Key(MeshNodePreimage(meshName, routingID)).
func MeshNodeKey(meshName string, routingID []byte) (string, error) {
	return keyOf(MeshNodePreimage(meshName, routingID))
}

// OwnerLeaseKey is Key(OwnerLeasePreimage(ownerID)).
func OwnerLeaseKey(ownerID string) (string, error) { return ownerLeaseKey(ownerID) }

// ClientServerKey is Key(ClientServerPreimage(channelName, serverRoutingID)).
func ClientServerKey(channelName string, serverRoutingID []byte) (string, error) {
	return keyOf(ClientServerPreimage(channelName, serverRoutingID))
}

// FanoutPublisherKey is Key(FanoutPublisherPreimage(channelName, publisherRoutingID)).
func FanoutPublisherKey(channelName string, publisherRoutingID []byte) (string, error) {
	return keyOf(FanoutPublisherPreimage(channelName, publisherRoutingID))
}

// AuthorityKey is Key(AuthorityPreimage(kind, id)), with the preimage on
// the stack: every authority operation computes it.
func AuthorityKey(kind IdentityKind, id string) (string, error) {
	if err := checkAuthorityKey(kind, id); err != nil {
		return "", err
	}
	var buf [stackPreimage]byte
	return Key(appendJoin(buf[:0], string(KindAuthority), string(kind), id)), nil
}

// CounterKey is Key(CounterPreimage(name)).
func CounterKey(name CounterName) (string, error) { return keyOf(CounterPreimage(name)) }

func keyOf(preimage []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return Key(preimage), nil
}

func join(parts ...string) []byte {
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p)
	}
	return appendJoin(make([]byte, 0, n), parts...)
}

// appendJoin appends parts separated by NUL bytes to b.
func appendJoin(b []byte, parts ...string) []byte {
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}

// stackPreimage is the size of the stack buffer a key function builds its
// preimage in before hashing it (a longer one moves to the heap): the
// preimage is only hashed, so keeping it would cost an allocation per key.
const stackPreimage = 192
