package mesh

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/mesh/authority"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/hostmove"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// Host relocation (docs/RELOCATION.md "Host relocation and drain"): move
// every Actor and Spot this node owns to the other serving nodes, each by
// the single-object move (relocate.go), many at once, under one deadline.
// mesh/hostmove keeps the books; this file starts the moves and reports.

// HostRelocateOptions adjust a host Relocate.
type HostRelocateOptions struct {
	// MaxConcurrent bounds the moves in flight (0 or less:
	// relocation.max_concurrent).
	MaxConcurrent int
	// Progress, when set, is called with the counts so far, one call at a
	// time, on a goroutine of its own: at the start and after outcomes —
	// a slow callback sees only the latest counts (snapshots it had no time
	// for are skipped) and never slows the moves. The last call has End
	// set, and Relocate returns after it.
	Progress func(HostProgress)
	// Stop, when closed, ends the command early, as its deadline would: no
	// move starts after it and the moves under way are cancelled (their
	// objects stay here, §9.4); a Drain then skips what is left of its
	// waits, moves and linger and runs the shutdown (§11) at once, which
	// removes what did not move. meshnode run closes it on a second SIGTERM.
	Stop <-chan struct{}
	// beforeStop, when set, gets a Drain's result after its moves and
	// before the node's stop (the admin listener reports it to the caller
	// while it is still up).
	beforeStop func(HostRelocationResult)
}

// HostProgress is a snapshot of a host Relocate.
type HostProgress = hostmove.Progress

// HostObjectResult is one object's final outcome in a host Relocate.
type HostObjectResult = hostmove.Result

// HostRelocationResult is how a host Relocate ended.
type HostRelocationResult struct {
	// End is Completed (every object reached its outcome — also a drain
	// that decided at once that nothing could move) or ForceStopped (the
	// deadline, Stop or the node's Close came first; objects not started
	// stay here, owned and working, until a shutdown removes them).
	End      hostmove.End
	Progress HostProgress
	// Objects lists every object's outcome; those not Moved stay owned
	// and working on this node (§9.4), except Gone ones.
	Objects []HostObjectResult
	// Took is how long the whole command took, from its call: everything
	// before the moves (BeforeMoves), the moves (MovesTook) and, for a
	// drain, the linger after them that passes messages on until their
	// senders have switched — up to the shutdown (Close, which a drain
	// runs next, is not in it). A drain that moved nothing (no other
	// serving node) took only what it spent before the moves.
	Took time.Duration
	// BeforeMoves is the part of Took before the first move could start:
	// a drain's waits for this node's owner lease being recovered and for a
	// peer recovering its lease (each at most noTargetPatience), its
	// publish of draining, and the discovery round that lists the targets.
	BeforeMoves time.Duration
	// MovesTook is the part of Took the moves took, from the first one's
	// start until every object had its outcome: what a handoff rate is
	// figured on.
	MovesTook time.Duration
	// ShutdownSwept (Drain only) says the shutdown's §11 sweep deleted the
	// records of the objects that stayed. False when it failed (the store
	// refused or was down) or could not run (the owner lease was lost):
	// their records then name this stopped run until the serving nodes
	// reclaim them (docs/OPERATIONS.md "A node died: its objects").
	ShutdownSwept bool
	// StoreDataLost (Drain only) says the Location Store lost its data
	// during this run (the node's lease ended with ErrDataLost): the
	// records of what stayed went with it, and nothing is left to reclaim.
	StoreDataLost bool
	// OtherDrain (Drain only): the node was already stopping when this
	// drain could begin — a drain already running when it was called (one
	// started through the admin listener) stopped it, or Close did; this
	// one moved nothing, and that drain's caller has its result.
	OtherDrain bool
}

// NotMoved lists the objects that are still on this node after the command
// (Skipped, Failed, NotStarted) — not those left to their targets.
func (r HostRelocationResult) NotMoved() []HostObjectResult {
	var out []HostObjectResult
	for _, o := range r.Objects {
		switch {
		case o.Outcome == hostmove.Failed && o.Reason == relocation.ReasonLeftToTarget.String():
		case o.Outcome == hostmove.Skipped, o.Outcome == hostmove.Failed, o.Outcome == hostmove.NotStarted:
			out = append(out, o)
		}
	}
	return out
}

// InstanceSpotsNotMoved counts the Instance Spots among NotMoved: host
// relocation never moves them (spec §8 moves Actors and User Spots); each
// activates again on its next message, on a serving node, with fresh state.
func (r HostRelocationResult) InstanceSpotsNotMoved() int {
	n := 0
	for _, o := range r.NotMoved() {
		if o.Object.Instance {
			n++
		}
	}
	return n
}

// LeftToTarget lists the objects whose moves this node stopped waiting for
// at its shutdown, their reservation release unconfirmed: left to their
// targets, whose owner CAS may still apply (their records are kept).
func (r HostRelocationResult) LeftToTarget() []HostObjectResult {
	var out []HostObjectResult
	for _, o := range r.Objects {
		if o.Outcome == hostmove.Failed && o.Reason == relocation.ReasonLeftToTarget.String() {
			out = append(out, o)
		}
	}
	return out
}

// Relocate moves every Actor and User Spot this node owns to the other
// serving nodes of its mesh, each placed like a creation (weight and
// remaining capacity, excluding this node), at most MaxConcurrent at once,
// all under ctx's deadline (relocation.host_deadline without one). While it
// runs this node takes no new creations and no incoming moves. Each object
// ends with one outcome: Moved, Skipped (DisableRelocation), Failed (typed
// reason; it stays owned and working here, §9.4), Gone (closed or destroyed
// meanwhile) or NotStarted (the deadline, Stop or the node's Close came
// first; Reason says which). The command ends once: Completed, or
// ForceStopped at the deadline, at Stop or at Close (§11).
//
// Errors: ErrHostCommandRunning (a host Relocate or a Drain is already
// running, or a Drain has begun), ErrUnavailable (the node is closing or
// its owner lease is not valid).
func (n *Node) Relocate(ctx context.Context, opts HostRelocateOptions) (HostRelocationResult, error) {
	if err := n.beginHostMove(cmdRelocate); err != nil {
		return HostRelocationResult{}, err
	}
	defer n.endHostMove()
	opts.Progress = n.hostView.track(cmdRelocate, opts.Progress)
	ctx, stopped := stopWith(ctx, opts.Stop)
	defer stopped()
	return n.hostRelocate(ctx, opts, n.hostNow(), false)
}

// The host commands, as a refusal of another names the one running.
var (
	cmdRelocate = "a host relocation"
	cmdDrain    = "a drain (the node is stopping)"
)

// beginHostMove checks the owner lease and marks the host command cmd
// running (no new creations, no incoming moves).
//
// A node that is closing refuses it: Close keeps the owner lease valid
// until it has swept the objects' records, so the lease alone let a
// command begun during Close through — once object work had stopped it
// listed nothing and ended Completed while the shutdown removed every
// object the node held, state included (review, 2026-12-07).
func (n *Node) beginHostMove(cmd string) error {
	if n.closing() {
		return fmt.Errorf("%w: the node is closing", ErrUnavailable)
	}
	if err := n.lease.Gate().Admit(); err != nil {
		return wrapErr(ErrUnavailable, err, "owner lease")
	}
	if cmd == cmdRelocate && n.obj.drainWanted.Load() {
		// A drain began: the node is stopping, and the drain may be
		// waiting for the flag (beginDrainCommand).
		return fmt.Errorf("%w: %s", ErrHostCommandRunning, cmdDrain)
	}
	if !n.obj.hostMove.CompareAndSwap(false, true) {
		if running := n.obj.hostCmd.Load(); running != nil {
			return fmt.Errorf("%w: %s", ErrHostCommandRunning, *running)
		}
		return ErrHostCommandRunning
	}
	n.obj.hostCmd.Store(&cmd)
	n.hostView.begin(cmd)
	return nil
}

// endHostMove ends the host command beginHostMove began. Its name goes
// first, so that a refusal never names a command that ended.
func (n *Node) endHostMove() {
	n.hostView.end()
	n.obj.hostCmd.Store(nil)
	n.obj.hostMove.Store(false)
}

