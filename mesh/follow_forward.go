package mesh

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// Message Follow on the wire (§7.3, docs/FOLLOW.md "Forwarding on the
// wire"). A previous owner that receives a message for an object it no
// longer hosts passes it on to the new owner it recorded when the move
// completed (never re-reading the store). The new owner, on admitting a
// message that was passed on at least once, tells the original sender with
// command 50 that its cached route is stale; the sender drops that route
// only if its cache still holds exactly it.

// metaFollowSource is the metadata key naming the route fence the original
// sender used, set by the first node that passes the message on:
// "<lowercase hex node RID>/<node run generation>/<AuthorityOwnerGeneration>/<OwnerLeaseGeneration>".
// The new owner copies it into command 50's Source, which is what the
// sender's route cache is matched against. Later hops keep it unchanged.
const metaFollowSource = "meshnode.follow-source"

// followSendWait bounds how long a previous owner waits for room on the link
// to the new owner before it gives a message up (Unavailable).
const followSendWait = 2 * time.Second

// recordMove keeps the source→target information of a move of one of this
// node's objects that just completed, so that messages still addressed here
// are passed on to the new owner for MessageFollowDuration (§7.3). The
// relocation coordinator calls it on the source once the move is complete.
// With Message Follow disabled (duration 0) it keeps nothing and returns nil.
// A malformed or stale move is ErrInvalidOperation.
func (o *objects) recordMove(m follow.Move) error {
	kept, err := o.follow.Record(m)
	if err != nil {
		o.log.Warn("move not recorded for Message Follow", "object", m.Key.String(), "err", err)
		return followErr(err, "record move of %s", m.Key)
	}
	if kept {
		o.stats.followMoves.Add(1)
		o.log.Debug("move recorded for Message Follow", "object", m.Key.String(),
			"ownerGeneration", m.AuthorityOwnerGeneration, "target", fmt.Sprintf("%x/%d", m.Route.NodeRID, m.Route.NodeGeneration))
	}
	return nil
}

// followErr maps an error of package follow into the vocabulary: a hop
// limit or a cycle is Unavailable, a generation mismatch (and a move that
// cannot be recorded) InvalidOperation, no follow route NotFound (§7.3).
func followErr(err error, format string, args ...any) error {
	switch {
	case errors.Is(err, follow.ErrUnavailable):
		return wrapErr(ErrUnavailable, err, format, args...)
	case errors.Is(err, follow.ErrNotFound):
		return wrapErr(ErrNotFound, err, format, args...)
	}
	return wrapErr(ErrInvalidOperation, err, format, args...)
}

