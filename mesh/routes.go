package mesh

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
)

// Portable reply routes (§7.3, §9.3). A Request envelope carries where its
// answer goes as plain data — the requesting node run and the correlation
// its transport waits on — so that a request captured on one node and run
// on another answers the original caller unchanged. The node that received
// the request keeps a fast path (the reply function of the connection it
// came on, or the local waiter); any other node sends command 20 to the
// requesting node, whose transport accepts it because the call is portable.

// replyRoute is a Request's answer address.
type replyRoute struct {
	fam  opFamily
	gen  uint64 // requesting node's lifecycle generation
	corr uint64 // the correlation the requester waits on (nonzero)
	rid  []byte // requesting node's RoutingId
}

// Route encoding: 'P', family, generation (8), correlation (8), RID.
const routeHeader = 1 + 1 + 8 + 8

const routePortable byte = 'P'

func (r replyRoute) encode() []byte {
	b := make([]byte, routeHeader+len(r.rid))
	b[0], b[1] = routePortable, byte(r.fam)
	binary.BigEndian.PutUint64(b[2:], r.gen)
	binary.BigEndian.PutUint64(b[10:], r.corr)
	copy(b[routeHeader:], r.rid)
	return b
}

// errBadRoute is a reply route that does not decode: a framework bug or a
// corrupted payload, never application input.
var errBadRoute = errors.New("malformed reply route")

func decodeReplyRoute(b []byte) (replyRoute, error) {
	if len(b) <= routeHeader || len(b) > routeHeader+255 || b[0] != routePortable {
		return replyRoute{}, fmt.Errorf("%w: %d bytes", errBadRoute, len(b))
	}
	r := replyRoute{fam: opFamily(b[1]), gen: binary.BigEndian.Uint64(b[2:]), corr: binary.BigEndian.Uint64(b[10:]),
		rid: append([]byte(nil), b[routeHeader:]...)}
	if r.gen == 0 || r.corr == 0 || (r.fam != familyActor && r.fam != familySpot) {
		return replyRoute{}, fmt.Errorf("%w: family %d generation %d correlation %d", errBadRoute, r.fam, r.gen, r.corr)
	}
	return r, nil
}

// routeKey identifies a reply route in the fast-path tables.
func (r replyRoute) key() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], r.corr)
	return string(r.rid) + "\x00" + string(b[:])
}

// self reports whether the route names this node run.
func (o *objects) self(r replyRoute) bool { return o.isRun(r.rid, r.gen) }

// isRun reports whether rid/gen is this node run.
func (o *objects) isRun(rid []byte, gen uint64) bool {
	return bytes.Equal(rid, o.n.run.rid) && gen == o.n.run.lifecycleGeneration
}

// Reply implements spot.Replier: the runtime calls it exactly once per
// Request envelope, on whichever node the request ran.
func (o *objects) Reply(route []byte, body []byte, err error) {
	r, derr := decodeReplyRoute(route)
	if derr != nil {
		o.log.Error("reply not sent", "err", derr)
		return
	}
	k := r.key()
	o.mu.Lock()
	ch, local := o.waiters[k]
	delete(o.waiters, k)
	rr, remote := o.remotes[k]
	delete(o.remotes, k)
	o.mu.Unlock()
	switch {
	case local:
		// The request was made and run on this node: hand over the result
		// itself, handler error included.
		ch <- localReply{body: body, err: err}
	case remote:
		// Run where it arrived: answer on the connection it came on — or,
		// when that connection is gone (the requester's link failed and
		// maybe came back on a new one), as a moved request's answer: the
		// requester's portable call still takes it (PortableGrace). Until
		// 2026-12-07 it was dropped ("reply not sent") and the requester
		// waited out its deadline (TestReplyAfterItsConnectionWentIsSentAnotherWay).
		send := rr.reply
		if h := o.hook().arrivalReply; h != nil {
			send = func(rec *router.Record) error {
				if err := h(); err != nil {
					return err
				}
				return rr.reply(rec)
			}
		}
		o.sendReplyOr(send, replyRecord(r.fam, r.corr, body, err), func(rec *router.Record) { o.sendPortableReply(r, rec) })
	case o.self(r):
		// Requested by this node run but not waiting here: a request it
		// sent over the wire that came back through Message Follow (the
		// object moved here, §7.3) — its portable call takes the answer —
		// or a local request whose waiter has gone (its context ended),
		// which the transport counts as a late reply.
		o.n.tr.Complete(replyRecord(r.fam, r.corr, body, err))
	default:
		// The request was made elsewhere and moved here: command 20 to
		// the requesting node, accepted there as a portable reply.
		o.sendPortableReply(r, replyRecord(r.fam, r.corr, body, err))
	}
}