// refreshForMoves makes a host command place on the mesh as it is now, not
// as the last discovery round saw it (rounds are lease.renew_interval
// apart): a node that joined since is listed and linked (freshList). A
// store failure leaves the last list; the moves go on.
func (n *Node) refreshForMoves(ctx context.Context) {
	if err := n.freshList(ctx, moveLinkWait); err != nil {
		n.log.Warn("host relocation: discovery before the moves failed; placing on the last descriptor list", "err", err)
	}
}

// moveLinkWait bounds refreshForMoves' wait for links being admitted.
const moveLinkWait = 2 * time.Second

// hostRelocate runs the host command; the caller holds hostMove. began is
// when the command was called (hostNow): the result's Took and BeforeMoves
// count from it. drain says the command is a drain's (relist).
func (n *Node) hostRelocate(ctx context.Context, opts HostRelocateOptions, began time.Time, drain bool) (HostRelocationResult, error) {
	o := n.obj
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.Relocation.HostDeadline)
		defer cancel()
	}
	max := opts.MaxConcurrent
	if max <= 0 {
		max = n.cfg.Relocation.MaxConcurrent
	}
	n.refreshForMoves(ctx)
	start := n.hostNow()
	// The list stays open for what is on its way here (relist): the
	// listed objects move meanwhile.
	cmd := hostmove.NewOpen(o.hostedForHostMove(), max)
	p := cmd.Progress()
	n.log.Info("host relocation started", "objects", p.Total, "skipped", p.Skipped, "max_concurrent", max)

	var mu sync.Mutex // guards cmd
	runs := newTargetRuns(n.cfg.Relocation.HostTargetRun, func() int {
		mu.Lock()
		defer mu.Unlock()
		return cmd.Progress().Pending + 1 // the move asking is no longer pending
	}, o.leastTaken)
	patience := newTargetPatience(n.noTargetPatience(), n.hostNow)
	pump := newProgressPump(opts.Progress)
	defer pump.finish()
	report := func() { pump.post(cmd.Progress()) }
	wake := make(chan struct{}, 1)
	deadline := ctx.Done() // nil once the command was stopped
	// The node's halt (Close) stops the command as its deadline would: its
	// moves in flight end, nothing more starts, and the objects left are
	// NotStarted for that reason — not Gone once Close has emptied the
	// hosted table (review, 2026-12-07): the shutdown removes them with
	// their state. Nil once the command was stopped for it.
	halted := o.halt.Done()
	var overrun <-chan time.Time
	abandoned := false
	var wg sync.WaitGroup
	cmdCtx := ctx // the command's deadline and Stop (a worker's ctx also ends at the halt)
	// stopDue: the command's deadline passed, or Stop closed (looked at
	// itself: stopWith cancels cmdCtx on a goroutine of its own, a moment
	// after Stop closed). stop ends the command ForceStopped (under mu).
	stopDue := func() bool { return cmdCtx.Err() != nil || stopClosed(opts.Stop) }
	stop := func() {
		if !cmd.Sealed() {
			if k := o.arrivalsUnderWay(); k > 0 {
				n.log.Warn("host relocation: objects still arriving at the deadline; they stay here", "arriving", k)
			}
		}
		cmd.Stop()
	}
	mu.Lock()
	report()
	for {
		if halted != nil && o.halt.Err() != nil {
			cmd.StopFor(nodeStoppedReason)
			halted, deadline = nil, nil
			overrun = time.After(hostOverrun)
			report()
		}
		if deadline != nil && stopDue() {
			stop() // moves in flight end by the same deadline
			deadline = nil
			overrun = time.After(hostOverrun)
			report()
		}
		var poll <-chan time.Time
		if !cmd.Sealed() && cmd.Progress().Pending == 0 {
			if added := o.relist(cmd, drain); added > 0 {
				n.log.Info("host relocation: objects that arrived meanwhile added", "objects", added)
				report()
			}
			if !cmd.Sealed() {
				// Also after an addition: objects listed Skipped (an
				// Instance Spot, a DisableRelocation object) start no move
				// whose end would wake this loop — without the poll it
				// slept until the deadline and ended ForceStopped
				// (TestHostRelocateEndsAfterAddingOnlySkippedArrivals).
				poll = time.After(arrivalPoll)
			}
		}
		for {
			obj, ok := cmd.Next()
			if !ok {
				break
			}
			wg.Add(1)
			// A worker takes the next object itself when it finishes one,
			// so up to max goroutines carry the whole command: a fresh
			// goroutine per move grew its stack through the move's deep
			// call chain every time (runtime.copystack was ~4 % of a host
			// relocation's CPU).
			worker := func(obj hostmove.Object) {
				defer wg.Done()
				// Its waits between tries end at the halt too: Close
				// waits for it.
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(o.halt, cancel)()
				for {
					r := o.hostMoveOne(ctx, obj, runs, patience)
					o.hook().step(obj.ID, stepHostFinish)
					mu.Lock()
					switch {
					case o.halt.Err() != nil:
						cmd.StopFor(nodeStoppedReason) // no next move: see halted
					case stopDue():
						// The deadline (or Stop) came while this move ran:
						// the command ends ForceStopped, as when the loop
						// below sees it first. Until 2026-12-08 whichever
						// saw it first decided: a drain whose last move
						// ended at the drain's deadline (a Snapshot that
						// never returns) ended completed or forceStopped
						// at random
						// (TestDrainOwnMoveOfAnObjectWhoseSnapshotNeverReturns).
						stop()
					}
					switch err := cmd.Finish(r); {
					case err == nil:
					case abandoned && errors.Is(err, hostmove.ErrNotRunning):
						n.log.Info("host relocation: a move ended after its command had ended", "object", obj.ID,
							"outcome", r.Outcome, "reason", r.Reason)
					default:
						n.log.Error("host relocation: bookkeeping", "object", obj.ID, "err", err)
					}
					var next hostmove.Object
					more := false
					if !stopDue() {
						// Past the deadline (or Stop) no move starts: the
						// loop below lists what is left NotStarted
						// (cmd.Stop). Until 2026-12-07 the worker took the
						// next object, whose move failed at once on the
						// ended context: Failed, not NotStarted
						// (TestHostRelocateStoppedStartsNoMore). Stop is
						// looked at itself (stopDue): a worker that looked
						// at cmdCtx alone took one more in about one run
						// in ten of that test.
						next, more = cmd.Next()
					}
					report()
					mu.Unlock()
					if !more {
						break
					}
					obj = next
				}
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			// On a goroutine Close waits for (goWork): it runs on after
			// its last move, and a Close while the command runs (or
			// after it gave up waiting: abandoned) returned before it
			// until 2026-12-07. Once the node halted none is counted any
			// more: its moves end at once.
			if !o.goWork(func() { worker(obj) }) {
				go worker(obj)
			}
		}
		if cmd.Progress().End != hostmove.Open {
			// The end, when the last look at the list sealed it after
			// the moves had reported (posted once: the pump drops a
			// second end).
			report()
			break
		}
		mu.Unlock()
		select {
		case <-wake:
		case <-poll:
		case <-halted:
		case <-deadline:
		case <-overrun:
			// A move still waiting for something its deadline does not
			// bound (a reservation release that must be confirmed before
			// the object may serve here again) keeps waiting on its own;
			// the command ends now (§11), listing it as failed.
			mu.Lock()
			abandoned = true
			cmd.Abandon(abandonedReason)
			report()
			mu.Unlock()
		}
		mu.Lock()
	}
	end := n.hostNow()
	res := HostRelocationResult{End: cmd.Progress().End, Progress: cmd.Progress(), Objects: cmd.Results(),
		Took: end.Sub(began), BeforeMoves: start.Sub(began), MovesTook: end.Sub(start)}
	mu.Unlock()
	if !abandoned {
		wg.Wait()
	}
	p = res.Progress
	n.log.Info("host relocation ended", "end", res.End, "moved", p.Moved, "skipped", p.Skipped, "failed", p.Failed,
		"gone", p.Gone, "not_started", p.NotStarted, "bytes", p.Bytes, "took", res.MovesTook, "before_moves", res.BeforeMoves,
		"moved_to", movedTo(res.Objects))
	n.logNotMoved(res)
	return res, nil
}

// movedTo counts the moved objects by target (hex RoutingId): how the
// command spread them, for the log.
func movedTo(objs []HostObjectResult) map[string]int {
	m := map[string]int{}
	for _, o := range objs {
		if o.Outcome == hostmove.Moved && len(o.Target) > 0 {
			m[hex.EncodeToString(o.Target)]++
		}
	}
	return m
}