// notAdmitted handles an inbound object message the route fence refused.
// When the refusal is "not hosted here" and this node recorded a move of the
// object, the message is passed on to the new owner instead (§7.3). Anything
// else keeps the refusal, or takes the follow outcome (refuseMessage). It
// returns, having done nothing more, the channel to wait on when the
// outcome needs what is not known yet on this goroutine — whether a new
// owner whose link is down stopped (linkRunStopped), or the cutover of the
// object's current stay here (readmit): the caller waits for it off the
// connection's reader, with the peer's later messages for the object
// behind it (waitCutover), and admits the message again.
func (o *objects) notAdmitted(from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error, refusal error) <-chan struct{} {
	m, _ := messageOf(rec) // only 21, 22, 24 and 25 reach here
	err := refusal
	if errors.Is(refusal, ErrNotFound) {
		var again func()
		if m.corr != 0 && controlOf(rec) == controlBarrier {
			// Handled again here should the pass-on be lost
			// (followUpBarrier).
			again = func() {
				o.inbound(from, m.fam, m.id, m.gen, m.to.nodeRID, m.to.nodeGen, m.to.ownerGen, m.to.leaseGen, m.corr, rec, reply)
			}
		}
		passed, ferr := o.passOn(from, m, rec, again)
		var down *followLinkDown
		if !passed && errors.As(ferr, &down) {
			stopped, wait := o.linkRunStopped(down.route)
			if wait != nil {
				// Counted once, when it is decided.
				o.stats.followRefused.Add(^uint64(0))
				return wait
			}
			if stopped {
				// No run of the node admitted and the one named has
				// stopped: between its connection's end and its node's
				// next run's admission (a rolling restart). As for a run
				// that ended: readmit, passOnLater, or refused as a stale
				// route (other_run) — before, a one-way message was
				// dropped as Unavailable though its object was here.
				o.log.Debug("message not followed: the new owner's run stopped", "object", down.key.String(), "hop", m.hop, "err", down.err)
				ferr = down.stopped()
			}
		}
		if passed {
			return nil
		}
		if errors.Is(ferr, errRunEnded) {
			// What the ended run passed back here before it ended is
			// admitted first: a readmit (or a pass-on from a later stay)
			// taken at once overtook it when the run had crashed
			// (ended_run_reads.go).
			var ended *followRunEnded
			if errors.As(ferr, &ended) {
				if wait := o.afterEndedRun(from.RID, ended.run, spot.Key{Spot: m.fam == familySpot, ID: m.id}); wait != nil {
					// Counted once, when it is decided.
					o.stats.followRefused.Add(^uint64(0))
					return wait
				}
			}
			if admitted, wait := o.readmit(from, m, rec, reply); admitted || wait != nil {
				if wait != nil {
					// Counted once, when it is decided: the message is
					// admitted again from the start after the cutover.
					// Before 2026-12-07 each round counted it
					// (TestReadmitWaitingForACutoverCountsOneFollowRefusal).
					o.stats.followRefused.Add(^uint64(0))
				}
				return wait
			}
			if o.passOnLater(from, m, rec, again) {
				return nil
			}
		}
		if ferr != nil {
			err = ferr
		} else if m.corr != 0 {
			// No follow route: answered behind what this node passed on
			// for the object, once that is in at its new owner
			// (follow_expiry.go).
			if wait := o.confirmPassOns(msgTarget{fam: m.fam, id: m.id}.cacheKey(), from.RID); wait != nil {
				return wait
			}
		}
	}
	o.refuseMessage(from, m, rec, reply, err)
	return nil
}

// followLinkDown is passOn's failure to send to a new owner none of whose
// node's runs is admitted on its link (transport.ErrNotAdmitted or
// ErrUnknownPeer, in err): as Unavailable, unless that run is over
// (notAdmitted, linkRunStopped).
type followLinkDown struct {
	key   follow.Key
	route follow.Route
	err   error
}

func (e *followLinkDown) Error() string { return e.err.Error() }
func (e *followLinkDown) Unwrap() error { return e.err }

// stopped is the outcome once the run is known to have stopped: refused as
// for a run that ended (errRunEnded), a stale route.
func (e *followLinkDown) stopped() error {
	return &followRunEnded{run: nodeRun{rid: string(e.route.NodeRID), gen: e.route.NodeGeneration},
		err: fmt.Errorf("message follow of %s: %w: %w: %w: the link to %x/%d is down, and that run stopped: %w",
			e.key, ErrUnavailable, errRouteStale, errRunEnded, e.route.NodeRID, e.route.NodeGeneration, e.err)}
}

// followRunEnded is a pass-on refused because the new owner's run ended
// (errRunEnded in err): run is that run, whose messages sent here before
// it ended are admitted before a readmit (afterEndedRun).
type followRunEnded struct {
	run nodeRun
	err error
}

func (e *followRunEnded) Error() string { return e.err.Error() }
func (e *followRunEnded) Unwrap() error { return e.err }

// refuseMessage refuses an inbound object message with err: a request gets
// exactly one command 20, sent to the node run that made it (which is not
// the peer the message came from when it was passed on); a one-way message
// is dropped (there is no reply to carry the refusal) and counted.
func (o *objects) refuseMessage(from transport.PeerInfo, m inMessage, rec *router.Record, reply func(*router.Record) error, err error) {
	if m.corr == 0 {
		if controlOf(rec) == controlUnbind {
			// Not application work: nothing accepted is lost.
			o.log.Debug("session unbind refused; the binding stays where it is", "object", m.id, "err", err)
			return
		}
		o.drops.add(err)
		o.log.Debug("one-way message refused", "object", m.id, "hop", m.hop, "err", err)
		return
	}
	o.answerOrigin(from, rec, m.fam, m.corr, reply, nil, err)
}

