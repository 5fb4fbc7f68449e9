package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/meshnode/meshnode/router"
)

// This file is the request side of correlation: every request this node
// waits on — a Request, a Start, a reply slot (ExpectReply) — is a Call in
// one node-wide table keyed by correlation. Replies (command 20, or 53 for
// a relocationPrepare) arriving on any admitted connection, and local
// completions (Complete), are matched through that table, and the table's
// delete is what makes completion exactly-once.

// CallOption adjusts a request started with Start or Request.
type CallOption func(*callOptions)

type callOptions struct {
	portable bool
	run      peerRun
}

// Portable marks a request whose reply may come from a node other than the
// one it was sent to: an object request (spotRequest 22, actorRequest 25)
// that reaches a previous owner is run by the object's new owner, which
// answers the original requester with the request's correlation unchanged
// (spec §7.3 Message Follow, "reply route unchanged"). Its reply is accepted
// from any admitted peer — on our ROUTER or on our DEALER link to that peer
// — and from Complete. When the connection it went out on is lost it
// still waits Config.PortableGrace for that reply (the request may have
// been passed on before), then fails with ErrPeerDown: the requester
// cannot tell whether it was.
func Portable() CallOption { return func(o *callOptions) { o.portable = true } }

// Run marks a request meant for one run of its peer, the one admitted with
// lifecycle generation gen: it is sent only on a session of that run, and
// fails at once with a *RunError otherwise (see SendRun).
func Run(gen uint64) CallOption {
	return func(o *callOptions) { o.run = peerRun{gen: gen, set: true} }
}

// Call is a request awaiting its reply, or a reply slot (ExpectReply). It is
// completed at most once — by the reply, an error, its deadline or Cancel —
// and must be waited for or cancelled, or it stays in the table until its
// connection ends (a reply slot: until the node closes).
type Call struct {
	n        *Node
	corr     uint64
	peer     RID      // the peer the request went to; nil for a reply slot
	portable bool     // replies accepted from any admitted peer
	sess     *session // the session the request went out on; nil for a reply slot
	done     chan struct{}
	rec      *router.Record // set before done is closed
	err      error
}

// Correlation is the call's node-wide correlation (the value written into
// the request body; for a reply slot, the value to write into it).
func (c *Call) Correlation() uint64 { return c.corr }

// Done is closed once the call is complete; Wait then returns at once.
func (c *Call) Done() <-chan struct{} { return c.done }

func (c *Call) String() string {
	if c.peer == nil {
		return fmt.Sprintf("reply slot %d", c.corr)
	}
	return fmt.Sprintf("request %d to %s", c.corr, c.peer)
}

// Wait waits for the reply. It ends at ctx's deadline or, without one,
// RequestTimeout after Wait is called (ErrDeadlineExceeded, also matching
// context.DeadlineExceeded); on ctx cancellation; or, for a request, with
// ErrPeerDown as soon as the connection it went out on is lost or the peer
// restarts. An ended wait ends the call: a reply arriving afterwards is
// counted late and dropped. Once the call is complete, every Wait returns
// the same result.
func (c *Call) Wait(ctx context.Context) (*router.Record, error) {
	select {
	case <-c.done:
		return c.rec, c.err
	default:
	}
	var expired chan struct{}
	if _, ok := ctx.Deadline(); !ok {
		expired = make(chan struct{})
		t := c.n.clock.AfterFunc(c.n.cfg.RequestTimeout, func() { close(expired) })
		defer t.Stop()
	}
	select {
	case <-c.done:
		return c.rec, c.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return c.abandon(deadlineErr("%s", c))
		}
		return c.abandon(fmt.Errorf("transport: %s: %w", c, ctx.Err()))
	case <-expired:
		return c.abandon(deadlineErr("%s: no reply within %s", c, c.n.cfg.RequestTimeout))
	}
}

// Cancel forgets the call: Wait returns an error wrapping context.Canceled
// and a reply arriving later is counted late and dropped. It does nothing
// on a call already complete.
func (c *Call) Cancel() {
	c.finish(nil, fmt.Errorf("transport: %s cancelled: %w", c, context.Canceled))
}

// abandon ends the call with err unless its reply won the race.
func (c *Call) abandon(err error) (*router.Record, error) {
	c.finish(nil, err)
	<-c.done
	return c.rec, c.err
}

// finish completes the call if nothing else has: only the goroutine that
// takes it out of the node's table resolves it.
func (c *Call) finish(rec *router.Record, err error) bool {
	if !c.n.calls.take(c) {
		return false
	}
	c.resolve(rec, err)
	return true
}

// resolve publishes the result; the caller has taken c out of the table
// (or never put it in).
func (c *Call) resolve(rec *router.Record, err error) {
	if c.sess != nil {
		c.sess.removePending(c.corr)
	}
	c.rec, c.err = rec, err
	close(c.done)
}

// accepts reports whether a reply from peer from (nil: this node, via
// Complete) may complete the call.
func (c *Call) accepts(from RID) bool {
	if c.peer == nil || c.portable {
		return true
	}
	return from != nil && from.Equal(c.peer)
}

// callTable is the node-wide index of calls by correlation.
type callTable struct {
	mu     sync.Mutex
	calls  map[uint64]*Call
	closed error // set by close: no new calls
}

func (t *callTable) init() { t.calls = make(map[uint64]*Call) }

func (t *callTable) add(c *Call) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed != nil {
		return t.closed
	}
	t.calls[c.corr] = c
	return nil
}

// take removes c if it is still in the table.
func (t *callTable) take(c *Call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls[c.corr] != c {
		return false
	}
	delete(t.calls, c.corr)
	return true
}