// hostOverrun is how long a host command waits past its deadline for the
// moves in flight to report: they carry the same deadline, so they normally
// end within it, but a move whose reservation release is not confirmed
// waits for the store for as long as the node runs (sourceMove.release).
var hostOverrun = 2 * time.Second

// nodeStoppedReason is the outcome of an object a host command had not
// started when the node stopped (Close); nodeStoppedDuring begins that of
// one whose move the stop ended.
const (
	nodeStoppedReason = "the node stopped (Close) before its move began: the shutdown removes it with its state"
	nodeStoppedDuring = "the node stopped (Close) during its move: the shutdown removes it with its state; "
)

// snapshotStillRunning begins the reason of an object a host command
// found held by a snapshot adapter's call that outlived an earlier move
// (relocate_snapshot.go): it stays here, held, until the call returns.
const snapshotStillRunning = "snapshotStillRunning"

// abandonedReason is the outcome of a move the command stopped waiting for.
const abandonedReason = "still in flight at the deadline: the object stays held on this node until its move settles (a store write not yet confirmed)"

// progressPump delivers host progress snapshots to a callback on a
// goroutine of its own, keeping only the latest one not yet delivered: the
// command never waits for the callback (issue 11: it used to run under the
// command's lock, so a slow progress bar slowed every move).
type progressPump struct {
	fn     func(HostProgress)
	mu     sync.Mutex
	latest HostProgress
	queued bool
	ended  bool // a snapshot with the end was posted
	wake   chan struct{}
	done   chan struct{}
	closed bool
}

func newProgressPump(fn func(HostProgress)) *progressPump {
	p := &progressPump{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if fn == nil {
		close(p.done)
		return p
	}
	go p.run()
	return p
}

// post replaces the snapshot waiting for delivery.
func (p *progressPump) post(s HostProgress) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	if p.ended {
		// The end was posted: it is the last call (a move the command
		// abandoned may still finish and report).
		p.mu.Unlock()
		return
	}
	p.latest, p.queued, p.ended = s, true, s.End != hostmove.Open
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *progressPump) run() {
	defer close(p.done)
	for range p.wake {
		p.mu.Lock()
		s, ok, closed := p.latest, p.queued, p.closed
		p.queued = false
		p.mu.Unlock()
		if ok {
			p.fn(s)
		}
		if closed && !ok {
			return
		}
	}
}

// finish delivers what is still waiting and returns after the last call.
func (p *progressPump) finish() {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for {
		select {
		case p.wake <- struct{}{}:
		case <-p.done:
			return
		}
	}
}

// logNotMoved logs the objects of res still on this node.
func (n *Node) logNotMoved(res HostRelocationResult) { logNotMoved(n.log, res.NotMoved()) }

// notMovedWarned is how many objects staying for one reason are each
// logged at WARN; the others are logged at DEBUG and counted in one WARN.
// Why: a drain with nowhere to go (the last server of a mesh) left one
// WARN line per object — 8,000 identical lines in a try-out — which buried
// the rest of the log and said nothing the count does not.
const notMovedWarned = 20

// logNotMoved logs each object that stays (object, outcome, reason): the
// first notMovedWarned of each outcome and reason at WARN, the rest at
// DEBUG, then for each reason with more one WARN with their count.
func logNotMoved(log *slog.Logger, objs []HostObjectResult) {
	type why struct {
		outcome hostmove.Outcome
		reason  string
	}
	seen := map[why]int{}
	var order []why
	instances := 0
	for _, r := range objs {
		if r.Object.Instance && r.Outcome == hostmove.Skipped {
			// Skipped as the spec has it (§8 moves Actors and User Spots):
			// counted in one INFO line below, each at DEBUG. One WARN per
			// Instance Spot in every step of a rolling restart read as a
			// failure when nothing had failed.
			instances++
			log.Debug("host relocation: object stays on this node", "object", r.Object.ID, "spot", r.Object.Spot,
				"outcome", r.Outcome.String(), "reason", r.Reason)
			continue
		}
		k := why{r.Outcome, reasonClass(r.Reason, r.Object.ID)}
		if seen[k] == 0 {
			order = append(order, k)
		}
		seen[k]++
		level := slog.LevelWarn
		if seen[k] > notMovedWarned {
			level = slog.LevelDebug
		}
		log.Log(context.Background(), level, "host relocation: object stays on this node", "object", r.Object.ID, "spot", r.Object.Spot,
			"outcome", r.Outcome.String(), "reason", r.Reason)
	}
	if instances > 0 {
		log.Info("host relocation: Instance Spots stay on this node (host relocation does not move them; each activates again on its next message, on a serving node, with fresh state)",
			"count", instances)
	}
	for _, k := range order {
		if more := seen[k] - notMovedWarned; more > 0 {
			log.Warn("host relocation: more objects stay on this node for the same reason (each at debug level)",
				"count", more, "outcome", k.outcome.String(), "reason", k.reason)
		}
	}
}

// reasonClass is reason with the object's own id replaced by "<object>",
// so that the same failure of many objects is counted as one reason: a
// store refusing writes fails each move with an error naming its object
// (`actor "a337" not moved, the store refused …`), and a host relocation
// of 488 objects against a Redis at its maxmemory wrote 488 WARN lines
// (operator try-out 5, 2026-12-06).
func reasonClass(reason, id string) string {
	if id == "" {
		return reason
	}
	reason = strings.ReplaceAll(reason, strconv.Quote(id), `"<object>"`)
	var b strings.Builder
	for rest := reason; ; {
		i := strings.Index(rest, id)
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		end := i + len(id)
		// Only the id as a word of its own: not a longer id it begins
		// (a1 in a1041), nor one it ends.
		if (i == 0 || !idByte(rest[i-1])) && (end == len(rest) || !idByte(rest[end])) {
			b.WriteString(rest[:i])
			b.WriteString("<object>")
		} else {
			b.WriteString(rest[:end])
		}
		rest = rest[end:]
	}
}

// idByte reports whether c can continue an object id in a reason's text.
func idByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// unmoved is the result of a drain that moves nothing (why): every object
// is NotStarted (Skipped when DisableRelocation), each logged, and stays
// until the shutdown removes it. It ends Completed.
func (n *Node) unmoved(why string, progress func(HostProgress)) HostRelocationResult {
	cmd := hostmove.New(n.obj.hostedForHostMove(), 1)
	// Completed: the drain decided at once that nothing could move, and
	// no deadline passed (ForceStopped, which it ended with until the
	// review of 2026-12-07, says one did: §11).
	cmd.Decline(why)
	res := HostRelocationResult{End: cmd.Progress().End, Progress: cmd.Progress(), Objects: cmd.Results()}
	n.logNotMoved(res)
	if progress != nil {
		progress(res.Progress) // its one call, with the end (a caller's progress display waits for it)
	}
	return res
}

// hostedForHostMove lists the Actors, User Spots and Instance Spots this
// node hosts and serves (not the Entry Spot, not objects arriving or
// leaving), with their factory's policy. Instance Spots are listed to be
// Skipped (unmovableInstance): a host command does not move them, and a
// drain's shutdown removes them — said, not silent (a drain of a node
// hosting 330 sessions reported "0 skipped" and removed them all).
func (o *objects) hostedForHostMove() []hostmove.Object {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]hostmove.Object, 0, len(o.hosted))
	for k, h := range o.hosted {
		if h.entry || h.state != hostServing && !lateSnapshotLocked(h) {
			continue
		}
		f, ok := o.registry[h.stableType]
		obj := hostmove.Object{ID: k.ID, Spot: k.Spot, Generation: h.objectGeneration, Disabled: ok && f.Policy == spot.PolicyDisabled}
		switch h.kind {
		case record.ObjectActor, record.ObjectUserSpot:
		case record.ObjectInstanceSpot:
			obj.Instance, obj.Unmovable = true, unmovableInstance
		default:
			continue
		}
		out = append(out, obj)
	}
	return out
}

