package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// The target side of a move (spec §1.3 steps 5–7, §8, §9.1, §9.2, §10):
// records 40 (Restore request), 52 (chunk), 54 (cutover) and 55 (cancel)
// drive one arrival per binding through mesh/relocation's Target machine.
// Each arrival has one goroutine that steps the machine, so its transitions
// are serial; the inbound handlers only post events and queue messages.

// poster is a mailbox: a spot object, or an arrival's temporary queue.
type poster interface{ Post(spot.Envelope) error }

// arrival is one move attempt bringing an object to this node.
type arrival struct {
	o      *objects
	bind   chunk.Binding
	prep   router.RelocationPrepare
	kind   record.ObjectKind
	key    spot.Key
	h      *hosted // the hostIncoming entry registered for it
	reply  func(*router.Record) error
	corr   uint64
	expire time.Time // the Restore deadline on this node's clock
	// ctx ends at the Restore deadline or when the node halts; the
	// attempt's store calls and factory run under it, and its end is the
	// machine's expiry. Cancelled when the machine stops.
	ctx    context.Context
	cancel context.CancelFunc

	m      *relocation.Target
	events chan relocation.TargetEvent
	done   chan struct{}

	// Set by the machine's goroutine (and the actions it starts) only.
	version          string   // the authority StoreVersion the target first read
	reservation      [16]byte // the move's Reservation ID, as the record names it
	committedVersion string   // the StoreVersion the owner CAS left (under mu: setCommitted)
	obj              *spot.Object
	grace            *time.Timer
	// casWaits / casUnknown count the owner CAS attempts that found the
	// lease gate shut / got no answer: the first of each is logged at
	// WARN, the rest (one every 50 ms while the store is down) at DEBUG.
	casWaits, casUnknown int
	// halted: the attempt ended because this node stops (EvHalted), not at
	// its Restore deadline: its owner sweep settles the move (fenceArrival).
	halted bool

	mu      sync.Mutex
	payload []byte          // the verified payload, until build takes it
	relay   []spot.Envelope // from the source between relay-ready and cutover
	temp    []spot.Envelope // everything else (§9.2 "temporary queue")
	// followed is the messages of temp that came through Message Follow:
	// their command 50 goes out at the open (noticeFollowed), not before —
	// until the owner CAS applied the move may still be taken back, and a
	// Session switches to the route a 50 names.
	followed  []followedArrival
	digest    router.RelayDigest
	cutover   *router.RelocationCutover
	cutSeen   bool
	abandoned bool
	// failText is why build failed (the factory's or the snapshot
	// adapter's error), sent to the source in the failure's Detail: the
	// source's result and a host command's line then say why, not only
	// "restoreFailed".
	failText string
	// assemblyErr is the chunk registry's error that failed the assembly
	// (the first one seen): the failure it maps to (restoreFailure) and
	// its text answer the source when the attempt ends TgtFailAssembly.
	assemblyErr error
	// sourceEnded says how this node learned that the source's node run
	// ended (sourceRunEnded), set by the machine's goroutine before it
	// steps EvSourceEnded: the failure's Detail.
	sourceEnded string
}

// registerRelocation adds the handoff records to the dispatch table.
func (o *objects) registerRelocation() {
	o.handle(router.CmdRelocationPrepare, o.inboundPrepare)
	o.handle(router.CmdRelocationState, o.inboundChunk)
	o.handle(router.CmdRelocationCutover, o.inboundCutover)
	o.handle(router.CmdRelocationCancel, o.inboundCancel)
}

// failReady answers a Restore request with an explicit failure (53).
func failReady(reply func(*router.Record) error, p *router.RelocationPrepare, f router.RelocationFailure, detail string) error {
	if len(detail) > 255 {
		detail = detail[:255]
	}
	return reply(router.NewRecord(&router.RelocationReady{Correlation: p.Correlation, Relocation: p.Binding.Relocation,
		TargetAttempt: p.Binding.TargetAttempt, Outcome: router.RelocationFailed, Failure: f, Detail: validText(detail)}, nil, nil))
}

// restoreFailure is the record 53 failure a chunk registry error is
// answered with — a Restore request the registry refuses (Begin) or an
// assembly that failed (Add, Complete) — as docs/RESTORE-PAYLOAD.md §9
// tables it. Until 2026-12-07 every refusal but a conflict was answered
// lengthMismatch and every assembly failure checksumMismatch. An error of
// no kind the table names (an invalid binding, which a decoded record
// cannot carry) is a lengthMismatch, as such a refusal was before.
func restoreFailure(err error) router.RelocationFailure {
	switch {
	case errors.Is(err, chunk.ErrConflict):
		return router.RelocationFailureConflict
	case errors.Is(err, chunk.ErrChecksum):
		return router.RelocationFailureChecksumMismatch
	case errors.Is(err, chunk.ErrLength), errors.Is(err, chunk.ErrOutOfOrder):
		return router.RelocationFailureLengthMismatch
	case errors.Is(err, chunk.ErrTooLarge), errors.Is(err, chunk.ErrCapacity):
		return router.RelocationFailureCapacity
	case errors.Is(err, chunk.ErrAborted), errors.Is(err, chunk.ErrSuperseded):
		return router.RelocationFailureCancelled
	case errors.Is(err, chunk.ErrMalformed):
		return router.RelocationFailureRestoreFailed
	}
	return router.RelocationFailureLengthMismatch
}