// readmit admits here a message addressed to an earlier stay of the object
// on this node, whose follow chain (here → the next owner → … → here) is
// cut at its first link: that owner's run ended (passOn). The chain was
// kept so that the message is admitted behind the earlier ones with that
// fence, which took the same links; with the run ended none of them is on
// its way through it any more — passed back before its transport closed
// (shutdown_passons.go) or gone with it — so the object, hosted here, takes
// it now with its current fence. Refused, a one-way message was dropped
// although its object was right here. It reports whether it was admitted
// (or refused by the fence again: answered or counted there), or the
// channel to wait on when the current stay is in its cutover: the caller
// waits with the message as it came and admits it again.
//
// The record is re-addressed to the current stay before it is admitted:
// whatever happens to it next is the current stay's — a refusal (the
// object closing) is answered as that stay's. With the earlier stay's
// fence kept, a refusal went back through that stay's follow record to
// this readmit, round and round on the connection's reader for as long as
// the object closed.
func (o *objects) readmit(from transport.PeerInfo, m inMessage, rec *router.Record, reply func(*router.Record) error) (bool, <-chan struct{}) {
	o.mu.Lock()
	h, ok := o.hosted[spot.Key{Spot: m.fam == familySpot, ID: m.id}]
	var ownerGen uint64
	if ok && !h.entry && h.objectGeneration == m.gen {
		ownerGen = h.ownerGeneration
	}
	o.mu.Unlock()
	if ownerGen <= m.to.ownerGen || !o.isRun(m.to.nodeRID, m.to.nodeGen) {
		return false, nil
	}
	org, err := originOf(rec, from)
	if err != nil {
		return false, nil
	}
	_, leaseGen := o.n.Owner()
	now := routeTo{nodeRID: m.to.nodeRID, nodeGen: m.to.nodeGen, ownerGen: ownerGen, leaseGen: leaseGen}
	// One hop more, and the sender's fence kept, as a pass-on along the
	// chain back here would have: admitted, it brings its sender a
	// command 50 (noticeFollowed) that drops the route it used. Without
	// it the sender's next messages took the same way — a follow lookup,
	// a refusal and this readmit each — until its cache entry aged out.
	// passOn reached this only after Forward allowed one more hop.
	out, err := retarget(rec, now, m.hop+1, org)
	if err == nil {
		out, err = withFollowSource(out, m)
	}
	if err != nil {
		return false, nil
	}
	o.log.Debug("message for an earlier stay admitted here: its follow chain's next owner's run ended", "object", m.id, "hop", m.hop)
	// inboundOnce, not inbound: run again from a queue of messages waiting
	// here (waitCutover), inbound would put the message at its end,
	// behind its sender's later messages for the object.
	if wait := o.inboundOnce(from, m.fam, m.id, m.gen, now.nodeRID, now.nodeGen, now.ownerGen, now.leaseGen, m.corr, out, reply); wait != nil {
		return false, wait
	}
	return true, nil
}

