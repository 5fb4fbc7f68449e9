package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/meshnode/meshnode/internal/listen"
	"github.com/meshnode/meshnode/internal/logbudget"
)

// This file is the link layer: the node's one ROUTER (our own accept loop
// and per-connection goroutines over zmq4's ZMTP Conn) and the dialling half
// of each per-peer DEALER. It moves frames only; admission, liveness and
// correlation live in node.go.

// splitEndpoint turns "tcp://host:port" into "host:port". "*" as host means
// every interface, as in ZeroMQ.
func splitEndpoint(ep string) (string, error) {
	addr, ok := strings.CutPrefix(ep, "tcp://")
	if !ok || addr == "" {
		return "", fmt.Errorf("%w: endpoint %q: want tcp://host:port", ErrConfig, ep)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%w: endpoint %q: %v", ErrConfig, ep, err)
	}
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), nil
}

// linkParams are the link-layer knobs taken from Config.
type linkParams struct {
	localID          []byte
	lim              frameLimits
	bufSize          int
	handshakeTimeout time.Duration
	writeTimeout     time.Duration
	queueRecords     int
	queueBytes       int64
	maxInbound       int
	curve            *curveParams // nil: NULL mechanism
	maxUnadmitted    int
	maxPeers         int
}

func (c *Config) linkParams() linkParams {
	return linkParams{
		localID:          c.RID,
		lim:              c.limits(),
		bufSize:          c.IOBufferBytes,
		handshakeTimeout: c.HandshakeTimeout,
		writeTimeout:     c.WriteTimeout,
		queueRecords:     c.SendQueueRecords,
		queueBytes:       c.SendQueueBytes,
		maxInbound:       c.MaxInboundConns,
		curve:            c.curve,
		maxUnadmitted:    c.MaxUnadmitted,
		maxPeers:         c.MaxPeers,
	}
}

// inConn is one inbound connection accepted on the ROUTER.
type inConn struct {
	pc     *peerConn
	ident  string // peer's ZMTP identity = its RID
	remote string

	// Admission state, owned by the node layer (mu guards it).
	mu       sync.Mutex
	admitted bool
	info     PeerInfo

	lastSeen atomic.Int64 // clock UnixNano of the last record received
	logLimit logbudget.Budget
	// row is the per-peer stats row admission acquired for this
	// connection, given back when it closes (stats.release).
	row       atomic.Pointer[peerCounters]
	superseed atomic.Bool // replaced by a newer connection with the same identity
	// unadmitted: the connection still counts against MaxUnadmitted (until
	// admission or close, whichever comes first releases it).
	unadmitted atomic.Bool
	// slot is its place in the MaxUnadmitted pool (released at admission,
	// close or eviction: unadmitted.go).
	slot *pendingSlot
	// readDone is closed once the reader stopped: every record of the
	// connection that will ever reach the handler has (the connection
	// that superseded it waits for it: after).
	readDone chan struct{}
	// after, set at admission when this connection superseded another
	// (only the reader touches it then), is that one's readDone: its
	// records reach the handler before any of this one's, however long
	// its reader takes — a superseded connection of the same peer run is
	// read to its end, at the handler's pace (supersede's own wait for it
	// is short or none: the admission must answer within the peer's
	// handshake timeout, and the peer's kept messages age meanwhile).
	after chan struct{}
	// seqNext is the number of the next numbered message on this
	// connection (router.LinkSequence; 0: the peer numbers nothing), and
	// seqIn what was delivered of the peer run (set at admission); both
	// the reader's.
	seqNext uint64
	seqIn   *inSeq
}

// routerSock is the node's ROUTER: one listener, any number of inbound
// connections, at most one current connection per identity.
type routerSock struct {
	p   linkParams
	log *slog.Logger
	ln  net.Listener

	// callbacks into the node layer; called from the connection goroutine
	onOpen   func(ic *inConn)
	onFrames func(ic *inConn, frames [][]byte)
	onClose  func(ic *inConn, cause error)
	onBad    func(remote, ident string, err error) // handshake failure or framing violation (ident may be "")
	onRefuse func(remote string, err error)        // connection closed at accept by a cap (may be nil)

	mu    sync.Mutex
	conns map[*inConn]struct{}
	hs    map[net.Conn]struct{} // accepted, ZMTP handshake in progress (close closes them)
	byID  map[string]*inConn
	// readOuts holds, per identity, the superseded connection of its peer
	// run being read to its end (peerConn.readOut): at most one per
	// identity (noteReadOut).
	readOuts map[string]*inConn
	n        int // live connections including handshaking ones
	unadm    int // live connections not admitted yet (handshaking ones included)
	// pending holds the slots of those unadmitted connections by source
	// address group (unadmitted.go); slotSeq numbers them in accept order.
	pending map[string]map[*pendingSlot]struct{}
	slotSeq uint64
	closed  bool
	done    chan struct{} // closed by close()
	wg      sync.WaitGroup

	refusedFull       atomic.Uint64
	refusedUnadmitted atomic.Uint64
	evictedUnadmitted atomic.Uint64
	readOutsCut       atomic.Uint64
}

