package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshnode/meshnode/mesh/activation"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Recovery of cold activations whose node died (spec §7.1 restart table,
// §10 DataLost; activation.Decide is the table). It runs where the id is
// next needed — a message for it, on a node that offers the type — so a
// Spot is never served before its stored first message: the message that
// found the record is delivered after the restored one.
//
//   - Creating, creator gone: the same record is cancelled (capacity
//     returned, no final result) and its payload deleted. The first message
//     of that activation is dropped (logged): it never ran.
//   - Ready with the recovery info still present, owner gone: this node
//     takes the record over (a recovery owner change keeping
//     ObjectGeneration and the recovery info), rebuilds the instance with
//     the stored first message at the head of its queue, and ends the
//     recovery info after that message's turn as a fresh activation does.
//   - The same, but the payload is missing after bounded re-reads or does
//     not match its checksum: DataLost is recorded in the location record
//     (its framework payload), the recovery info cleared, and the instance
//     opened without a first message. The owner is never rolled back.

// errCannotRestore: the activation needs recovery but this node cannot host
// its type; a node that can must do it (the sender hands it a cold
// activation, whose target recovers first).
var errCannotRestore = errors.New("mesh: this node cannot restore that Instance Spot")

// activationRefPrefix starts every activation reference (activation.Reference).
const activationRefPrefix = "meshnode/instance-activation/"

