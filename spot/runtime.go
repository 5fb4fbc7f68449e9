// Package spot is the object runtime of one node: Actor and Spot instances,
// an ordered mailbox per object with one application turn at a time, timers
// that fire as turns, and the factory registry with relocation policies.
//
// Design for relocation: a mailbox holds plain-data Envelopes (no
// closures), so freezing an object is Hold (dispatch closes after the
// current turn), Capture (queue and timers leave as data, new arrivals keep
// queuing behind them: the ingress hold), and reopening elsewhere is Open
// with Restored data and Release. The runtime never interprets bodies or
// reply routes; mesh/ does.
//
// Scale: idle objects cost memory, not goroutines. A fixed pool of workers
// runs whichever mailboxes have work; an object is on the run queue at most
// once, and a worker runs a bounded batch per visit so a busy object cannot
// starve others.
package spot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/internal/logbudget"
)

// EnvelopeKind says what an Envelope asks of the handler.
type EnvelopeKind uint8

const (
	// Send is a one-way application message.
	Send EnvelopeKind = iota + 1
	// Request expects exactly one reply through ReplyRoute.
	Request
	// Timer is a timer firing; Timer names it.
	Timer
)

func (k EnvelopeKind) String() string {
	switch k {
	case Send:
		return "send"
	case Request:
		return "request"
	case Timer:
		return "timer"
	}
	return fmt.Sprintf("EnvelopeKind(%d)", uint8(k))
}

// Envelope is one unit of work in a mailbox. It is plain data so that a
// captured queue can travel to another node in order.
type Envelope struct {
	Kind  EnvelopeKind
	Body  []byte
	Timer string // Timer envelopes only
	// ReplyRoute is opaque to the runtime; the Replier turns it back into a
	// destination. Request envelopes only.
	ReplyRoute []byte
	// Meta is opaque framework data carried with the message (operation id,
	// sender, follow hops).
	Meta []byte
}

// Handler is an application object. Receive runs inside one turn; the
// runtime never runs two turns of one object at once.
type Handler interface {
	Receive(t *Turn, env Envelope) error
}

// Replier delivers the reply of a Request envelope. mesh implements it.
type Replier interface {
	Reply(route []byte, body []byte, err error)
}

// Errors of the runtime.
var (
	ErrClosed       = errors.New("spot: object closed")
	ErrMailboxFull  = errors.New("spot: mailbox full")
	ErrRuntimeDown  = errors.New("spot: runtime closed")
	ErrNotHeld      = errors.New("spot: object dispatch is not held")
	ErrDuplicate    = errors.New("spot: object already open")
	ErrHandlerPanic = errors.New("spot: handler panicked")
	ErrNoReply      = errors.New("spot: handler returned without replying")
	// ErrTurnEnded is returned by Turn.Reply called after the handler's
	// Receive returned: a Turn is valid only during its turn, and the
	// request was answered then (ErrNoReply without a Reply).
	ErrTurnEnded = errors.New("spot: turn ended")
	// ErrAlreadyReplied is returned by a second Turn.Reply to one request:
	// the first answer stands.
	ErrAlreadyReplied = errors.New("spot: request already replied")
	// ErrNotRequest is returned by Turn.Reply on a Send or Timer envelope:
	// nobody waits for an answer.
	ErrNotRequest = errors.New("spot: reply outside a request")
	// ErrTimerName is returned by SetTimer for a name longer than
	// MaxTimerName bytes, which a move could not carry.
	ErrTimerName = errors.New("spot: timer name too long")
	// ErrTooManyTimers is returned by SetTimer arming a new name on an
	// object that has MaxTimers timers already.
	ErrTooManyTimers = errors.New("spot: too many timers")
	// ErrNotStarted is returned by a Handler that declined to start the
	// turn and did nothing: a second admission check (the node's gate,
	// asked again by the handler guard) that found the gate shut just after
	// Options.Admit let the turn through. With Options.Admit set, the
	// envelope goes back to the head of the queue and the object holds
	// itself as when Options.Admit refuses (GateHeld) — the turn is not
	// lost to the moment between the two checks; without it, it is an
	// ordinary handler error.
	ErrNotStarted = errors.New("spot: turn not started")
)

// Options configure a Runtime.
type Options struct {
	Workers      int // default 4×GOMAXPROCS
	MailboxLimit int // queued envelopes per object; default 65536
	Batch        int // envelopes per worker visit; default 32
	Clock        Clock
	Replier      Replier
	Logger       *slog.Logger
	// Admit, when set, is asked before each turn starts. While it fails
	// the object holds itself instead of starting the turn (GateHeld):
	// its envelopes and timers stay queued, in order, and nothing is
	// dropped; ReleaseGateHeld (or Release) reopens it. A node's owner
	// lease gate (§5: no turn starts past the admission deadline).
	Admit func() error
}

