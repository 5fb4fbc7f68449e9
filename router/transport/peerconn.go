package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/router"
)

// outItem is one encoded record waiting for the writer.
type outItem struct {
	frames     [][]byte
	size       int64
	closeAfter bool // close the connection once this record is flushed (reject)
	// keep: a one-way application message, which a later connection to
	// the same peer run may still carry if this one ends before it left
	// (Node.keepUnsent); requests are not kept — their calls fail.
	keep bool
	// seq is the message's number on its link (router.LinkSequence),
	// given by the writer that first writes it (0: not written yet, or
	// the peer numbers nothing); a message sent again keeps it.
	seq uint64
}

// inflightRec is a record of the writer's current batch and where its last
// byte lies in the connection's write stream (guardConn.written).
type inflightRec struct {
	it  outItem
	end int64
}

// peerConn is one admitted-or-admitting physical connection in either
// direction, with its bounded send queue and its single writer goroutine.
//
// Design notes (why not zmq4's sockets): zmq4's Socket.Send writes to the
// TCP connection synchronously while holding the socket-wide writer mutex,
// so one peer that stops reading stalls every send of the socket and, through
// addConn, the accept loop as well (see docs/TRANSPORT.md). Here every
// connection has its own queue and writer, enqueueing never blocks, and a
// stalled flush is bounded by a socket write deadline.
type peerConn struct {
	zc *zconn

	q        *sendQueue    // data records, bounded in count
	prio     chan [][]byte // liveness probe/ack: never waits behind data
	qBytes   atomic.Int64  // bytes of records in q
	maxBytes int64
	// unflushed counts the data records queued and not yet written out by
	// a flush: zero means everything sent on this connection left the
	// process (Node.Flush waits for it before a close).
	unflushed atomic.Int64

	// Room notification for enqueueWait: waiters counts goroutines waiting
	// for queue room; while it is nonzero the writer closes room (and
	// replaces it) after every record it takes from q, so a waiter sleeps
	// until the queue actually shrank instead of polling it.
	roomMu  sync.Mutex
	room    chan struct{}
	waiters atomic.Int64
	retries atomic.Uint64 // enqueue attempts after a wake-up (tests check waiters do not spin)

	pongMu sync.Mutex
	pong   []byte
	hasPng bool
	// wake tells the writer there is data or a pong to write (one token:
	// the writer takes everything there is once woken).
	wake chan struct{}

	writeTimeout time.Duration
	// deadlineMu orders the writer's arming of its write deadline against
	// drainClose cutting it short: a batch armed after the cut would block
	// on a stalled peer for the whole writeTimeout.
	deadlineMu sync.Mutex
	// inflight is the batch the writer had not flushed when it stopped
	// (set by the writer on its way out, read after wait).
	inflight []inflightRec
	// sent are the one-way messages that left this process and that the
	// peer's kernel had not acknowledged when last looked at (writer-owned;
	// read after wait): if the peer closes the connection, those past its
	// last acknowledgement never reached it (undelivered).
	sent      []inflightRec
	sentHead  int
	untracked bool // acknowledgements unusable here: nothing is remembered (untrack)
	// inbound: the ROUTER side of a peer's link (set before start): its
	// end, whatever ends it, lets the reader read what the kernel
	// acknowledged (failWrite cuts it instead of closing it).
	inbound bool
	// drainAcked is what the peer had acknowledged when the drain began
	// (lingerRead), -1 before: a peer that acknowledged nothing more
	// through the linger takes nothing (abortIfUnaccepted).
	drainAcked atomic.Int64
	// late: what undelivered answered when a write found the peer gone
	// (failWrite), for the reader, whose own read then fails on a socket
	// already closed.
	late []outItem
	// drainCtx and drainLinger, set for a link's connection before start
	// (lingerOnTimeout): a write deadline that ends it while one-way
	// messages are unacknowledged drains it like drainClose instead of
	// closing it, so that its reader can learn whether the peer closed.
	drainCtx    context.Context
	drainLinger time.Duration
	// onEnd, when set, is told once that the connection ended, whoever
	// ended it (the session ends with it).
	onEnd atomic.Pointer[func(error)]
	// seq numbers the one-way messages of a link's connection whose peer
	// takes router.LinkSequence (set before the first data record is
	// queued, nil otherwise); lastSeq is the number last written on it
	// (the writer's).
	seq     *outSeq
	lastSeq uint64

	done       chan struct{}
	closeOnce  sync.Once
	errMu      sync.Mutex
	err        error
	lingerStop func() bool // drainClose: stops closing the socket on ctx end
	readingOut atomic.Bool // readOut: the reader reads on until the peer's end
	released   bool        // release ran: the reader is done with the socket
	writerWG   sync.WaitGroup

	// dataOut counts the data records (taken from q) the writer wrote on
	// this connection, and dataEnd is where the last of them ends in its
	// byte stream: what this node sent the peer, without the liveness
	// records, which are written every ProbeInterval — and acknowledged by
	// a peer's kernel with room — whether or not the peer reads
	// (Node.PeerProgress).
	dataOut atomic.Uint64
	dataEnd atomic.Int64

	// counters are the per-peer stats this connection counts in. An
	// inbound connection counts in a detached set until its hello is
	// admitted (onInboundOpen, admitInbound): its identity is the remote's
	// own choice until then, and strangers must not fill the bounded
	// per-peer table (maxPeerStats) so that real peers go uncounted.
	counters atomic.Pointer[peerCounters]
}

