package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/internal/gopool"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/router/transport"
	"github.com/meshnode/meshnode/spot"
)

// objects is the object side of a Node: the spot runtime hosting this node's
// Actors and Spots, the table of what it hosts under which authority, the
// reply routes of requests in flight, the route cache, and the inbound
// dispatch of object commands. One per Node; the Manager is its API.
type objects struct {
	// apps are the calls into the application outside a turn, named for
	// a stop that does not see them return (app_calls.go).
	apps appCalls
	// barrierEvery, when set, replaces barrierWait as a route switch's
	// wait without progress (tests).
	barrierEvery time.Duration
	// barrierHeldEvery, when set, replaces barrierHeldEvery as the pace
	// of a held barrier's notices (tests).
	barrierHeldEvery time.Duration
	// linkLook, when set, replaces the look at the link a barrier waits on
	// (tests).
	linkLook func() linkProgress
	// listedLook, when set, replaces the look at the discovery list a
	// barrier asks whether the previous owner's run is listed live
	// (tests: a list that lags the run's stop).
	listedLook func(prev follow.Ready) bool
	n          *Node
	log        *slog.Logger
	rt         *spot.Runtime
	exec       *authority.Executor
	cache      *follow.Cache
	follow     *follow.Table // moves of this node's objects, for Message Follow (follow_forward.go)
	drops      dropReport    // one-way messages refused here, reported each discovery round
	registry   map[string]spot.Factory
	dispatch   map[router.Command]inboundFunc // inbound commands (registerCommands)
	chunks     *chunk.Registry                // Restore payloads being assembled (target side)
	arrivals   map[chunk.Binding]*arrival     // moves bringing an object here

	// Budgets of the log lines one inbound record causes (record_log.go).
	restoreRefusedLog, route44IgnoredLog, replyNotSentLog *recordLog
	restoreForeignLog                                     *recordLog // 52/54/55 not from the source (checkSource)

	// unconfirmed are this node's moves past their cutover whose target
	// the store does not name yet, by object: they keep copies of what
	// Message Follow passes on (follow_copies.go).
	unconfirmed map[follow.Key]*sourceMove
	// streamed are this node's moves whose Restore request left, until
	// they end; readySent the arrivals here that answered relay-ready,
	// until they end (kept while the node stops). Both under mu, by move
	// attempt: a target that stops tells the source of such an arrival,
	// once its owner sweep fenced the move, that it can no longer commit
	// (relocate_stopped.go).
	streamed  map[moveAttempt]*sourceMove
	readySent map[moveAttempt]*arrival
	// gos runs the per-move and per-creation goroutines of the target side
	// on reused workers (internal/gopool: no stack growth per move).
	gos      *gopool.Pool
	sessions sessionTable // this node's bound Sessions (session.go)
	sent     sentRoutes   // the route last used per object (route_barrier.go)
	held     heldBarriers // this node's barriers awaiting an answer (route_barrier_held.go)
	passed   passedOn     // what this node passed on to new owners, for its shutdown (shutdown_passons.go)
	// runChecks: reads of whether a new owner's run stopped, its link down
	// (follow_run_check.go).
	runChecks runChecks
	// endedReads: waits for what an ended node run sent here to be admitted
	// (ended_run_reads.go).
	endedReads endedReads
	// commitLag is how long, recently, a source waited from its cutover
	// until the store named the target (sourceMove.confirm).
	commitLag lagAverage
	// ended: owners this node saw without a live lease (dead_owner.go).
	ended endedOwners
	// lh: objects held while the owner lease does not admit (lease_hold.go).
	lh leaseHold
	// activating: cold activations of Instance Spots in progress here
	// (instance_target.go).
	activating activations
	// sentActivations: where this node sent cold activations not yet
	// visible in the store (instance.go).
	sentActivations sentActivations
	// handedOn: whose one-way first messages this node handed on after
	// refusing them, per id, until the store shows the Spot
	// (instance_target.go).
	handedOn handedOn
	// passOns: the cold activations this node passes on while it empties
	// itself (instance_target.go). Not object work: they go on after Close
	// stopped it, until just before the transport closes (endPassOns).
	passOns passOnLife
	// listRefresh is held by the placement that runs a discovery round
	// after finding nothing on an old list (placement.go).
	listRefresh sync.Mutex
	// hostMove is set while a host Relocate runs (host_relocate.go): no
	// new creations and no incoming moves.
	hostMove atomic.Bool
	// hostCmd says which host command took hostMove ("a host relocation",
	// "a drain (the node is stopping)"), for the refusal of another.
	hostCmd atomic.Pointer[string]
	// drainWanted is set once a Drain began (it ends in the node's stop):
	// a host Relocate called after it is refused, also while the drain
	// waits for a host command running to end (beginDrainCommand).
	drainWanted atomic.Bool

	mu      sync.Mutex
	hosted  map[spot.Key]*hosted
	waiters map[string]chan localReply // local requests waiting here, by reply route key
	remotes map[string]remoteReply     // remote requests received here, by reply route key
	// afterCutover are the messages from a peer waiting for an object's
	// cutover here, in arrival order (messaging.go waitCutover);
	// cutoverWaiting counts them all, bounded by cutoverWaitMax;
	// cutoverQueues is len(afterCutover), read without the lock.
	afterCutover   map[cutoverWaitKey]*cutoverQueue
	cutoverWaiting int
	cutoverQueues  atomic.Int32
	// lateRelays are the late relays of the objects that opened here on
	// their move's CutoverGrace before the source's cutover came, by that
	// move's binding, until it comes (session_late_relay.go).
	lateRelays map[chunk.Binding]*lateRelay
	closing    bool // no new object work (Close began)
	// stopping mirrors closing for lock-free readers (emptying, on every
	// placement).
	stopping atomic.Bool
	// creating counts target-side creations under way (createOnTarget)
	// and Instance Spot activations and recoveries (arriving): a host
	// command keeps its list open until they have landed.
	creating int
	// work is what stop waits for: creation and close orders in flight,
	// and the node's background goroutines (goWork).
	work  workGroup
	entry *spot.Object // the Entry Spot of a Server node
	stats objectStats
	hooks atomic.Pointer[testHooks]
	// orders are the 47/48/49 requests this run accepted, for duplicate
	// deliveries (manager_target.go).
	orders  map[inboundKey]*inboundRequest
	stopped chan struct{}
	// halt ends the calls in flight (creations waiting, closes) when the
	// node stops, so that Close does not wait for their deadlines.
	halt     context.Context
	haltCall context.CancelFunc
}