// Runtime runs the objects of one node.
type Runtime struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	runq    []*Object
	head    int
	objects map[Key]*Object
	closed  bool
	wg      sync.WaitGroup

	gateHeld atomic.Int64 // objects holding themselves for Admit
	// ctx ends when the runtime closes (CloseContext, cause
	// ErrRuntimeDown); the objects' turn contexts derive from it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// down is closed, read by a running batch between turns without rt.mu.
	down atomic.Bool

	// Handler panics and one-way handler errors are logged at most
	// handlerLogBurst times per handlerLogEvery each, node-wide: a handler
	// that fails every message must not write a line per message (before,
	// 10,000 messages to one such object wrote 10,000 lines). The next line
	// let through says how many were left out.
	panicLog, errLog logbudget.Budget
}

const (
	handlerLogBurst = 10
	handlerLogEvery = 10 * time.Second
)

// Key identifies an object in a runtime: one ID has one authority row per
// actor/spot segment (§3.4), so Actor and Spot IDs are separate spaces.
type Key struct {
	Spot bool
	ID   string
}

// New starts a runtime.
func New(opts Options) *Runtime {
	if opts.Workers <= 0 {
		opts.Workers = 4 * runtime.GOMAXPROCS(0)
	}
	if opts.MailboxLimit <= 0 {
		opts.MailboxLimit = 65536
	}
	if opts.Batch <= 0 {
		opts.Batch = 32
	}
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	rt := &Runtime{opts: opts, log: opts.Logger, objects: map[Key]*Object{}}
	rt.ctx, rt.cancel = context.WithCancelCause(context.Background())
	rt.cond = sync.NewCond(&rt.mu)
	rt.wg.Add(opts.Workers)
	for i := 0; i < opts.Workers; i++ {
		go rt.worker()
	}
	return rt
}

// Close stops the workers after their current turn and closes every object.
// Queued requests are answered with ErrRuntimeDown. No goroutine survives.
func (rt *Runtime) Close() { rt.CloseContext(context.Background()) }

// CloseContext is Close bounded by ctx. When ctx ends while turns still run
// (a handler blocked on a slow call, or for good), it stops waiting: every
// object is closed all the same — queued requests answered, timers stopped
// — and it returns the keys of the objects whose turn was still running.
// Their workers end when their handlers return; nothing else runs on
// them. A node's shutdown must end within its deadline whatever the
// application does (before, one stuck handler kept a stopping node's
// Close, and its process, waiting for ever).
func (rt *Runtime) CloseContext(ctx context.Context) (stuck []Key) {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil
	}
	rt.closed = true
	rt.down.Store(true)
	rt.cancel(ErrRuntimeDown) // running turns learn it before they are waited for
	objs := make([]*Object, 0, len(rt.objects))
	for _, o := range rt.objects {
		objs = append(objs, o)
	}
	rt.cond.Broadcast()
	rt.mu.Unlock()
	idle := make(chan struct{})
	go func() {
		rt.wg.Wait()
		close(idle)
	}()
	wait := true
	select {
	case <-idle:
	case <-ctx.Done():
		wait = false
	}
	for _, o := range objs {
		if o.closeWaiting(ErrRuntimeDown, wait) {
			stuck = append(stuck, o.key)
		}
	}
	return stuck
}

// Len returns the number of open objects.
func (rt *Runtime) Len() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.objects)
}

// Get returns an open object.
func (rt *Runtime) Get(k Key) (*Object, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	o, ok := rt.objects[k]
	return o, ok
}

// Spec describes an object to open.
type Spec struct {
	Key        Key
	Kind       ObjectKind
	StableType string
	Generation uint64
	Handler    Handler
	// Held opens the object with dispatch closed: envelopes queue but do not
	// run until Release (a restored object stays hidden until cutover).
	Held bool
	// Restored, when set, pre-fills the queue and re-arms timers.
	Restored *Captured
}

// Open registers and returns a new object.
func (rt *Runtime) Open(s Spec) (*Object, error) {
	if s.Handler == nil {
		return nil, fmt.Errorf("spot: open %v: nil handler", s.Key)
	}
	o := &Object{rt: rt, key: s.Key, kind: s.Kind, stableType: s.StableType, gen: s.Generation,
		handler: s.Handler, dispatch: !s.Held, timers: map[string]*timer{}}
	o.idle = sync.NewCond(&o.mu)
	// o.mu before rt.mu (the order scheduleLocked → enqueue takes them),
	// held until the restored work is in place: a Close that collects o
	// as soon as it is registered waits for it, then answers it. Filled
	// after the registration, a racing Close could close o first — its
	// restored requests were never answered and arming a timer on the
	// closed object crashed.
	o.mu.Lock()
	defer o.mu.Unlock()
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil, ErrRuntimeDown
	}
	if _, dup := rt.objects[s.Key]; dup {
		rt.mu.Unlock()
		return nil, fmt.Errorf("%w: %v", ErrDuplicate, s.Key)
	}
	rt.objects[s.Key] = o
	rt.mu.Unlock()
	if s.Restored != nil {
		o.queue = append(o.queue, s.Restored.Queue...)
		o.rearmLocked(*s.Restored)
		o.markQueuedLocked(s.Restored.Queue)
		o.scheduleLocked()
	}
	return o, nil
}

func (rt *Runtime) enqueue(o *Object) {
	rt.mu.Lock()
	if !rt.closed {
		rt.runq = append(rt.runq, o)
		rt.cond.Signal()
	}
	rt.mu.Unlock()
}