func newPeerConn(zc *zconn, queueRecords int, queueBytes int64, writeTimeout time.Duration) *peerConn {
	pc := &peerConn{
		zc:           zc,
		q:            newSendQueue(queueRecords),
		prio:         make(chan [][]byte, 4),
		maxBytes:     queueBytes,
		wake:         make(chan struct{}, 1),
		room:         make(chan struct{}),
		writeTimeout: writeTimeout,
		done:         make(chan struct{}),
	}
	pc.drainAcked.Store(-1)
	zc.g.onPing = pc.queuePong
	return pc
}

// start launches the writer goroutine.
func (pc *peerConn) start() {
	pc.writerWG.Add(1)
	go pc.writer()
}

// errQueueClosed is returned when enqueueing on a connection already torn down.
var errQueueClosed = errors.New("transport: connection closed")

// enqueue adds a record without ever blocking: a full queue (records or
// bytes) is backpressure, reported to the caller at once.
func (pc *peerConn) enqueue(it outItem) error {
	select {
	case <-pc.done:
		return pc.closedErr()
	default:
	}
	if pc.maxBytes > 0 {
		for {
			cur := pc.qBytes.Load()
			// One record larger than the byte budget may still go alone.
			if cur > 0 && cur+it.size > pc.maxBytes {
				return fmt.Errorf("%w: %d bytes queued (limit %d)", ErrBackpressure, cur, pc.maxBytes)
			}
			if pc.qBytes.CompareAndSwap(cur, cur+it.size) {
				break
			}
		}
	}
	pc.unflushed.Add(1) // before the writer can take it
	if err := pc.q.push(it); err != nil {
		pc.unflushed.Add(-1)
		pc.qBytes.Add(-it.size)
		if errors.Is(err, errQueueClosed) {
			// The session ended since the check above and its queue was
			// handed on (takeUnsent): this record was not taken.
			return pc.closedErr()
		}
		return fmt.Errorf("%w: %d records queued (limit %d)", ErrBackpressure, pc.q.max, pc.q.max)
	}
	pc.wakeWriter()
	return nil
}

// wakeWriter makes the writer look at the queue and the pong (at most one
// token is pending; the writer takes everything once woken).
func (pc *peerConn) wakeWriter() {
	select {
	case pc.wake <- struct{}{}:
	default:
	}
}

// flushed reports whether every data record queued on the connection was
// written out, or the connection is gone (its queue is then dropped).
func (pc *peerConn) flushed() bool {
	select {
	case <-pc.done:
		return true
	default:
	}
	return pc.unflushed.Load() == 0
}

// enqueueWait is enqueue that, while the queue is full, waits for the
// writer to take records out until ctx ends (an error wrapping
// ErrBackpressure and ctx.Err()) or the connection closes. waited reports
// whether it found the queue full at least once. A record larger than the
// whole byte budget still goes once the queue is empty (enqueue's rule), so
// a waiter never waits for room that can never exist.
func (pc *peerConn) enqueueWait(ctx context.Context, it outItem) (waited bool, err error) {
	err = pc.enqueue(it)
	if !errors.Is(err, ErrBackpressure) {
		return false, err
	}
	pc.waiters.Add(1)
	defer pc.waiters.Add(-1)
	for {
		// Take the notification channel before trying: a record taken by
		// the writer after this point closes ch (waiters is already
		// counted), one taken before it left room the attempt sees.
		pc.roomMu.Lock()
		ch := pc.room
		pc.roomMu.Unlock()
		pc.retries.Add(1)
		if err = pc.enqueue(it); !errors.Is(err, ErrBackpressure) {
			return true, err
		}
		select {
		case <-ch:
		case <-pc.done:
			return true, pc.closedErr()
		case <-ctx.Done():
			return true, fmt.Errorf("%w: %w", err, ctx.Err())
		}
	}
}

