package mesh

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// A message that reaches an object's owner through another node — relayed
// from a move's ingress hold, or passed on by Message Follow (§7.3) — keeps
// its operation id, ObjectGeneration, correlation, payload and reply route;
// only its route fence and hop count change. The node run that originally
// sent it travels in one metadata entry, so that the owner answers a
// request to its requester (portable reply) and sends command 50 there.

// metaOrigin is the metadata key naming the original sender's node run:
// "<lowercase hex RoutingId>/<lifecycle generation>".
const metaOrigin = "meshnode.origin"

// origin is the node run a message was first sent from.
type origin struct {
	rid []byte
	gen uint64
}

func (o origin) String() string {
	return hex.EncodeToString(o.rid) + "/" + strconv.FormatUint(o.gen, 10)
}

func parseOrigin(v string) (origin, error) {
	h, g, ok := strings.Cut(v, "/")
	rid, err := hex.DecodeString(h)
	if !ok || err != nil || len(rid) == 0 || len(rid) > 255 {
		return origin{}, fmt.Errorf("%w: %s %q", ErrInvalidOperation, metaOrigin, v)
	}
	gen, err := strconv.ParseUint(g, 10, 64)
	if err != nil || gen == 0 {
		return origin{}, fmt.Errorf("%w: %s %q", ErrInvalidOperation, metaOrigin, v)
	}
	return origin{rid: rid, gen: gen}, nil
}

// originOf is the node run rec was first sent from: its origin entry, or
// the peer it came from. A malformed entry is refused (typed), never
// guessed.
func originOf(rec *router.Record, from transport.PeerInfo) (origin, error) {
	v, ok, err := metaValue(rec.Metadata, metaOrigin)
	if err != nil {
		return origin{}, err
	}
	if ok {
		return parseOrigin(v)
	}
	return origin{rid: from.RID, gen: from.LifecycleGeneration}, nil
}

// metaValue returns the value of key in a metadata frame (nil: none).
func metaValue(frame []byte, key string) (string, bool, error) {
	if frame == nil {
		return "", false, nil
	}
	entries, err := router.DecodeMetadata(frame)
	if err != nil {
		return "", false, fmt.Errorf("%w: metadata: %w", ErrInvalidOperation, err)
	}
	for _, e := range entries {
		if e.Key == key {
			return e.Value, true, nil
		}
	}
	return "", false, nil
}

// direct reports whether rec came straight from its origin.
func (o origin) direct(from transport.PeerInfo) bool {
	return bytes.Equal(o.rid, from.RID) && o.gen == from.LifecycleGeneration
}

// routeTo is the fence of the node run and owner a message is re-addressed
// to.
type routeTo struct {
	nodeRID                     []byte
	nodeGen, ownerGen, leaseGen uint64
}

// retarget returns a copy of the object message rec (21, 22, 24 or 25)
// addressed to to with hop count hop, carrying org as its origin. The body
// fields other than the fence and hop count, the metadata's other entries
// and the payload are kept as they are.
func retarget(rec *router.Record, to routeTo, hop uint8, org origin) (*router.Record, error) {
	// The switch only copies the body and points at the fields that change
	// (an Actor's or a Spot's fence, the hop count); one path sets them.
	var (
		body  router.Body
		actor *router.ActorRouteFence
		spot  *router.SpotRouteFence
		hops  *uint8
	)
	switch b := rec.Body.(type) {
	case *router.ActorSend:
		c := *b
		body, actor, hops = &c, &c.TargetActor, &c.MessageFollowHopCount
	case *router.ActorRequest:
		c := *b
		body, actor, hops = &c, &c.TargetActor, &c.MessageFollowHopCount
	case *router.SpotSend:
		c := *b
		body, spot, hops = &c, &c.TargetSpot, &c.MessageFollowHopCount
	case *router.SpotRequest:
		c := *b
		body, spot, hops = &c, &c.TargetSpot, &c.MessageFollowHopCount
	default:
		return nil, fmt.Errorf("%w: %s is not an object message", ErrInvalidOperation, rec.Command)
	}
	if actor != nil {
		*actor = actorFence(actor.Actor, to)
	} else {
		*spot = spotFence(spot.Spot, to)
	}
	*hops = hop
	meta, err := withOrigin(rec.Metadata, org)
	if err != nil {
		return nil, err
	}
	return router.NewRecord(body, meta, rec.Payload), nil
}