func (rt *Runtime) worker() {
	defer rt.wg.Done()
	for {
		rt.mu.Lock()
		for !rt.closed && rt.head == len(rt.runq) {
			rt.cond.Wait()
		}
		if rt.closed {
			rt.mu.Unlock()
			return
		}
		o := rt.runq[rt.head]
		rt.runq[rt.head] = nil
		rt.head++
		if rt.head == len(rt.runq) {
			rt.runq, rt.head = rt.runq[:0], 0
		} else if rt.head > 1024 && rt.head*2 > len(rt.runq) {
			n := copy(rt.runq, rt.runq[rt.head:])
			rt.runq, rt.head = rt.runq[:n], 0
		}
		rt.mu.Unlock()
		o.run(rt.opts.Batch)
	}
}

func (rt *Runtime) forget(o *Object) {
	rt.mu.Lock()
	if rt.objects[o.key] == o {
		delete(rt.objects, o.key)
	}
	rt.mu.Unlock()
}

// TimerState is a pending timer in captured form.
type TimerState struct {
	Name      string
	Remaining time.Duration // until the next firing, measured at capture
	Period    time.Duration // 0 = one-shot
}

// Captured is an object's not-yet-run work: its queue in order and its
// pending timers. Application state travels separately (snapshot adapter).
type Captured struct {
	Queue  []Envelope
	Timers []TimerState
	// At is the runtime clock's time at capture (Capture sets it). Put back
	// on the node that captured it (Requeue, or Open with Restored), the
	// timers' remaining times are counted from At, so that a move that
	// failed does not delay them by its duration. It does not travel: on
	// another node (a decoded payload) it is zero and the remaining times
	// count from the restore.
	At time.Time
}

type timer struct {
	due    time.Time
	period time.Duration
	stop   func() bool // nil once a one-shot timer fired
	// queued: a firing of this timer waits in the mailbox. The next
	// period's firing of a periodic timer is then skipped, so a timer
	// whose turns cannot keep up (a 1 ms tick on a 5 ms turn, or any tick
	// on a held or stuck object) has one firing waiting, not a queue
	// growing without bound (before, it filled the mailbox — every message
	// to the object was refused ErrMailboxFull — and went on growing past
	// its limit).
	queued bool
	// fired: a one-shot timer that fired; it stays in Object.timers while
	// its firing waits (queued), so that CancelTimer or a re-arm finds the
	// firing and drops it, and leaves when its turn starts.
	fired bool
}

// Object is one Actor or Spot instance with its mailbox.
type Object struct {
	rt         *Runtime
	key        Key
	kind       ObjectKind
	stableType string
	gen        uint64
	handler    Handler

	mu        sync.Mutex
	idle      *sync.Cond
	queue     []Envelope
	qhead     int
	dispatch  bool
	scheduled bool
	running   bool
	closed    bool
	closeErr  error
	timers    map[string]*timer
	// stale counts, per timer name, the firings waiting in the mailbox
	// that are no longer their timer's (CancelTimer, or a re-arm, came
	// after they queued); staleN is their sum. They are dropped unrun when
	// they reach the head of the queue (dropStaleLocked): a name's stale
	// firings are always ahead of its live one, which queued after the
	// arm that made them stale. Capture leaves them out of what it takes.
	stale  map[string]int
	staleN int
	// gateHeld: dispatch is closed because Options.Admit refused a turn
	// (not by Hold, whose caller releases).
	gateHeld bool
	// holds counts the Hold and HoldContext calls, so that a HoldContext
	// that gives up sees whether another hold began while it waited.
	holds uint64
	// ctx is what Turn.Context returns, made at its first call (an object
	// whose handler never asks costs nothing) and ended by close.
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// context returns the object's turn context, which ends when the object
// closes (its cause the close's error: ErrClosed, ErrRuntimeDown) or the
// runtime does.
func (o *Object) context() context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ctx == nil {
		o.ctx, o.cancel = context.WithCancelCause(o.rt.ctx)
		if o.closed {
			o.cancel(o.closeErr)
		}
	}
	return o.ctx
}

// Key returns the object's key.
func (o *Object) Key() Key { return o.key }

// Generation returns the ObjectGeneration the instance was opened with.
func (o *Object) Generation() uint64 { return o.gen }

// StableType returns the factory's stable type.
func (o *Object) StableType() string { return o.stableType }

// Kind returns the object kind.
func (o *Object) Kind() ObjectKind { return o.kind }

// Handler returns the application instance (for the snapshot adapter).
func (o *Object) Handler() Handler { return o.handler }

// Post appends env to the mailbox. It never runs the handler itself.
func (o *Object) Post(env Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.closeErr
	}
	if n := o.queuedLocked(); n >= o.rt.opts.MailboxLimit {
		return fmt.Errorf("%w: %v has %d queued", ErrMailboxFull, o.key, n)
	}
	o.queue = append(o.queue, env)
	o.scheduleLocked()
	return nil
}

