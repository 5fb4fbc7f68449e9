package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Riding out a lost lease (docs/LEASE.md "Riding out a store outage",
// issue 12): the lease manager reacquires the lease under a new
// LeaseGeneration once the store answers again (EventReacquired) while the
// admission gate stays shut; then this node re-adopts every object it still
// serves — one conditional Readopt per object, which only applies while the
// record is exactly as this run left it — drops, without running anything,
// each object whose record changed meanwhile (reclaimed after the grace,
// recreated, moved), reopens the gate (lease.Resume) and publishes serving
// again. The reclaim and the Readopt of one object condition on the same
// record version, so exactly one of them applies: never two owners.

// ReadoptResult counts what a re-adoption did.
type ReadoptResult struct {
	Kept, Dropped int
	DroppedIDs    []string // ids dropped (their record changed hands while the lease was lost)
}

// readoptAfterReacquire runs on its own goroutine after EventReacquired.
func (n *Node) readoptAfterReacquire(newGen uint64) {
	ctx, cancel := n.stopContext()
	defer cancel()
	// Routes to the old combination are stale from now on. A goroutine of
	// an earlier reacquisition that runs late must not set its generation
	// back over a later one.
	oldGen := n.leaseGen.Load()
	for ; oldGen < newGen && !n.leaseGen.CompareAndSwap(oldGen, newGen); oldGen = n.leaseGen.Load() {
	}
	if oldGen > newGen {
		return
	}
	to := authority.Owner{ID: n.run.ownerID, LeaseGeneration: newGen}
	// A later reacquisition (the lease lost again meanwhile) supersedes
	// this one: its own goroutine re-adopts to the later generation, and
	// this one must neither drop what that one keeps nor open the gate.
	superseded := func() bool { return n.leaseGen.Load() != newGen }
	pause := settleFirstPause
	var res ReadoptResult
	for attempt := 1; ; attempt++ {
		if superseded() {
			return
		}
		r, pending, err := n.obj.readopt(ctx, to)
		res.Kept += r.Kept
		res.Dropped += r.Dropped
		res.DroppedIDs = append(res.DroppedIDs, r.DroppedIDs...)
		if err == nil && pending == 0 {
			break
		}
		if attempt == 1 || attempt%10 == 0 {
			n.log.Warn("re-adoption after the lease loss not finished; trying again", "pending", pending, "attempts", attempt, "err", err)
		}
		if ctxsleep.For(ctx, pause) != nil {
			return
		}
		pause = min(2*pause, settleMaxPause)
	}
	if superseded() {
		return
	}
	if !n.lease.Resume(newGen) {
		n.log.Error("owner lease not resumed after re-adoption (lost again or released)")
		return
	}
	n.mu.Lock()
	n.lostErr = nil
	n.mu.Unlock()
	n.obj.releaseLeaseHold()
	shown, more := droppedForLog(res.DroppedIDs)
	attrs := []any{"old_gen", oldGen, "new_gen", newGen, "kept", res.Kept, "dropped", res.Dropped, "dropped_ids", shown}
	if more > 0 {
		attrs = append(attrs, "dropped_ids_more", more)
	}
	n.log.Warn("owner lease recovered after its loss: objects re-adopted under the new lease generation", attrs...)
	// Serving again for the others once the descriptor says so: retried
	// until it lands (or the node stops), since nothing else republishes it.
	// A node whose drain (or Close) already said draining says draining
	// again: serving would tell the others to place on it and move their
	// objects to it for the rest of the drain.
	wait := newBackoff()
	for failed := 0; ; failed++ {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		n.drainMu.Lock()
		state := record.StateServing
		if n.drainSaid {
			state = record.StateDraining
		}
		err := n.publish(pctx, state)
		n.drainMu.Unlock()
		pcancel()
		if err == nil {
			// Also the end of the WARN lines below, when there were any.
			// Until the operator try-out of 2026-12-06 the publisher logged
			// this republish as a takeover of "a host run whose lease is
			// gone", naming this very run, when it landed at once.
			n.log.Info("descriptor republished after the lease recovery", "state", string(state), "failed_publishes", failed)
			return
		}
		if errors.Is(err, directory.ErrRoutingIDInUse) {
			// Another run took this routing id over while this process did
			// not run: the mesh routes the id to it, so nothing here can be
			// reached again, and retrying cannot succeed while it lives.
			// The lease ends for good, so that the objects' records become
			// reclaimable.
			n.log.Error("this node's routing id was taken over by another live run while this process did not run; "+
				"it cannot serve again: stop this process (its objects' records are reclaimed once its lease ends)", "err", err)
			n.lease.Fail(err)
			return
		}
		n.log.Warn("descriptor not republished after the lease recovery; trying again", "err", err)
		if wait.sleep(ctx) != nil {
			return
		}
	}
}

// readopt re-adopts every object this node serves to the owner
// combination to. Each record is read first: one that names this OwnerId
// under an earlier generation is this process's own (OwnerIds are never
// shared), whichever loss it dates from — so a lease lost again during a
// re-adoption is handled by the next one; one already at to is kept; any
// other record (gone, another owner, another generation of the object)
// means the copy here is no longer the object. It returns what it decided
// and how many objects are still undecided (a store failure); the caller
// retries those.
func (o *objects) readopt(ctx context.Context, to authority.Owner) (ReadoptResult, int, error) {
	type item struct {
		key spot.Key
		h   *hosted
	}
	o.mu.Lock()
	var undecided []item
	for k, h := range o.hosted {
		if !h.entry && h.state == hostServing {
			undecided = append(undecided, item{k, h})
		}
	}
	o.mu.Unlock()
	self := authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid, LifecycleGeneration: o.n.run.lifecycleGeneration}
	var res ReadoptResult
	pending := 0
	var errs []error
	for _, it := range undecided {
		if err := o.readoptOne(ctx, it.key, it.h, to, self, &res); err != nil {
			pending++
			if !errors.Is(err, errReadoptSuperseded) {
				errs = append(errs, fmt.Errorf("%s: %w", it.key.ID, err))
			}
		}
	}
	return res, pending, errors.Join(errs...)
}