// lateSnapshotLocked reports whether h is held by a snapshot adapter's
// call that outlived its move (relocate_snapshot.go, ActReopenAfterSnapshot
// marks it, the call's return unmarks it): its state is still hostMoving
// though its move has ended. Marked, not inferred: a hostMoving object
// whose ingress hold is gone is also one whose cancelled move is being
// reopened, and taking that for a late snapshot failed its next host move
// at once (TestHostRelocateStoppedStartsNoMore, one run in five). Such an object stays here, held, its moves answering ErrMoving, until the
// call returns — which may be never. A host command lists it (a drain's
// list no longer waits for it as for an object leaving) and ends it at
// once, Failed (snapshotStillRunning), instead of retrying its ErrMoving
// until the deadline or leaving it out of its result (until 2026-12-07:
// TestHostRelocateReportsAnObjectHeldByALateSnapshot,
// TestDrainReportsAnObjectHeldByALateSnapshot). objects.mu is held.
func lateSnapshotLocked(h *hosted) bool {
	return !h.entry && h.state == hostMoving && h.lateSnapshot != nil
}

// heldByLateSnapshot is lateSnapshotLocked for the object k; false once the
// node halted (a move left to its target at the stop is in that state too,
// and the stop's reasons say what becomes of it).
func (o *objects) heldByLateSnapshot(k spot.Key) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.hosted[k]
	return h != nil && o.halt.Err() == nil && lateSnapshotLocked(h)
}

// lateSnapshotGrace is how long a host command waits for a snapshot call
// that outlived its move before it ends the object Failed: a move
// cancelled while a plain Snapshot was about to return (the command's own
// Stop a moment before) leaves the object so for microseconds only.
const lateSnapshotGrace = time.Second

// awaitLateSnapshot waits, while the object k is held by a snapshot call
// that outlived its move, for that call to return — at most
// lateSnapshotGrace, and not past ctx — and reports whether it is still so
// held then (heldByLateSnapshot).
func (o *objects) awaitLateSnapshot(ctx context.Context, k spot.Key) bool {
	o.mu.Lock()
	h := o.hosted[k]
	var returned chan struct{}
	if h != nil && o.halt.Err() == nil && lateSnapshotLocked(h) {
		returned = h.lateSnapshot
	}
	o.mu.Unlock()
	if returned == nil {
		return false
	}
	t := time.NewTimer(lateSnapshotGrace)
	defer t.Stop()
	select {
	case <-returned:
	case <-t.C:
	case <-ctx.Done():
	}
	return o.heldByLateSnapshot(k)
}

// snapshotStillRunningReason is the outcome of an object held by a late
// snapshot call (heldByLateSnapshot).
const snapshotStillRunningReason = snapshotStillRunning + ": the snapshot adapter's call from a move of it (this one's, past its deadline, or an earlier one's) is still running " +
	"(a Snapshot that does not return, or not in time); the object stays here, held (no turn runs, its moves answer ErrMoving) until the call returns"

// arrivalsUnderWay counts the objects on their way here: creations under
// way on this node (createOnTarget) and incoming moves not yet opened.
func (o *objects) arrivalsUnderWay() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.creating
	for _, h := range o.hosted {
		if h.state == hostIncoming {
			n++
		}
	}
	return n
}

// relist adds to cmd, whose list is still open, the objects that landed
// here since it was listed, and closes the list once nothing is on its way
// here any more. A host command (hostMove set: nothing new starts) would
// otherwise leave behind an object whose creation or incoming move began
// before the command and ended after the list — and a drain's shutdown
// removes it with its state (found in a try-out: three servers, creations
// and destroys from 16 workers, host relocations meanwhile). What is on
// its way is counted before listing: an arrival landing between the two
// keeps the list open for the next look. The caller holds the command's
// lock.
//
// A drain's list also stays open while an object it does not list is
// leaving (leavingUnderWay): its shutdown would remove one that serves
// here again. A host Relocate does not wait for those — the node goes on
// serving them — only for its own objects and the arrivals: until the
// review of 2026-12-07 its list stayed open while any object of the node
// was moving or closing, so a single-object move under way beside it held
// it, its own objects done, until that move ended or the command's
// deadline, and it then ended ForceStopped
// (TestHostRelocateDoesNotWaitForAMoveOutsideIt).
func (o *objects) relist(cmd *hostmove.Command, drain bool) int {
	arriving := o.arrivalsUnderWay()
	if drain {
		arriving += o.leavingUnderWay(cmd)
	}
	added, _ := cmd.Add(o.hostedForHostMove())
	if arriving == 0 && added == 0 {
		cmd.Seal()
	}
	return added
}

// leavingUnderWay counts the objects (not the Entry Spot) cmd does not
// list in a state that ends by itself — moving away (a single-object move
// of another caller), relaying its cutover, closing: each either leaves or
// serves here again, and one that serves again must be listed (a drain's
// shutdown would otherwise remove it unreported). cmd's own objects are
// not counted: each has its outcome or a move of the command under way,
// and one listed already is not listed again.
func (o *objects) leavingUnderWay(cmd *hostmove.Command) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, h := range o.hosted {
		if !h.entry && (h.state == hostMoving || h.state == hostCutover || h.state == hostClosing) &&
			!cmd.Lists(hostmove.Key{ID: k.ID, Spot: k.Spot}) {
			n++
		}
	}
	return n
}

// arrivalPoll is how often a host command whose listed objects have all
// started looks again for arrivals (relist).
const arrivalPoll = 5 * time.Millisecond

// unmovableInstance is why a host command skips an Instance Spot.
const unmovableInstance = "an Instance Spot: host relocation does not move it (spec §8 moves Actors and User Spots; docs/INSTANCE-SPOTS.md); its next message activates it again on a serving node, with fresh state"