// objectStats counts what the route cache and the fences did; tests and
// operators read them (ObjectStats).
type objectStats struct {
	cacheHits, cacheMisses, authorityReads atomic.Uint64
	fenceRefused, delivered                atomic.Uint64
	unhandled                              atomic.Uint64 // inbound commands with no dispatch entry
	lostRecovered                          atomic.Uint64 // creations decided from the store after a lost answer
	followMoves, followForwarded           atomic.Uint64 // Message Follow (follow_forward.go)
	followRefused, followNotices           atomic.Uint64
	followRoutesDropped                    atomic.Uint64
	sessionSwitches, sessionAborts         atomic.Uint64 // bound Sessions (session.go)
	sessionIgnored, sessionRoutesSent      atomic.Uint64
	sessionRebinds, sessionPruned          atomic.Uint64
	sessionUnbound                         atomic.Uint64
	routeBarriers, routeBarriersTimedOut   atomic.Uint64 // route switches (route_barrier.go)
	// Instance Spots (instance_target.go, instance_recover.go).
	instanceActivated, instanceRefused  atomic.Uint64
	instanceDropped, instanceRecovered  atomic.Uint64
	instanceCancelled, instanceDataLost atomic.Uint64
	instancePassedOn                    atomic.Uint64
	restoreForeign                      atomic.Uint64 // 52/54/55 not from the source (checkSource)
}

// ObjectStats is a snapshot of a node's object counters.
type ObjectStats struct {
	// RouteCacheHits/Misses count route resolutions answered by the route
	// cache or by a Location Store read.
	RouteCacheHits, RouteCacheMisses uint64
	// AuthorityReads counts authority rows read for routing.
	AuthorityReads uint64
	// FenceRefused counts inbound messages this node refused because the
	// route fence did not match what it hosts (never delivered).
	FenceRefused uint64
	// Delivered counts messages this node put into a hosted object's mailbox.
	Delivered uint64
	// LostAnswersRecovered counts creations whose 47/49 answer was lost and
	// whose outcome this node read from the store instead.
	LostAnswersRecovered uint64
	// Hosted is the number of objects this node hosts (Entry Spot included).
	Hosted int
	// Message Follow (§7.3): FollowMoves counts moves recorded for
	// following; FollowForwarded messages this node passed on to a new
	// owner; FollowRefused messages it had a follow route for but did not
	// pass on (hop limit, cycle, generation mismatch, link to the new owner
	// full or down); FollowNotices commands 50 it sent as a new owner;
	// FollowRoutesDropped route cache entries a command 50 dropped here.
	FollowMoves, FollowForwarded, FollowRefused, FollowNotices, FollowRoutesDropped uint64
	// Bound Sessions (command 44, session.go): SessionRouteSwitches counts
	// Session routes a commit switched here; SessionAborts aborts a Session
	// here took (its route stays); SessionRoutesIgnored commands 44 that
	// did not match a live Session's binding and route; SessionRoutesSent
	// commands 44 this node sent as a move's source or target;
	// SessionRebinds Sessions that fell back to a store resolve after a
	// refusal; SessionBindingsPruned bindings a hosted Actor dropped
	// because the Session's node run is gone (session.go, sessionsOf);
	// SessionBindingsUnbound bindings a hosted Actor dropped because its
	// Session was closed (its unbind reached this node).
	SessionRouteSwitches, SessionAborts, SessionRoutesIgnored, SessionRoutesSent, SessionRebinds uint64
	SessionBindingsPruned, SessionBindingsUnbound                                                uint64
	// RouteBarriers counts route switches of this node's senders that
	// first sent a barrier on the previous route (route_barrier.go);
	// RouteBarriersTimedOut those whose barrier went unanswered.
	RouteBarriers, RouteBarriersTimedOut uint64
	// Instance Spots (§7.1): InstancesActivated counts cold activations
	// this node completed (Ready, first message queued); InstanceRefused
	// commands 39 it refused before storing anything; InstanceDropped
	// one-way first messages it could not deliver (logged);
	// InstancesRecovered activations it resumed from the stored first
	// message after their owner died; InstancesCancelled Creating records
	// of dead owners it cancelled; InstancesDataLost activations whose
	// stored first message was missing or corrupt; InstancePassedOn
	// cold activations (one-way or request) it could not take while
	// emptying itself and handed to another node (passOnActivation).
	InstancesActivated, InstanceRefused, InstanceDropped      uint64
	InstancesRecovered, InstancesCancelled, InstancesDataLost uint64
	InstancePassedOn                                          uint64
	// RestoreRecordsNotFromSource counts the chunks (52), cutovers (54)
	// and cancels (55) naming a move this node discarded because a peer
	// other than the source the move's binding names sent them.
	RestoreRecordsNotFromSource uint64
}