// errReadoptSuperseded: a later reacquisition's re-adoption took the
// object; not for this one to decide.
var errReadoptSuperseded = errors.New("re-adopted under a later lease generation")

// readoptOne re-adopts one object h (at key) to the owner combination to,
// on the node run self, or drops it when its record changed hands; see
// readopt. A non-nil error leaves it undecided: the caller asks again.
func (o *objects) readoptOne(ctx context.Context, key spot.Key, h *hosted, to authority.Owner, self authority.Node, res *ReadoptResult) error {
	row, _, err := o.readAuthorityAt(ctx, h.kind, key.ID)
	if err != nil {
		return err
	}
	a := row.Record
	ours := row.Found && a.OwnerID == to.ID && uint64(a.ObjectGeneration) == h.objectGeneration &&
		a.Allocation.ObjectKind == h.kind && a.Allocation.StableType == h.stableType
	switch {
	case ours && uint64(a.OwnerLeaseGeneration) == to.LeaseGeneration:
		// Re-adopted already: by an earlier pass, or by a Readopt whose
		// result was lost (ErrOutcomeUnknown) — then the copy here
		// still carries the fence it had before, and every route to
		// the record would be refused as stale: take the record's.
		o.mu.Lock()
		if o.hosted[key] == h && h.ownerGeneration != uint64(a.AuthorityOwnerGeneration) {
			h.readoptedFrom = h.readoptTried
			h.ownerGeneration = uint64(a.AuthorityOwnerGeneration)
			h.storeVersion = row.Version
			res.Kept++
		}
		o.mu.Unlock()
		return nil
	case ours && uint64(a.OwnerLeaseGeneration) > to.LeaseGeneration:
		// A later reacquisition's re-adoption took it: not for this
		// one to decide (its caller stops, superseded).
		return errReadoptSuperseded
	case !ours:
		// The record changed hands while the lease was lost (gone,
		// reclaimed, recreated, moved): this copy is no longer the
		// object. Drop it without running anything.
		o.drop(key, h, fmt.Errorf("%w: the record is gone or names another owner", authority.ErrConflict), res)
		o.cache.Drop(msgTarget{fam: famOf(h.kind), id: key.ID}.cacheKey())
		return nil
	}
	from := ownerCombination{leaseGen: uint64(a.OwnerLeaseGeneration), ownerGen: uint64(a.AuthorityOwnerGeneration)}
	o.mu.Lock()
	h.readoptTried = from
	o.mu.Unlock()
	r, err := o.exec.Readopt(ctx, authority.ReadoptRequest{
		Object:           authority.Object{ID: key.ID, Kind: h.kind, StableType: h.stableType},
		ObjectGeneration: h.objectGeneration, From: authority.Owner{ID: to.ID, LeaseGeneration: from.leaseGen},
		To: to, Node: self, IfVersion: row.Version})
	o.cache.Drop(msgTarget{fam: famOf(h.kind), id: key.ID}.cacheKey())
	if err != nil {
		// Undecided: a conflict here may be about this node's own new
		// lease (its row expired in a second outage), not the object's
		// record, and the record read just above still names this
		// node. The next pass reads it again and decides; dropping now
		// lost objects nobody else had taken.
		return err
	}
	o.mu.Lock()
	if o.hosted[key] == h {
		h.readoptedFrom = from
		h.ownerGeneration = uint64(r.Plan.Record.AuthorityOwnerGeneration)
		h.storeVersion = r.Version
	}
	o.mu.Unlock()
	res.Kept++
	return nil
}