// portableReplyWait bounds how long a moved request's answer may wait for
// room on the link to its requester.
const portableReplyWait = 5 * time.Second

// sendPortableReply sends a moved request's answer to its requester. Not
// bound to o.halt: the answers a stopping node still gives come after the
// halt — turns that end while §11 stops object work, the queued requests
// the runtime's close answers with ErrRuntimeDown, refusals of requests
// (route switch barriers among them) passed on to it while it stops — and
// its transport is up until Close closes it, after a Flush that waits for
// them. Sent with the halt's context, each failed at once (`context
// canceled`) and its requester waited out its own deadline: an operator
// try-out saw a route switch wait 10 s for a barrier a stopped node had
// refused. Send never blocks; the wait for room ends when the transport
// closes the link (ErrPeerDown) or at portableReplyWait.
func (o *objects) sendPortableReply(r replyRoute, rec *router.Record) {
	err := o.portableReplySend(false, func() error { return o.n.tr.Send(context.Background(), transport.RID(r.rid), rec) })
	if failed, ok := unsendableAnswer(rec, err); ok {
		// Its answer cannot be carried: the requester learns so at once.
		rec = failed
		err = o.portableReplySend(false, func() error { return o.n.tr.Send(context.Background(), transport.RID(r.rid), rec) })
	}
	if errors.Is(err, transport.ErrUnknownPeer) || errors.Is(err, transport.ErrNotAdmitted) {
		// No link of ours reaches the requester: it may have started
		// less than a discovery round ago. Its own link to this node is
		// admitted if it ever sent here, and takes the answer. (An
		// operator soak lost four answers, each a 10 s timeout, to a
		// client started two seconds before a host relocation.)
		if ierr := o.n.tr.ReplyInbound(transport.RID(r.rid), r.gen, rec); ierr == nil {
			return
		}
	}
	if errors.Is(err, transport.ErrBackpressure) {
		// Reply runs on a runtime worker: never block it. Wait for room on
		// a goroutine of its own, bounded by portableReplyWait and by the
		// transport's close (ErrPeerDown), not by the halt: an answer
		// ready at the halt still goes out while the transport is up.
		// Close waits for it (goWork, a node goroutine: within its
		// bounded wait; until 2026-12-07 a plain goroutine that could
		// outlive Close). Once the node halted goWork starts nothing, and
		// the wait runs on a goroutine of its own as before: Close's
		// transport close ends it.
		wait := func() {
			ctx, cancel := context.WithTimeout(context.Background(), portableReplyWait)
			defer cancel()
			if err := o.portableReplySend(true, func() error { return o.n.tr.SendWait(ctx, transport.RID(r.rid), rec) }); err != nil {
				o.logMovedReplyNotSent(r, err)
			}
		}
		if !o.goWork(wait) {
			go wait()
		}
		return
	}
	if err != nil {
		o.logMovedReplyNotSent(r, err)
	}
}

// portableReplySend is send, or what testHooks.portableReplySend stands
// for it (wait: the send waiting for room).
func (o *objects) portableReplySend(wait bool, send func() error) error {
	if h := o.hook().portableReplySend; h != nil {
		if err := h(wait); err != nil {
			return err
		}
	}
	return send()
}