// Append queues envs behind the mailbox, in order, outside
// Options.MailboxLimit: they are work another node or an earlier instance
// accepted already (a relocation's relay and temporary queue merged at the
// owner change, the messages a source takes back after a failed move, a
// relay arriving after a grace commit). The limit governs new admissions
// (Post); refusing accepted work there would lose a one-way message whose
// Send returned nil. The mailbox can so exceed the limit by what a move
// brought — at most the source's captured queue and its ingress hold, each
// bounded by the source's limit — and Post refuses until it drains below.
// It fails only when the object is closed.
func (o *Object) Append(envs ...Envelope) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.closeErr
	}
	o.queue = append(o.queue, envs...)
	o.scheduleLocked()
	return nil
}

// Queued returns the number of envelopes waiting (stale timer firings,
// which will be dropped unrun, not counted).
func (o *Object) Queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queuedLocked()
}

func (o *Object) queuedLocked() int { return len(o.queue) - o.qhead - o.staleN }

func (o *Object) scheduleLocked() {
	if o.dispatch && !o.scheduled && !o.running && !o.closed && len(o.queue) > o.qhead {
		o.scheduled = true
		o.rt.enqueue(o)
	}
}

// Hold closes dispatch and returns once no turn is running. Envelopes keep
// queuing. It is the first step of capture (§1.3 step 3).
func (o *Object) Hold() {
	o.mu.Lock()
	o.holds++
	o.dispatch = false
	o.clearGateHeldLocked() // the caller of Hold releases it now
	for o.running {
		o.idle.Wait()
	}
	o.mu.Unlock()
}

// HoldContext is Hold bounded by ctx: when ctx ends while a turn still
// runs (a handler blocked on a slow call, or for good), it returns ctx's
// error and leaves the object's dispatch as it found it, so that a
// relocation gives up at its deadline and the object goes on where it is
// (spec §9.4) instead of waiting for the turn without bound. Dispatch
// reopens only if it was open when HoldContext was called and no other
// Hold began meanwhile; an object held already (opened held, or by another
// Hold whose caller releases it) stays held, and one that held itself for
// Options.Admit holds itself again (ReleaseGateHeld reopens it). Until
// 2026-12-07 it reopened dispatch whatever the object's state had been,
// undoing the other holder's hold while it counted on no turn running. In
// mesh that other holder is the lease hold (lease_hold.go), whose objects
// also hold themselves at their next turn through Options.Admit, so no
// turn ran there; for other users of Hold it did.
func (o *Object) HoldContext(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		o.mu.Lock()
		o.idle.Broadcast()
		o.mu.Unlock()
	})
	defer stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	wasOpen, wasGateHeld := o.dispatch, o.gateHeld
	o.holds++
	mine := o.holds
	o.dispatch = false
	o.clearGateHeldLocked() // the caller of Hold releases it now
	for o.running && ctx.Err() == nil {
		o.idle.Wait()
	}
	if !o.running {
		return nil
	}
	switch {
	case o.closed, o.holds != mine:
		// Closed, or another Hold began while this one waited: it holds
		// the object now, and its caller releases it.
	case wasOpen:
		o.dispatch = true
		o.scheduleLocked()
	case wasGateHeld && !o.dispatch:
		o.gateHeld = true
		o.rt.gateHeld.Add(1)
	}
	return ctx.Err()
}

// Held reports whether dispatch is closed (Hold was called, or the object
// was opened held) — arrivals queue but do not run.
func (o *Object) Held() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return !o.dispatch && !o.closed
}

// Release reopens dispatch and schedules queued work.
func (o *Object) Release() {
	o.mu.Lock()
	o.clearGateHeldLocked()
	o.dispatch = true
	o.scheduleLocked()
	o.mu.Unlock()
}

// Capture removes the queue and pending timers of a held object and returns
// them as data. The object stays held; later arrivals queue behind (the
// ingress hold) and can be taken with another Capture.
func (o *Object) Capture() (Captured, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return Captured{}, o.closeErr
	}
	if o.dispatch || o.running {
		return Captured{}, ErrNotHeld
	}
	now := o.rt.opts.Clock.Now()
	c := Captured{Queue: o.liveQueueLocked(), At: now}
	o.queue, o.qhead = nil, 0
	for name, t := range o.timers {
		if t.fired {
			continue // its firing is in c.Queue; restoring it marks it again
		}
		t.stop()
		rem := t.due.Sub(now)
		if rem < 0 {
			rem = 0
		}
		c.Timers = append(c.Timers, TimerState{Name: name, Remaining: rem, Period: t.period})
	}
	o.timers = map[string]*timer{}
	sortTimers(c.Timers)
	return c, nil
}

// liveQueueLocked returns a copy of what waits in the mailbox without the
// stale timer firings, and forgets them: the captured queue carries no
// firing that is not its timer's, so that where it is put back (the
// target, or here by Requeue) every Timer envelope in it is the waiting
// firing of its name (markQueuedLocked).
func (o *Object) liveQueueLocked() []Envelope {
	rest := o.queue[o.qhead:]
	if o.staleN == 0 {
		return append([]Envelope(nil), rest...)
	}
	q := make([]Envelope, 0, len(rest)-o.staleN)
	for _, env := range rest {
		if env.Kind == Timer && o.stale[env.Timer] > 0 {
			o.unstaleLocked(env.Timer)
			continue
		}
		q = append(q, env)
	}
	o.stale, o.staleN = nil, 0
	return q
}