// testHooks let tests inject the failures the spec's result tables name.
// They are nil in production.
type testHooks struct {
	// beforeFactory runs on the target after every framework check and
	// before the factory; a non-nil error is a framework failure before the
	// callback.
	beforeFactory func(id string) error
	// dropCreateReply, when true for an id, makes the target swallow the
	// command 20 answering its 47/49 (a lost reply).
	dropCreateReply func(id string) bool
	// beforeRemoteSend, when it returns an error, stands for the
	// transport's answer to sending a message to id (e.g. backpressure).
	beforeRemoteSend func(id string) error
	// arrivalReply, when it returns an error, stands for the transport's
	// answer to a reply on the connection its request came on (e.g.
	// ErrPeerDown: that connection is gone).
	arrivalReply func() error
	// activationSend, when it returns an error, stands for the
	// transport's answer to sending a cold activation of id to another
	// node (sendActivation).
	activationSend func(id string) error
	// portableReplySend, when it returns an error, stands for the
	// transport's answer to sending a moved request's answer (wait: the
	// send waiting for room after backpressure).
	portableReplySend func(wait bool) error
	// relocationStep runs at a named point of a move of id (see the calls
	// in relocate.go and relocate_target.go); a test blocks in it to hold
	// the move there.
	relocationStep func(id, step string)
	// restoreChunk returns the bytes the source sends as chunk index of
	// its Restore stream (a test may return a corrupted copy).
	restoreChunk func(id string, b chunk.Binding, index int, data []byte) []byte
	// activationStep runs at a named point of a cold activation of id
	// (instance_target.go); a test blocks in it to crash the node there.
	activationStep func(id, step string)
	// relaySend, when it returns an error, stands for the transport's
	// answer to relaying held message index of a move of id.
	relaySend func(id string, index int) error
	// cutover may alter the cutover (54) a move of id is about to send
	// (a test declares a count or CRC-32C the relay does not match).
	cutover func(id string, c *router.RelocationCutover)
	// arrivalEnded reports how a target attempt for id ended.
	arrivalEnded func(id string, state relocation.TargetState, failure relocation.TargetFailure)
	// holdSessionRoute, when it returns true for a command 44 about id
	// addressed to another node, keeps the sender from sending it (the
	// test sends it later itself: a late one-way command).
	holdSessionRoute func(id string, body *router.SessionRelocationRoute) bool
	// sessionHeldSend is asked before each notice about id that a node
	// holding a Session's message on purpose sends the Session's node;
	// false keeps it from sending it (a holder that stopped telling).
	sessionHeldSend func(id string) bool
	// closeStep runs at a named point of Node.Close (closeObjectsStopped,
	// closeStoppedPublished); a test acts there while the node closes.
	closeStep func(step string)
}

// Node.Close hook points (testHooks.closeStep).
const (
	closeObjectsStopped   = "close:objects-stopped"   // object work stopped (§11), transport up
	closeStoppedPublished = "close:stopped-published" // stopped published, the teardown not begun
	closeSettlePassOns    = "close:settle-pass-ons"   // barriers behind what was passed on go out (a round)
)

// Cold activation hook points (testHooks.activationStep) named here; the
// others are spelled where they run.
const (
	stepFirstMessageDone = "first-message-done" // the first message's turn over, its end of use begins
	// stepFollowsPassedOn: a message for an id whose activation this node
	// passed on a moment ago goes after it (activate).
	stepFollowsPassedOn = "follows-passed-on"
)

// Relocation hook points (testHooks.relocationStep).
const (
	stepSourceRead    = "source:read"    // a move's first read of the record done
	stepSourceSecure  = "source:secure"  // before each SecureCapacity attempt
	stepSourceRecord  = "source:record"  // held and captured, the Captured stage not yet written
	stepSourceReady   = "source:ready"   // relay-ready answered, the hold not yet relayed
	stepSourceCutover = "source:cutover" // relay sent, cutover not yet
	stepSourceConfirm = "source:confirm" // cutover sent, the commit not yet looked for
	// the wait for the commit ended on the target's word that it stopped
	// and fenced the move (relocate_stopped.go)
	stepSourceTold    = "source:told-stopped"
	stepTargetCAS     = "target:cas"     // before each owner CAS attempt
	stepTargetOpen    = "target:open"    // CAS applied, dispatch not open
	stepTargetBuild   = "target:build"   // the hidden instance's build begins, its payload not taken yet
	stepTargetBuilt   = "target:built"   // the hidden instance's build returned
	stepTargetDone    = "target:done"    // opened; the completion not yet written
	stepSenderBarrier = "sender:barrier" // a route switch sends its barrier
	stepFollowPassOn  = "follow:pass-on" // a previous owner passes a message on
	stepFollowArrive  = "follow:arrive"  // a message passed on arrives (on the reader of the link it came on)
	stepEndedRunWait  = "ended-run:wait" // a readmit or a switch's barrier waits for what an ended run sent here
	stepSwitchHeld    = "switch:held"    // a route switch waits for a move's ingress hold
	stepSwitchQueued  = "switch:queued"  // a route switch waits for one-way sends on the previous route to be queued
	stepCutoverWait   = "cutover:wait"   // a peer's message waits for the object's cutover here
	// a route switch's sender got a notice that its barrier is held on purpose
	stepBarrierHeldNotice = "sender:barrier-held"
	// a Session whose route switch waits got a notice that one of its
	// messages is held on purpose
	stepSessionHeldNotice = "session:held"
	// a target that committed on its grace sent the fresh commits a
	// relay taken in after it owed (session_late_relay.go)
	stepSessionLateCommit = "target:late-commit"
	// a host command's worker has a move's result, the command not yet
	// told (host_relocate.go)
	stepHostFinish = "host:finish"
	// a host command's move attempt returned, its outcome not yet
	// classified (hostMoveOne)
	stepHostAttempt = "host:attempt"
	// a drain refused by a host command running waits for it; then the
	// wait ended and the drain tries again (Drain, id "")
	stepDrainAwait   = "drain:await"
	stepDrainAwaited = "drain:awaited"
)