// hostMoveOne moves one object of a host command and classifies the end.
func (o *objects) hostMoveOne(ctx context.Context, obj hostmove.Object, runs *targetRuns, patience *targetPatience) hostmove.Result {
	kind := record.ObjectActor
	if obj.Spot {
		kind = record.ObjectUserSpot
	}
	r := hostmove.Result{Object: obj}
	// left classifies an object no longer hosted here: Gone (destroyed,
	// closed, moved by someone else) — unless the node stopped, whose
	// shutdown removed it (Failed: not moved).
	left := func(why string) {
		if o.halt.Err() != nil {
			r.Outcome, r.Reason = hostmove.Failed, nodeStoppedDuring+why
			return
		}
		r.Outcome, r.Reason = hostmove.Gone, why
	}
	if _, ok := o.hostedFor(spot.Key{Spot: obj.Spot, ID: obj.ID}); !ok {
		if o.halt.Err() != nil {
			r.Outcome, r.Reason = hostmove.Failed, nodeStoppedReason
			return r
		}
		r.Outcome, r.Reason = hostmove.Gone, "no longer hosted here"
		return r
	}
	if o.awaitLateSnapshot(ctx, spot.Key{Spot: obj.Spot, ID: obj.ID}) {
		r.Outcome, r.Reason = hostmove.Failed, snapshotStillRunningReason
		o.log.Warn("host relocation: the object is held by a snapshot adapter's call that outlived an earlier move; not moved, it stays here",
			"object", obj.ID)
		return r
	}
	start := time.Now()
	var preferred []byte // the target run's node this move was handed
	handed := false
	res, err := o.hostAttempt(ctx, kind, obj, []RelocateOption{preferring(func(kind record.ObjectKind, stableType string) []byte {
		// Once per move: a move that waits for its object's arrival to
		// end places again (relocateOne), and must not take two turns.
		if !handed {
			preferred, handed = runs.prefer(kind, stableType), true
		}
		return preferred
	})})
	o.hook().step(obj.ID, stepHostAttempt)
	runs.took(preferred, res.TargetNodeRID, failedOnTarget(res, err))
	// The nodes the move was offered to, each once: an attempt that found
	// no node to try offered it to none (until 2026-12-07 each retry
	// counted one, and "3 targets" was reported with 2 tried).
	var offered [][]byte
	offer := func() {
		if len(res.TargetNodeRID) == 0 {
			return
		}
		for _, rid := range offered {
			if bytes.Equal(rid, res.TargetNodeRID) {
				return
			}
		}
		offered = append(offered, res.TargetNodeRID)
		r.Targets = len(offered)
	}
	offer()
	// A move that failed on its target (unreachable, dead, full, refusing)
	// left the object serving here (§9.4): try the other nodes before
	// giving up on it, as long as the command's deadline allows. A node
	// that died a moment ago still looks serving until its lease ends.
	// One that failed for a passing store or lease problem here left it
	// serving too: try it again, paced (transientMove).
	var avoid [][]byte
	var tried []string // "reason on target" of the targets that failed, for the outcome
	pace := newHostRetryPace()
	// No usable target at all (every peer reacquiring its lease after a
	// store outage, links coming back) is waited for, but not for ever: a
	// mesh whose other nodes are gone would hold the command until its
	// deadline. The patience is the command's (targetPatience).
	waitForTargets := func() bool {
		return errors.Is(err, errNoUsableNode) && o.n.serversRecently(ctx) && patience.wait()
	}
retry:
	for ctx.Err() == nil && (err != nil || res.Outcome != Moved) {
		if _, ok := o.hostedFor(spot.Key{Spot: obj.Spot, ID: obj.ID}); !ok {
			break
		}
		if o.awaitLateSnapshot(ctx, spot.Key{Spot: obj.Spot, ID: obj.ID}) {
			break // its move answers ErrMoving until the call returns: see below
		}
		switch {
		case err == nil && retryElsewhere(res.Reason) && !res.storeFailed && !res.appSlow && r.Targets < hostMoveTries:
			avoid = append(avoid, res.TargetNodeRID)
			tried = append(tried, fmt.Sprintf("%s on %x", reasonWithDetail(res), res.TargetNodeRID))
			o.log.Info("host relocation: move failed on its target; trying another node", "object", obj.ID,
				"target", fmt.Sprintf("%x", res.TargetNodeRID), "reason", reasonWithDetail(res))
		case transientMove(res, err, o.n.leaseRecoverable()) || waitForTargets():
			why := reasonWithDetail(res)
			if err != nil {
				why = err.Error()
			}
			level := slog.LevelDebug
			if pace.n == 0 {
				level = slog.LevelInfo
			}
			msg := "host relocation: move failed for a passing store or lease problem; trying again"
			if errors.Is(err, errNoUsableNode) {
				msg = "host relocation: no node can take it now, but other servers served a moment ago; trying again"
			}
			o.log.Log(ctx, level, msg, "object", obj.ID, "reason", why)
			if pace.sleep(ctx) != nil {
				break retry // the deadline: this attempt's outcome stands
			}
		default:
			break retry
		}
		res, err = o.hostAttempt(ctx, kind, obj, []RelocateOption{avoiding(avoid)})
		offer()
		o.hook().step(obj.ID, stepHostAttempt)
	}
	if err != nil && len(tried) > 0 {
		// The retry found no node to try: say why the earlier targets
		// failed, not only that none is left.
		err = fmt.Errorf("%s; then: %w", strings.Join(tried, "; "), err)
	}
	r.Took = time.Since(start)
	switch {
	case err == nil && res.Outcome == Moved:
		patience.landed()
		r.Outcome, r.Bytes, r.Target = hostmove.Moved, res.PayloadBytes, res.TargetNodeRID
	case o.heldByLateSnapshot(spot.Key{Spot: obj.Spot, ID: obj.ID}):
		// This attempt's snapshot call, or another caller's, outlived its
		// move: the object stays here, held, until it returns.
		r.Outcome, r.Reason = hostmove.Failed, snapshotStillRunningReason
		if err == nil && res.Detail != "" {
			r.Reason += " (" + reasonWithDetail(res) + ")"
		}
	case err == nil && res.Reason == relocation.ReasonRemoved.String():
		// Its record was removed during the move (ctl reclaim, the reclaim
		// sweep): it is on no node, so not Failed (which stays here and is
		// what a drain's shutdown removes) but Gone, with the reason.
		r.Outcome, r.Reason = hostmove.Gone, res.Reason+": its record was removed from the store during the move; no node serves it"
	case err == nil && res.Reason == relocation.ReasonOwnerChanged.String():
		// Its record names an owner the move did not make: it is no
		// longer here (not reopened; what the move took in was handed over to that
		// owner, relocate_handover.go), and not this node's to
		// retry or to remove at a drain's shutdown.
		r.Outcome, r.Reason = hostmove.Gone, res.Reason+": its record names an owner this move did not make; no longer served here"
	case err == nil && res.Reason == relocation.ReasonLeftToTarget.String():
		r.Outcome, r.Reason = hostmove.Failed, res.Reason // LeftToTarget
	case err == nil:
		// An attempt that failed without an error leaves the object
		// serving here (§9.4) — unless it left meanwhile (destroyed or
		// closed while the move was retried): then it is Gone, not
		// Failed, which says it stays here (review, 2026-12-07).
		if _, ok := o.hostedFor(spot.Key{Spot: obj.Spot, ID: obj.ID}); !ok {
			left("no longer hosted here after its move failed (" + reasonWithDetail(res) + ")")
		} else {
			r.Outcome, r.Reason = hostmove.Failed, reasonWithDetail(res)
		}
	case errors.Is(err, ErrNotFound) || errors.Is(err, ErrStaleGeneration):
		r.Outcome, r.Reason = hostmove.Gone, err.Error()
	default:
		if _, ok := o.hostedFor(spot.Key{Spot: obj.Spot, ID: obj.ID}); !ok {
			left(err.Error())
		} else {
			r.Outcome, r.Reason = hostmove.Failed, err.Error()
		}
	}
	return r
}

// hostAttempt is one move of a host command's object under the command's
// deadline, whose wait for the application on this node — the object's
// running turn to end, its Snapshot — is bounded as a single move's whose
// caller gave no deadline (relocation.deadline; waitingForApp). The moves
// of a command share its deadline, and one whose Snapshot did not return
// held its worker until then and ended the command ForceStopped
// (TestHostRelocateBoundsEachMoveByTheMoveDeadline). The rest of the move
// keeps the command's deadline: a large payload over a slow link, a slow
// Restore on the target, may take longer than relocation.deadline (review,
// 2026-12-07: bounding the whole move failed such moves on every target;
// TestHostRelocateMovesAnObjectThatTakesLongerThanTheMoveDeadline).
func (o *objects) hostAttempt(ctx context.Context, kind record.ObjectKind, obj hostmove.Object, opts []RelocateOption) (RelocationResult, error) {
	return o.relocate(ctx, kind, obj.ID, obj.Generation, append(opts, waitingForApp(o.n.cfg.Relocation.Deadline)))
}

// reasonWithDetail is res.Reason with its Detail, when there is one: a
// target whose owner lease is gone read "capacity" alone, as if it were
// full (an operator try-out: every server stopped at once).
// Only the reasons the detail belongs to get it: others are compared as
// they are (leftToTarget).
func reasonWithDetail(res RelocationResult) string {
	switch {
	case res.Detail == "":
	case res.Reason == relocation.ReasonCapacity.String(), res.Reason == relocation.ReasonTargetFailed.String(),
		res.Reason == relocation.ReasonSnapshotFailed.String(), res.Reason == relocation.ReasonDeadline.String():
		return res.Reason + " (" + res.Detail + ")"
	}
	return res.Reason
}

// hostMoveTries bounds the targets one object of a host command is offered
// to (its first move and the retries elsewhere).
const hostMoveTries = 3

// transientMove reports whether a move failed for a passing problem here,
// before anything changed: the store could not be reached (a read timed
// out while it was paused), the lease gate was shut while a renew was late
// (it reopens), or the record changed before Captured — which is also how
// a store failure at that step ends. The object is still serving here, so
// the host command tries it again (paced) instead of handing it to the
// shutdown, which removes it: a drain during an 8 s Redis pause (try-out)
// gave up on 5 to 10 objects that way. The lease lost counts only while
// it is being reacquired (leaseRecoverable). Not: the lease released, the
// node closing, the object's own refusal.
func transientMove(res RelocationResult, err error, leaseRecoverable bool) bool {
	if err == nil {
		// The store failed the capacity batch (its reads not answered, or
		// its result lost and not confirmed by a re-read; the reservation
		// was released, the object serves here): the target was not at
		// fault. Ruling it out left a drain with one other node nothing
		// to try, and storeUnconfirmed was not tried again at all, once
		// the store answered again (an operator try-out: Redis stopped
		// 12 s in the middle of a drain, six objects removed with 7 s of
		// the drain left).
		return res.Reason == relocation.ReasonRecordChanged.String() || res.Reason == relocation.ReasonStoreUnconfirmed.String() ||
			res.storeFailed
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, lease.ErrLeaseReleased) || errors.Is(err, locstore.ErrWriteRefused) {
		// A store refusing writes (out of memory, a failed save)
		// refuses them until an operator acts: the move fails, listed
		// with the refusal, and the object stays here (§9.4).
		return false
	}
	if errors.Is(err, lease.ErrLeaseLost) {
		// Lost and being reacquired (the objects are re-adopted, then the
		// gate reopens): passing; lost to a store data loss: not.
		return leaseRecoverable
	}
	// Being created, closing, or moved by another command: the state ends
	// by itself; the loop ends once the object is movable or gone.
	var ps *passingState
	return errors.As(err, &ps) || errors.Is(err, locstore.ErrUnavailable) || errors.Is(err, lease.ErrLeaseExpired)
}