// dequeued accounts for a record the writer took from q and wakes the
// goroutines waiting for room, if any.
func (pc *peerConn) dequeued(it outItem) {
	pc.qBytes.Add(-it.size)
	if pc.waiters.Load() == 0 {
		return
	}
	pc.roomMu.Lock()
	close(pc.room)
	pc.room = make(chan struct{})
	pc.roomMu.Unlock()
}

// enqueuePriority queues a liveness record ahead of data. The channel is
// small: at most one probe is outstanding per connection, so only a peer
// flooding probes can fill it, and its extra acks are dropped.
func (pc *peerConn) enqueuePriority(frames [][]byte) error {
	select {
	case <-pc.done:
		return pc.closedErr()
	case pc.prio <- frames:
		return nil
	default:
		return fmt.Errorf("%w: liveness queue full", ErrBackpressure)
	}
}

func (pc *peerConn) queuePong(ctx []byte) {
	pc.pongMu.Lock()
	pc.pong, pc.hasPng = ctx, true
	pc.pongMu.Unlock()
	pc.wakeWriter()
}

func (pc *peerConn) takePong() ([]byte, bool) {
	pc.pongMu.Lock()
	defer pc.pongMu.Unlock()
	p, ok := pc.pong, pc.hasPng
	pc.pong, pc.hasPng = nil, false
	return p, ok
}

// maxBatch bounds how many records are coalesced before a flush, so that the
// peer sees a steady stream rather than one burst per drained queue.
const maxBatch = 256

func (pc *peerConn) writer() {
	defer pc.writerWG.Done()
	var batch []outItem // reused: the records of one batch, taken at once
	// inflight: the data records written to the buffer since the last
	// successful flush, with their end offsets.
	var inflight []inflightRec
	for {
		var firstPrio [][]byte
		select {
		case <-pc.done:
			return
		case firstPrio = <-pc.prio:
		case <-pc.wake:
		}
		// The deadline covers every write of this batch, including the
		// implicit flushes bufio does when its buffer fills; set before the
		// first write (a wake-up can find the queue already taken).
		armed := false
		arm := func() {
			if !armed {
				pc.armWrite()
			}
			armed = true
		}
		closeAfter := false
		var taken int64 // data records of this batch
		write := func(frames [][]byte) error {
			arm()
			if err := pc.zc.write(frames); err != nil {
				return err
			}
			if c := pc.counters.Load(); c != nil {
				c.sent(frames)
			}
			return nil
		}
		if firstPrio != nil {
			if err := write(firstPrio); err != nil {
				pc.failWrite("write", err, inflight)
				return
			}
		}
		if ctx, ok := pc.takePong(); ok {
			arm()
			if err := pc.zc.pong(ctx); err != nil {
				pc.failWrite("write pong", err, inflight)
				return
			}
		}
		// Take what is queued, write it, and take again what was queued
		// meanwhile (a write can wait for the socket when the buffer is
		// full), up to maxBatch records, so that records queued while a
		// write is in progress share the next flush.
		for taken < maxBatch && !closeAfter {
			batch = pc.q.popN(batch[:0], maxBatch-int(taken))
			if len(batch) == 0 {
				break
			}
			for i, it := range batch {
				// Liveness records go between data records, never behind the
				// rest of the batch.
				select {
				case fr := <-pc.prio:
					if err := write(fr); err != nil {
						pc.failWrite("write", err, append(inflight, unwritten(batch[i:])...))
						return
					}
				default:
				}
				pc.dequeued(it)
				taken++
				batch[i] = outItem{}
				if err := pc.number(&it, write); err != nil {
					pc.failWrite("write", err, append(append(inflight, inflightRec{it: it, end: math.MaxInt64}), unwritten(batch[i+1:])...))
					return
				}
				if err := write(it.frames); err != nil {
					pc.failWrite("write", err, append(append(inflight, inflightRec{it: it, end: math.MaxInt64}), unwritten(batch[i+1:])...))
					return
				}
				end := pc.zc.g.written()
				inflight = append(inflight, inflightRec{it: it, end: end})
				pc.dataEnd.Store(end)
				pc.dataOut.Add(1)
				if it.closeAfter {
					// A reject record ends the connection: what was queued
					// behind it is dropped with the queue.
					closeAfter = true
					break
				}
			}
		}
		pc.armWrite()
		wrote, err := pc.zc.g.flush()
		if err != nil {
			pc.failWrite("flush", err, inflight)
			return
		}
		pc.track(inflight)
		clear(inflight)
		inflight = inflight[:0]
		if c := pc.counters.Load(); c != nil && wrote {
			c.flushed()
		}
		pc.unflushed.Add(-taken)
		if closeAfter {
			pc.close(nil)
			return
		}
		if pc.q.len() > 0 {
			pc.wakeWriter() // the batch bound stopped it: go on after this flush
		}
	}
}