// Requeue puts captured work back in front of whatever arrived since, in
// order, and re-arms its timers: the source's path when a move is
// cancelled before relay-ready (§9.4).
func (o *Object) Requeue(c Captured) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.closeErr
	}
	rest := o.queue[o.qhead:]
	q := make([]Envelope, 0, len(c.Queue)+len(rest))
	q = append(append(q, c.Queue...), rest...)
	o.queue, o.qhead = q, 0
	o.rearmLocked(c)
	o.markQueuedLocked(c.Queue)
	o.scheduleLocked()
	return nil
}

// rearmLocked arms the timers of c, their remaining times counted from
// c.At when it is set (captured by this runtime: the time since then has
// passed for them too; before 2026-12-07 a move that failed after 30 s
// delayed every timer of its object by those 30 s).
func (o *Object) rearmLocked(c Captured) {
	var since time.Duration
	if !c.At.IsZero() {
		since = max(o.rt.opts.Clock.Now().Sub(c.At), 0)
	}
	for _, ts := range c.Timers {
		o.armLocked(ts.Name, ts.Remaining-since, ts.Period)
	}
}

// markQueuedLocked marks the timers whose firing waits among envs, which
// came back into the mailbox with the timers re-armed (a restore, a
// Requeue, a turn that did not start): armLocked starts a timer as having
// none waiting, and each such way back would otherwise add one more
// waiting firing per period skipped (timer.queued). A firing whose name
// has no timer is a one-shot's that fired: it is entered as fired, so
// that CancelTimer or a re-arm drops it there as before it left (a
// captured queue holds no stale firing: liveQueueLocked).
func (o *Object) markQueuedLocked(envs []Envelope) {
	for _, env := range envs {
		if env.Kind != Timer {
			continue
		}
		if t, ok := o.timers[env.Timer]; ok {
			t.queued = true
		} else {
			o.timers[env.Timer] = &timer{due: o.rt.opts.Clock.Now(), fired: true, queued: true}
		}
	}
}

// Close closes the object: queued requests are answered with ErrClosed,
// timers stop, and the runtime forgets it. It waits for a running turn.
func (o *Object) Close() { o.close(ErrClosed) }

// CloseFrom is Close on behalf of the caller whose context is ctx: when ctx
// is (derived from) the Context of this object's turn that still runs —
// its handler ending its own object, through mesh's Destroy or Close — it
// does not wait for that turn, which is the caller and would wait for
// itself for good; otherwise it is Close.
func (o *Object) CloseFrom(ctx context.Context) {
	o.closeWaiting(ErrClosed, !o.InOwnTurn(ctx))
}

// InOwnTurn reports whether ctx is (derived from) the Context of this
// object's turn that still runs: a call its handler makes from that turn.
// mesh uses it to answer what would wait for that turn (CloseFrom; a move
// of the object, which holds it until its running turn ends) instead of
// waiting for the caller itself.
func (o *Object) InOwnTurn(ctx context.Context) bool {
	t, _ := ctx.Value(turnCtxKey{}).(*Turn)
	return t != nil && t.obj == o && t.state.Load() != turnEnded
}

// Discard closes the object without running or answering what is queued:
// the work belongs to someone else (a relocation target removing its
// prepared instance while the source keeps the originals, §9.4). Timers
// stop and the runtime forgets it. It waits for a running turn.
func (o *Object) Discard() { o.close(nil) }

func (o *Object) close(reason error) { o.closeWaiting(reason, true) }

// closeWaiting closes the object, waiting for a running turn unless wait is
// false; it reports whether a turn was still running (not waited for).
func (o *Object) closeWaiting(reason error, wait bool) (running bool) {
	o.mu.Lock()
	if o.closed {
		running = o.running
		o.mu.Unlock()
		return running
	}
	closeErr := reason
	if closeErr == nil {
		closeErr = ErrClosed
	}
	o.closed, o.closeErr, o.dispatch = true, closeErr, false
	o.clearGateHeldLocked()
	if o.cancel != nil {
		o.cancel(closeErr) // a running turn learns it before it is waited for
	}
	for wait && o.running {
		o.idle.Wait()
	}
	running = o.running
	pending := o.queue[o.qhead:]
	o.queue, o.qhead = nil, 0
	o.stale, o.staleN = nil, 0
	for _, t := range o.timers {
		if t.stop != nil {
			t.stop()
		}
	}
	o.timers = nil
	o.mu.Unlock()
	o.rt.forget(o)
	if reason == nil {
		return running
	}
	for _, env := range pending {
		if env.Kind == Request {
			o.reply(env.ReplyRoute, nil, reason)
		}
	}
	return running
}

func (o *Object) reply(route, body []byte, err error) {
	if o.rt.opts.Replier != nil {
		o.rt.opts.Replier.Reply(route, body, err)
	}
}

// MaxTimerName is the longest timer name in bytes: what a relocation
// payload carries (docs/RESTORE-PAYLOAD.md, a timer's name is bytes16).
const MaxTimerName = 1<<16 - 1

