package mesh

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/internal/buildinfo"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/admin"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// The node's side of its admin listener (mesh/admin): what /readyz,
// /v1/status and /v1/relocate ask of it. The listener binds in Start before
// the first publish, so that a port already taken fails the start before any
// descriptor names this run (/readyz says not ready until the node serves),
// and stops last in Close.

// ready is nil when the node takes traffic: it publishes serving, its owner
// lease admits new work, and the lease was not lost (re-adoption after a
// loss keeps it unready until done); else it says why not (/readyz serves
// "not ready: " and that).
func (n *Node) ready() error {
	if n.lease == nil || n.obj == nil {
		return errors.New("starting")
	}
	if st := n.State(); st != record.StateServing {
		if lost := n.LeaseLost(); errors.Is(lost, locstore.ErrDataLost) {
			// Only a restart (after restoring the store, or accepting
			// the loss) brings this node back: say so where operators
			// and orchestrators look, not only in the log.
			return fmt.Errorf("node is %s: STORE DATA LOST, restore the Location Store or accept the loss, then restart this process: %w",
				st, lost)
		} else if errors.Is(lost, directory.ErrRoutingIDInUse) {
			return fmt.Errorf("node is %s: its routing id was taken over by another live run while this process did not run; stop this process: %w", st, lost)
		} else if lost != nil {
			// An ordinary loss (the store refused or lost the renewals
			// past the TTL): it heals by itself once the store takes
			// writes again; an orchestrator must not restart for it.
			return fmt.Errorf("node is %s: owner lease lost; new work waits until it is acquired again, as soon as the Location Store takes writes (no restart needed): %w",
				st, lost)
		}
		return fmt.Errorf("node is %s", st)
	}
	if err := n.LeaseLost(); err != nil {
		return fmt.Errorf("owner lease lost: %w", err)
	}
	if err := n.lease.Gate().Admit(); err != nil {
		if why := n.lease.RenewFailure(); why != nil {
			// Say why the renewals fail (a store refusing writes says what
			// to do), where an orchestrator's probe looks.
			return fmt.Errorf("owner lease does not admit new work: %w; the renewals fail: %w", err, why)
		}
		return fmt.Errorf("owner lease does not admit new work: %w", err)
	}
	return nil
}

// Ready reports nil when the node takes traffic (what /readyz serves).
func (n *Node) Ready() error { return n.ready() }

// leaseRemaining is how long the admission gate stays open without another
// renewal (0 when shut).
func (n *Node) leaseRemaining() time.Duration {
	g := n.lease.Gate()
	if g.Admit() != nil {
		return 0
	}
	return max(g.Remaining(), 0)
}

// AdminAddr is the admin listener's bound address ("" when off).
func (n *Node) AdminAddr() string {
	if n.admin == nil {
		return ""
	}
	return n.admin.Addr()
}

// startAdmin starts the admin listener when admin.listen is set.
func (n *Node) startAdmin() error {
	a := n.cfg.Admin
	if a.Listen == "" {
		return nil
	}
	srv, err := admin.Start(admin.Options{Listen: a.Listen, Token: a.Token, Ready: n.ready, Status: n.adminStatus,
		Gatherer: n.metrics.reg, Relocate: n.adminRelocate, Logger: n.log})
	if err != nil {
		return err
	}
	n.admin = srv
	return nil
}