func listenRouter(endpoint string, p linkParams, log *slog.Logger) (*routerSock, error) {
	addr, err := splitEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	ln, err := listen.TCP(addr, endpoint)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	return &routerSock{
		p:        p,
		log:      log,
		ln:       ln,
		conns:    make(map[*inConn]struct{}),
		hs:       make(map[net.Conn]struct{}),
		byID:     make(map[string]*inConn),
		readOuts: make(map[string]*inConn),
		done:     make(chan struct{}),
	}, nil
}

func (r *routerSock) start() {
	r.wg.Add(1)
	go r.acceptLoop()
}

func (r *routerSock) acceptLoop() {
	defer r.wg.Done()
	backoff := time.Duration(0)
	for {
		raw, err := r.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// zmq4's accept loop retries immediately on any error, spinning
			// a core on EMFILE; back off instead.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff < time.Second {
				backoff *= 2
			}
			r.log.Warn("transport: accept failed", "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.done:
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = raw.Close()
			return
		}
		if r.n >= r.p.maxInbound {
			r.mu.Unlock()
			r.refuseFull(raw)
			continue
		}
		slot, evicted, ok := r.takeSlotLocked(raw, addrGroup(raw.RemoteAddr()))
		if !ok {
			r.mu.Unlock()
			r.refuseUnadmitted(raw)
			continue
		}
		r.n++
		r.wg.Add(1)
		r.mu.Unlock()
		if evicted != nil {
			r.evict(evicted)
		}
		go r.serve(raw, slot)
	}
}

// serve runs the handshake and then the read loop of one inbound connection.
// The handshake happens here, not in the accept loop, with a deadline.
func (r *routerSock) serve(raw net.Conn, slot *pendingSlot) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		r.n--
		r.releaseSlotLocked(slot)
		r.mu.Unlock()
	}()
	remote := raw.RemoteAddr().String()
	// Until admission the connection may only send hello-sized messages;
	// claim restores r.p.lim.
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = raw.Close()
		return
	}
	r.hs[raw] = struct{}{}
	r.mu.Unlock()
	zc, err := openZMTP(raw, zmq4.Router, r.p.localID, true, preHelloLimits(r.p.lim), r.p.bufSize, r.p.handshakeTimeout, r.p.curve.serverMechanism())
	r.mu.Lock()
	delete(r.hs, raw)
	r.mu.Unlock()
	if err != nil {
		if slot.evicted.Load() {
			err = r.evictedCause(err)
		}
		r.onBad(remote, "", err)
		return
	}
	if err := checkBinding(zc); err != nil {
		_ = zc.close()
		r.onBad(remote, string(zc.ident), err)
		return
	}
	// The hello is due within the handshake timeout too; claim clears the
	// deadline. Without it a connection could hold its unadmitted slot
	// until the idle sweep (PeerTimeout), 3× longer.
	_ = raw.SetReadDeadline(time.Now().Add(r.p.handshakeTimeout))
	if err := validRID(zc.ident); err != nil {
		// Without a usable identity replies could not be routed back; our
		// peers always set their RID as identity.
		_ = zc.close()
		r.onBad(remote, "", fmt.Errorf("%w: peer identity: %v", ErrFraming, err))
		return
	}
	ic := &inConn{
		pc:       newPeerConn(zc, r.p.queueRecords, r.p.queueBytes, r.p.writeTimeout),
		ident:    string(zc.ident),
		remote:   remote,
		readDone: make(chan struct{}),
		slot:     slot,
	}
	ic.unadmitted.Store(true)
	ic.pc.inbound = true
	r.onOpen(ic)
	ic.pc.start()

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		close(ic.readDone)
		ic.pc.close(ErrClosed)
		ic.pc.wait()
		return
	}
	r.conns[ic] = struct{}{}
	r.mu.Unlock()

	var cause error
	for {
		frames, err := zc.recv()
		if err != nil {
			cause = err
			break
		}
		r.onFrames(ic, frames)
	}
	if ic.after != nil {
		// Read to its end means its predecessors' ends too: a connection
		// that delivered nothing must not let its successor overtake the
		// one it superseded.
		<-ic.after
	}
	close(ic.readDone)
	ic.pc.close(cause)
	ic.pc.wait()
	ic.pc.release() // a cut connection is closed only now that it was read to its end
	if bad := unadmittedCause(ic, cause); bad != nil {
		r.onBad(remote, ic.ident, bad)
	} else if isProtocolViolation(cause) {
		r.onBad(remote, ic.ident, cause)
	}
	r.mu.Lock()
	delete(r.conns, ic)
	if r.byID[ic.ident] == ic {
		delete(r.byID, ic.ident)
	}
	if r.readOuts[ic.ident] == ic {
		delete(r.readOuts, ic.ident)
	}
	r.mu.Unlock()
	r.onClose(ic, ic.pc.closedErr())
}