// MaxTimers is the most timers one object can have: armed, or one-shot
// timers that fired and whose firing waits in the mailbox. SetTimer
// refuses a new name beyond it with ErrTooManyTimers (re-arming a name it
// has is always allowed). Every timer travels in a move's payload, so a
// handler arming a uniquely named timer per message grew the object's
// memory and its payload without bound until every move of it failed at
// the payload's limit (256 MiB by default). MaxTimers timers with names
// of MaxTimerName bytes take at most a quarter of that (checked in
// package chunk's tests). Keep many deadlines in the object's state and
// arm one timer for the earliest.
const MaxTimers = 1000

// SetTimer arms (or re-arms) a named timer on the object. It fires as a
// Timer envelope, that is as a turn in mailbox order; an after of 0 or
// less fires at once (behind what is queued). A period of 0 or less is a
// one-shot timer; a name longer than MaxTimerName bytes is
// refused with ErrTimerName (until 2026-12-07 both were accepted as they
// came, and every later move of the object failed at the payload's
// validation: negative duration, name above 65,535 bytes), and a new name
// on an object with MaxTimers timers with ErrTooManyTimers (since
// 2026-12-07).
func (o *Object) SetTimer(name string, after, period time.Duration) error {
	if len(name) > MaxTimerName {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTimerName, len(name), MaxTimerName)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return o.closeErr
	}
	if _, ok := o.timers[name]; !ok && len(o.timers) >= MaxTimers {
		return fmt.Errorf("%w: %v has %d, at most %d", ErrTooManyTimers, o.key, len(o.timers), MaxTimers)
	}
	o.armLocked(name, after, period)
	return nil
}

// CancelTimer stops a named timer; it reports whether one was pending:
// armed, or fired with its firing still waiting in the mailbox, which it
// drops (that firing does not run).
func (o *Object) CancelTimer(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dropTimerLocked(name)
}

// dropTimerLocked stops the timer of name and forgets it; its firing that
// waits in the mailbox, if any, becomes stale: it is dropped unrun when it
// reaches the head (dropStaleLocked). Until 2026-12-07 it ran: the
// handler could not tell it from a firing of the timer armed since (an
// idle timer re-armed for 30 s fired at once, and again 30 s later).
func (o *Object) dropTimerLocked(name string) bool {
	t, ok := o.timers[name]
	if !ok {
		return false
	}
	if t.stop != nil {
		t.stop()
	}
	if t.queued {
		if o.stale == nil {
			o.stale = map[string]int{}
		}
		o.stale[name]++
		o.staleN++
	}
	delete(o.timers, name)
	return true
}

func (o *Object) unstaleLocked(name string) {
	if o.stale[name]--; o.stale[name] == 0 {
		delete(o.stale, name)
	}
	o.staleN--
}

// dropStaleLocked drops the envelope at the head of the queue if it is a
// stale timer firing and reports whether it did.
func (o *Object) dropStaleLocked() bool {
	if o.staleN == 0 {
		return false
	}
	env := &o.queue[o.qhead]
	if env.Kind != Timer || o.stale[env.Timer] == 0 {
		return false
	}
	o.unstaleLocked(env.Timer)
	*env = Envelope{}
	o.qhead++
	o.compactLocked()
	return true
}

// armLocked arms name afresh; the timer it replaces is dropped
// (dropTimerLocked), with its waiting firing.
func (o *Object) armLocked(name string, after, period time.Duration) {
	o.dropTimerLocked(name)
	if after < 0 {
		after = 0
	}
	if period < 0 {
		period = 0 // one-shot, as fire runs it; a move carries no negative period
	}
	t := &timer{due: o.rt.opts.Clock.Now().Add(after), period: period}
	o.timers[name] = t
	o.startLocked(name, t, after)
}

// startLocked has the clock call fire for t after d.
func (o *Object) startLocked(name string, t *timer, d time.Duration) {
	t.stop = o.rt.opts.Clock.AfterFunc(d, func() { o.fire(name, t) })
}

func (o *Object) fire(name string, t *timer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.timers[name] != t || t.fired {
		return // cancelled, re-armed or captured meanwhile
	}
	if t.period > 0 {
		// The same timer goes on: its waiting firing stays its own.
		now := o.rt.opts.Clock.Now()
		next := nextFiring(t, now)
		t.due = now.Add(next)
		o.startLocked(name, t, next)
		if t.queued {
			return // its previous firing still waits: skipped
		}
	} else {
		t.fired, t.stop = true, nil
	}
	t.queued = true
	// A timer firing while held still queues: it is accepted work and is
	// captured with the queue.
	o.queue = append(o.queue, Envelope{Kind: Timer, Timer: name})
	o.scheduleLocked()
}

// nextFiring returns how long after now the periodic timer t, whose
// callback runs now, fires next: on its own phase (its due time plus a
// whole number of periods), the periods that ended while the callback was
// late skipped as a period that ends while a firing waits is. Until
// 2026-12-07 the next period was counted from now, so every late callback
// (scheduling latency, a loaded machine) pushed every later firing back
// for good.
func nextFiring(t *timer, now time.Time) time.Duration {
	late := now.Sub(t.due)
	if late < 0 {
		late = 0
	}
	next := t.due.Add(late / t.period * t.period).Add(t.period)
	return next.Sub(now)
}