// passOnLater passes on, along the move the object made from a later stay
// here, a message for an earlier stay whose follow chain is cut at its
// first link (that owner's run ended) when the object is not hosted here
// any more: it came back (the ended run's drain) and moved on — a message
// that met it in its cutover waited for it in the fence check, before
// readmit could take it. As for readmit, nothing with that fence is on its
// way through the ended run any more, so the message takes the later
// stay's fence and follows the object from there. It reports whether the
// message was passed on.
func (o *objects) passOnLater(from transport.PeerInfo, m inMessage, rec *router.Record, again func()) bool {
	if !o.isRun(m.to.nodeRID, m.to.nodeGen) {
		return false
	}
	in := follow.Inbound{Key: msgTarget{fam: m.fam, id: m.id}.cacheKey(), ObjectGeneration: m.gen, AuthorityOwnerGeneration: m.to.ownerGen, Hop: int(m.hop)}
	cut, err := o.follow.Forward(in)
	if err != nil {
		return false
	}
	// The departure after the cut one: from the object's next stay here.
	in.AuthorityOwnerGeneration = cut.Target.AuthorityOwnerGeneration
	next, err := o.follow.Forward(in)
	if err != nil || next.Target.PreviousAuthorityOwnerGeneration <= m.to.ownerGen {
		return false
	}
	org, err := originOf(rec, from)
	if err != nil {
		return false
	}
	_, leaseGen := o.n.Owner()
	out, err := retarget(rec, routeTo{nodeRID: m.to.nodeRID, nodeGen: m.to.nodeGen,
		ownerGen: next.Target.PreviousAuthorityOwnerGeneration, leaseGen: leaseGen}, m.hop, org)
	if err == nil {
		// The fence the sender used, not the later stay's: the new owner's
		// command 50 must name the route the sender's cache holds.
		out, err = withFollowSource(out, m)
	}
	if err != nil {
		return false
	}
	later, _ := messageOf(out)
	if passed, _ := o.passOn(from, later, out, again); !passed {
		return false
	}
	o.log.Debug("message for an earlier stay passed on from a later one: its follow chain's next owner's run ended", "object", m.id, "hop", m.hop)
	return true
}

// answerOrigin sends the command 20 of a request that is answered where it
// arrived, not by a turn (a refusal, a barrier), to the node run that made
// it: on the connection it came on when it came straight from there, else
// as a portable reply (or, when this node made it, to its own waiting
// call) — a node that only passed the request on waits for no answer and
// must not get one.
func (o *objects) answerOrigin(from transport.PeerInfo, rec *router.Record, fam opFamily, corr uint64, reply func(*router.Record) error, body []byte, err error) {
	org, oerr := originOf(rec, from)
	if oerr != nil || org.direct(from) {
		o.sendReply(reply, replyRecord(fam, corr, body, err))
		return
	}
	o.Reply(replyRoute{fam: fam, gen: org.gen, corr: corr, rid: org.rid}.encode(), body, err)
}

// endedHere reports whether m was addressed to a stay of its object on this
// run later than every move of it the follow table keeps, and the object is
// no longer hosted here (not even closing): that stay ended here without
// moving (destroyed, closed, dropped).
func (o *objects) endedHere(key follow.Key, m inMessage) bool {
	if !o.isRun(m.to.nodeRID, m.to.nodeGen) {
		return false
	}
	last, ok := o.follow.Latest(key)
	if !ok || m.to.ownerGen <= last.AuthorityOwnerGeneration {
		return false
	}
	_, hosted := o.hostedFor(spot.Key{Spot: m.fam == familySpot, ID: m.id})
	return !hosted
}