// recoverInstance applies the restart table to an Instance Spot record
// that exists. It reports whether it changed the record (the caller reads
// it again); (false, nil) means nothing to do (or the owner is alive).
//
// claimed says the caller already holds this node's activation claim on the
// id (an activation that found the record).
func (o *objects) recoverInstance(ctx context.Context, row authority.AuthorityRow, claimed bool) (bool, error) {
	a := row.Record
	pc := a.PendingCreation
	if a.Allocation.State == record.AllocationReserved {
		aborted, err := o.recoverAbandoned(ctx, row)
		if aborted {
			o.stats.instanceCancelled.Add(1)
			o.log.Warn("instance spot: cancelled the activation of a node that died before Ready; its first message did not run",
				"object", a.ObjectID, "type", a.Allocation.StableType, "creator", a.OwnerID)
			if pc != nil && strings.HasPrefix(pc.RequestContentReference, activationRefPrefix) && o.n.reloc != nil {
				o.forgetPayload(pc.RequestContentReference)
			}
		}
		return aborted, err
	}
	if pc == nil {
		return false, nil
	}
	// The store decides, not the last descriptor list: a node that saw the
	// owner listed alive a moment ago must not leave the Spot unserved.
	ownerID, leaseGen := o.n.Owner()
	// Recorded as this node's, with its first message not done, but not
	// hosted here (a takeover whose result was lost, so its rebuild never
	// ran): nobody else will ever recover it while this node lives — every
	// message spun on "not found" until its deadline. It is rebuilt here,
	// without a takeover (the claim below keeps out an activation or a
	// recovery under way on this node).
	mine := a.OwnerID == ownerID && uint64(a.OwnerLeaseGeneration) == leaseGen
	if mine && o.hostedInstance(a.ObjectID) {
		return false, nil
	}
	if !mine {
		ended, err := leaseEnded(ctx, o.n.loc, authority.OwnerOf(a))
		if err != nil || !ended {
			return false, err
		}
	}
	if o.activationRefusal(activation.Record{SpotID: a.ObjectID, StableType: a.Allocation.StableType, MeshName: a.Allocation.Descriptor.MeshName,
		TargetRID: o.n.run.rid, TargetGen: o.n.run.lifecycleGeneration, DeadlineUnixMs: uint64(time.Now().Add(time.Hour).UnixMilli())}) != nil {
		return false, fmt.Errorf("%w: %w: %s's first message waits for a node of mesh %q offering %q", ErrUnavailable, errCannotRestore,
			a.ObjectID, a.Allocation.Descriptor.MeshName, a.Allocation.StableType)
	}
	// On its way here until it returns: a host command that begins
	// meanwhile lists the Spot once rebuilt (arriving).
	landed, ok := o.arriving()
	if !ok {
		return false, fmt.Errorf("%w: %w: %s's first message waits for a node of mesh %q offering %q (a host relocation is emptying this one)",
			ErrUnavailable, errCannotRestore, a.ObjectID, a.Allocation.Descriptor.MeshName, a.Allocation.StableType)
	}
	defer landed()
	if !claimed {
		if _, ours := o.activating.claim(a.ObjectID); !ours {
			return false, nil // being activated or restored here already
		}
		defer o.activating.release(a.ObjectID)
		if mine && o.hostedInstance(a.ObjectID) {
			return false, nil // an activation here finished meanwhile
		}
	}
	payload, state, err := o.readPayload(ctx, pc.RequestContentReference, pc.RequestEncodedSize, pc.RequestSHA256)
	if err != nil {
		return false, err // unknown: change nothing
	}
	var rec activation.Record
	if state == activation.PayloadIntact {
		if rec, err = activation.Decode(payload); err != nil || rec.SpotID != a.ObjectID || rec.StableType != a.Allocation.StableType {
			state = activation.PayloadCorrupt
		}
	}
	act := activation.Decide(activation.Situation{Row: activation.RowReadyPending, OwnerEnded: true, Payload: state})
	self := authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}
	node := authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid, LifecycleGeneration: o.n.run.lifecycleGeneration}
	obj := authority.Object{ID: a.ObjectID, Kind: record.ObjectInstanceSpot, StableType: a.Allocation.StableType}
	if err := o.n.lease.Gate().Admit(); err != nil {
		return false, wrapErr(ErrUnavailable, err, "owner lease: %s not recovered", a.ObjectID)
	}
	objGen, ownerGen, version := uint64(a.ObjectGeneration), uint64(a.AuthorityOwnerGeneration), row.Version
	if !mine {
		res, err := o.exec.NewOwner(ctx, authority.NewOwnerRequest{Object: obj, ObjectGeneration: uint64(a.ObjectGeneration),
			IfVersion: row.Version, ResumeActivation: true,
			Target: authority.Target{Node: node, Owner: self, Limits: o.instanceLimits(a.Allocation.StableType)}})
		switch {
		case errors.Is(err, authority.ErrOutcomeUnknown):
			// Maybe taken over by this very call: a record that names this
			// node is rebuilt here, by whichever comes first — a caller
			// that reads again, or rebuildLater once the store answers.
			o.rebuildLater(a.ObjectID, err)
			return true, nil
		case errors.Is(err, authority.ErrConflict), errors.Is(err, authority.ErrNotFound):
			return true, nil // changed meanwhile: read again
		case err != nil:
			return false, classify(ctx, err, "take over "+a.ObjectID)
		}
		ownerGen, version = uint64(res.Plan.Record.AuthorityOwnerGeneration), res.Version
	}
	// A factory failure here cannot give the record back to anyone: the
	// Spot is removed (exact, fenced by what this node wrote last: current)
	// and the payload with it; the first message is reported lost. A
	// removal the store does not take now is done once it does (settle.go).
	current := version
	remove := func(why error) error {
		wctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		defer cancel()
		req := authority.DeleteRequest{Object: obj, ObjectGeneration: objGen, Owner: self, IfVersion: current}
		if _, err := o.exec.Delete(wctx, req); err != nil && !errors.Is(err, authority.ErrNotFound) {
			o.removeOwnedLater(req, err, func() { o.forgetPayload(pc.RequestContentReference) })
			return why
		}
		o.forgetPayload(pc.RequestContentReference)
		return why
	}
	switch act {
	case activation.Restore:
		var route []byte
		if rec.Request {
			route = replyRoute{fam: familySpot, gen: rec.SourceGen, corr: rec.ReplyRouteID, rid: rec.SourceRID}.encode()
		}
		if err := o.openInstance(ctx, instanceBuild{rec: rec, org: origin{rid: rec.SourceRID, gen: rec.SourceGen}, route: route,
			ref: pc.RequestContentReference, objGen: objGen, ownerGen: ownerGen, version: version, undo: remove}); err != nil {
			o.log.Error("instance spot recovery: the Spot could not be rebuilt; its first message is lost", "object", a.ObjectID, "err", err)
			return true, nil
		}
		o.stats.instanceRecovered.Add(1)
		o.log.Warn("instance spot recovered: its node died before the first message was done; that message runs first here",
			"object", a.ObjectID, "type", a.Allocation.StableType, "previous_owner", a.OwnerID)
	default: // activation.DataLost
		marker, _ := json.Marshal(objectError{Error: "dataLost", Detail: fmt.Sprintf("the stored first message of the cold activation is %s", state),
			AtUnixMs: time.Now().UnixMilli()})
		wctx, cancel := context.WithTimeout(context.Background(), storeWriteTimeout)
		pres, err := o.exec.Preserve(wctx, authority.PreserveRequest{Object: obj, ObjectGeneration: objGen, Owner: self, IfVersion: version,
			ClearPendingCreation: true, Payload: authority.SetPayload(marker)})
		cancel()
		if err != nil {
			return true, classify(ctx, err, "record DataLost of "+a.ObjectID)
		}
		current = pres.Version // the rebuild's undo removes the record as DataLost left it
		o.stats.instanceDataLost.Add(1)
		o.log.Error("instance spot: DataLost — the stored first message of its activation is gone or corrupt; the Spot is opened without it",
			"object", a.ObjectID, "type", a.Allocation.StableType, "payload", state.String(), "ref", pc.RequestContentReference)
		o.forgetPayload(pc.RequestContentReference)
		if err := o.openInstance(ctx, instanceBuild{rec: activation.Record{SpotID: a.ObjectID, StableType: a.Allocation.StableType},
			objGen: objGen, ownerGen: ownerGen, version: pres.Version, noFirst: true, undo: remove}); err != nil {
			o.log.Error("instance spot: not rebuilt after DataLost", "object", a.ObjectID, "err", err)
		}
	}
	return true, nil
}

// objectError is the framework payload of a location record that records
// an error (§10: "The runtime records the error in the current location
// record").
type objectError struct {
	Error    string `json:"error"`
	Detail   string `json:"detail"`
	AtUnixMs int64  `json:"atUnixMs"`
}

// hostedInstance reports whether this node hosts the Instance Spot id (for
// tests and the status view).
func (o *objects) hostedInstance(id string) bool {
	h, ok := o.hostedFor(spot.Key{Spot: true, ID: id})
	return ok && h.kind == record.ObjectInstanceSpot
}

// HostsInstance reports whether this node hosts the Instance Spot id now.
func (n *Node) HostsInstance(id string) bool { return n.obj.hostedInstance(id) }