// drop removes a copy whose record no longer names this node, without
// running anything, and counts it in res.
func (o *objects) drop(key spot.Key, h *hosted, why error, res *ReadoptResult) {
	o.mu.Lock()
	if o.hosted[key] == h {
		delete(o.hosted, key)
	}
	o.mu.Unlock()
	h.obj.Close()
	res.Dropped++
	res.DroppedIDs = append(res.DroppedIDs, key.ID)
	level := slog.LevelWarn
	if res.Dropped > droppedWarned {
		level = slog.LevelDebug // counted in the recovery's WARN (dropped=N)
	}
	o.log.Log(context.Background(), level, "dropped an object on re-adoption: its record changed while the lease was lost",
		"object", key.ID, "kind", string(h.kind), "err", why)
}

// droppedWarned is how many objects dropped on one re-adoption are each
// logged at WARN, and named in the recovery's WARN; the rest are logged at
// DEBUG and counted. Why: a node paused past the reclaim grace has every
// object reclaimed by the others, and its recovery wrote one WARN per
// object and one line naming them all (62 WARN lines and a 1.5 KB line in
// an operator try-out with 62 counters; a node of 10,000 objects would
// write 10,000 and a line of ~200 KB).
const droppedWarned = 20

// droppedForLog is the first droppedWarned of ids and how many more there
// are.
func droppedForLog(ids []string) (shown []string, more int) {
	if len(ids) <= droppedWarned {
		return ids, 0
	}
	return ids[:droppedWarned], len(ids) - droppedWarned
}

// readoptAfterHold re-adopts the object at key when it serves here again
// after an operation held it — a move that did not move it — across a
// lease loss: the re-adoption of that loss passed it over (it takes only
// the objects this node serves, not ones it is moving away), so its record
// still names the lease generation began, the one the operation began
// under, which is gone. Until then every sender is refused (OwnerGoneError),
// a move of it is refused as not this node's, and the reclaim sweep
// removes it once the grace has passed, its state lost while this node
// holds it (an operator try-out, 2026-12-06: Redis stopped 12 s in the
// middle of a drain; the five objects in flight stayed on the node under
// their dead lease generation and the drain could not move them again).
// It tries while ctx lasts, then goes on in the background until the node
// stops.
func (o *objects) readoptAfterHold(ctx context.Context, key spot.Key, began uint64) {
	if o.readoptHeldOnce(ctx, key, began) {
		return
	}
	o.n.async(func() {
		sctx, cancel := o.n.stopContext()
		defer cancel()
		o.readoptHeldOnce(sctx, key, began)
	})
}

// readoptHeldOnce is readoptAfterHold's loop: it reports whether the
// object was decided (re-adopted, dropped, or nothing to do) before ctx
// ended.
func (o *objects) readoptHeldOnce(ctx context.Context, key spot.Key, began uint64) bool {
	pause := settleFirstPause
	for attempt := 1; ; attempt++ {
		self, lg := o.n.Owner()
		o.mu.Lock()
		h := o.hosted[key]
		serving := h != nil && !h.entry && h.state == hostServing
		o.mu.Unlock()
		if lg == began || !serving {
			return true // no lease change since, or no longer served here (moved, closed, dropped)
		}
		to := authority.Owner{ID: self, LeaseGeneration: lg}
		node := authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid, LifecycleGeneration: o.n.run.lifecycleGeneration}
		var res ReadoptResult
		err := o.readoptOne(ctx, key, h, to, node, &res)
		if err == nil {
			if res.Kept > 0 {
				o.log.Info("an object held across the owner lease loss serves here again: re-adopted under the new lease generation",
					"object", key.ID, "old_gen", began, "new_gen", lg)
			}
			return true
		}
		if !errors.Is(err, errReadoptSuperseded) && (attempt == 1 || attempt%10 == 0) {
			o.log.Warn("re-adoption of an object held across the owner lease loss not finished; trying again",
				"object", key.ID, "attempts", attempt, "err", err)
		}
		if ctxsleep.For(ctx, pause) != nil {
			return false
		}
		pause = min(2*pause, settleMaxPause)
	}
}