// passOn forwards m to the new owner when the follow table has a route for
// it. It reports whether the message was passed on; when it was not, a nil
// error means "no follow route" (the caller keeps its refusal) and any other
// error is the follow outcome to answer with.
func (o *objects) passOn(from transport.PeerInfo, m inMessage, rec *router.Record, again func()) (bool, error) {
	key := msgTarget{fam: m.fam, id: m.id}.cacheKey()
	// Before the follow table is asked: a move taken back removes its
	// record, then takes the copies once this pass-on has ended.
	mv := o.beginPassOn(key)
	var copied *spot.Envelope
	var to uint64
	defer func() { o.endPassOn(mv, to, copied) }()
	f, err := o.follow.Forward(follow.Inbound{Key: key, ObjectGeneration: m.gen, AuthorityOwnerGeneration: m.to.ownerGen, Hop: int(m.hop)})
	switch {
	case errors.Is(err, follow.ErrNotFound), errors.Is(err, follow.ErrInvalidArgument):
		// No move kept (or nothing a move could match): today's refusal.
		return false, nil
	case errors.Is(err, follow.ErrCycle) && o.endedHere(key, m):
		// Addressed to a later stay here than any move kept, which ended
		// without a move: nothing to follow, the refusal is "not hosted"
		// and the sender reads the store (ErrNotFound for a destroyed
		// object). Until 2026-12-07 it was the cycle's Unavailable, which
		// an application retries, for as long as the earlier move was kept
		// (TestMessageToActorDestroyedAfterReturnIsNotFound).
		return false, nil
	case err != nil:
		o.stats.followRefused.Add(1)
		o.log.Debug("message not followed", "object", key.String(), "hop", m.hop, "err", err)
		return false, followErr(err, "message follow of %s", key)
	}
	out, err := o.followed(from, m, rec, f)
	if err != nil {
		o.stats.followRefused.Add(1)
		return false, err
	}
	notFollowed := func(ended error) (bool, error) {
		// The new owner's run ended (it stopped and started again), and
		// with it the follow record it would pass the message on by: its
		// new run would refuse the message as addressed to another run,
		// and drop a one-way one. This node does not read the store
		// (§7.3): the message is refused here, where why is known — a
		// request's origin reads the store, a one-way message is counted
		// dropped (other_run) — unless the object is hosted here again
		// (notAdmitted, readmit).
		o.stats.followRefused.Add(1)
		o.log.Debug("message not followed: the new owner's run ended", "object", key.String(), "hop", m.hop, "err", ended)
		return false, &followRunEnded{run: nodeRun{rid: string(f.Target.Route.NodeRID), gen: f.Target.Route.NodeGeneration},
			err: fmt.Errorf("message follow of %s: %w", key, ended)}
	}
	if controlOf(rec) == controlUnbind {
		// Whether the new owner's run would take it is read here (the
		// peer's capabilities), and so is whether that run ended, as the
		// send checks it for any other message (endedRun).
		p, ok := o.n.tr.Peer(transport.RID(f.Target.Route.NodeRID))
		if !ok {
			return false, nil
		}
		if ended := runMismatch(f.Target.Route.NodeRID, f.Target.Route.NodeGeneration, p.LifecycleGeneration); ended != nil {
			return notFollowed(ended)
		}
		if !p.Has(router.CapabilitySessionUnbind) {
			// The new owner would queue it for the application (session.go).
			return false, nil
		}
	}
	// SendWait on purpose: this runs on the goroutine reading the sender's
	// connection, so waiting for room on the link to the new owner keeps
	// the sender's messages in their order and pushes back on the sender
	// instead of shedding or buffering without bound. The wait is short:
	// an owner that cannot take the message in time gets none of it.
	o.hook().step(m.id, stepFollowPassOn)
	// Not bound to o.halt: a node shutting down after a drain keeps
	// passing on until its transport closes (host_relocate.go, Drain).
	ctx, cancel := context.WithTimeout(context.Background(), followSendWait)
	defer cancel()
	// Counted before the send: the new owner may answer (and its command
	// 50 arrive) before SendWait returns, and a reader of the counter must
	// see the forward by then.
	// Registered for the closing node's last barriers (shutdown_passons.go)
	// unless they are sealed: a message read after that is still passed
	// on, only not confirmed in order there — dropping it (or refusing a
	// one-way message, which its sender cannot retry) would lose what its
	// sender's Send accepted, and a request would wait out its deadline.
	tracked := o.passed.begin()
	o.stats.followForwarded.Add(1)
	// Only to the new owner's run (endedRun).
	err = o.n.tr.SendWaitRun(ctx, transport.RID(f.Target.Route.NodeRID), f.Target.Route.NodeGeneration, out)
	switch {
	case tracked:
		o.passed.end(o.n.clock.Now(), o.n.cfg.Routing.MessageFollowDuration, err == nil, msgTarget{fam: m.fam, id: m.id, gen: m.gen}, f.Target)
	case err == nil:
		// Counted once sent, as end counts it: the close's WARN reports
		// what went out unconfirmed, not a send the transport refused
		// (the run it names ended, the link down).
		o.passed.late.Add(1)
		o.log.Debug("message passed on after the closing node's last confirmation round; not confirmed in order at the new owner",
			"object", key.String(), "hop", m.hop)
	}
	if err != nil {
		o.stats.followForwarded.Add(^uint64(0))
		if ended := runRefused(err); ended != nil {
			return notFollowed(ended)
		}
		o.stats.followRefused.Add(1)
		err = wrapErr(ErrUnavailable, err, "message follow of %s to %x/%d", key, f.Target.Route.NodeRID, f.Target.Route.NodeGeneration)
		if errorsIsAny(err, transport.ErrNotAdmitted, transport.ErrUnknownPeer) {
			// No run of the node admitted (endedRun let it through):
			// whether the run named is over is notAdmitted's to ask.
			return false, &followLinkDown{key: key, route: f.Target.Route, err: err}
		}
		return false, err
	}
	if again != nil {
		o.followUpBarrier(m, f.Target, again)
	}
	if mv != nil && m.corr == 0 && controlOf(rec) != controlUnbind {
		// Kept to put back into the object if the move is taken back; an
		// unbind is no application message (it would reach a turn).
		if org, err := originOf(rec, from); err == nil {
			env := inboundEnvelope(rec, m.op, org, sessionTagOf(rec))
			copied, to = &env, f.Target.AuthorityOwnerGeneration
		}
	}
	return true, nil
}