func (h testHooks) step(id, step string) {
	if h.relocationStep != nil {
		h.relocationStep(id, step)
	}
}

func (h testHooks) chunkOut(id string, b chunk.Binding, index int, data []byte) []byte {
	if h.restoreChunk != nil {
		return h.restoreChunk(id, b, index, data)
	}
	return data
}

func (h testHooks) ended(id string, state relocation.TargetState, failure relocation.TargetFailure) {
	if h.arrivalEnded != nil {
		h.arrivalEnded(id, state, failure)
	}
}

// hook returns the test hooks (zero in production).
func (o *objects) hook() testHooks {
	if h := o.hooks.Load(); h != nil {
		return *h
	}
	return testHooks{}
}

// hosted is one object this node owns: the authority it was created or
// restored under, which every inbound route fence is checked against.
type hosted struct {
	obj              *spot.Object
	kind             record.ObjectKind
	stableType       string
	objectGeneration uint64
	ownerGeneration  uint64 // AuthorityOwnerGeneration
	storeVersion     string // the authority StoreVersion after the last change this node made
	entry            bool   // the Entry Spot (no authority row)
	state            hostState
	// lateSnapshot is non-nil while the snapshot adapter's call of a move
	// that already ended still runs; it stays hostMoving and held until
	// the call returns, which closes it (relocate_snapshot.go). A host
	// command waits for it a moment (awaitLateSnapshot).
	lateSnapshot chan struct{}
	// cutoverDone is closed when a move's cutover was submitted (state
	// hostCutover) or the move left that state otherwise (reopened,
	// discarded, ended): arrivals wait for it, then are admitted again
	// (they follow the object). cutoverOpen: not closed yet.
	cutoverDone chan struct{}
	cutoverOpen bool
	// holding is closed (and set to nil) when the move that put the
	// object in hostMoving lets go of its ingress hold: it relays it
	// (hostCutover), puts it back (serving again) or drops the object,
	// or the move ends. A route switch barrier that reaches the object
	// meanwhile waits for it (messaging.go inbound): the sender's earlier
	// messages are still in the hold, and answering at once let the
	// sender's next ones reach a target that had committed on its
	// CutoverGrace ahead of the relay.
	holding chan struct{}
	// arrival is the move bringing the object here (state hostIncoming).
	arrival *arrival
	// closed is closed when the close under way (state hostClosing) ends,
	// whether it removed the object or reopened it: a second Destroy or
	// Close of the object waits for it and then decides on the record.
	closed chan struct{}
	// settling is closed once the move that brought the object here has
	// recorded its completion (§9.1: the move's progress erased from the
	// record), which it does right after opening the object; nil when no
	// completion is pending. A move on from here waits for it
	// (beginMoveChecked): it would otherwise read a record that this
	// completion is about to change and be refused for it.
	settling chan struct{}
	// sessions are the bound Sessions of an Actor, by session RID
	// (session.go); they move with it.
	sessions map[string]*sessionBinding
	// heldSessions are the bound Sessions with a message a move here
	// keeps on purpose — in its ingress hold (hostMoving) or waiting for
	// its cutover (hostCutover) — by session RID, each with its latest
	// such message; telling is set while a goroutine tells them so
	// (route_barrier_held.go). Emptied when the move lets go of the hold
	// or ends its cutover (letGoLocked, endCutoverLocked).
	heldSessions map[string]heldSession
	telling      bool
	// lateRelay is set while the move that brought the object here
	// committed on its CutoverGrace and the source may still relay its
	// hold: a relayed Session message taken in then gets its Session a
	// fresh command 44 (session_late_relay.go).
	lateRelay *lateRelay
	// readoptedFrom is the owner combination this run held the object
	// under before its latest re-adoption (node_readopt.go); zero when
	// it was never re-adopted. Messages fenced with it were sent to this
	// very object, here, and are admitted (admitMessage).
	readoptedFrom ownerCombination
	// readoptTried is the combination the last Readopt attempt moved the
	// record from: when its result was lost and a later read finds the
	// record re-adopted, it becomes readoptedFrom.
	readoptTried ownerCombination
}

// ownerCombination is the part of a route fence that a re-adoption
// changes: the owner's LeaseGeneration and the AuthorityOwnerGeneration.
type ownerCombination struct{ leaseGen, ownerGen uint64 }

// hostState is where a hosted object stands in its life on this node. It is
// the one place that says whether messages, Destroy/Close and relocation
// may touch the object; it changes only under objects.mu.
type hostState uint8

const (
	// hostServing: dispatching; messages enter the mailbox.
	hostServing hostState = iota
	// hostMoving: a relocation holds dispatch. Arrivals still enter the
	// mailbox, which is the ingress hold (in arrival order, run nowhere
	// until the move ends); Destroy/Close are refused with ErrMoving
	// (§7.2).
	hostMoving
	// hostClosing: Destroy/Close in progress; messages are refused.
	hostClosing
	// hostCutover: the source relays its hold and sends the cutover;
	// arrivals wait for cutoverDone, then follow the object (§7.3).
	hostCutover
	// hostIncoming: the target side of a move: a temporary queue (and,
	// once restored, a hidden instance) that dispatches nothing until the
	// owner CAS (§9.2). Not Ready: Find does not return it.
	hostIncoming
)