// number gives a one-way message its link number, the first time it is
// written, and writes a router.LinkSequence before it when it does not
// follow the number last written on this connection: at the connection's
// start, after messages kept for the peer were dropped, or before one sent
// again. Requests and replies are not numbered.
func (pc *peerConn) number(it *outItem, write func([][]byte) error) error {
	if pc.seq == nil || !it.keep {
		return nil
	}
	if it.seq == 0 {
		it.seq = pc.seq.issue()
	}
	if it.seq != pc.lastSeq+1 || pc.lastSeq == 0 {
		frames, err := encodeInfra(&router.LinkSequence{Next: it.seq, Run: pc.seq.run})
		if err != nil {
			return err
		}
		if err := write(frames); err != nil {
			return err
		}
	}
	pc.lastSeq = it.seq
	return nil
}

// armWrite gives the writes that follow writeTimeout, unless the connection
// is ending: drainClose cut the deadline short to stop the writer, and a
// deadline armed after that would let it block on a stalled peer for the
// whole timeout (and the session's end with it).
func (pc *peerConn) armWrite() {
	if pc.writeTimeout <= 0 {
		return
	}
	pc.deadlineMu.Lock()
	if !pc.isClosed() {
		_ = pc.zc.raw.SetWriteDeadline(time.Now().Add(pc.writeTimeout))
	}
	pc.deadlineMu.Unlock()
}

// unwritten lists records taken from the queue but not written at all.
func unwritten(items []outItem) []inflightRec {
	out := make([]inflightRec, 0, len(items))
	for _, it := range items {
		if it.frames != nil {
			out = append(out, inflightRec{it: it, end: math.MaxInt64})
		}
	}
	return out
}

// maxUnackedBytes is far past any kernel's send buffer: a connection
// whose unacknowledged bytes exceed it cannot be reading acknowledgements
// right, and stops remembering (untrack).
const maxUnackedBytes = 256 << 20

// track remembers the one-way messages of a flushed batch and forgets
// those the peer's kernel has acknowledged since (one TCP_INFO read per
// flush). Where acknowledgements cannot be read nothing is remembered.
//
// What is remembered is bounded by the kernel, not by a count: a message
// is forgotten once acknowledged, and what is written but not acknowledged
// fits in the socket's send buffer (the writer waits otherwise) — at most
// tcp_wmem's maximum, 4 MiB by default on Linux, of records kept alive
// per connection whose peer stopped reading. A count used to bound it
// (8,192 records): small records past it were forgotten while still
// unacknowledged, and a stalled peer that then cut the connection lost
// them (TestWriteDeadlineThenPeerCutLosesNothing: 4,419–7,473 of ~20,500
// 100-byte records).
func (pc *peerConn) track(batch []inflightRec) {
	if pc.untracked {
		return
	}
	for _, r := range batch {
		if r.it.keep {
			pc.sent = append(pc.sent, r)
		}
	}
	if len(pc.sent) == pc.sentHead {
		return
	}
	acked, ok := pc.zc.ack.acked()
	// After the handshake the peer has read our greeting, so a kernel
	// that counts acknowledgements has counted some: none means this one
	// does not (tcpi_bytes_acked is Linux 4.1+; older kernels leave it 0).
	if !ok || acked <= 0 || pc.zc.g.written()-acked > maxUnackedBytes {
		pc.untrack()
		return
	}
	for pc.sentHead < len(pc.sent) && pc.sent[pc.sentHead].end <= acked {
		pc.sent[pc.sentHead] = inflightRec{}
		pc.sentHead++
	}
	if pc.sentHead == len(pc.sent) {
		pc.sent, pc.sentHead = pc.sent[:0], 0
	} else if pc.sentHead > len(pc.sent)/2 {
		n := copy(pc.sent, pc.sent[pc.sentHead:])
		clear(pc.sent[n:])
		pc.sent, pc.sentHead = pc.sent[:n], 0
	}
}