// takeReply removes and returns the call with correlation corr if a reply
// from from may complete it.
func (t *callTable) takeReply(corr uint64, from RID) *Call {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls[corr]
	if c == nil || !c.accepts(from) {
		return nil
	}
	delete(t.calls, corr)
	return c
}

// close refuses new calls and fails every remaining one: reply slots with
// err, requests (a portable one still in its grace) with reqErr.
func (t *callTable) close(err, reqErr error) {
	t.mu.Lock()
	t.closed = err
	left := t.calls
	t.calls = make(map[uint64]*Call)
	t.mu.Unlock()
	for _, c := range left {
		if c.peer != nil {
			c.resolve(nil, reqErr)
			continue
		}
		c.resolve(nil, err)
	}
}

// Start sends a request record (a command whose body carries a correlation
// field) to peer and returns at once with its Call; Call.Wait collects the
// reply. The transport assigns the correlation — a node-wide nonzero u64 —
// by writing it into rec's body, as Request does. Like SendWait, a full send
// queue is waited out until ctx ends; ctx bounds only the send, Wait takes
// its own. Records the caller sends to the same peer after Start returns
// travel behind the request on the same ordered connection: the relocation
// source starts relocationPrepare (40), streams its chunks (52) with
// SendWait, then waits for relocationReady (53).
func (n *Node) Start(ctx context.Context, peer RID, rec *router.Record, opts ...CallOption) (*Call, error) {
	return n.start(ctx, peer, rec, true, opts)
}

// Request is Start followed by Wait, except that a full send queue fails at
// once with ErrBackpressure (as Send): callers on the message path shed
// load rather than queue behind a slow peer.
func (n *Node) Request(ctx context.Context, peer RID, rec *router.Record, opts ...CallOption) (*router.Record, error) {
	c, err := n.start(ctx, peer, rec, false, opts)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx)
}

func (n *Node) start(ctx context.Context, peer RID, rec *router.Record, wait bool, opts []CallOption) (*Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rec == nil || rec.Body == nil {
		return nil, fmt.Errorf("%w: request without body", ErrInvalidRecord)
	}
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	s, err := n.session(peer, o.run)
	if err != nil {
		return nil, err
	}
	corr := n.nextCorrelation()
	if !setCorrelation(rec.Body, corr) {
		return nil, fmt.Errorf("%w: %s carries no correlation; it is not a request", ErrInvalidRecord, rec.Body.Command())
	}
	frames, err := router.Encode(rec)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if err := n.checkOutgoing(frames); err != nil {
		return nil, err
	}
	c := &Call{n: n, corr: corr, peer: s.l.rid, portable: o.portable, sess: s, done: make(chan struct{})}
	// Table first, then the session: a session ending in between finds the
	// call in the table and fails it; the other order could miss it.
	if err := n.calls.add(c); err != nil {
		return nil, err
	}
	if err := s.addPending(c); err != nil {
		n.calls.take(c)
		return nil, err
	}
	if err := s.send(ctx, frames, wait, false); err != nil {
		c.finish(nil, err)
		return nil, err
	}
	return c, nil
}

// ExpectReply registers a reply slot: a Call with a fresh node-wide
// correlation that is bound to no peer, for a request this node runs
// locally but whose handler may end up running on another node (the object
// moved; the new owner answers us with this correlation, spec §7.3). The
// caller writes Correlation() into the request it builds. Any admitted
// peer's reply with that correlation completes it, and so does Complete
// when the handler ran here. A slot has no connection, so it never fails
// with ErrPeerDown: only its Wait deadline, Cancel or Close end it. After
// Close it is returned already failed with ErrClosed.
func (n *Node) ExpectReply() *Call {
	c := &Call{n: n, corr: n.nextCorrelation(), done: make(chan struct{})}
	if err := n.calls.add(c); err != nil {
		c.resolve(nil, fmt.Errorf("transport: %s: %w", c, err))
	}
	return c
}

// Complete delivers a reply produced on this node (the request's handler
// ran here) to the call waiting for it, through the same table as replies
// from peers, so the caller has one path. It accepts a reply for a reply
// slot or a portable request; a non-portable request accepts its reply only
// from the peer it was sent to. It reports whether a call was completed;
// false means none was waiting (already completed, ended or never there:
// counted as a late reply) or rec is not a reply.
func (n *Node) Complete(rec *router.Record) bool {
	if rec == nil {
		return false
	}
	if _, ok := replyCorrelation(rec); !ok {
		return false
	}
	return n.deliverReply(nil, rec)
}

// deliverReply completes the call a reply answers. from is the peer the
// reply came from (nil: this node). A reply no call accepts is counted late
// and dropped — except a peer's 53 that Config.UnawaitedReady takes.
func (n *Node) deliverReply(from RID, rec *router.Record) bool {
	corr, ok := replyCorrelation(rec)
	if !ok {
		// Only commands 20 and 53 are routed here, and both carry one.
		n.stats.protocolErrors.Add(1)
		return false
	}
	c := n.calls.takeReply(corr, from)
	if c == nil {
		if from != nil && rec.Command == router.CmdRelocationReady && n.cfg.UnawaitedReady != nil && n.cfg.UnawaitedReady(from, rec) {
			return true
		}
		n.stats.lateReplies.Add(1)
		return false
	}
	switch {
	case from == nil:
		n.stats.localReplies.Add(1)
	case c.peer == nil || !from.Equal(c.peer):
		n.stats.portableReplies.Add(1)
	}
	c.resolve(rec, nil)
	return true
}