func actorFence(a router.ActorRef, to routeTo) router.ActorRouteFence {
	return router.ActorRouteFence{Actor: a, TargetNodeRID: to.nodeRID, TargetNodeGeneration: to.nodeGen,
		ExpectedAuthorityOwnerGeneration: to.ownerGen, ExpectedOwnerLeaseGeneration: to.leaseGen}
}

func spotFence(s router.SpotRef, to routeTo) router.SpotRouteFence {
	return router.SpotRouteFence{Spot: s, TargetNodeRID: to.nodeRID, TargetNodeGeneration: to.nodeGen,
		ExpectedAuthorityOwnerGeneration: to.ownerGen, ExpectedOwnerLeaseGeneration: to.leaseGen}
}

// withOrigin sets the origin entry of a metadata frame, keeping the others.
func withOrigin(frame []byte, org origin) ([]byte, error) {
	return withMeta(frame, metaOrigin, org.String())
}

// withMeta sets key to value in a metadata frame, keeping the other
// entries.
func withMeta(frame []byte, key, value string) ([]byte, error) {
	var entries []router.MetadataEntry
	if frame != nil {
		es, err := router.DecodeMetadata(frame)
		if err != nil {
			return nil, fmt.Errorf("%w: metadata: %w", ErrInvalidOperation, err)
		}
		for _, e := range es {
			if e.Key != key {
				entries = append(entries, e)
			}
		}
	}
	entries = append(entries, router.MetadataEntry{Key: key, Value: value})
	meta, err := router.EncodeMetadata(entries)
	if err != nil {
		return nil, fmt.Errorf("%w: metadata with %s: %w", ErrInvalidOperation, key, err)
	}
	return meta, nil
}

// inMessage is the routing view of an object message record.
type inMessage struct {
	fam  opFamily
	id   string
	gen  uint64 // ObjectGeneration of the ref
	to   routeTo
	corr uint64 // 0 for a one-way message
	op   router.OperationID
	hop  uint8
}

// messageOf reads the routing view of a 21, 22, 24 or 25; false for any
// other record.
func messageOf(rec *router.Record) (inMessage, bool) {
	af := func(f router.ActorRouteFence) routeTo {
		return routeTo{nodeRID: f.TargetNodeRID, nodeGen: f.TargetNodeGeneration, ownerGen: f.ExpectedAuthorityOwnerGeneration, leaseGen: f.ExpectedOwnerLeaseGeneration}
	}
	sf := func(f router.SpotRouteFence) routeTo {
		return routeTo{nodeRID: f.TargetNodeRID, nodeGen: f.TargetNodeGeneration, ownerGen: f.ExpectedAuthorityOwnerGeneration, leaseGen: f.ExpectedOwnerLeaseGeneration}
	}
	switch b := rec.Body.(type) {
	case *router.ActorSend:
		return inMessage{fam: familyActor, id: b.TargetActor.Actor.ActorID, gen: b.TargetActor.Actor.ObjectGeneration,
			to: af(b.TargetActor), op: b.Operation, hop: b.MessageFollowHopCount}, true
	case *router.ActorRequest:
		return inMessage{fam: familyActor, id: b.TargetActor.Actor.ActorID, gen: b.TargetActor.Actor.ObjectGeneration,
			to: af(b.TargetActor), corr: b.Correlation, op: b.Operation, hop: b.MessageFollowHopCount}, true
	case *router.SpotSend:
		return inMessage{fam: familySpot, id: b.TargetSpot.Spot.SpotID, gen: b.TargetSpot.Spot.ObjectGeneration,
			to: sf(b.TargetSpot), op: b.Operation, hop: b.MessageFollowHopCount}, true
	case *router.SpotRequest:
		return inMessage{fam: familySpot, id: b.TargetSpot.Spot.SpotID, gen: b.TargetSpot.Spot.ObjectGeneration,
			to: sf(b.TargetSpot), corr: b.Correlation, op: b.Operation, hop: b.MessageFollowHopCount}, true
	}
	return inMessage{}, false
}