// stopAdmin stops the listener (idempotent).
func (n *Node) stopAdmin() {
	if n.admin == nil {
		return
	}
	if n.adminDrain.Load() {
		// The drain's caller reads its result here before the listener
		// goes (adminRelocate).
		lctx, lcancel := context.WithTimeout(context.Background(), adminDrainLinger)
		if err := n.admin.Linger(lctx); err != nil {
			// Not an error of the drain: whoever started it stopped
			// following it; the drained line above has its outcome.
			n.log.Info("admin listener: no one read the drain's result; closing", "waited", adminDrainLinger)
		}
		lcancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.admin.Close(ctx); err != nil {
		n.log.Warn("admin listener: close", "err", err)
	}
}

// adminStatus is GET /v1/status.
func (n *Node) adminStatus() admin.Status {
	owner, gen := n.Owner()
	st := admin.Status{Mesh: n.cfg.Node.MeshName, RID: hex.EncodeToString(n.run.rid), Version: buildinfo.Read().String(), Endpoint: n.run.endpoint,
		LifecycleGeneration: n.run.lifecycleGeneration, State: string(n.State()), Role: string(n.cfg.Node.ObjectRole),
		OwnerID: owner, LeaseGeneration: gen, LeaseRemainingSeconds: n.leaseRemaining().Seconds(), Ready: true,
		Peers: []admin.Peer{}}
	if err := n.ready(); err != nil {
		st.Ready, st.NotReady = false, err.Error()
	}
	if err := n.lease.RenewFailure(); err != nil {
		st.LeaseRenewError = err.Error()
	}
	ts := n.tr.Stats()
	for _, p := range n.tr.Peers() {
		ps := ts.Peers[p.RID.String()]
		st.Peers = append(st.Peers, admin.Peer{RID: p.RID.String(), Endpoint: p.Endpoint, LifecycleGeneration: p.LifecycleGeneration,
			RecordsIn: ps.RecordsIn, RecordsOut: ps.RecordsOut, BytesIn: ps.BytesIn, BytesOut: ps.BytesOut, Queued: ps.Queued})
	}
	os := n.obj.snapshotStats()
	st.Objects = admin.Objects{Hosted: 0, ByType: map[string]int{}, Counters: map[string]uint64{
		"delivered": os.Delivered, "fenceRefused": os.FenceRefused, "followForwarded": os.FollowForwarded,
		"followRefused": os.FollowRefused, "routeCacheHits": os.RouteCacheHits, "routeCacheMisses": os.RouteCacheMisses,
		"instancesActivated": os.InstancesActivated, "instancesRecovered": os.InstancesRecovered,
	}}
	for k, c := range n.obj.hostedByType() {
		st.Objects.ByType[k.kind+"/"+k.stableType] = c
		st.Objects.Hosted += c
	}
	if n.admin != nil {
		st.HostCommand = n.admin.CurrentJob()
	}
	if st.HostCommand == nil {
		// Not started through the listener: a SIGTERM drain, or the
		// application's Relocate or Drain.
		st.HostCommand, _ = n.hostView.job()
	}
	for _, s := range n.replicaWaits() {
		st.Stores = append(st.Stores, admin.StoreReplicas{Store: s.name, Behind: s.r.ReplicasBehind()})
	}
	return st
}

// adminRelocate runs POST /v1/relocate: a host Relocate, or a drain (which
// ends with the node's orderly stop; its result goes to early before the
// stop, and the listener stays up until it was read, adminDrainLinger at
// most: stopAdmin).
func (n *Node) adminRelocate(ctx context.Context, drain bool, progress func(admin.Progress), early func(admin.Result)) (admin.Result, error) {
	opts := HostRelocateOptions{Progress: func(p HostProgress) { progress(adminProgress(p)) }}
	var res HostRelocationResult
	var err error
	if drain {
		opts.beforeStop = func(r HostRelocationResult) { early(adminResult(r)) }
		n.adminDrain.Store(true)
		res, err = n.Drain(ctx, opts)
	} else {
		res, err = n.Relocate(ctx, opts)
	}
	return adminResult(res), err
}

// adminDrainLinger bounds how long a drain run through the admin listener
// keeps the listener up after its moves for the caller to read the result.
const adminDrainLinger = 3 * time.Second

func adminResult(res HostRelocationResult) admin.Result {
	out := admin.Result{End: res.End.String(), Progress: adminProgress(res.Progress), TookMs: res.Took.Milliseconds(),
		BeforeMovesMs: res.BeforeMoves.Milliseconds(), MovesTookMs: res.MovesTook.Milliseconds()}
	for _, o := range res.Objects {
		kind := record.ObjectActor
		switch {
		case o.Object.Instance:
			kind = record.ObjectInstanceSpot // skipped: it was said a User Spot
		case o.Object.Spot:
			kind = record.ObjectUserSpot
		}
		oo := admin.ObjectOutcome{Kind: string(kind), ID: o.Object.ID, Outcome: o.Outcome.String(), Reason: o.Reason,
			TookMs: o.Took.Milliseconds()}
		if len(o.Target) > 0 {
			oo.Target = hex.EncodeToString(o.Target)
		}
		out.Objects = append(out.Objects, oo)
	}
	return out
}

func adminProgress(p HostProgress) admin.Progress {
	out := admin.Progress{Total: p.Total, Moved: p.Moved, Skipped: p.Skipped, Failed: p.Failed, Gone: p.Gone,
		NotStarted: p.NotStarted, Running: p.Running, Pending: p.Pending, Bytes: p.Bytes}
	if p.End != 0 {
		out.End = p.End.String()
	}
	return out
}