// inboundPrepare takes a Restore request (40): checks what needs no store,
// registers the temporary queue and starts the arrival.
func (o *objects) inboundPrepare(_ context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
	p := rec.Body.(*router.RelocationPrepare)
	refuse := func(f router.RelocationFailure, format string, a ...any) {
		detail := fmt.Sprintf(format, a...)
		if ok, suppressed := o.restoreRefusedLog.allow(); ok {
			o.log.Info("relocation: Restore refused", "object", p.Object.ObjectID, "failure", f, "detail", detail, "suppressed", suppressed)
		}
		if err := failReady(reply, p, f, detail); err != nil {
			o.log.Debug("relocation: refusal not sent", "err", err)
		}
	}
	b := chunk.BindingOf(p.Binding)
	kind, ok := kindFromWire(p.Object.Kind)
	switch {
	case !ok:
		refuse(router.RelocationFailureAuthorityMismatch, "unknown object kind %d", p.Object.Kind)
		return
	case !fromSource(from, b):
		// Only the source itself streams its Restore (one ordered
		// connection carries 40, 52, 54).
		refuse(router.RelocationFailureNotServing, "sent by %x/%d, the binding names source %x/%d", []byte(from.RID), from.LifecycleGeneration,
			b.Source.NodeRID, b.Source.NodeGeneration)
		return
	case !bytes.Equal(p.TargetNodeRID, o.n.run.rid) || p.TargetNodeGeneration != o.n.run.lifecycleGeneration:
		refuse(router.RelocationFailureNotServing, "addressed to node run %x/%d", p.TargetNodeRID, p.TargetNodeGeneration)
		return
	case o.n.State() != record.StateServing:
		refuse(router.RelocationFailureNotServing, "%s", stateRefusal(o.n.State()))
		return
	case o.hostMove.Load():
		if cmd := o.hostCmd.Load(); cmd != nil && *cmd == cmdDrain {
			// A drain ends in this node's stop: said as the draining it
			// publishes next, so that the source's view marks this run
			// leaving (noteRefusedLeaving) before the publish lands.
			refuse(router.RelocationFailureNotServing, "%s", stateRefusal(record.StateDraining))
			return
		}
		refuse(router.RelocationFailureNotServing, "node is relocating its own objects away (host relocation)")
		return
	}
	if err := o.n.lease.Gate().Admit(); err != nil {
		refuse(router.RelocationFailureNotServing, "owner lease: %v", err)
		return
	}
	remaining := restoreWait(p.DeadlineUnixMs)
	if remaining <= 0 {
		refuse(router.RelocationFailureDeadlineExceeded, "the Restore deadline passed")
		return
	}
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		refuse(router.RelocationFailureNotServing, "node closing")
		return
	}
	if o.hostMove.Load() {
		// Checked again under o.mu, where a host command counts the
		// arrivals under way (relist): either it keeps its list open for
		// this one or this one is refused.
		o.mu.Unlock()
		refuse(router.RelocationFailureNotServing, "node is relocating its own objects away (host relocation)")
		return
	}
	key := spot.Key{Spot: kind != record.ObjectActor, ID: p.Object.ObjectID}
	// The assembly opens before this handler returns: the chunks follow
	// on this same connection and must find it.
	d := chunk.Declaration{Length: p.TotalLength, Count: p.ChunkCount, CRC32C: p.CRC32C}
	if h, ok := o.hosted[key]; ok {
		state, under := h.state, h.arrival // read under o.mu: open() clears them
		o.mu.Unlock()
		if state == hostIncoming && under != nil && under.bind == b {
			o.retransmittedRestore(under, d, refuse)
			return
		}
		refuse(router.RelocationFailureAuthorityMismatch, "%s is already hosted here (%s)", p.Object.ObjectID, state)
		return
	}
	begun, err := o.chunks.Begin(b, d)
	if err != nil {
		o.mu.Unlock()
		refuse(restoreFailure(err), "assembly: %v", err)
		return
	}
	if begun.Status != chunk.Started {
		// The binding's payload was already handed out: a late Restore of
		// an attempt that is over (§9.1). A node still hosting the object
		// refused it above; one it left registers nothing for it.
		o.mu.Unlock()
		refuse(router.RelocationFailureAuthorityMismatch, "a late Restore of an ended attempt (assembly %s)", begun.Status)
		return
	}
	a := &arrival{o: o, bind: b, prep: *p, kind: kind, key: key, reply: reply, corr: p.Correlation,
		expire: time.Now().Add(remaining), m: relocation.NewTarget(),
		events: make(chan relocation.TargetEvent, 16), done: make(chan struct{})}
	a.ctx, a.cancel = context.WithDeadline(o.halt, a.expire)
	// Registering the temporary queue is the first thing (§1.3 step 5):
	// from here on messages for the object wait in it.
	a.h = &hosted{kind: kind, stableType: p.Object.StableType, objectGeneration: p.Object.ObjectGeneration,
		ownerGeneration: p.Object.ExpectedAuthorityOwnerGeneration + 1, state: hostIncoming, arrival: a}
	o.hosted[key] = a.h
	o.arrivals[b] = a
	o.work.Add(1)
	o.mu.Unlock()
	o.gos.Go(a.run)
	a.post(relocation.EvPrepare)
}

// maxRestoreWait bounds how long one arrival may take on this node, from
// its Restore request on, whatever deadline the source sent
// (DeadlineUnixMs): a peer's far-future deadline must not hold an
// assembly (up to the payload limit, 256 MiB), a hosted entry and its
// temporary queue here (as maxActivationWait for an activation). The
// source sends its move's deadline: relocation.deadline (30 s by default)
// for one move, a host command's — relocation.host_deadline, 5 min by
// default, or its caller's — for every move of the command, and a drain's
// shutdown_deadline; each move of a command starts when its turn comes,
// so its Restore has at most what is left of that. One Restore — one
// object's payload assembled, built, relayed and committed — takes
// seconds, a 256 MiB one at 1 MiB/s some four minutes; 30 minutes is six
// default host deadlines and is never the bound a move legitimately meets.
// A clamped attempt ends as at its deadline (before relay-ready answered
// deadlineExceeded, after it as §10 says); the source, which may wait
// longer, is told before relay-ready and, after it, the grace commits
// within a second and an unanswered CAS is decided by reading.
const maxRestoreWait = 30 * time.Minute

// restoreWait is how long this node works on a Restore request whose
// deadline is deadlineUnixMs (Unix milliseconds, as the source's clock
// says): the time left until it, at most maxRestoreWait; zero or less
// when it passed. A value beyond int64 (never a real time) is taken as
// the far future, and so clamped, not as a past deadline.
func restoreWait(deadlineUnixMs uint64) time.Duration {
	return min(time.Until(time.UnixMilli(int64(min(deadlineUnixMs, 1<<62)))), maxRestoreWait)
}

// retransmittedRestore takes a second Restore request (40) for the binding
// of arrival a, under way here; the registry decides on its declaration d
// (§9.1). The same length, count and checksum: a retransmission, reused —
// the answer comes from the first request. A different one: "the existing
// assembly state is neither reused nor overwritten — it ends as an
// explicit conflict failure": the registry ends the assembly (ErrConflict),
// this request is refused conflict and the attempt fails as its assembly
// did, the source told on the first request's connection. Until
// 2026-12-07 every second request was ignored, and the attempt went on on
// the first declaration. Once the payload was verified and handed out the
// registry keeps it (docs/RESTORE-PAYLOAD.md §11): the request is refused
// conflict, and an attempt already past its assembly (building, relaying,
// committing) goes on — its machine takes no assembly failure there.
func (o *objects) retransmittedRestore(a *arrival, d chunk.Declaration, refuse func(router.RelocationFailure, string, ...any)) {
	begun, err := o.chunks.Begin(a.bind, d)
	if err == nil {
		o.log.Debug("relocation: retransmitted Restore reused", "object", a.prep.Object.ObjectID, "assembly", begun.Status)
		return
	}
	refuse(restoreFailure(err), "retransmitted Restore: assembly: %v", err)
	a.assemblyFailed(err)
}