func (o *Object) run(batch int) {
	o.mu.Lock()
	o.scheduled = false
	if !o.dispatch || o.closed {
		o.mu.Unlock()
		return
	}
	o.running = true
	// Close stops the workers after their current turn (Runtime.Close):
	// the rest of the batch is left queued, for Close to answer.
	for i := 0; i < batch && o.dispatch && !o.closed && !o.rt.down.Load() && len(o.queue) > o.qhead; i++ {
		if o.dropStaleLocked() {
			continue
		}
		if !o.admitLocked() {
			break
		}
		env := o.queue[o.qhead]
		o.queue[o.qhead] = Envelope{}
		o.qhead++
		if env.Kind == Timer {
			if t, ok := o.timers[env.Timer]; ok {
				if t.fired {
					delete(o.timers, env.Timer) // a one-shot's: done
				} else {
					t.queued = false // its next firing queues again
				}
			}
		}
		o.compactLocked()
		o.mu.Unlock()
		o.turn(env)
		o.mu.Lock()
	}
	o.running = false
	o.idle.Broadcast()
	o.scheduleLocked()
	o.mu.Unlock()
}

// compactLocked reclaims the mailbox's consumed prefix, so that its storage
// is bounded by what waits, not by what the object ever ran: an empty
// queue restarts at the front (and lets go of a large array), and once
// more than mailboxCompact slots were consumed and they are over half
// the slice, the waiting envelopes move to the front (each copied
// envelope was preceded by at least as many consumed: O(1) amortised).
// Until 2026-12-07 only an empty queue was reset, so a mailbox that never
// quite drained grew by one slot per message it ever processed.
func (o *Object) compactLocked() {
	switch n := len(o.queue) - o.qhead; {
	case n == 0 && cap(o.queue) > mailboxKeep:
		o.queue, o.qhead = nil, 0
	case n == 0:
		o.queue, o.qhead = o.queue[:0], 0
	case o.qhead > mailboxCompact && o.qhead > n:
		copy(o.queue, o.queue[o.qhead:])
		clear(o.queue[n:])
		o.queue, o.qhead = o.queue[:n], 0
	}
}

const (
	// mailboxCompact is how many consumed slots a mailbox keeps before
	// compactLocked moves what waits to the front.
	mailboxCompact = 1024
	// mailboxKeep is the largest array an emptied mailbox keeps for reuse.
	mailboxKeep = 1024
)

// admitLocked asks Options.Admit whether the next turn may start; if not,
// the object holds itself (GateHeld) and reports false. A gate that
// reopened while it did so is asked again: its ReleaseGateHeld may have
// passed this object just before it was marked.
func (o *Object) admitLocked() bool {
	a := o.rt.opts.Admit
	if a == nil || a() == nil {
		return true
	}
	o.dispatch, o.gateHeld = false, true
	o.rt.gateHeld.Add(1)
	if a() != nil {
		return false
	}
	o.clearGateHeldLocked()
	o.dispatch = true
	return true
}

func (o *Object) clearGateHeldLocked() {
	if o.gateHeld {
		o.gateHeld = false
		o.rt.gateHeld.Add(-1)
	}
}

// GateHeld reports whether the object holds itself because Options.Admit
// refused a turn.
func (o *Object) GateHeld() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gateHeld
}

// GateHeld counts the objects holding themselves for Options.Admit.
func (r *Runtime) GateHeld() int { return int(r.gateHeld.Load()) }

// ReleaseGateHeld reopens every object holding itself for Options.Admit
// (once it admits again) and returns how many it reopened. Objects held by
// Hold are left to Hold's caller.
func (r *Runtime) ReleaseGateHeld() int {
	if r.gateHeld.Load() == 0 {
		return 0
	}
	r.mu.Lock()
	objs := make([]*Object, 0, len(r.objects))
	for _, o := range r.objects {
		objs = append(objs, o)
	}
	r.mu.Unlock()
	n := 0
	for _, o := range objs {
		o.mu.Lock()
		if o.gateHeld && !o.closed {
			o.clearGateHeldLocked()
			o.dispatch = true
			o.scheduleLocked()
			n++
		}
		o.mu.Unlock()
	}
	return n
}

func (o *Object) turn(env Envelope) {
	t := &Turn{obj: o, env: env}
	err := o.safeReceive(t, env)
	// Ended before anything else: a Reply from a goroutine the handler
	// started either came first (replied) or is refused (ErrTurnEnded).
	replied := !t.state.CompareAndSwap(turnOpen, turnEnded)
	if errors.Is(err, ErrNotStarted) && !replied && o.requeue(env) {
		return
	}
	if env.Kind == Request && !replied {
		if err == nil {
			err = ErrNoReply
		}
		// The requester gets a typed failure without this text (the wire
		// carries a code only); the node keeps it for whoever debugs.
		o.rt.log.Debug("request failed in its handler", "object", o.key.ID, "spot", o.key.Spot, "err", err)
		o.reply(env.ReplyRoute, nil, err)
	} else if err != nil {
		if ok, suppressed := o.rt.errLog.Allow(logbudget.At(o.rt.opts.Clock.Now()), handlerLogBurst, handlerLogEvery); ok {
			o.rt.log.Warn("handler error", "object", o.key.ID, "spot", o.key.Spot, "kind", env.Kind.String(), "err", err,
				"suppressed", suppressed)
		}
	}
}