// noTargetPatience is how long a host command's move waits for a usable
// target to appear (errNoUsableNode): long enough for peers to reacquire
// their leases after a store outage, re-adopt their objects and be listed
// serving again — three lease renew intervals, at least 10 s.
func (n *Node) noTargetPatience() time.Duration {
	return max(3*n.cfg.Lease.RenewInterval, 10*time.Second)
}

// hostRetryPace paces the tries of one object of a host command after a
// passing problem: 50 ms doubling to 1 s.
type hostRetryPace struct {
	n int
	d time.Duration
}

func newHostRetryPace() *hostRetryPace { return &hostRetryPace{d: 50 * time.Millisecond} }

func (p *hostRetryPace) sleep(ctx context.Context) error {
	d := p.d
	p.n++
	p.d = min(2*p.d, time.Second)
	return ctxsleep.For(ctx, d)
}

// retryElsewhere reports whether a move that ended for reason may succeed
// on another target: the failure was the target's (it could not be
// reached, refused, ran out of capacity or of time), not the object's.
// failedOnTarget says whether a host move's attempt failed because of its
// target, which benches that target in the command's target runs
// (host_targets.go). A move that ended at its wait for the application
// (appSlow) or whose capacity batch the store did not answer
// (storeFailed, reported as ReasonCapacity) tells nothing of its target:
// until 2026-12-08 a store outage on the source benched every target it
// met, and the moves that followed once the store answered again waited
// out those benches (up to maxBench).
func failedOnTarget(res RelocationResult, err error) bool {
	return err == nil && res.Outcome != Moved && retryElsewhere(res.Reason) && !res.appSlow && !res.storeFailed
}

func retryElsewhere(reason string) bool {
	switch reason {
	case relocation.ReasonCapacity.String(), relocation.ReasonTargetFailed.String(), relocation.ReasonStreamFailed.String(),
		relocation.ReasonDeadline.String(), relocation.ReasonTargetLost.String():
		return true
	}
	return false
}