// untrack stops remembering sent messages for good: what the kernel took
// counts as delivered, as where TCP_INFO cannot be read.
func (pc *peerConn) untrack() {
	pc.untracked = true
	clear(pc.sent)
	pc.sent, pc.sentHead = nil, 0
}

// failWrite ends the connection after the writer's write failed, keeping
// the batch it was writing (inflight) for takeUnsent. A write that failed
// for any reason but its deadline (a drain's cut, a stalled peer, which
// may still read what it was sent) means the connection is broken — the
// peer closed or reset it, and zmq4 refuses writes once a read saw that —
// so nothing it did not acknowledge will reach it: this is the moment to
// ask, while the socket is still open, and the answer is kept in late for
// the reader.
func (pc *peerConn) failWrite(what string, err error, inflight []inflightRec) {
	pc.inflight = inflight
	cause := fmt.Errorf("transport: %s: %w", what, err)
	if pc.inbound {
		// What the peer sent and this kernel acknowledged is the peer's
		// "delivered" whatever became of our writes: the reader reads it
		// to the end (a closed socket discarded it — a paused node that
		// ran again and found its peer had reset the connection lost the
		// peer's last ~8,000 one-way messages, its writer's first write of
		// a liveness ack failing before its reader got to them).
		pc.cut(cause)
		return
	}
	var ne net.Error
	if !(errors.As(err, &ne) && ne.Timeout()) {
		pc.splitInflight()
		pc.late = pc.undelivered()
		pc.close(cause)
		return
	}
	// A deadline says only that writes did not finish in time: the peer
	// may be slow, or this process was stopped past the deadline (SIGSTOP,
	// a VM freeze) — and then writes that ran before Go's runtime noticed
	// the deadline left it, maybe onto a connection the peer cut
	// meanwhile. Which one-way messages reached the peer only the reader
	// can learn (the end of the stream or a reset, or silence): closing
	// now counted them all as delivered (TestPausedSenderLosesNothing lost
	// one 16 KiB write buffer of records so). So a connection with
	// unacknowledged ones drains like drainClose; the rest close at once.
	if pc.drainCtx != nil {
		pc.splitInflight()
		if pc.sentHead < len(pc.sent) {
			pc.end(cause, func() { pc.lingerRead(pc.drainCtx, pc.drainLinger) })
			return
		}
	}
	pc.close(cause)
}

// lingerOnTimeout makes a write deadline drain the connection instead of
// closing it while one-way messages it sent are unacknowledged (failWrite);
// ctx ending closes it at once. Called before start.
func (pc *peerConn) lingerOnTimeout(ctx context.Context, linger time.Duration) {
	pc.drainCtx, pc.drainLinger = ctx, linger
}

// splitInflight moves the one-way messages of the writer's last batch that
// left this process into sent; inflight keeps those that did not.
func (pc *peerConn) splitInflight() {
	left := pc.zc.g.left()
	var rest []inflightRec
	for _, r := range pc.inflight {
		switch {
		case r.end > left:
			rest = append(rest, r)
		case r.it.keep && !pc.untracked:
			pc.sent = append(pc.sent, r)
		}
	}
	pc.inflight = rest
}

// undelivered returns, once the writer has stopped and before the socket
// is closed, the one-way messages that left this process but that the
// peer's kernel never acknowledged, in order: after the peer closed the
// connection or reset it, those never reached it — a peer that closed a
// connection it found silent (this process was paused) answers what it
// is sent afterwards with a reset. It is only asked when the connection
// ended by the peer's close or reset; a peer that is merely silent may
// still read them.
func (pc *peerConn) undelivered() []outItem {
	acked, ok := pc.zc.ack.acked()
	if !ok {
		return nil
	}
	return pc.undeliveredAt(acked)
}

// undeliveredAt is undelivered for a peer that acknowledged acked bytes.
func (pc *peerConn) undeliveredAt(acked int64) []outItem {
	var out []outItem
	for _, r := range pc.sent[pc.sentHead:] {
		if r.end > acked {
			out = append(out, r.it)
		}
	}
	pc.sent, pc.sentHead = nil, 0
	return out
}