// beginCutoverLocked puts h in hostCutover with a fresh cutoverDone and
// lets go of the ingress hold (a barrier held meanwhile now waits for the
// cutover, then follows); objects.mu is held.
func (h *hosted) beginCutoverLocked() {
	h.state = hostCutover
	h.cutoverDone = make(chan struct{})
	h.cutoverOpen = true
	h.letGoLocked()
}

// endCutoverLocked closes h.cutoverDone, once; objects.mu is held. Every
// way out of hostCutover calls it: the arrivals waiting for it (off the
// connection's reader, messaging.go waitCutover) have no other bound.
func (h *hosted) endCutoverLocked() {
	h.heldSessions = nil // what waited for the cutover goes on now
	if h.cutoverOpen {
		close(h.cutoverDone)
		h.cutoverOpen = false
	}
}

// letGoLocked closes h.holding, once; objects.mu is held.
func (h *hosted) letGoLocked() {
	h.heldSessions = nil // relayed, put back or dropped: no longer held here
	if h.holding != nil {
		close(h.holding)
		h.holding = nil
	}
}

func (s hostState) String() string {
	switch s {
	case hostServing:
		return "serving"
	case hostMoving:
		return "moving"
	case hostClosing:
		return "closing"
	case hostCutover:
		return "cutover"
	case hostIncoming:
		return "incoming"
	}
	return fmt.Sprintf("hostState(%d)", uint8(s))
}

type localReply struct {
	body []byte
	err  error
}

// remoteReply is the fast path of a request received from a peer: the
// reply function of the connection it came on.
type remoteReply struct {
	reply func(*router.Record) error
}

// Default packet name and content type of the application payload envelope
// (the wire requires both, 1..255 bytes; the Manager carries bytes only).
const (
	PacketName  = "meshnode.message"
	ContentType = "application/octet-stream"
)

// rowHintAge is how long a row this node read or wrote may stand in for a
// fresh read in the first attempt of an authority operation. A stale hint
// costs a refused batch and a re-read, never a wrong commit
// (authority.WithRowHints); a second is far longer than any one move or
// creation and far shorter than a lease's renewal interval.
const rowHintAge = time.Second

// entryStableType is the stable type the Entry Spot is opened with in the
// spot runtime, which has no Entry kind of its own. It is never placed and
// has no authority row (§3.4: an Entry Spot has no allocation).
const entryStableType = "meshnode.entry-spot"

// entrySpotPrefix starts every Entry Spot id (entrySpotID); User Spot ids
// may not use it.
const entrySpotPrefix = "entry:"

// targetWorkers bounds the idle workers of objects.gos: about the moves
// and creations a node serves at once (relocation.max_concurrent of a few
// sources), beyond which a burst's extra goroutines end.
const targetWorkers = 64

func newObjects(n *Node) (*objects, error) {
	o := &objects{n: n, log: n.log, hosted: map[spot.Key]*hosted{}, waiters: map[string]chan localReply{},
		remotes: map[string]remoteReply{}, registry: map[string]spot.Factory{}, stopped: make(chan struct{}),
		dispatch: map[router.Command]inboundFunc{}, arrivals: map[chunk.Binding]*arrival{}, gos: gopool.New(targetWorkers),
		streamed: map[moveAttempt]*sourceMove{}, readySent: map[moveAttempt]*arrival{},
		restoreRefusedLog: newRecordLog(n.clock.Now), route44IgnoredLog: newRecordLog(n.clock.Now),
		replyNotSentLog: newRecordLog(n.clock.Now), restoreForeignLog: newRecordLog(n.clock.Now)}
	o.registerCommands()
	o.registerRelocation()
	o.registerSessions()
	o.registerInstance()
	o.halt, o.haltCall = context.WithCancel(context.Background())
	o.passOns.ctx, o.passOns.cancel = context.WithCancel(context.Background())
	for _, f := range n.factories {
		o.registry[f.StableType] = f
	}
	var err error
	if o.exec, err = authority.NewExecutor(n.loc, authority.WithLogger(n.log), authority.WithRowHints(rowHintAge, n.clock.Now)); err != nil {
		return nil, err
	}
	if o.chunks, err = chunk.NewRegistry(chunk.Limits{}); err != nil {
		return nil, err
	}
	if o.cache, err = follow.NewCache(n.clock, follow.CacheOptions{MaxAge: n.cfg.Routing.RouteCacheMaxAge,
		MaxEntries: n.cfg.Routing.RouteCacheMaxEntries}); err != nil {
		return nil, err
	}
	if o.follow, err = follow.NewTable(n.clock, n.cfg.Routing.MessageFollowDuration); err != nil {
		return nil, err
	}
	// A turn whose time comes while the lease gate is shut is not started
	// (§5) and not dropped: its object holds itself until the gate admits
	// again (releaseLeaseHold).
	o.rt = spot.New(spot.Options{Replier: o, Logger: n.log, Admit: n.lease.Gate().Admit})
	return o, nil
}

// objectRole reports whether this node takes part in objects at all.
func (o *objects) role() config.ObjectRole { return o.n.cfg.Node.ObjectRole }