func (r *routerSock) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// close stops accepting, closes every connection and waits for every
// goroutine of the ROUTER to exit.
func (r *routerSock) close() {
	r.mu.Lock()
	if !r.closed {
		close(r.done)
	}
	r.closed = true
	conns := make([]*inConn, 0, len(r.conns))
	for ic := range r.conns {
		conns = append(conns, ic)
	}
	for raw := range r.hs {
		_ = raw.Close() // aborts its handshake at once
	}
	r.mu.Unlock()
	_ = r.ln.Close()
	for _, ic := range conns {
		ic.pc.close(ErrClosed)
		ic.pc.stopReadOut() // a superseded one being read to its end
	}
	r.wg.Wait()
}

// dialErr is the error of a TCP connect to endpoint that failed with err:
// a *DialTimeoutError when it got no connection within timeout (ownBound:
// that bound, not the caller's context, ended it), else err as it is.
func dialErr(endpoint string, timeout time.Duration, ownBound bool, err error) error {
	var ne net.Error
	if ownBound && errors.As(err, &ne) && ne.Timeout() {
		return &DialTimeoutError{Endpoint: endpoint, Timeout: timeout, Err: err}
	}
	return fmt.Errorf("transport: dial %s: %w", endpoint, err)
}

// dialDealer opens the DEALER half of a peer link: TCP connect, ZMTP
// handshake as DEALER with our RID as identity, and a check that the ROUTER
// we reached is the peer we meant (when it announces an identity).
func dialDealer(ctx context.Context, endpoint string, want []byte, p linkParams) (*zconn, error) {
	addr, err := splitEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	mech, err := p.curve.clientMechanism(want)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: p.handshakeTimeout}
	// Whose bound a timed-out connect met: the handshake timeout's, unless
	// ctx's deadline comes first.
	ownBound := true
	if dl, ok := ctx.Deadline(); ok && dl.Before(time.Now().Add(p.handshakeTimeout)) {
		ownBound = false
	}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, dialErr(endpoint, p.handshakeTimeout, ownBound && ctx.Err() == nil, err)
	}
	// Closing raw when ctx ends aborts a handshake stuck on a silent peer
	// even before its deadline.
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	defer stop()
	// Until the peer admitted us (link.connect raises them) the frame
	// limits are the ones an inbound connection has before its hello:
	// during the handshake — and, for CURVE, before WELCOME proved the
	// server — whoever answers at the endpoint is unauthenticated, and a
	// message frame's header declaring MaxFrameBytes made zmq4 allocate
	// that much (review, 2026-12-07;
	// TestCurveDialerRefusesOversizeFrameBeforeWelcome).
	zc, err := openZMTP(raw, zmq4.Dealer, p.localID, false, preHelloLimits(p.lim), p.bufSize, p.handshakeTimeout, mech)
	if err != nil {
		return nil, err
	}
	if len(zc.ident) > 0 && string(zc.ident) != string(want) {
		_ = zc.close()
		return nil, fmt.Errorf("%w: dialled %s expecting RID %s, it announced %s", ErrIdentityMismatch, endpoint, RID(want), RID(zc.ident))
	}
	return zc, nil
}