// givenUpEnds returns the end offsets of the one-way messages the peer had
// not acknowledged when its connection was given up gracefully with them
// in flight — they count as delivered, and holdUntilAcked waits for them —
// and forgets them; nil when what the peer acknowledged cannot be read.
func (pc *peerConn) givenUpEnds() []int64 {
	acked, ok := pc.zc.ack.acked()
	if !ok {
		return nil
	}
	// The records past acked are the last ones written: sent is in the
	// order of their ends.
	recs := pc.sent[pc.sentHead:]
	recs = recs[len(recs)-len(pc.undeliveredAt(acked)):]
	ends := make([]int64, len(recs))
	for i, r := range recs {
		ends[i] = r.end
	}
	return ends
}

// takeUnsent returns, in order, the data records that did not leave this
// process whole once the writer has stopped (after wait): those of its last
// batch past what the kernel took — the one it was cut in the middle of
// included, which the peer discards as a truncated frame — then everything
// still queued. Those of the last batch that did leave are remembered for
// undelivered. Called once, by the link whose session ended.
func (pc *peerConn) takeUnsent() []outItem {
	pc.splitInflight()
	var out []outItem
	for _, r := range pc.inflight {
		out = append(out, r.it)
	}
	pc.inflight = nil
	// Closing the queue, not merely emptying it: a send that passed
	// enqueue's check of done just before the session ended would
	// otherwise queue its record after this — on a queue nobody reads
	// again, lost although its sender was told it was sent (seen under
	// load: 1 to 8 records per pause in TestPausedSenderLosesNothing).
	out = pc.q.close(out)
	return out
}

// requeue queues records kept from an earlier connection to the same peer
// run ahead of anything sent on this one; it is called before the session
// is published, so nothing can come between. The queue's bounds do not
// refuse them (their senders were told they were sent): they can hold up
// to the record bound plus the writer's last batch, and new sends meet
// backpressure until they drain.
func (pc *peerConn) requeue(items []outItem) {
	if len(items) == 0 {
		return
	}
	for _, it := range items {
		pc.unflushed.Add(1)
		pc.qBytes.Add(it.size)
		pc.q.pushOver(it)
	}
	pc.wakeWriter()
}

// close tears the connection down once: the socket is closed (which unblocks
// the reader and any blocked write) and the queue is abandoned.
func (pc *peerConn) close(cause error) {
	pc.end(cause, func() { _ = pc.zc.close() })
}

// end marks the connection closed with cause once, then runs stop (under
// the once); it reports whether this call was the one.
func (pc *peerConn) end(cause error, stop func()) bool {
	first := false
	pc.closeOnce.Do(func() {
		first = true
		if cause == nil {
			cause = errQueueClosed
		}
		pc.errMu.Lock()
		pc.err = cause
		pc.errMu.Unlock()
		close(pc.done)
		stop()
	})
	if first {
		if f := pc.onEnd.Load(); f != nil {
			(*f)(cause)
		}
	}
	return first
}

// cut ends an inbound connection — found silent by the sweep, superseded
// by a connection of a newer run of its peer, or read to its end while
// superseded and then idle (readSource) — without losing what its
// kernel acknowledged: the writer stops, and the socket is shut down both
// ways (cutSocket) instead of closed — the reader goes on with the records
// the kernel holds and then reads the end of the stream (this side's
// reading is shut too, so it does not wait for the peer), and closes the
// socket then (routerSock.serve). Closing it outright
// discards the bytes the kernel acknowledged but the reader had not read
// yet, which their sender counts as delivered: the sweep looks for unread
// bytes first, but bytes arriving between that look and the close (a
// sender resuming just then; Go closes the descriptor only once the
// reading goroutine lets go of it) were lost. Where the socket cannot be
// shut down, it is closed.
//
// The reader gets no read deadline for this: after the cut a read never
// waits for the peer, so a deadline could only end a reader that is slow
// — its handler stuck, its process starved — and discard what the kernel
// acknowledged, which the sender counts as delivered (a receiver whose
// handler was stuck for four peer timeouts lost ~18,000 such records of a
// stream: TestStuckReceiverLongerThanTwoPeerTimeouts).
func (pc *peerConn) cut(cause error) {
	pc.end(cause, func() {
		pc.deadlineMu.Lock()
		_ = pc.zc.raw.SetWriteDeadline(time.Now())
		pc.deadlineMu.Unlock()
		if !cutSocket(pc.zc.raw) {
			_ = pc.zc.close()
		}
	})
}