// arrivalOf returns the arrival of a binding.
func (o *objects) arrivalOf(w router.RelocationBinding) (*arrival, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.arrivals[chunk.BindingOf(w)]
	return a, ok
}

// fromSource reports whether a record came from the node run its binding's
// source fence names: only the source streams a move's records (40, 52,
// 54, 55 on its one ordered connection, §1.3 step 4, §9.1).
func fromSource(from transport.PeerInfo, b chunk.Binding) bool {
	return bytes.Equal(from.RID, []byte(b.Source.NodeRID)) && from.LifecycleGeneration == b.Source.NodeGeneration
}

// errNotFromSource matches every *notFromSourceError.
var errNotFromSource = errors.New("mesh: relocation record not from the source its binding names")

// notFromSourceError is a chunk (52), cutover (54) or cancel (55) that a
// peer other than the source its binding names sent: discarded.
type notFromSourceError struct {
	cmd  router.Command
	from transport.PeerInfo
	bind chunk.Binding
}

func (e *notFromSourceError) Error() string {
	return fmt.Sprintf("%v: %v for %s sent by %x/%d", errNotFromSource, e.cmd, e.bind.String(), []byte(e.from.RID),
		e.from.LifecycleGeneration)
}

// Is makes errors.Is(err, errNotFromSource) true.
func (e *notFromSourceError) Is(target error) bool { return target == errNotFromSource }

// checkSource returns nil for a record of binding b that its source sent;
// otherwise the record is discarded: counted (RestoreRecordsNotFromSource)
// and logged at a bounded rate (record_log.go), and the error says so.
// Until 2026-12-07 a chunk, cutover or cancel naming a move was taken from
// any peer — the binding is in the Location Store's record, readable by
// every member — and a third node's broke the move: its chunk was linked
// to the assembly, its cutover ended the relay, its cancel the attempt.
func (o *objects) checkSource(cmd router.Command, from transport.PeerInfo, b chunk.Binding) error {
	if fromSource(from, b) {
		return nil
	}
	err := &notFromSourceError{cmd: cmd, from: from, bind: b}
	o.stats.restoreForeign.Add(1)
	if ok, suppressed := o.restoreForeignLog.allow(); ok {
		o.log.Info("relocation: record discarded", "err", err, "suppressed", suppressed)
	}
	return err
}

// inboundChunk links one chunk (52) to its binding's assembly. A chunk of
// no open assembly (a late chunk of an earlier attempt, §9.1) is discarded
// by the registry and counted there; one from a peer other than the
// binding's source is discarded before (checkSource).
func (o *objects) inboundChunk(_ context.Context, from transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
	c := rec.Body.(*router.RelocationState)
	b := chunk.BindingOf(c.Binding)
	if o.checkSource(rec.Command, from, b) != nil {
		return
	}
	pr, err := o.chunks.Add(b, c.ChunkIndex, c.Data)
	a, ok := o.arrivalOf(c.Binding)
	switch {
	case errors.Is(err, chunk.ErrDiscarded):
		o.log.Debug("relocation: chunk discarded", "binding", b.String(), "index", c.ChunkIndex, "err", err)
	case err != nil && ok:
		a.assemblyFailed(err)
	case ok && pr.Received == pr.Count:
		a.assembled()
	}
}

// assembled takes the payload out of the assembly once its last chunk
// arrived, verifying length and CRC-32C (§9.1): a mismatch is the
// attempt's assembly failure, answered as such, and nothing is built.
func (a *arrival) assembled() {
	raw, err := a.o.chunks.Complete(a.bind)
	if err != nil {
		a.assemblyFailed(err)
		return
	}
	a.mu.Lock()
	a.payload = raw
	a.mu.Unlock()
	a.post(relocation.EvAssembled)
}

// assemblyFailed ends the attempt on the registry's error err: answered
// with the failure err maps to (restoreFailure) and its text. The first
// error is kept: what follows a failed assembly only echoes it.
func (a *arrival) assemblyFailed(err error) {
	a.o.log.Info("relocation: assembly failed", "object", a.prep.Object.ObjectID, "failure", restoreFailure(err), "err", err)
	a.mu.Lock()
	if a.assemblyErr == nil {
		a.assemblyErr = err
	}
	a.mu.Unlock()
	a.post(relocation.EvAssemblyFailed)
}

// inboundCutover takes the source's one-way cutover (54); one from
// another peer is discarded (checkSource).
func (o *objects) inboundCutover(_ context.Context, from transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
	c := rec.Body.(*router.RelocationCutover)
	if o.checkSource(rec.Command, from, chunk.BindingOf(c.Binding)) != nil {
		return
	}
	a, ok := o.arrivalOf(c.Binding)
	if !ok {
		// The relay of a move that committed here on its grace is complete
		// (session_late_relay.go).
		o.endLateRelay(chunk.BindingOf(c.Binding))
		o.log.Debug("relocation: cutover of no arrival", "binding", chunk.BindingOf(c.Binding).String())
		return
	}
	a.mu.Lock()
	a.cutSeen, a.cutover = true, c
	match := a.digest.Matches(c)
	received := a.digest.Count()
	a.mu.Unlock()
	if match {
		a.post(relocation.EvCutover)
		return
	}
	o.log.Error("relocation: relayed messages differ from the cutover's count or digest", "object", a.prep.Object.ObjectID,
		"declared", c.RelayedCount, "received", received)
	a.post(relocation.EvCutoverMismatch)
}

// inboundCancel takes the source's one-way cancel (55, §9.4); one from
// another peer is discarded (checkSource).
func (o *objects) inboundCancel(_ context.Context, from transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
	c := rec.Body.(*router.RelocationCancel)
	if o.checkSource(rec.Command, from, chunk.BindingOf(c.Binding)) != nil {
		return
	}
	o.chunks.Abort(chunk.BindingOf(c.Binding))
	if a, ok := o.arrivalOf(c.Binding); ok {
		a.post(relocation.EvCancelled)
	}
}