// openEntrySpot opens the Entry Spot of a Server node (§1: created as the
// server entry point when the framework starts). Its id is framework-issued
// (entrySpotID); it has no authority row.
func (o *objects) openEntrySpot() error {
	if o.role() != config.RoleServer {
		return nil
	}
	id := entrySpotID(o.n.run)
	key := spot.Key{Spot: true, ID: id}
	obj, err := o.rt.Open(spot.Spec{Key: key, Kind: spot.KindUserSpot, StableType: entryStableType, Generation: 1,
		Handler: gated{h: &entrySpot{o: o}, gate: o.n.lease.Gate()}})
	if err != nil {
		return fmt.Errorf("open Entry Spot: %w", err)
	}
	o.mu.Lock()
	o.entry = obj
	o.hosted[key] = &hosted{obj: obj, stableType: entryStableType, objectGeneration: 1, ownerGeneration: 1, entry: true}
	o.mu.Unlock()
	return nil
}

// entrySpot is the Entry Spot's handler: Actors created on this node belong
// to it (§1). It answers a request with a one-line summary of the node.
type entrySpot struct{ o *objects }

func (e *entrySpot) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind != spot.Request {
		return nil
	}
	return t.Reply([]byte("entry spot " + t.ID() + " hosts " + strconv.Itoa(e.o.rt.Len()-1) + " objects"))
}

// gated asks the admission gate before every application turn (§5: starting
// Actor/Spot messages and timer callbacks is a blocked target). A refused
// turn does not run; a refused request is answered with the refusal.
type gated struct {
	h    spot.Handler
	gate interface{ Admit() error }
	// first, when set, is told once the first turn that ran is over: a
	// cold-activated Instance Spot's first message (instance_target.go).
	first *firstTurn
}

func (g gated) Receive(t *spot.Turn, env spot.Envelope) error {
	if err := g.gate.Admit(); err != nil {
		// The runtime asked the same gate a moment ago (spot.Options.Admit);
		// a deadline that fell in between is not a reason to lose the
		// envelope: spot.ErrNotStarted puts it back and holds the object.
		return wrapErr(ErrUnavailable, fmt.Errorf("%w: %w", spot.ErrNotStarted, err), "owner lease")
	}
	if g.first != nil {
		defer g.first.over()
	}
	if err := g.h.Receive(t, env); err != nil && !errors.Is(err, spot.ErrNotStarted) {
		return &handlerError{err: err}
	}
	return nil
}

// handlerError is an application handler's own failure of its turn. It is
// ErrRequestFailed and nothing else: the message was delivered and ran,
// whatever the handler's error wraps. A handler that returned a framework
// error (ErrNotFound from a lookup of another object, say) had it taken for
// a refusal of its own delivery — the request was sent again and ran twice
// — and a local requester got that error instead of ErrRequestFailed.
type handlerError struct{ err error }

func (e *handlerError) Error() string        { return "the handler failed: " + e.err.Error() }
func (e *handlerError) Is(target error) bool { return target == ErrRequestFailed }

// stop ends object work (§11 first step): new creations, closes and
// messages are refused, orders in flight finish, then the runtime closes —
// queued requests are answered with ErrRuntimeDown while the transport is
// still up. Idempotent.
func (o *objects) stop() { o.stopWithin(context.Background()) }

// stopWithin is stop that waits for the work under way only until ctx
// ends: it returns the objects ("actor <id>", "spot <id>") whose handler
// was still in a turn then (closed without waiting;
// spot.Runtime.CloseContext), and whether other work — creations, moves:
// a call into the application that did not return — was still running.
// Only the first call stops; later ones wait for it and return nothing.
func (o *objects) stopWithin(ctx context.Context) (stuck []string, calls bool, inCalls []string) {
	o.mu.Lock()
	if o.closing {
		o.mu.Unlock()
		<-o.stopped
		return nil, false, nil
	}
	o.closing = true
	o.stopping.Store(true)
	o.mu.Unlock()
	o.haltCall()
	o.work.stopGo() // after the halt: what goWork then refuses sees it
	// Orders and the node's goroutines end once their calls do; one held
	// by the application (a factory's New or a snapshot adapter that does
	// not return, whatever its context says) is not waited for past ctx.
	// The target pool's workers are the node's goroutines too: once the
	// orders ended, its idle workers end at its Close and are waited for
	// (gos.Wait; until 2026-12-07 they could still be ending when Close
	// returned). One still running a function is not: that function is
	// bounded by its own context (an owner CAS the store holds).
	settled := make(chan struct{})
	go func() {
		o.work.Wait()
		o.gos.Close()
		o.gos.Wait()
		close(settled)
	}()
	select {
	case <-settled:
	case <-ctx.Done():
		// Only work still in flight is stuck: with ctx ended on entry (a
		// caller's cancelled context) this case wins the race against
		// an idle node's settled too.
		calls = o.work.busy()
		inCalls = o.apps.running(time.Now())
		if bg := o.work.background(); bg > 0 {
			// Not the application's: they end with the halt, only not
			// yet (a context done on entry gave them no time).
			o.log.Info("shutdown: goroutines of the node still ending at the halt; not waited for", "goroutines", bg)
		}
		// The idle workers end now, not when the stuck call returns
		// (which may be never); one still running ends with its call.
		o.gos.Close()
	}
	for _, k := range o.rt.CloseContext(ctx) {
		stuck = append(stuck, keyName(k))
	}
	o.mu.Lock()
	o.hosted = map[spot.Key]*hosted{}
	o.forgetOrders()
	o.endLateRelaysLocked()
	for id, ch := range o.waiters {
		ch <- localReply{err: wrapErr(ErrUnavailable, ErrClosed, "node closing")}
		delete(o.waiters, id)
	}
	o.mu.Unlock()
	close(o.stopped)
	return stuck, calls, inCalls
}