// logMovedReplyNotSent logs a moved request's lost answer within the reply
// budget (record_log.go): a requester gone with many moved requests fails
// each of them.
func (o *objects) logMovedReplyNotSent(r replyRoute, err error) {
	if ok, suppressed := o.replyNotSentLog.allow(); ok {
		o.log.Warn("moved request's reply not sent", "requester", fmt.Sprintf("%x/%d", r.rid, r.gen), "err", err, "suppressed", suppressed)
	}
}

// envMeta is what a queued envelope carries besides its body (spot
// Envelope.Meta, opaque to the runtime): the operation id, the node run
// that sent it and, for a bound Session's Actor message, its session tail,
// so that a message captured in a move can be re-sent from the new owner's
// point of view with its identity unchanged (§7.3, §9.3) and its Session
// still known to the next host (session.go).
type envMeta struct {
	op   router.OperationID
	org  origin
	sess *sessionTag // nil: not a bound-session message
}

// envMeta encoding: op high (8), op low (8), origin generation (8), RID.
// With a session tail: op (16), eight zero bytes — an origin generation is
// never 0, so this layout cannot be read as the other — origin generation
// (8), u8 RID length, RID, u8 session RID length, session RID, binding
// generation (8), sequence (8). A meta without a session keeps the first
// layout, byte for byte what builds without sessions write.
const envMetaHeader = 24

func (m envMeta) encode() []byte {
	if m.sess == nil {
		b := make([]byte, envMetaHeader+len(m.org.rid))
		binary.BigEndian.PutUint64(b[0:], m.op.High)
		binary.BigEndian.PutUint64(b[8:], m.op.Low)
		binary.BigEndian.PutUint64(b[16:], m.org.gen)
		copy(b[envMetaHeader:], m.org.rid)
		return b
	}
	b := make([]byte, 0, envMetaHeader+8+2+len(m.org.rid)+len(m.sess.rid)+16)
	b = binary.BigEndian.AppendUint64(b, m.op.High)
	b = binary.BigEndian.AppendUint64(b, m.op.Low)
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint64(b, m.org.gen)
	b = append(append(b, byte(len(m.org.rid))), m.org.rid...)
	b = append(append(b, byte(len(m.sess.rid))), m.sess.rid...)
	b = binary.BigEndian.AppendUint64(b, m.sess.bindGen)
	return binary.BigEndian.AppendUint64(b, m.sess.seq)
}

func decodeEnvMeta(b []byte) (envMeta, error) {
	if len(b) <= envMetaHeader {
		return envMeta{}, fmt.Errorf("%w: envelope meta of %d bytes", errBadRoute, len(b))
	}
	m := envMeta{op: router.OperationID{High: binary.BigEndian.Uint64(b[0:]), Low: binary.BigEndian.Uint64(b[8:])}}
	if binary.BigEndian.Uint64(b[16:]) != 0 {
		if len(b) > envMetaHeader+255 {
			return envMeta{}, fmt.Errorf("%w: envelope meta of %d bytes", errBadRoute, len(b))
		}
		m.org = origin{gen: binary.BigEndian.Uint64(b[16:]), rid: append([]byte(nil), b[envMetaHeader:]...)}
		return m, nil
	}
	// The session layout: every length is checked against what is left.
	r := b[envMetaHeader:]
	bad := func() (envMeta, error) {
		return envMeta{}, fmt.Errorf("%w: envelope meta with a session tail of %d bytes", errBadRoute, len(b))
	}
	if len(r) < 9 || int(r[8]) == 0 || len(r) < 9+int(r[8])+1 {
		return bad()
	}
	m.org = origin{gen: binary.BigEndian.Uint64(r), rid: append([]byte(nil), r[9:9+int(r[8])]...)}
	r = r[9+int(r[8]):]
	if int(r[0]) == 0 || len(r) != 1+int(r[0])+16 {
		return bad()
	}
	m.sess = &sessionTag{rid: append([]byte(nil), r[1:1+int(r[0])]...), bindGen: binary.BigEndian.Uint64(r[1+int(r[0]):]),
		seq: binary.BigEndian.Uint64(r[1+int(r[0])+8:])}
	if m.org.gen == 0 || m.sess.bindGen == 0 || m.sess.seq == 0 {
		return bad()
	}
	return m, nil
}