// requeue puts env, whose handler declined to start it (ErrNotStarted),
// back at the head of the queue and holds the object for Options.Admit as
// admitLocked does (asking again, in case the gate reopened meanwhile). It
// reports false when it cannot: no Options.Admit to release it, or the
// object closed.
func (o *Object) requeue(env Envelope) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rt.opts.Admit == nil || o.closed {
		return false
	}
	if o.qhead > 0 {
		o.qhead--
		o.queue[o.qhead] = env
	} else {
		o.queue = append(o.queue, Envelope{})
		copy(o.queue[1:], o.queue)
		o.queue[0] = env
	}
	o.markQueuedLocked([]Envelope{env}) // run cleared it when it took env
	if o.dispatch {
		o.admitLocked() // shut: held until ReleaseGateHeld; open again: the turn is retried
	}
	return true
}

func (o *Object) safeReceive(t *Turn, env Envelope) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if ok, suppressed := o.rt.panicLog.Allow(logbudget.At(o.rt.opts.Clock.Now()), handlerLogBurst, handlerLogEvery); ok {
				// The stack says where in the application it panicked.
				o.rt.log.Error("handler panic", "object", o.key.ID, "spot", o.key.Spot, "kind", env.Kind.String(), "panic", r,
					"suppressed", suppressed, "stack", string(debug.Stack()))
			}
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, r)
		}
	}()
	return o.handler.Receive(t, env)
}

// Turn is the context of one application turn.
type Turn struct {
	obj   *Object
	env   Envelope
	state atomic.Uint32 // turnOpen, turnReplied, turnEnded
}

// Turn states: Reply moves an open turn to replied; the runtime moves an
// open turn to ended once Receive returned.
const (
	turnOpen uint32 = iota
	turnReplied
	turnEnded
)

// ID returns the object's ActorId or SpotId.
func (t *Turn) ID() string { return t.obj.key.ID }

// Generation returns the object's ObjectGeneration.
func (t *Turn) Generation() uint64 { return t.obj.gen }

// Now returns the runtime clock's time.
func (t *Turn) Now() time.Time { return t.obj.rt.opts.Clock.Now() }

// Context returns a context for work done inside the turn (and for work
// the turn starts that should end with the object). It ends when the
// object is closed or discarded — ended, removed, moved away (after its
// last turn here) — or its runtime closes (the node stops); context.Cause
// then is ErrClosed or ErrRuntimeDown. It does not end when a move holds
// or captures the object: a turn runs to completion before a capture, and
// a move whose deadline passes while a turn runs gives up and leaves the
// object where it is (HoldContext). Until 2026-12-07 it was
// context.Background(), so a handler blocked on a slow call could not
// learn that its object or node was closing.
//
// It carries the turn: a Destroy or Close of the object from its own turn
// with it does not wait for that turn (Object.CloseFrom).
func (t *Turn) Context() context.Context {
	return context.WithValue(t.obj.context(), turnCtxKey{}, t)
}

// turnCtxKey marks a turn's Context with its Turn (CloseFrom).
type turnCtxKey struct{}

// Reply answers the current Request envelope, once: a second call is
// ErrAlreadyReplied, and a call on a Send or Timer envelope (nobody to
// answer) ErrNotRequest.
// It must be called before Receive returns — a Turn is valid only during
// its turn; a Reply after it is ErrTurnEnded, the request having been
// answered ErrNoReply then. There is no asynchronous reply: a handler that
// needs a slow result either waits for it in the turn (t.Context()) or
// answers at once and lets the requester ask again.
func (t *Turn) Reply(body []byte) error {
	if t.env.Kind != Request {
		return fmt.Errorf("%w (envelope is %v)", ErrNotRequest, t.env.Kind)
	}
	if !t.state.CompareAndSwap(turnOpen, turnReplied) {
		if t.state.Load() == turnEnded {
			// Until 2026-12-07 this sent a second answer after the
			// runtime's ErrNoReply (TestReplyAfterTheTurnIsErrTurnEnded).
			return ErrTurnEnded
		}
		return ErrAlreadyReplied
	}
	t.obj.reply(t.env.ReplyRoute, body, nil)
	return nil
}

// SetTimer arms a named timer on the current object.
func (t *Turn) SetTimer(name string, after, period time.Duration) error {
	return t.obj.SetTimer(name, after, period)
}

// CancelTimer stops a named timer of the current object.
func (t *Turn) CancelTimer(name string) bool { return t.obj.CancelTimer(name) }

func sortTimers(ts []TimerState) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && (ts[j].Remaining < ts[j-1].Remaining ||
			ts[j].Remaining == ts[j-1].Remaining && ts[j].Name < ts[j-1].Name); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}