// workGroup is a sync.WaitGroup that also says whether anything is still
// in flight, so that a stop whose wait ended reports stuck work only when
// there is some.
type workGroup struct {
	wg sync.WaitGroup
	// n counts the orders (Add, Done): what busy reports, a call into
	// the application that may not return. The node's own goroutines
	// (goUnlessStopped) are counted apart, in bg: one still ending when
	// stop's wait ended is not the application's (a caller's context done
	// on entry, a pass-on waiting for room on a link); counted with the
	// orders, it made Close report ApplicationStuckError.Calls.
	n  atomic.Int64
	bg atomic.Int64
	// mu orders goUnlessStopped's Add ahead of stop's Wait, which sets
	// stopped first (stopGo).
	mu      sync.Mutex
	stopped bool
}

// goUnlessStopped runs f on a goroutine counted in g, unless stopGo ran;
// it reports whether it did.
func (g *workGroup) goUnlessStopped(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	g.bg.Add(1)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.bg.Add(-1)
		f()
	}()
	return true
}

// stopGo makes goUnlessStopped start nothing more; before Wait.
func (g *workGroup) stopGo() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}

func (g *workGroup) Add(n int)  { g.n.Add(int64(n)); g.wg.Add(n) }
func (g *workGroup) Done()      { g.n.Add(-1); g.wg.Done() }
func (g *workGroup) Wait()      { g.wg.Wait() }
func (g *workGroup) busy() bool { return g.n.Load() > 0 }

// background is how many of the node's own goroutines run (goUnlessStopped).
func (g *workGroup) background() int64 { return g.bg.Load() }

// begin registers one order (creation, close) so that stop waits for it; it
// fails once stop began.
func (o *objects) begin() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closing {
		return ErrClosed
	}
	o.work.Add(1)
	return nil
}

// goWork runs f on a goroutine of its own that stop waits for (work) and
// reports whether it started it: nothing starts once stop's wait began
// (work.stopGo, after the halt). f must end promptly once the node halts
// (o.halt): Close returns only after it did — such a goroutine that
// outlived Close kept the closed node reachable and broke Close's promise
// that none is left — and one still running when stop's wait ends is not
// waited for further, nor reported as application code (workGroup.bg). A caller
// whose f must run (it answers someone) runs it itself when it did not
// start: the node halted then. It takes no lock but work's own, a leaf:
// callers may hold objects.mu or not.
func (o *objects) goWork(f func()) bool { return o.work.goUnlessStopped(f) }

// call is begin for a Manager call: it also returns ctx cancelled when the
// node stops. done must be called when the call ends.
func (o *objects) call(ctx context.Context) (context.Context, func(), error) {
	if err := o.begin(); err != nil {
		return ctx, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(o.halt, cancel)
	return ctx, func() { stop(); cancel(); o.work.Done() }, nil
}

// replyRecord builds the command 20 answering a request: ok with the
// application payload, or the mapped failure.
func replyRecord(fam opFamily, corr uint64, body []byte, err error) *router.Record {
	if err != nil {
		res, code := wireFailure(fam, err)
		return router.NewRecord(&router.Reply{Correlation: corr, Result: res, FailureCode: code}, nil, nil)
	}
	return router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultOK}, nil,
		&router.Payload{PacketName: PacketName, ContentType: ContentType, Data: body})
}

// inboundFunc handles one inbound object command. It runs on the peer's
// connection goroutine, so anything that reads the store or runs a factory
// hands itself to its own goroutine; mailbox delivery is quick and stays
// inline, which keeps one sender's messages in order.
type inboundFunc func(ctx context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error)

// registerCommands builds the inbound dispatch table: one entry per command
// this node answers. Features add their own entries (relocation registers
// 40, 52, 54, 55 in its file) instead of growing a switch here.
func (o *objects) registerCommands() {
	o.handle(router.CmdActorSend, func(_ context.Context, from transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
		o.inboundActor(from, rec.Body.(*router.ActorSend).TargetActor, 0, rec, nil)
	})
	o.handle(router.CmdActorRequest, func(_ context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		b := rec.Body.(*router.ActorRequest)
		o.inboundActor(from, b.TargetActor, b.Correlation, rec, reply)
	})
	o.handle(router.CmdSpotSend, func(_ context.Context, from transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
		o.inboundSpot(from, rec.Body.(*router.SpotSend).TargetSpot, 0, rec, nil)
	})
	o.handle(router.CmdSpotRequest, func(_ context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		b := rec.Body.(*router.SpotRequest)
		o.inboundSpot(from, b.TargetSpot, b.Correlation, rec, reply)
	})
	o.handle(router.CmdActorCreate, func(ctx context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		b := rec.Body.(*router.ActorCreate)
		o.inboundCreate(ctx, from, b.Correlation, reply, createOrderFromWire(record.ObjectActor, b.ActorID, b.StableType,
			b.Operation, b.SourceNodeRID, b.SourceNodeGeneration, b.Reservation, b.DeadlineUnixMs))
	})
	o.handle(router.CmdUserSpotCreate, func(ctx context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		b := rec.Body.(*router.UserSpotCreate)
		o.inboundCreate(ctx, from, b.Correlation, reply, createOrderFromWire(record.ObjectUserSpot, b.SpotID, b.StableType,
			b.Operation, b.SourceNodeRID, b.SourceNodeGeneration, b.Reservation, b.DeadlineUnixMs))
	})
	o.handle(router.CmdUserSpotClose, func(ctx context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		o.inboundClose(ctx, from, rec.Body.(*router.UserSpotClose), reply)
	})
	o.handle(router.CmdMessageFollow, func(_ context.Context, _ transport.PeerInfo, rec *router.Record, _ func(*router.Record) error) {
		// §7.3: one of our messages reached its object's new owner through
		// Message Follow; the route we sent it with is stale.
		r := rec.Body.(*router.MessageFollow).Route
		o.dropFollowed(r.Source, r.OriginalOperation)
		o.sessionFollowed(r.OriginalOperation, r.Source, r.Target)
	})
}