// post hands an event to the arrival's goroutine. It never blocks the
// caller (an inbound connection): the channel is ample for one attempt's
// events, and a full channel means the attempt already ended.
func (a *arrival) post(ev relocation.TargetEvent) {
	select {
	case a.events <- ev:
	case <-a.done:
	default:
		a.o.log.Warn("relocation: arrival event dropped", "object", a.prep.Object.ObjectID, "event", ev)
	}
}

// followedArrival is a message of the temporary queue that came through
// Message Follow, as it came: its command 50 is sent at the open.
type followedArrival struct {
	from transport.PeerInfo
	rec  *router.Record
}

// arrive queues a message for the arriving object: relayed by the source
// between relay-ready and cutover, or into the temporary queue (§9.2).
// followed says it came through Message Follow (hop count ≥ 1): one in the
// temporary queue gets its command 50 at the open, as one posted to the
// mailbox gets it at once. Until 2026-12-07 it got none: its sender kept
// following through the previous owner until its cache entry aged out,
// and a route switch of it waited for a settle that never came.
func (a *arrival) arrive(from transport.PeerInfo, rec *router.Record, env spot.Envelope, followed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.cutSeen && fromSource(from, a.bind) {
		// Relayed before the cutover: the move's, not Message Follow's.
		frames, err := router.Encode(rec)
		if err == nil {
			a.digest.Add(frames)
		}
		a.relay = append(a.relay, env)
		return
	}
	a.temp = append(a.temp, env)
	if followed {
		a.followed = append(a.followed, followedArrival{from: from, rec: rec})
	}
}

// localQueue is the temporary queue as a mailbox for this node's own
// senders.
type localQueue struct{ a *arrival }

func (q localQueue) Post(env spot.Envelope) error {
	q.a.mu.Lock()
	defer q.a.mu.Unlock()
	q.a.temp = append(q.a.temp, env)
	return nil
}

func (a *arrival) local() poster { return localQueue{a} }

// run steps the machine until the attempt ends.
func (a *arrival) run() {
	o := a.o
	defer o.work.Done()
	defer close(a.done)
	defer a.cancel()
	// Each of these is seen once. a.ctx also ends when the node halts: then
	// the halt is the event (posted once, whichever channel is seen first).
	expired, halted := a.ctx.Done(), o.halt.Done()
	// Before relay-ready the attempt also ends once the source's node run
	// is known to have ended (sourceRunEnded): looked at from
	// targetLeaseCheckAfter on, every targetLeaseCheckEvery, as a source
	// looks at a late target's lease (confirm). A Restore normally answers
	// relay-ready within milliseconds: a watch costs nothing then.
	watch := time.NewTimer(targetLeaseCheckAfter)
	defer watch.Stop()
	watching := watch.C
	for !a.m.State().Final() {
		var ev relocation.TargetEvent
		select {
		case <-watching:
			if !beforeRelayReady(a.m.State()) {
				watching = nil // after relay-ready the target may commit (§9.1)
				continue
			}
			why, ended := o.sourceRunEnded(a.bind.Source.NodeRID, a.bind.Source.NodeGeneration)
			if !ended {
				watch.Reset(targetLeaseCheckEvery)
				continue
			}
			watching = nil
			o.log.Warn("relocation: the source's node run ended before relay-ready; ending the arrival as its cancel would (its assembly, hosted entry and temporary queue removed) instead of at the Restore deadline",
				"object", a.prep.Object.ObjectID, "source", fmt.Sprintf("%x/%d", []byte(a.bind.Source.NodeRID), a.bind.Source.NodeGeneration),
				"why", why, "deadline_in", time.Until(a.expire).Round(time.Second))
			a.mu.Lock()
			a.sourceEnded = why
			a.mu.Unlock()
			ev = relocation.EvSourceEnded
		case ev = <-a.events:
		case <-expired:
			expired = nil
			switch {
			case o.halt.Err() == nil:
				ev = relocation.EvExpired
			case halted != nil:
				ev, halted = relocation.EvHalted, nil
			default:
				continue // the halt was already posted
			}
		case <-halted:
			ev, halted = relocation.EvHalted, nil // once
		}
		if ev == relocation.EvHalted {
			a.halted = true
		}
		acts, err := a.m.Step(ev)
		if err != nil {
			o.log.Debug("relocation: late target event", "object", a.prep.Object.ObjectID, "err", err)
			continue
		}
		for _, act := range acts {
			a.do(act)
		}
	}
	if a.grace != nil {
		a.grace.Stop()
	}
	o.mu.Lock()
	if o.arrivals[a.bind] == a {
		delete(o.arrivals, a.bind)
	}
	o.arrivalEndsLocked(a)
	o.mu.Unlock()
	o.log.Info("relocation: arrival ended", "object", a.prep.Object.ObjectID, "state", a.m.State(), "failure", a.m.Failure())
	o.hook().ended(a.prep.Object.ObjectID, a.m.State(), a.m.Failure())
}

// beforeRelayReady reports whether an attempt in state s has not answered
// relay-ready yet: its source still holds the object and nothing of it can
// commit here.
func beforeRelayReady(s relocation.TargetState) bool {
	return s == relocation.TgtPreparing || s == relocation.TgtRestoring
}

// sourceRunEnded reports whether node run rid/gen — the source of an
// arrival under way here — is known to have ended, and how this node
// knows: from what it already holds, without a store read of its own.
// The transport admitted a later run of that node (its link runs
// that one now: endedRun); or the list discovery read last (every
// discovery round, with each listed run's owner lease read directly by
// OwnerId, §1.3, §4) shows that run's lease ended — not valid and not
// reacquired — or shows a later run of its RoutingID (a restart took its
// descriptor over, which it does only once the ended run's lease is
// gone). A run the list does not name at all is not judged: the list may
// predate it. A list that is not read (a store outage) shows nothing new,
// and the Restore deadline (maxRestoreWait at most) still ends the
// attempt. This is the spec's "Confirms the current source owner" (§9.1)
// for a source that terminates during its Restore: a process that crashed
// stops renewing its lease, which ends within lease.ttl.
func (o *objects) sourceRunEnded(rid string, gen uint64) (string, bool) {
	if o.n.tr != nil {
		if err := o.endedRun([]byte(rid), gen); errors.Is(err, errRunEnded) {
			return "a later run of its node was admitted here", true
		}
	}
	snap, list, ok := o.n.lastSnapshotNumbered()
	if !ok {
		return "", false
	}
	listed, live := o.n.memo.runListed(list, snap, []byte(rid), gen)
	if listed && !live {
		return "its owner lease ended (the discovery list shows it not valid)", true
	}
	if listed {
		return "", false
	}
	for i := range snap.Entries {
		d := &snap.Entries[i].Descriptor
		if string(d.RoutingID) == rid && uint64(d.LifecycleGeneration) > gen {
			return fmt.Sprintf("the discovery list shows a later run of its node (%d)", uint64(d.LifecycleGeneration)), true
		}
	}
	return "", false
}