// followed is rec re-addressed along f: the new owner's fence and hop count,
// its origin, and — set by the first node that passes it on — the fence the
// original sender used, for command 50.
func (o *objects) followed(from transport.PeerInfo, m inMessage, rec *router.Record, f follow.Forwarding) (*router.Record, error) {
	org, err := originOf(rec, from)
	if err != nil {
		return nil, err
	}
	t := f.Target
	out, err := retarget(rec, routeTo{nodeRID: t.Route.NodeRID, nodeGen: t.Route.NodeGeneration, ownerGen: t.AuthorityOwnerGeneration,
		leaseGen: t.Owner.LeaseGeneration}, uint8(f.Hop), org)
	if err != nil {
		return nil, err
	}
	return withFollowSource(out, m)
}

// withFollowSource is out, m re-addressed, carrying the fence its sender
// used (metaFollowSource) when m came straight from that sender (hop 0)
// and out does not carry one yet: set by the first node that re-addresses
// the message (passOnLater sets it before passOn re-addresses it again),
// kept by every later one.
func withFollowSource(out *router.Record, m inMessage) (*router.Record, error) {
	if m.hop != 0 {
		return out, nil
	}
	if _, ok, err := metaValue(out.Metadata, metaFollowSource); err != nil || ok {
		return out, err
	}
	meta, err := withMeta(out.Metadata, metaFollowSource, encodeFollowSource(m.to))
	if err != nil {
		return nil, err
	}
	return router.NewRecord(out.Body, meta, out.Payload), nil
}

func encodeFollowSource(to routeTo) string {
	return hex.EncodeToString(to.nodeRID) + "/" + strconv.FormatUint(to.nodeGen, 10) + "/" +
		strconv.FormatUint(to.ownerGen, 10) + "/" + strconv.FormatUint(to.leaseGen, 10)
}

// followSourceOf reads the first-hop fence of a message that was passed on.
func followSourceOf(rec *router.Record) (routeTo, error) {
	v, ok, err := metaValue(rec.Metadata, metaFollowSource)
	if err != nil {
		return routeTo{}, err
	}
	if !ok {
		return routeTo{}, fmt.Errorf("%w: no %s", ErrInvalidOperation, metaFollowSource)
	}
	parts := strings.Split(v, "/")
	if len(parts) != 4 {
		return routeTo{}, fmt.Errorf("%w: %s %q", ErrInvalidOperation, metaFollowSource, v)
	}
	rid, err := hex.DecodeString(parts[0])
	if err != nil || len(rid) == 0 || len(rid) > 255 {
		return routeTo{}, fmt.Errorf("%w: %s %q", ErrInvalidOperation, metaFollowSource, v)
	}
	var g [3]uint64
	for i := range g {
		if g[i], err = strconv.ParseUint(parts[i+1], 10, 64); err != nil || g[i] == 0 {
			return routeTo{}, fmt.Errorf("%w: %s %q", ErrInvalidOperation, metaFollowSource, v)
		}
	}
	return routeTo{nodeRID: rid, nodeGen: g[0], ownerGen: g[1], leaseGen: g[2]}, nil
}