// readOut ends an inbound connection superseded by a newer one of the same
// peer run without refusing anything that peer's kernel still sends on it:
// the writer stops, the socket stays open, and its reader reads on until
// the peer's end of the stream (its close or reset) — or until a read has
// waited idle for nothing (readSource: the socket is cut then, and what
// its kernel acknowledged is still read). The socket is closed once the
// reader stops (routerSock.serve), or at once when the node closes
// (stopReadOut).
//
// Why not cut it (as cut does, and as supersede did): the peer's link
// reconnects only once it gave the old connection up (awaitDrain), and a
// give-up counts what that socket still holds as delivered when the peer
// was still taking data with segments in flight (session.hold). That
// socket goes on sending it; a cut made this kernel refuse it, and those
// records were lost although counted delivered — thousands at a time over
// CURVE (TestSupersededConnectionIsReadToItsEnd). Read to its end, the
// connection delivers them; the new connection delivers nothing before
// (inConn.after), so order holds.
//
// Nothing is written on it any more: the peer's socket is closed for
// reading or held only until what it counted delivered is acknowledged,
// and once closed its kernel answers any data — a liveness ack owed to a
// probe read late — with a reset, discarding what it still holds. No FIN
// is sent either (the peer's socket no longer reads).
func (pc *peerConn) readOut(cause error, idle time.Duration) {
	pc.end(cause, func() {
		pc.deadlineMu.Lock()
		_ = pc.zc.raw.SetWriteDeadline(time.Now())
		pc.deadlineMu.Unlock()
		pc.readingOut.Store(true)
		pc.zc.g.src.boundIdle(idle)
	})
}

// cutReadOut ends the read-out of a superseded connection (readOut) early:
// its socket is cut (cutSocket) — the reader still delivers what this
// kernel acknowledged, then reads the end of the stream; what the peer's
// kernel sends from then on is refused. Where the socket cannot be cut it
// is closed. For a connection more than one supersession old
// (routerSock.noteReadOut); it may run before or after readOut did.
func (pc *peerConn) cutReadOut() {
	pc.deadlineMu.Lock()
	_ = pc.zc.raw.SetWriteDeadline(time.Now())
	pc.deadlineMu.Unlock()
	if !cutSocket(pc.zc.raw) {
		_ = pc.zc.close()
	}
}

// stopReadOut closes a connection being read to its end (readOut) at once:
// the node is closing.
func (pc *peerConn) stopReadOut() {
	if pc.readingOut.Load() {
		_ = pc.zc.close()
	}
}

// drainClose ends the connection like close, but keeps what already left
// this process: the writer stops (a write blocked on a full socket returns
// at once; what it had not written stays counted in unflushed), the write
// side is shut down — the FIN follows whatever the kernel still holds — and
// the socket stays open for reading until the peer closes its side or
// linger passes. Closing it outright would be the end of what the kernel
// still holds: a peer that stopped running (SIGSTOP, a VM freeze) answers
// the first thing it read once it runs again (a liveness probe), that
// answer meets a closed socket, our kernel replies with a reset, and the
// peer's kernel discards every byte the peer had not read yet. The reader
// (session.read) closes the socket when it stops; ctx ending (the node
// closing) closes it at once. It reports whether this call ended the
// connection (false: it was already closed).
func (pc *peerConn) drainClose(ctx context.Context, cause error, linger time.Duration) bool {
	if !pc.end(cause, func() {
		pc.deadlineMu.Lock()
		_ = pc.zc.raw.SetWriteDeadline(time.Now())
		pc.deadlineMu.Unlock()
	}) {
		return false
	}
	// Outside the once: a writer failing meanwhile calls close, which
	// waits for the once.
	pc.writerWG.Wait()
	pc.lingerRead(ctx, linger)
	return true
}