// do performs one target action; actions that take time run on their own
// goroutine and post their outcome.
func (a *arrival) do(act relocation.TargetAction) {
	o := a.o
	switch act {
	case relocation.ActRegisterTemp:
		// Done in inboundPrepare, before the first chunk could arrive.
	case relocation.ActBeginAssembly:
		// Opened in inboundPrepare (the chunks follow on its connection);
		// an empty payload is whole at once.
		if a.prep.ChunkCount == 0 {
			a.assembled()
		}
	case relocation.ActReadAuthority:
		o.gos.Go(a.readAuthority)
	case relocation.ActBuildHidden:
		// Counted as work in flight on its own: the build calls the
		// application (Restore, New), and the attempt may end (the node
		// halts) while that call has not returned — a shutdown waits for
		// it as for any call into the application, and reports it when it
		// does not return (ApplicationStuckError.Calls). Added here, while
		// this attempt's own count holds the group above zero.
		o.work.Add(1)
		o.gos.Go(func() {
			defer o.work.Done()
			a.build()
		})
	case relocation.ActReplyRelayReady:
		// Kept for this node's stop: its sweep's fence tells the source
		// (relocate_stopped.go).
		o.relayReadySent(a)
		if err := a.reply(router.NewRecord(&router.RelocationReady{Correlation: a.corr, Relocation: a.prep.Binding.Relocation,
			TargetAttempt: a.prep.Binding.TargetAttempt, Outcome: router.RelocationRelayReady}, nil, nil)); err != nil {
			o.log.Warn("relocation: relay-ready not sent; the grace commits anyway", "object", a.prep.Object.ObjectID, "err", err)
		}
	case relocation.ActArmGrace:
		a.grace = time.AfterFunc(relocation.CutoverGrace, func() { a.post(relocation.EvGraceElapsed) })
	case relocation.ActReplyFailed:
		f := map[relocation.TargetFailure]router.RelocationFailure{
			relocation.TgtFailAuthority: router.RelocationFailureAuthorityMismatch,
			relocation.TgtFailAssembly:  router.RelocationFailureChecksumMismatch, // unless assemblyErr says (below)
			relocation.TgtFailRestore:   router.RelocationFailureRestoreFailed,
			relocation.TgtFailDeadline:  router.RelocationFailureDeadlineExceeded,
			// After relay-ready: the relayed records differ from the
			// cutover's count or CRC-32C. A second 53 (the first was
			// relay-ready): this attempt never sent its owner CAS, so the
			// source, awaiting the commit, stops waiting (unawaitedReady).
			relocation.TgtFailRelayMismatch: router.RelocationFailureChecksumMismatch,
			// Ended as the source's cancel would end it; told in case
			// the source still reads its connection.
			relocation.TgtFailSourceEnded: router.RelocationFailureCancelled,
		}[a.m.Failure()]
		if f == 0 {
			f = router.RelocationFailureRestoreFailed
		}
		detail := a.m.Failure().String()
		a.mu.Lock()
		switch {
		case a.m.Failure() == relocation.TgtFailAssembly && a.assemblyErr != nil:
			// The registry's error says which (docs/RESTORE-PAYLOAD.md §9).
			f, detail = restoreFailure(a.assemblyErr), detail+": "+a.assemblyErr.Error()
		case a.m.Failure() == relocation.TgtFailSourceEnded:
			detail = "the source's node run ended: " + a.sourceEnded
		case a.m.Failure() == relocation.TgtFailRelayMismatch && a.cutover != nil:
			detail = fmt.Sprintf("relay mismatch: the cutover declares %d relayed records (CRC-32C %08x), %d arrived (%08x)",
				a.cutover.RelayedCount, a.cutover.RelayedCRC32C, a.digest.Count(), a.digest.Sum32())
		case a.failText != "":
			detail = a.failText
		}
		a.mu.Unlock()
		if err := failReady(a.reply, &a.prep, f, detail); err != nil {
			o.log.Debug("relocation: failure not sent", "err", err)
		}
	case relocation.ActCAS, relocation.ActRetryCAS:
		retry := act == relocation.ActRetryCAS
		o.gos.Go(func() { a.commit(retry) })
	case relocation.ActOpen:
		o.hook().step(a.prep.Object.ObjectID, stepTargetOpen)
		a.open()
	case relocation.ActRemove:
		a.remove()
	case relocation.ActDecide:
		o.gos.Go(a.decide)
	default:
		o.log.Error("relocation: unknown target action", "action", act)
	}
}

// readAuthority reads the record by object id and checks it names this
// move at the expected generations (§9.1 last paragraph) before any
// factory runs. Its StoreVersion is the one the owner CAS is made on.
func (a *arrival) readAuthority() {
	o := a.o
	ctx := a.ctx
	row, _, err := o.readAuthorityAt(ctx, a.kind, a.prep.Object.ObjectID)
	if err != nil {
		o.log.Info("relocation: authority not read", "object", a.prep.Object.ObjectID, "err", err)
		a.post(relocation.EvAuthorityMismatch)
		return
	}
	r := row.Record
	self, lg := o.n.Owner()
	pr := r.Relocation
	want := [16]byte{}
	copyID(&want, a.bind.Relocation)
	ok := row.Found && r.Allocation.State == record.AllocationActive && r.Allocation.ObjectKind == a.kind &&
		r.Allocation.StableType == a.prep.Object.StableType && uint64(r.ObjectGeneration) == a.prep.Object.ObjectGeneration &&
		uint64(r.AuthorityOwnerGeneration) == a.prep.Object.ExpectedAuthorityOwnerGeneration &&
		r.OwnerID == a.bind.Source.OwnerID && uint64(r.OwnerLeaseGeneration) == a.bind.Source.LeaseGeneration &&
		pr != nil && pr.Stage == record.RelocationCaptured && pr.RelocationID == want &&
		uint64(pr.TargetAttempt) == a.bind.TargetAttempt && pr.Target.OwnerID == self &&
		uint64(pr.Target.OwnerLeaseGeneration) == lg && bytes.Equal(pr.Target.RoutingID, o.n.run.rid) &&
		uint64(pr.Target.LifecycleGeneration) == o.n.run.lifecycleGeneration
	if !ok {
		o.log.Info("relocation: the record does not name this move", "object", a.prep.Object.ObjectID, "found", row.Found)
		a.post(relocation.EvAuthorityMismatch)
		return
	}
	a.version = row.Version
	a.reservation = pr.ReservationID
	a.post(relocation.EvAuthorityMatched)
}