// Drain is the orderly stop that keeps the objects alive (SIGTERM with
// relocation.drain_on_shutdown): it publishes draining (other nodes stop
// placing here), moves every object to the other serving nodes like
// Relocate within ctx's deadline less a reserve for the shutdown, keeps
// passing messages on until its senders have switched to the new owners
// (lingerFollow), then runs Close (§11), which removes what could
// not move. Without another serving node it skips the moves and only
// closes; the result then shows every object NotStarted (each logged) and
// ends Completed. From its call a host Relocate is refused; one running is
// waited for (within the deadline less the shutdown's reserve). It
// returns what the moves did and Close's error.
func (n *Node) Drain(ctx context.Context, opts HostRelocateOptions) (HostRelocationResult, error) {
	deadline := n.cfg.ShutdownDeadline
	if deadline <= 0 {
		deadline = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	// The shutdown gets the whole deadline; what comes before it also ends
	// when opts.Stop closes.
	closeCtx := ctx
	ctx, stopped := stopWith(ctx, opts.Stop)
	defer stopped()
	opts.Progress = n.hostView.track(cmdDrain, opts.Progress)
	// The drain's reported time counts from here: the waits below for this
	// node's lease and for a recovering peer are part of it (Took,
	// BeforeMoves).
	began := n.hostNow()
	var res HostRelocationResult
	moves := false // the moves ran (hostRelocate)
	// Both waits for this node's own lease share one noTargetPatience (the
	// documented bound): a lease still not back after the first is not
	// waited for again.
	leaseWait := n.noTargetPatience()
	// Every wait before the moves keeps the shutdown's reserve before
	// ctx's deadline, like the moves (drainMoves): noTargetPatience is 10 s
	// at least, and a shutdown_deadline (or a caller's deadline) shorter
	// than the waits plus the reserve left Close an expired context — the
	// owner sweep, the stopped publish and the lease release undone.
	end, _ := ctx.Deadline()
	wctx, wcancel := context.WithDeadline(ctx, end.Add(-drainReserve(deadline)))
	defer wcancel()
	leaseWait -= n.awaitOwnLease(wctx, leaseWait)
	// Stop taking objects and say so before looking for targets
	// (OPERATIONS.md, drain step 1): the look may wait for a peer, and a
	// node still serving meanwhile took objects moved in by a peer draining
	// too — only for its shutdown to remove them (an operator try-out,
	// 2026-12-06). hostMove is held until Close: nothing new lands here
	// between the moves and the shutdown.
	// The wait for a host command running keeps the shutdown's reserve
	// (wctx): counted from now, it ate into the reserve by the lease wait
	// above, and all of it under a caller's deadline shorter than
	// shutdown_deadline.
	holding := n.beginDrainCommand(wctx)
	if holding {
		n.publishDraining(ctx)
	}
	if n.closing() {
		// A drain already running (started through the admin listener)
		// has stopped the node, or is stopping it: its caller has its
		// result. Close below waits for that stop.
		res.OtherDrain, res.End = true, hostmove.Completed
		n.log.Info("drain: the node is already stopping (a drain already running, or Close); nothing is left here to move")
	} else if lost := n.LeaseLost(); lost != nil && !n.leaseRecoverable() {
		// The lease ended for good (the store lost its data, or another
		// run took the routing id over; LeaseLost is set on an ordinary,
		// recoverable loss too): no move can start, whatever the
		// other nodes do. Say so, instead of the "no other serving node"
		// a look at the mesh finds — an operator try-out (Redis restarted
		// empty, then SIGTERM) read 20 WARN lines blaming the mesh.
		why := leaseEndedReason(lost)
		res = n.unmoved("drain: "+why, opts.Progress)
		n.log.Warn("drain: this node's owner lease ended for good; no object can move", "objects", res.Progress.Total,
			"why", why, "err", lost)
	} else {
		res, moves = n.drainMoves(ctx, wctx, opts, began, deadline, holding, leaseWait)
	}
	res.Took = n.hostNow().Sub(began)
	if !moves {
		res.BeforeMoves = res.Took // all of it went before the moves that did not run
	}
	n.log.Info("drain: shutting down", "took", res.Took, "before_moves", res.BeforeMoves, "moves_took", res.MovesTook,
		"after_moves", res.Took-res.BeforeMoves-res.MovesTook)
	if opts.beforeStop != nil {
		opts.beforeStop(res)
	}
	err := n.Close(closeCtx)
	res.ShutdownSwept = n.sweptOnClose()
	res.StoreDataLost = errors.Is(n.LeaseLost(), locstore.ErrDataLost)
	if left := res.NotMoved(); len(left) > 0 {
		instances := res.InstanceSpotsNotMoved()
		switch {
		case res.StoreDataLost:
			n.log.Warn("drain: objects not moved; their state is lost, and their records went with the store's data", "count", len(left))
		case res.ShutdownSwept && instances == len(left):
			// Only Instance Spots stayed: what the spec has a drain do with
			// them (§8 moves Actors and User Spots), not a failure. A
			// WARN here in every step of a rolling restart told operators
			// something went wrong when nothing had.
			n.log.Info("drain: Instance Spots removed by the shutdown; each activates again on its next message, with fresh state", "count", instances)
		case res.ShutdownSwept:
			n.log.Warn("drain: objects removed by the shutdown (their state is lost)", "count", len(left)-instances, "instance_spots", instances)
		default:
			n.log.Warn("drain: objects not moved and the shutdown could not remove their records: their state is lost, their records remain until reclaimed",
				"count", len(left), "err", err)
		}
	}
	return res, err
}

// drainMoves is a drain's look for targets and its moves (Drain): without
// another serving node (or a descriptor list) it moves nothing; otherwise it
// moves the objects within ctx's deadline less the shutdown's reserve and
// lingers for the senders of moved objects. moves reports whether the moves
// ran (hostRelocate). The waits for a peer and for this node's lease end
// by wctx, ctx less the shutdown's reserve.
func (n *Node) drainMoves(ctx, wctx context.Context, opts HostRelocateOptions, began time.Time, deadline time.Duration,
	holding bool, leaseWait time.Duration) (res HostRelocationResult, moves bool) {
	switch others, err := n.otherServingNodes(wctx); {
	case err != nil:
		res = n.unmoved("drain: cannot tell whether another node can take it: "+err.Error(), opts.Progress)
		n.log.Warn("drain: cannot tell whether another node can take the objects; shutting down without moving them",
			"objects", res.Progress.Total, "err", err)
	case others == 0:
		res = n.unmoved("drain: no other serving node", opts.Progress)
		if res.Progress.Total > 0 {
			n.log.Warn("drain: no other serving node in the mesh can take the objects; the shutdown removes them",
				"objects", res.Progress.Total)
		}
	default:
		// The discovery round above may have waited out a store timeout,
		// long enough for the admission gate to shut meanwhile (a renew
		// late): wait for it again rather than hand every object to the
		// shutdown.
		n.awaitOwnLease(wctx, leaseWait)
		if !holding {
			if err := n.beginHostMove(cmdDrain); err != nil {
				res = n.unmoved("drain: "+err.Error(), opts.Progress)
				n.log.Warn("drain: objects not moved", "objects", res.Progress.Total, "err", err)
				break
			}
			n.publishDraining(ctx)
		}
		// Once every peer has had a discovery round since, none resolves
		// a route to this node from its cache any more (isLeaving).
		seenBy := time.Now().Add(n.discoveryEvery + drainQuiet)
		end, _ := ctx.Deadline()
		rctx, rcancel := context.WithDeadline(ctx, end.Add(-drainReserve(deadline)))
		res, _ = n.hostRelocate(rctx, opts, began, true)
		moves = true
		p := res.Progress
		n.log.Info("drain: objects moved before the shutdown", "moved", p.Moved, "left", len(res.NotMoved()), "end", res.End)
		if p.Moved > 0 {
			n.lingerFollow(ctx, seenBy, end.Add(-drainReserve(deadline)/2))
		}
		rcancel()
	}
	return res, moves
}

// beginDrainCommand takes the host-command flag for a drain, waiting for a
// host command that holds it to end (awaitHostCommand), until ctx ends or
// the node starts closing; it reports whether it took it. From its call on
// a host Relocate is refused (drainWanted), and a drain that still finds
// a command running after its wait — one that took the flag in between —
// waits again: before the review of 2026-12-07 a Relocate called in that
// window kept the flag, and the drain listed every object NotStarted and
// ran the shutdown under it. Refused for another reason (the lease gate),
// it tries once more after the look, as when a command that ended between
// the refusal and the look left nothing to wait for: a gate that refused
// may have reopened.
func (n *Node) beginDrainCommand(ctx context.Context) bool {
	n.obj.drainWanted.Store(true)
	err := n.beginHostMove(cmdDrain)
	for again := false; err != nil; again = true {
		if again && !errors.Is(err, ErrHostCommandRunning) || n.closing() || ctx.Err() != nil {
			return false
		}
		n.obj.hook().step("", stepDrainAwait)
		n.awaitHostCommand(ctx)
		n.obj.hook().step("", stepDrainAwaited)
		err = n.beginHostMove(cmdDrain)
	}
	return true
}

// awaitHostCommand waits while a host command that another caller started
// runs — a host Relocate, or a drain, through the admin listener — until it
// ends, the node starts closing (a drain ends in the node's stop) or ctx
// ends. It reports whether it waited. Why: a SIGTERM drain refused by the
// command running went straight to the shutdown, which removed every
// object that command had not moved yet and cut its moves and linger short
// (an operator try-out: SIGTERM 0.15 s into `ctl relocate --drain`).
func (n *Node) awaitHostCommand(ctx context.Context) bool {
	if !n.obj.hostMove.Load() {
		return false // refused for the lease gate, or the command ended
	}
	// hostCmd is nil for an instant after beginHostMove set hostMove: the
	// command runs all the same.
	running := "a host command"
	if p := n.obj.hostCmd.Load(); p != nil {
		running = *p
	}
	n.log.Info("drain: a host command is already running; waiting for it to end before draining", "running", running)
	for n.obj.hostMove.Load() && !n.closing() {
		if ctxsleep.For(ctx, 50*time.Millisecond) != nil {
			break
		}
	}
	return true
}

// closing reports whether Close has begun.
func (n *Node) closing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// leaseEndedReason says in a few words why a run's owner lease ended for
// good (LeaseLost), for the outcome of each object a drain cannot move.
func leaseEndedReason(lost error) string {
	switch {
	case errors.Is(lost, locstore.ErrDataLost):
		return "the Location Store lost its data (STORE DATA LOST), and this node's owner lease with it"
	case errors.Is(lost, directory.ErrRoutingIDInUse):
		return "this node's owner lease ended for good: another run took its routing id over"
	}
	return "this node's owner lease ended for good"
}

// stopClosed reports whether stop (HostRelocateOptions.Stop) is closed; a
// nil stop never is.
func stopClosed(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// stopWith returns ctx, ended also when stop closes (nil: never), and the
// function that releases it. The release returns once the goroutine
// watching stop ended: the command (Relocate, Drain) returns after it.
// Until 2026-12-07 it ended on its own after the release, so it could
// still run when a Drain — which closes the node — had returned.
func stopWith(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	if stop == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel()
		<-ended
	}
}

// hostNow reads the clock a host command's reported durations and its
// waits before the moves are measured by: time.Now, or the clock a test
// moves (hostClock).
func (n *Node) hostNow() time.Time {
	if n.hostClock != nil {
		return n.hostClock()
	}
	return time.Now()
}

// drainQuiet is how long no message may have been passed on (Message
// Follow) before a drained node stops: its senders have switched to the
// new owners.
const drainQuiet = 100 * time.Millisecond

// lingerFollow keeps the drained node up — passing on what senders with an
// old route still send it, each pass-on answered by a command 50 that
// switches its sender — until every peer has seen it draining (seenBy: one
// discovery round after it published draining; a peer then re-reads the
// store instead of using a cached route to it) and nothing was passed on
// for drainQuiet; never past until. A one-way message sent to a node that
// has stopped is lost, so the node leaves only once its senders have moved
// on.
func (n *Node) lingerFollow(ctx context.Context, seenBy, until time.Time) {
	start := time.Now()
	first := n.obj.stats.followForwarded.Load()
	last := first
	for time.Now().Before(until) && ctx.Err() == nil {
		time.Sleep(drainQuiet)
		now := n.obj.stats.followForwarded.Load()
		if now == last && !time.Now().Before(seenBy) {
			break
		}
		last = now
	}
	n.log.Info("drain: passed on messages for moved objects until their senders switched", "forwarded", last-first,
		"took", time.Since(start))
}

// drainReserve is the part of the shutdown deadline kept for the §11
// shutdown after the moves: a quarter, 1..10 s.
func drainReserve(deadline time.Duration) time.Duration {
	r := deadline / 4
	switch {
	case r < time.Second:
		return time.Second
	case r > 10*time.Second:
		return 10 * time.Second
	}
	return r
}

// otherServingNodes counts the serving server nodes of this mesh other than
// this one in the current descriptor list. When there are none but some
// are recovering — their lease lost and reacquired, their descriptor not
// yet republished: all of them right after a store outage longer than the
// lease TTL, re-adopting their objects — it waits for one to serve again,
// at most noTargetPatience: a drain then would otherwise hand every object
// to the shutdown. A node that hosts no object and has no creation under
// way has nothing to hand over and does not wait (the last server of a
// mesh stopped right after a pause of its own waited the whole patience
// for peers that had stopped in order: an operator try-out); a creation
// under way is not hosted until its factory returns, and the drain lists
// it once it lands (holdsObjects).
func (n *Node) otherServingNodes(ctx context.Context) (int, error) {
	var waited time.Time
	for {
		serving, recovering, err := n.peersNow(ctx)
		if err != nil && !waited.IsZero() && ctx.Err() != nil {
			return 0, nil // the wait ran out during a round: as at its bound below
		}
		if err != nil || serving > 0 || recovering == 0 || !n.obj.holdsObjects() {
			return serving, err
		}
		if waited.IsZero() {
			waited = n.hostNow()
			n.log.Info("drain: no other node serves now, but some are recovering their owner lease; waiting for them",
				"recovering", recovering, "at_most", n.noTargetPatience())
		}
		if n.hostNow().Sub(waited) >= n.noTargetPatience() || ctxsleep.For(ctx, 250*time.Millisecond) != nil {
			return 0, nil
		}
	}
}

// awaitOwnLease waits, at most atMost, for this node's own admission gate
// while its lease is being recovered (lost and reacquired, or a renew
// late: the objects are re-adopted, then the gate reopens) — a drain right
// after a store outage would otherwise refuse every move and hand the
// objects to the shutdown. A lease released, lost to a data loss or ended
// for good is not waited for. It returns how long it waited.
func (n *Node) awaitOwnLease(ctx context.Context, atMost time.Duration) time.Duration {
	if atMost <= 0 || n.lease.Gate().Admit() == nil || !n.leaseRecoverable() {
		return 0
	}
	n.log.Info("drain: this node's owner lease is being recovered; waiting for it before moving the objects",
		"at_most", atMost)
	start := n.hostNow()
	for n.hostNow().Sub(start) < atMost && n.leaseRecoverable() {
		if n.lease.Gate().Admit() == nil || ctxsleep.For(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	return n.hostNow().Sub(start)
}

// peersNow runs a discovery round and counts the other server nodes of
// this mesh that serve, and those that may be recovering: listed serving
// within the last two noTargetPatience but not now — right after a store
// outage longer than the lease TTL, their leases ended in the store, their
// descriptors may even have been removed as a dead run's, and they come
// back once they have reacquired the lease, re-adopted their objects and
// republished (a peer killed a moment ago looks the same: the wait is
// bounded). Not recovering: a peer listed draining or stopped (only a
// drain publishes draining, and it ends in the node's stop), and a peer no
// longer listed whose owner lease is gone while this node met no store
// problem in the same window — a node that stops in order releases its
// lease and removes its descriptor, and before 2026-12-06 the last server
// of a mesh, stopped right after the others, waited noTargetPatience for
// them (an operator try-out). A peer no longer listed whose lease its run
// holds (its watchers removed its descriptor while it was without one,
// and it reacquired it) is recovering; so is any peer gone from the list
// right after a store problem here, when the others' leases may not be
// back yet.
func (n *Node) peersNow(ctx context.Context) (serving, recovering int, err error) {
	if err := n.Discover(ctx); err != nil {
		if _, ok := n.LastSnapshot(); !ok {
			return 0, 0, err
		}
	}
	snap, ok := n.LastSnapshot()
	if !ok {
		return 0, 0, fmt.Errorf("%w: no descriptor list", ErrUnavailable)
	}
	servingNow := map[string]bool{}
	for _, e := range snap.Entries {
		if n.servingPeer(e) {
			servingNow[string(e.Descriptor.RoutingID)] = true
		}
	}
	listed := n.notLeaving(snap)
	troubled := n.troubledRecently()
	for _, rid := range n.recentServers() {
		if !servingNow[rid] && n.mayServeAgain(ctx, rid, listed, troubled) {
			recovering++
		}
	}
	return len(servingNow), recovering, nil
}

// mayServeAgain reports whether rid, a server listed serving recently that
// does not serve now, may be recovering rather than leaving (peersNow):
// not when listed draining or stopped; when listed otherwise, or when this
// node met a store problem recently (troubled); and when no longer listed,
// only while its run still holds its owner lease (an unreadable lease is
// no proof the run left). listed is notLeaving of the last list.
func (n *Node) mayServeAgain(ctx context.Context, rid string, listed map[string]bool, troubled bool) bool {
	notLeaving, isListed := listed[rid]
	switch {
	case isListed && !notLeaving:
		return false
	case isListed || troubled:
		return true
	}
	held, err := n.leaseHeld(ctx, n.servedOwner(rid))
	return err != nil || held
}

// recentServers lists the other servers of this mesh listed serving within
// the last two noTargetPatience. Whether they are linked says nothing after
// a store outage: every node's discovery removed the others as dead runs
// when their leases expired in the store, and dropped its links to them,
// until they republish.
func (n *Node) recentServers() []string {
	now := n.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.servedAt))
	for rid, s := range n.servedAt {
		if now-s.at <= 2*n.noTargetPatience() {
			out = append(out, rid)
		}
	}
	return out
}

// servedRun is when another server was last listed serving, and the host
// run (OwnerId) its descriptor named then.
type servedRun struct {
	at    time.Duration
	owner string
}

// servedOwner is the OwnerId rid's descriptor named when it was last
// listed serving ("" when it was not).
func (n *Node) servedOwner(rid string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.servedAt[rid].owner
}

// leaseHeld reports whether the owner-lease record of owner exists and
// names it — valid, or reacquired under a newer generation by the same
// run (OwnerIds are never reused): the run is alive.
func (n *Node) leaseHeld(ctx context.Context, owner string) (bool, error) {
	key, err := record.OwnerLeaseKey(owner)
	if err != nil {
		return false, nil
	}
	rr, err := n.loc.Read(ctx, key)
	if err != nil {
		return false, err
	}
	lr, err := authority.LeaseRowOf(key, rr)
	return err == nil && lr.Found && lr.Lease.OwnerID == owner, nil
}

// serversRecently reports whether another server of this mesh served
// recently and is not leaving by the rule of peersNow (mayServeAgain:
// listed draining or stopped, or no longer listed with its lease gone
// while this node met no store problem): a move that found no usable node
// may find one again soon (recovering from a store outage), where a node
// alone in its mesh — or left with peers that are stopping too, or that
// stopped in order — would only wait.
func (n *Node) serversRecently(ctx context.Context) bool {
	snap, _ := n.LastSnapshot()
	listed := n.notLeaving(snap)
	troubled := n.troubledRecently()
	for _, rid := range n.recentServers() {
		if n.mayServeAgain(ctx, rid, listed, troubled) {
			return true
		}
	}
	return false
}

// notLeaving maps the RID of every descriptor of this mesh in snap to
// whether it is not leaving: false for one that says draining or stopped
// (only a drain publishes draining, and it ends in the node's stop).
func (n *Node) notLeaving(snap directory.Snapshot) map[string]bool {
	out := make(map[string]bool, len(snap.Entries))
	for _, e := range snap.Entries {
		if d := &e.Descriptor; d.MeshName == n.cfg.Node.MeshName {
			out[string(d.RoutingID)] = d.State != record.StateDraining && d.State != record.StateStopped
		}
	}
	return out
}

// publishDraining publishes this node draining (a drain's first step).
func (n *Node) publishDraining(ctx context.Context) {
	if err := n.publishDrainingState(ctx); err != nil {
		n.log.Warn("drain: publish draining", "err", err)
	}
}

// publishDrainingState publishes draining and records that it was said
// (drainSaid): a republish after a lease recovery, retried until it lands,
// then says draining too instead of serving (readoptAfterReacquire).
func (n *Node) publishDrainingState(ctx context.Context) error {
	n.drainMu.Lock()
	defer n.drainMu.Unlock()
	n.drainSaid = true
	return n.publish(ctx, record.StateDraining)
}

// noteStoreTrouble records that this node met a store problem now.
func (n *Node) noteStoreTrouble() {
	now := n.clock.Now()
	n.mu.Lock()
	n.troubleAt, n.troubled = now, true
	n.mu.Unlock()
}

// troubledRecently reports whether this node met a store problem within
// the window recentServers looks back over (two noTargetPatience).
func (n *Node) troubledRecently() bool {
	now := n.clock.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.troubled && now-n.troubleAt <= 2*n.noTargetPatience()
}

// noteServingLocked records when each other server of this mesh was
// listed serving in snap (at now), and forgets those not seen so for long.
func (n *Node) noteServingLocked(snap directory.Snapshot, now time.Duration) {
	if n.servedAt == nil {
		n.servedAt = map[string]servedRun{}
	}
	for _, e := range snap.Entries {
		if n.servingPeer(e) {
			n.servedAt[string(e.Descriptor.RoutingID)] = servedRun{at: now, owner: e.Descriptor.OwnerID}
		}
	}
	for rid, s := range n.servedAt {
		if now-s.at > 4*n.noTargetPatience() {
			delete(n.servedAt, rid)
		}
	}
}