// lingerRead shuts the write side of the stopped writer's socket — the FIN
// follows whatever the kernel still holds — and leaves it open for its
// reader until the peer closes its side or linger passes; ctx ending (the
// node closing) closes it at once.
func (pc *peerConn) lingerRead(ctx context.Context, linger time.Duration) {
	cw, ok := pc.zc.raw.(interface{ CloseWrite() error })
	if !ok || ctx.Err() != nil {
		_ = pc.zc.close()
		return
	}
	// A connection the peer already reset refuses the shutdown; it is not
	// closed here for that: its reader's read fails at once, and it asks
	// the socket what the peer acknowledged (undelivered) before closing
	// it (release). Closed here, the socket could not be asked, and every
	// one-way message written since the peer's last acknowledgement
	// counted as delivered (seen under load: 8 records lost by a sender
	// whose peer had cut it while it was paused).
	if acked, ok := pc.zc.ack.acked(); ok {
		pc.drainAcked.Store(acked)
	}
	_ = cw.CloseWrite()
	_ = pc.zc.raw.SetReadDeadline(time.Now().Add(linger))
	pc.errMu.Lock()
	if !pc.released {
		pc.lingerStop = context.AfterFunc(ctx, func() { _ = pc.zc.close() })
	}
	pc.errMu.Unlock()
}

// abortIfUnaccepted resets a drained connection whose peer stayed silent
// through the linger (the reader has stopped), when what the peer has not
// acknowledged cannot reach it: either no data segment is in flight
// (TCP_INFO tcpi_unacked 0: it was never transmitted), or the peer
// acknowledged nothing during the whole linger and the window it last
// advertised is closed (its process stopped or its reader stuck, its
// buffer full: what is in flight is being refused and retransmitted). The
// reset discards it here — the peer still reads what it acknowledged —
// and it returns, with why, the one-way messages past what the peer had
// acknowledged at that instant (resetIf: the count is read in the same
// pass as the reset), which it will never get. Otherwise their fate is
// unknown, and it returns "": the close stays graceful, they count as
// delivered, and the session holds the connection until the peer
// acknowledges them (session.hold).
//
// Unknown too with nothing acknowledged through the linger while
// segments are in flight into a window the peer last advertised open:
// a receiver that resumed at the end of the linger may have taken them
// already, its acknowledgements not processed by this kernel yet (its
// own backlog, or this one's, on a loaded machine). Reset, it read them
// before the reset and got them again on the next connection (a run of
// TestStuckReceiverLongerThanTwoPeerTimeouts under load delivered 344
// records twice so; TestGiveUpOfWhatAnOpenWindowMayHaveTaken).
// The price: a stuck peer whose kernel dropped segments it had advertised
// room for (its queue pruned under a flood of small segments) is held too,
// not reset, and what the hold's bound does not see acknowledged is
// counted lost (Stats.HeldLost) instead of being sent again.
//
// What is left is a race of two system calls: a stopped peer that resumes
// and takes a segment between the count and the reset would get it and
// then, resent, again.
//
// A peer that drops what it already delivered (its messages numbered,
// pc.seq; docs/TRANSPORT.md "Delivered once") makes the unknown harmless:
// its connection is always reset and everything it did not acknowledge is
// sent again — one it had read after all is dropped there — instead of
// held, where what the hold does not see acknowledged within its bound (a
// partition, a host frozen as a whole) was counted lost.
//
// why is "nothing in flight", "the peer took nothing through the linger"
// or "the peer drops copies".
func (pc *peerConn) abortIfUnaccepted() (why string, undelivered []outItem) {
	if pc.untracked || len(pc.sent) == pc.sentHead {
		return "", nil
	}
	at := pc.drainAcked.Load()
	raw, reset, ok := resetIf(pc.zc.raw, func(raw int64, inFlight, windowOpen bool) bool {
		switch acked := raw - pc.zc.ack.base; {
		case pc.seq != nil:
			why = "the peer drops copies"
		case at >= 0 && acked == at && !(inFlight && windowOpen):
			why = "the peer took nothing through the linger"
		case !inFlight:
			why = "nothing in flight"
		default:
			return false
		}
		return true
	})
	if !ok || !reset {
		return "", nil
	}
	return why, pc.undeliveredAt(raw - pc.zc.ack.base)
}

// release closes the socket once its reader has stopped (after close or
// drainClose).
func (pc *peerConn) release() {
	pc.errMu.Lock()
	pc.released = true
	stop := pc.lingerStop
	pc.errMu.Unlock()
	if stop != nil {
		stop()
	}
	_ = pc.zc.close()
}

func (pc *peerConn) closedErr() error {
	pc.errMu.Lock()
	defer pc.errMu.Unlock()
	if pc.err == nil {
		return errQueueClosed
	}
	return pc.err
}

// wait blocks until the writer goroutine has exited (after close).
func (pc *peerConn) wait() { pc.writerWG.Wait() }