// copyID writes a wire RelocationID as the store's 16 bytes.
func copyID(dst *[16]byte, id router.RelocationID) {
	for i := 0; i < 8; i++ {
		dst[i] = byte(id.High >> (56 - 8*i))
		dst[8+i] = byte(id.Low >> (56 - 8*i))
	}
}

// build verifies and decodes the payload and builds the instance hidden:
// factory (Recreate) or snapshot restore (PreserveStateWith), then its queue
// and timers, dispatch closed (§9.2).
func (a *arrival) build() {
	o := a.o
	defer o.hook().step(a.prep.Object.ObjectID, stepTargetBuilt)
	o.hook().step(a.prep.Object.ObjectID, stepTargetBuild)
	fail := func(format string, args ...any) {
		text := fmt.Sprintf(format, args...)
		a.mu.Lock()
		a.failText = text
		gone := a.abandoned
		a.mu.Unlock()
		if gone {
			// The attempt ended first (its node stops, its deadline, the
			// source's cancel: logged as such) and took the payload or
			// cut the callback's context: what the build met then is
			// that end, not a failed Restore. Until 2026-12-07 a target
			// stopped mid-build logged WARN "restore failed … truncated
			// payload" (operator try-out 8).
			o.log.Debug("relocation: build of an attempt that had ended", "object", a.prep.Object.ObjectID, "err", text)
			return
		}
		o.log.Warn("relocation: restore failed", "object", a.prep.Object.ObjectID, "err", text)
		a.post(relocation.EvRestoreFailed)
	}
	a.mu.Lock()
	raw := a.payload
	a.payload = nil
	a.mu.Unlock()
	p, err := chunk.Decode(raw, o.chunks.Limits())
	if err != nil {
		fail("payload: %v", err)
		return
	}
	if p.Object.ID != a.prep.Object.ObjectID || p.Object.Generation != a.prep.Object.ObjectGeneration ||
		p.Object.StableType != a.prep.Object.StableType || objectKind(p.Object.Kind) != a.kind {
		fail("the payload is for %s/%d, the Restore request for %s/%d", p.Object.ID, p.Object.Generation,
			a.prep.Object.ObjectID, a.prep.Object.ObjectGeneration)
		return
	}
	f, ok := o.registry[p.Object.StableType]
	if !ok || objectKind(f.Kind) != a.kind {
		fail("no %s factory %q on this node", a.kind, p.Object.StableType)
		return
	}
	o.restoreSessions(a.h, p.Sessions)
	ctx := a.ctx
	req := spot.CreateRequest{ID: p.Object.ID, Generation: p.Object.Generation, StableType: p.Object.StableType}
	var h spot.Handler
	switch p.Policy {
	case spot.PolicyPreserveState:
		if f.Snapshot == nil {
			fail("factory %q has no snapshot adapter", f.StableType)
			return
		}
		h, err = runRestore(ctx, &o.apps, a.key, f.Snapshot, req, p.State)
	default:
		// RecreateOnRelocation: a new instance without application state.
		h, err = runFactory(ctx, &o.apps, a.key, f, req)
	}
	if err != nil {
		fail("%s: %v", p.Policy, err)
		return
	}
	// The attempt may have been removed (cancelled, expired) while the
	// callback ran: then nothing is opened. Checked and opened under a.mu,
	// which remove takes to mark the attempt abandoned and take a.obj.
	a.mu.Lock()
	if a.abandoned {
		a.mu.Unlock()
		return
	}
	obj, err := o.rt.Open(spot.Spec{Key: a.key, Kind: f.Kind, StableType: f.StableType, Generation: p.Object.Generation,
		Handler: gated{h: h, gate: o.n.lease.Gate()}, Held: true, Restored: &p.Captured})
	if err == nil {
		a.obj = obj
	}
	a.mu.Unlock()
	if err != nil {
		fail("open: %v", err)
		return
	}
	a.post(relocation.EvRestored)
}

// commit runs the owner CAS (NewOwner) on the first-read StoreVersion,
// bound to this move's ids (§8); a retry re-reads the same key and
// version (§10). Only the target writes it.
func (a *arrival) commit(retry bool) {
	o := a.o
	if retry {
		wait := time.NewTimer(50 * time.Millisecond)
		select {
		case <-wait.C:
		case <-a.done:
			wait.Stop()
			return
		}
	}
	o.hook().step(a.prep.Object.ObjectID, stepTargetCAS)
	self, lg := o.n.Owner()
	if err := o.n.lease.Gate().Admit(); err != nil {
		// §5: no owner change without owner eligibility; retried until
		// the lease returns or the Restore deadline ends the attempt.
		a.casWaits++
		o.log.Log(context.Background(), casLogLevel(a.casWaits, o.halt), "relocation: owner CAS waits for the owner lease",
			"object", a.prep.Object.ObjectID, "attempts", a.casWaits, "err", err)
		a.post(relocation.EvUnknown)
		return
	}
	ctx := a.ctx
	var id [16]byte
	copyID(&id, a.bind.Relocation)
	res, err := o.exec.NewOwner(ctx, authority.NewOwnerRequest{
		Object:           authority.Object{ID: a.prep.Object.ObjectID, Kind: a.kind, StableType: a.prep.Object.StableType},
		ObjectGeneration: a.prep.Object.ObjectGeneration, IfVersion: a.version,
		Target: authority.Target{Node: authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid,
			LifecycleGeneration: o.n.run.lifecycleGeneration}, Owner: authority.Owner{ID: self, LeaseGeneration: lg}},
		Relocation: &authority.RelocationRef{RelocationID: id, TargetAttempt: a.bind.TargetAttempt, ReservationID: a.reservation}})
	if err == nil {
		a.setCommitted(res.Version)
		a.post(relocation.EvCommitted)
		return // before ae: taking its address moves it to the heap
	}
	var ae *authority.Error
	switch {
	case errors.As(err, &ae) && (ae.Kind == authority.ErrConflict || ae.Kind == authority.ErrContended || ae.Kind == authority.ErrNotFound || ae.Kind == authority.ErrInvalidOperation):
		o.log.Info("relocation: owner CAS refused", "object", a.prep.Object.ObjectID, "err", err)
		a.post(relocation.EvConflict)
	default:
		a.casUnknown++
		o.log.Log(context.Background(), casLogLevel(a.casUnknown, o.halt), "relocation: owner CAS answer unknown; retrying with the same version",
			"object", a.prep.Object.ObjectID, "attempts", a.casUnknown, "err", err)
		a.post(relocation.EvUnknown)
	}
}

