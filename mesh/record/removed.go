package record

import (
	"encoding/hex"
	"strconv"
)

// RemovedMeshNode is what is left, for operators, of a host run whose
// MeshNode descriptor one of its watchers removed: it found the run's owner
// lease ended while the run's links were still up (a process paused past
// its lease TTL, or cut off from the store), and removing the descriptor is
// how every other node learns to stop using the run (docs/DISCOVERY.md
// "Watching"). Written in the removing batch with a retention (the
// descriptor reclaim age), under RemovedMeshNodePreimage of the same mesh
// and RoutingID, so that "meshnode ctl topology" can still show the run,
// as removed, instead of nothing. Discovery never reads it. The format is
// project-specific.
type RemovedMeshNode struct {
	// Descriptor is the descriptor as it was stored when removed (without
	// its lists when Trimmed).
	Descriptor MeshNodeDescriptor
	// Trimmed reports that Descriptor's ObjectCapabilities,
	// Capacity.SpotTypes and ChannelWeights were left out: with them the
	// record would not have fitted MaxValueBytes.
	Trimmed bool
	// RemovedAt is the store time of the lease read that found the lease
	// ended, the read the removing batch was planned from.
	RemovedAt EpochMillis
	// RemovedByOwnerID and RemovedByRoutingID name the watcher run that
	// removed it.
	RemovedByOwnerID   string
	RemovedByRoutingID []byte
}

// RemovedMeshNodePreimage is removed-mesh-node\0{MeshName}\0{hex(RoutingId)}:
// one record per mesh and RoutingID, the descriptor's own key inputs.
func RemovedMeshNodePreimage(meshName string, routingID []byte) ([]byte, error) {
	if err := textErr(KindRemovedMeshNode, "meshName", meshName, MaxNameBytes); err != nil {
		return nil, err
	}
	if r := checkRoutingID(routingID); r != "" {
		return nil, &FieldError{Kind: KindRemovedMeshNode, Field: "routingId", Reason: r}
	}
	return join(string(KindRemovedMeshNode), meshName, hex.EncodeToString(routingID)), nil
}

// RemovedMeshNodeKey is Key(RemovedMeshNodePreimage(meshName, routingID)).
func RemovedMeshNodeKey(meshName string, routingID []byte) (string, error) {
	return keyOf(RemovedMeshNodePreimage(meshName, routingID))
}

// Preimage is RemovedMeshNodePreimage of the removed descriptor.
func (r RemovedMeshNode) Preimage() ([]byte, error) {
	return RemovedMeshNodePreimage(r.Descriptor.MeshName, r.Descriptor.RoutingID)
}

func (r *RemovedMeshNode) validate() error {
	if err := r.Descriptor.validate(); err != nil {
		return err
	}
	v := &val{kind: KindRemovedMeshNode}
	v.millis("removedAtEpochMs", r.RemovedAt)
	v.name("removedByOwnerId", r.RemovedByOwnerID)
	v.routingID("removedByRoutingIdHex", r.RemovedByRoutingID)
	return v.err
}

// Validate checks every field, the descriptor's included, and the encoded
// size.
func (r RemovedMeshNode) Validate() error {
	_, err := r.Encode()
	return err
}

// Encode returns the canonical JSON value
// {"descriptorRecord":{…the descriptor record…},"recordVersion":1,
// "removedAtEpochMs":"…","removedByOwnerId":"…","removedByRoutingIdHex":"…",
// "trimmed":false}. A record over MaxValueBytes is a *LimitError: the
// writer then trims the descriptor's lists (Trimmed).
func (r RemovedMeshNode) Encode() ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	desc, err := r.Descriptor.value()
	if err != nil {
		return nil, err
	}
	root := jObjV(
		mem("descriptorRecord", desc),
		mem("recordVersion", jUintV(RecordVersion)),
		mem("removedAtEpochMs", jDecStrV(uint64(r.RemovedAt))),
		mem("removedByOwnerId", jStrV(r.RemovedByOwnerID)),
		mem("removedByRoutingIdHex", jStrV(hex.EncodeToString(r.RemovedByRoutingID))),
		mem("trimmed", jBoolV(r.Trimmed)),
	)
	return finish(KindRemovedMeshNode, encodeCanonical(root))
}

// DecodeRemovedMeshNode reads a removal record, its nested descriptor
// record with the same rules as DecodeMeshNode.
func DecodeRemovedMeshNode(value []byte) (RemovedMeshNode, error) {
	d, top, err := begin(KindRemovedMeshNode, value)
	if err != nil {
		return RemovedMeshNode{}, err
	}
	defer d.release()
	var r RemovedMeshNode
	env := top.child("descriptorRecord")
	if v := env.get("recordVersion"); d.err == nil && (v.t != jNumber || v.s != strconv.Itoa(RecordVersion)) {
		d.setErr(&UnknownVersionError{Kind: KindMeshNode, Version: shorten(string(appendCanonical(nil, *v)))})
	}
	r.Descriptor = readMeshNode(d, env)
	env.end()
	r.RemovedAt = top.millis("removedAtEpochMs")
	r.RemovedByOwnerID = top.str("removedByOwnerId")
	r.RemovedByRoutingID = top.hexBytes("removedByRoutingIdHex")
	r.Trimmed = top.boolean("trimmed")
	top.end()
	if d.err != nil {
		return RemovedMeshNode{}, d.err
	}
	if err := r.validate(); err != nil {
		return RemovedMeshNode{}, err
	}
	return r, nil
}

// Trim returns r with the descriptor's lists left out and Trimmed set:
// what a writer stores when the whole record would not fit.
func (r RemovedMeshNode) Trim() RemovedMeshNode {
	r.Descriptor.ObjectCapabilities, r.Descriptor.ChannelWeights = nil, nil
	r.Descriptor.Capacity.SpotTypes = nil
	r.Trimmed = true
	return r
}
