package spot

import "context"

// Relocated is implemented by a Handler that must act when its object has
// arrived on a new node — reopen node-local resources, re-register with a
// local service, log. The target node calls it once per arrival, after the
// owner change is recorded and the moved queue is in place, with dispatch
// still closed: no message or timer of the object runs on the new node
// before it returns (spec §1.3 step 7, §9.2: "required lifecycle callbacks
// finish before application message processing starts").
//
// It runs outside any turn, on the instance the factory or the snapshot
// adapter built. ctx ends after the framework's callback bound
// (docs/RELOCATION.md). The object is owned by the new node whatever
// Relocated returns — the owner change cannot be undone — so an error is
// logged and dispatch opens anyway; a Handler that cannot work without the
// resource should fail its messages itself.
type Relocated interface {
	Relocated(ctx context.Context, info RelocationInfo) error
}

// RelocationInfo tells a Relocated handler about the move that brought it.
type RelocationInfo struct {
	ID                       string // ActorId or SpotId
	ObjectGeneration         uint64 // unchanged by a move
	AuthorityOwnerGeneration uint64 // the new owner's, raised by the move
	// SourceNodeRID is the routing id of the node the object came from.
	SourceNodeRID []byte
}