// casLogLevel is the level of an arrival's n-th owner CAS attempt that
// waits for the lease or got no answer: WARN for the first, DEBUG for the
// rest. The CAS is tried again every 50 ms, and in an operator try-out
// (Redis stopped 12 s in the middle of a drain) a target wrote 1,090 WARN
// lines for five arrivals in ten seconds. Once halt has ended the CAS was
// cut by the node's own stop (its context is the halt's, the lease is
// released): no store or lease fault, and nothing is retried — the attempt
// ends on the halt and the owner sweep settles the move — so DEBUG; until
// 2026-12-07 each arrival cut by a stop logged a WARN (operator try-out 8).
func casLogLevel(n int, halt context.Context) slog.Level {
	if n == 1 && halt.Err() == nil {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// setCommitted records the StoreVersion the owner CAS left. The CAS and
// the decide loop may both learn it (a late CAS answer after the deadline).
func (a *arrival) setCommitted(version string) {
	a.mu.Lock()
	a.committedVersion = version
	a.mu.Unlock()
}

// decideEvery bounds the decide loop's back-off between reads.
const decideEvery = time.Second

// decide runs after the Restore deadline when an owner CAS answer was lost
// (relocation.TgtDeciding): no CAS is sent any more (§10), the instance
// stays hidden, and the record is read until it shows the CAS applied —
// the store names this node, so the object must be here: open — or that no
// CAS of this attempt can apply — the source released the reservation or
// took the object back: remove (location_update_failed). The spec removes
// at the deadline; that leaves a record naming a node without the object
// whenever a CAS in flight lands later (docs/RELOCATION.md §5). The
// source's own deadline handling (releasing the reservation, retried while
// the store is down) is what decides an undecided row.
func (a *arrival) decide() {
	o := a.o
	id := a.prep.Object.ObjectID
	self, lg := o.n.Owner()
	var rid [16]byte
	copyID(&rid, a.bind.Relocation)
	req := authority.NewOwnerRequest{
		Object:           authority.Object{ID: id, Kind: a.kind, StableType: a.prep.Object.StableType},
		ObjectGeneration: a.prep.Object.ObjectGeneration, IfVersion: a.version,
		Target: authority.Target{Node: authority.Node{MeshName: o.n.cfg.Node.MeshName, RoutingID: o.n.run.rid,
			LifecycleGeneration: o.n.run.lifecycleGeneration}, Owner: authority.Owner{ID: self, LeaseGeneration: lg}},
		Relocation: &authority.RelocationRef{RelocationID: rid, TargetAttempt: a.bind.TargetAttempt, ReservationID: a.reservation}}
	o.log.Warn("relocation: the Restore deadline passed with the owner CAS answer unknown; reading the record until it decides",
		"object", id)
	wait, since := 10*time.Millisecond, time.Now()
	for {
		ctx, cancel := context.WithTimeout(o.halt, storeWriteTimeout)
		out, res, err := o.exec.DecideNewOwner(ctx, req)
		cancel()
		switch {
		case err == nil && out == authority.CASCommitted:
			a.setCommitted(res.Version)
			o.log.Warn("relocation: the owner CAS had applied; opening the object here", "object", id, "after", time.Since(since))
			a.post(relocation.EvCommitted)
			return
		case err == nil && out == authority.CASImpossible:
			a.post(relocation.EvConflict)
			return
		case err != nil:
			o.log.Debug("relocation: deciding read failed", "object", id, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-a.done:
			t.Stop()
			return
		case <-o.halt.Done():
			t.Stop()
			a.post(relocation.EvHalted)
			return
		}
		if wait *= 2; wait > decideEvery {
			wait = decideEvery
		}
	}
}

// open makes the object Ready here (§9.2): saved work (already in the
// instance from the payload), the pre-cutover relay, then the temporary
// queue, in that order; the regular route replaces the temporary one with
// dispatch closed; then dispatch opens. Arrivals after the switch post to
// the mailbox behind the merged work.
func (a *arrival) open() {
	o := a.o
	o.mu.Lock()
	a.mu.Lock()
	merged := append(a.relay, a.temp...)
	followed := a.followed
	a.relay, a.temp, a.followed = nil, nil, nil
	version := a.committedVersion
	late := !a.cutSeen // committed on the grace: the source may relay still
	a.mu.Unlock()
	// Requests the object refuses are answered once o.mu is let go (Reply
	// takes it): until 2026-12-07 each on a goroutine of its own, which
	// Close did not wait for.
	type refusal struct {
		route []byte
		err   error
	}
	var refused []refusal
	// Appended outside the mailbox limit: the source accepted the relay
	// (its captured queue is in the instance already) and this node the
	// temporary queue; until 2026-12-07 they were Posted, and what went
	// past spot's MailboxLimit was refused here — a one-way message lost
	// after its Send returned nil (TestMergeKeepsEveryAcceptedMessageAcrossTheMailboxLimit).
	// Only a closed object refuses them.
	if err := a.obj.Append(merged...); err != nil {
		o.log.Error("relocation: merged messages not queued", "object", a.prep.Object.ObjectID, "count", len(merged), "err", err)
		for _, env := range merged {
			if env.Kind == spot.Request {
				refused = append(refused, refusal{env.ReplyRoute, err})
			}
		}
	}
	h := a.h
	h.obj, h.state, h.arrival = a.obj, hostServing, nil
	h.storeVersion = version
	if late {
		o.expectLateRelayLocked(a)
	}
	settled := make(chan struct{})
	h.settling = settled
	ownerGen := h.ownerGeneration
	o.mu.Unlock()
	for _, r := range refused {
		o.Reply(r.route, nil, wrapErr(ErrUnavailable, r.err, "relocation merge"))
	}
	// Merged in order and owned here: nothing sent later overtakes them.
	for _, f := range followed {
		o.noticeFollowed(f.from, f.rec)
	}
	a.relocated(ownerGen) // dispatch still closed: before anything runs here
	a.obj.Release()
	k := followKey(a.kind, a.prep.Object.ObjectID)
	o.cache.Drop(k)
	// An earlier move away from here stays recorded: a message still
	// carrying that stay's fence is passed along the recorded chain and
	// comes back here behind what was sent before it (admitMessage).
	a.sessionCommit() // command 44 commit to every bound Session's owner (§9.2)
	o.gos.Go(func() { a.complete(settled) })
}

// relocatedWait bounds the ctx a Relocated handler gets (spot.Relocated).
const relocatedWait = 10 * time.Second

// relocated runs the instance's lifecycle callback, if it has one, after
// the owner change and the queue merge and before dispatch opens (§1.3
// step 7, §9.2). The object is owned here whatever it returns: an error is
// logged and dispatch opens anyway.
func (a *arrival) relocated(ownerGen uint64) {
	r, ok := unwrapGated(a.obj.Handler()).(spot.Relocated)
	if !ok {
		return
	}
	o := a.o
	ctx, cancel := context.WithTimeout(o.halt, relocatedWait)
	defer cancel()
	info := spot.RelocationInfo{ID: a.prep.Object.ObjectID, ObjectGeneration: a.prep.Object.ObjectGeneration,
		AuthorityOwnerGeneration: ownerGen, SourceNodeRID: append([]byte(nil), a.bind.Source.NodeRID...)}
	start := time.Now()
	if err := safeRelocated(ctx, &o.apps, a.key, r, info); err != nil {
		o.log.Error("relocation: the object's Relocated callback failed; it is owned here and opens anyway",
			"object", info.ID, "err", err, "took", time.Since(start))
	}
}

// safeRelocated calls the application's callback of the object k, turning
// a panic into an error: application code must not take the node down;
// calls names the call while it runs (until review L, 2026-12-07, night, a
// stop did not: TestCloseDuringAStuckRelocatedNamesTheCall).
func safeRelocated(ctx context.Context, calls *appCalls, k spot.Key, r spot.Relocated, info spot.RelocationInfo) (err error) {
	defer calls.enter("Relocated", k)()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: in Relocated: %v", spot.ErrHandlerPanic, p)
		}
	}()
	return r.Relocated(ctx, info)
}

// complete erases the move's progress from the record (Completed, §9.1):
// owner, generations and capacity are kept. It does not block Ready. It
// closes settled when it ends, whatever the outcome, so that a move on
// waiting for it goes ahead.
func (a *arrival) complete(settled chan struct{}) {
	o := a.o
	defer func() {
		o.mu.Lock()
		if a.h.settling == settled {
			a.h.settling = nil
		}
		o.mu.Unlock()
		close(settled)
	}()
	o.hook().step(a.prep.Object.ObjectID, stepTargetDone)
	if err := o.n.lease.Gate().Admit(); err != nil {
		o.log.Warn("relocation: completion not recorded", "object", a.prep.Object.ObjectID, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(o.halt, storeWriteTimeout)
	defer cancel()
	self, lg := o.n.Owner()
	var id [16]byte
	copyID(&id, a.bind.Relocation)
	res, err := o.exec.CompleteRelocation(ctx, authority.CompleteRequest{
		Object:           authority.Object{ID: a.prep.Object.ObjectID, Kind: a.kind, StableType: a.prep.Object.StableType},
		ObjectGeneration: a.prep.Object.ObjectGeneration, Owner: authority.Owner{ID: self, LeaseGeneration: lg}, RelocationID: id})
	if err != nil {
		o.log.Warn("relocation: completion not recorded", "object", a.prep.Object.ObjectID, "err", err)
		return
	}
	o.mu.Lock()
	if h, ok := o.hosted[a.key]; ok && h == a.h && h.state == hostServing {
		h.storeVersion = res.Version
	}
	o.mu.Unlock()
}

// remove discards what the attempt prepared: the hidden instance, the
// temporary queue and the assembly staging; nothing is ever dispatched.
// The requests of the temporary queue are answered Unavailable, however
// the attempt ended, so their callers do not wait for nothing: nobody else
// has them (the source's own messages join the relay until the cutover,
// and it passes nothing on before). Before relay-ready the queue is empty
// unless a row names this node at the generation the move would commit
// without its CAS (written by hand, the ownerChanged case: the handover's
// refusal sends the requester there); until 2026-12-07 it was dropped then,
// and such a request waited for its caller's deadline. The requests of the
// captured queue (in the hidden instance) and those the source relayed are
// not answered here: the source keeps them (its payload, relayEnvs) and,
// when it takes the object back, runs and answers them (recoverLocal).
// Until 2026-12-07 they were answered here too (ErrClosed, Unavailable): a
// caller whose answer that was read "failed" for a request the source then
// ran.
func (a *arrival) remove() {
	o := a.o
	o.chunks.Abort(a.bind)
	o.mu.Lock()
	if o.hosted[a.key] == a.h {
		delete(o.hosted, a.key)
	}
	a.mu.Lock()
	queued := a.temp
	a.relay, a.temp, a.followed, a.payload, a.abandoned = nil, nil, nil, nil, true
	obj := a.obj
	a.mu.Unlock()
	o.mu.Unlock()
	if obj != nil {
		// Its queue is the captured one of the payload, which the source
		// keeps too and runs when it takes the object back: not answered
		// here (Close answered its requests ErrClosed, read "failed" by
		// callers whose requests the source then ran).
		obj.Discard()
	}
	why := a.m.Failure().String()
	if a.m.Failure() == relocation.TgtFailNone {
		why = a.m.State().String() // cancelled by the source
	}
	for _, env := range queued {
		if env.Kind == spot.Request {
			o.Reply(env.ReplyRoute, nil, fmt.Errorf("%w: the move of %s failed (%s)", ErrUnavailable, a.prep.Object.ObjectID, why))
		}
	}
	switch {
	case a.m.Failure() != relocation.TgtFailLocationUpdate:
	case a.halted:
		// The node's own stop, not a failure: its owner sweep fences the
		// move (the source keeps the object and is told) or, when the
		// CAS had applied, removes the object with the node's others.
		// Until 2026-12-07 this was the deadline's ERROR below, one per
		// arrival cut by a stop (operator try-out 8).
		o.log.Info("relocation: this node stops before the move here was confirmed; the prepared object was removed (the owner sweep settles the move: the source keeps the object, or, had the owner CAS applied, it goes with this node's objects)",
			"object", a.prep.Object.ObjectID)
	default:
		o.log.Error("relocation: location_update_failed: ownership not confirmed before the Restore deadline; the prepared object was removed",
			"object", a.prep.Object.ObjectID)
	}
}