// arriving counts an object about to land on this node — a creation on its
// target (createOnTarget), an Instance Spot activation or recovery — in
// objects.creating, unless a host command has begun: under o.mu, so that a
// host command either sees it and keeps its list open until it has landed
// (relist) — a drain then moves it, or lists it (an Instance Spot:
// Skipped) among what its shutdown removes — or it sees the command and is
// refused (its sender tries another node). landed must be called once it
// ended, hosted here or not. Before 2026-12-06 activations had only an
// unlocked check: one accepted a moment before a drain began landed after
// the drain had closed its list, and the shutdown removed the Spot without
// the drain's result or log naming it
// (TestDrainReportsAnInstanceSpotActivatedDuringIt).
func (o *objects) arriving() (landed func(), ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hostMove.Load() {
		return nil, false
	}
	o.creating++
	return func() {
		o.mu.Lock()
		o.creating--
		o.mu.Unlock()
	}, true
}

// handle adds one entry to the dispatch table. Registering a command twice
// is a programming error of this package, caught by every test that builds
// a node.
func (o *objects) handle(cmd router.Command, f inboundFunc) {
	if _, dup := o.dispatch[cmd]; dup {
		panic(fmt.Sprintf("mesh: command %s registered twice", cmd))
	}
	o.dispatch[cmd] = f
}

// holdsObjects reports whether this node has something a drain hands
// over: an Actor or User Spot hosted here (in any state: serving, moving,
// arriving) or a creation under way (arriving: hosted only once its
// factory returned; the drain lists it once it lands, relist). The Entry
// Spot and Instance Spots do not count: a drain never moves them.
func (o *objects) holdsObjects() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.creating > 0 {
		return true
	}
	for _, h := range o.hosted {
		if !h.entry && h.kind != record.ObjectInstanceSpot {
			return true
		}
	}
	return false
}

// handleRecord is the transport Handler: it looks the command up in the
// dispatch table. A command this node does not answer is a protocol error:
// a request gets a typed command 20 (ProtocolError) so its sender does not
// wait for nothing, and every such record is logged (rate-limited by the
// counter in the log line) and counted.
func (o *objects) handleRecord(ctx context.Context, from transport.PeerInfo, rec *router.Record, reply func(*router.Record) error) {
	if f, ok := o.dispatch[rec.Command]; ok {
		f(ctx, from, rec, reply)
		return
	}
	n := o.stats.unhandled.Add(1)
	o.log.Warn("object command not handled by this node", "command", rec.Command.String(), "peer", from.RID.String(), "unhandled", n)
	if corr, ok := transport.RequestCorrelation(rec); ok && reply != nil {
		o.sendReply(reply, router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultProtocolError, FailureCode: router.FailRequestProtocolError}, nil, nil))
	}
}

// stats returns the counters.
func (o *objects) snapshotStats() ObjectStats {
	o.mu.Lock()
	h := len(o.hosted)
	o.mu.Unlock()
	return ObjectStats{
		RouteCacheHits: o.stats.cacheHits.Load(), RouteCacheMisses: o.stats.cacheMisses.Load(),
		AuthorityReads: o.stats.authorityReads.Load(), FenceRefused: o.stats.fenceRefused.Load(),
		Delivered: o.stats.delivered.Load(), LostAnswersRecovered: o.stats.lostRecovered.Load(), Hosted: h,
		FollowMoves: o.stats.followMoves.Load(), FollowForwarded: o.stats.followForwarded.Load(),
		FollowRefused: o.stats.followRefused.Load(), FollowNotices: o.stats.followNotices.Load(),
		FollowRoutesDropped:  o.stats.followRoutesDropped.Load(),
		SessionRouteSwitches: o.stats.sessionSwitches.Load(), SessionAborts: o.stats.sessionAborts.Load(),
		SessionRoutesIgnored: o.stats.sessionIgnored.Load(), SessionRoutesSent: o.stats.sessionRoutesSent.Load(),
		SessionRebinds: o.stats.sessionRebinds.Load(), SessionBindingsPruned: o.stats.sessionPruned.Load(),
		SessionBindingsUnbound: o.stats.sessionUnbound.Load(),
		RouteBarriers:          o.stats.routeBarriers.Load(), RouteBarriersTimedOut: o.stats.routeBarriersTimedOut.Load(),
		InstancesActivated: o.stats.instanceActivated.Load(), InstanceRefused: o.stats.instanceRefused.Load(),
		InstanceDropped: o.stats.instanceDropped.Load(), InstancesRecovered: o.stats.instanceRecovered.Load(),
		InstancesCancelled: o.stats.instanceCancelled.Load(), InstancesDataLost: o.stats.instanceDataLost.Load(),
		InstancePassedOn: o.stats.instancePassedOn.Load(), RestoreRecordsNotFromSource: o.stats.restoreForeign.Load(),
	}
}

// ObjectStats returns the node's object counters.
func (n *Node) ObjectStats() ObjectStats { return n.obj.snapshotStats() }

// errNotHosted is the fence outcome for an object this node does not host.
func errNotHosted(id string) error {
	return fmt.Errorf("%w: %s is not hosted here", ErrNotFound, id)
}

// hostedFor returns the hosted object of key when it exists.
func (o *objects) hostedFor(key spot.Key) (*hosted, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.hosted[key]
	return h, ok
}