// noticeFollowed runs after a message was admitted here. When it reached
// this node through Message Follow (hop count ≥ 1), the original sender's
// cached route is stale: command 50 tells it, one-way, naming the route it
// used (Source) and this node's route (Target). When this node is the
// original sender, it drops its own cache entry directly. A notice that
// cannot be built or sent is only logged: the sender's entry then ends at
// its cache age, and its messages keep being followed until then.
func (o *objects) noticeFollowed(from transport.PeerInfo, rec *router.Record) {
	m, ok := messageOf(rec)
	if !ok || m.hop == 0 {
		return
	}
	src, err := followSourceOf(rec)
	if err != nil {
		o.log.Debug("command 50 not sent", "object", m.id, "err", err)
		return
	}
	org, err := originOf(rec, from)
	if err != nil {
		o.log.Debug("command 50 not sent", "object", m.id, "err", err)
		return
	}
	if o.isRun(org.rid, org.gen) {
		o.dropFollowed(followRoute(m, src), m.op)
		o.sessionFollowed(m.op, followRoute(m, src), followRoute(m, m.to))
		return
	}
	notice := router.NewRecord(&router.MessageFollow{Route: router.MessageFollowRouteV1{
		Source: followRoute(m, src), Target: followRoute(m, m.to), HopCount: m.hop,
		OriginalOperation: m.op, OriginalReplyRouteID: m.corr,
	}}, nil, nil)
	// Counted before the send (and taken back if it fails): the origin may
	// act on the notice before Send returns, and a reader of both nodes'
	// counters must never see the effect before its cause.
	o.stats.followNotices.Add(1)
	// Send, not SendWait: the notice is an optimisation, and this runs on
	// the goroutine reading a peer's connection.
	if err := o.n.tr.Send(o.halt, transport.RID(org.rid), notice); err != nil {
		o.stats.followNotices.Add(^uint64(0))
		o.log.Debug("command 50 not sent", "object", m.id, "origin", org.String(), "err", err)
		return
	}
}

// followRoute is the command 50 route of m's object addressed with to.
func followRoute(m inMessage, to routeTo) router.MessageFollowRoute {
	if m.fam == familySpot {
		f := spotFence(router.SpotRef{SpotID: m.id, ObjectGeneration: m.gen}, to)
		return router.MessageFollowRoute{Kind: router.ObjectSpot, Spot: &f}
	}
	f := actorFence(router.ActorRef{ActorID: m.id, ObjectGeneration: m.gen}, to)
	return router.MessageFollowRoute{Kind: router.ObjectActor, Actor: &f}
}

// dropFollowed drops the route cache entry a command 50 Source names, only
// if the cache holds exactly that route: an entry read since (the new owner,
// or a later one) is kept.
func (o *objects) dropFollowed(src router.MessageFollowRoute, op router.OperationID) {
	var key follow.Key
	var f follow.Fence
	switch {
	case src.Actor != nil:
		a := src.Actor
		key = follow.Key{Kind: follow.KindActor, ID: a.Actor.ActorID}
		f = follow.Fence{ObjectGeneration: a.Actor.ObjectGeneration, AuthorityOwnerGeneration: a.ExpectedAuthorityOwnerGeneration,
			OwnerLeaseGeneration: a.ExpectedOwnerLeaseGeneration, NodeRID: a.TargetNodeRID, NodeGeneration: a.TargetNodeGeneration}
	case src.Spot != nil:
		s := src.Spot
		key = follow.Key{Kind: follow.KindSpot, ID: s.Spot.SpotID}
		f = follow.Fence{ObjectGeneration: s.Spot.ObjectGeneration, AuthorityOwnerGeneration: s.ExpectedAuthorityOwnerGeneration,
			OwnerLeaseGeneration: s.ExpectedOwnerLeaseGeneration, NodeRID: s.TargetNodeRID, NodeGeneration: s.TargetNodeGeneration}
	default:
		return
	}
	if o.cache.DropRoute(key, f) {
		o.stats.followRoutesDropped.Add(1)
	}
	// The followed message is queued at the new owner: when it was the
	// last one sent on that route, nothing of ours is still on its way
	// there (route_barrier.go).
	o.sent.settle(key, f, op)
}
