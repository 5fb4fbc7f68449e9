package relocation

import (
	"errors"
	"fmt"
)

// ErrUnexpected reports an event that does not belong to the machine's
// current state. The machine is unchanged; the caller logs and drops it.
var ErrUnexpected = errors.New("relocation: event not expected in this state")

// Policy is the moving object's relocation policy (§2), as far as the
// source machine cares.
type Policy uint8

// Policies.
const (
	// Disable: the object never moves across nodes; refused before capture.
	Disable Policy = iota + 1
	// Recreate: queue and timers move, application state does not.
	Recreate
	// Preserve: state moves through the snapshot adapter with queue and timers.
	Preserve
)

// SourceState is where one move stands on the source node.
type SourceState uint8

// Source states. Refused, Reopened and Moved are final.
const (
	SrcStart SourceState = iota
	// SrcSecuring: target capacity is being secured (§1.3 step 2).
	SrcSecuring
	// SrcCapturing: dispatch closed (reception goes on into the ingress
	// hold), waiting for the current turn, then capture (§1.3 step 3).
	SrcCapturing
	// SrcRecording: the Captured stage is being written (§1.3 step 3).
	SrcRecording
	// SrcStreaming: the Restore request and its chunks are sent on the
	// ordered connection; waiting for relay-ready (§1.3 step 4–5).
	SrcStreaming
	// SrcRelaying: relay-ready accepted; the hold is relayed in order and the
	// cutover sent. The source never reopens from here on (§9.4 last
	// paragraph).
	SrcRelaying
	// SrcCancelling: §9.4 cleanup; the target's reservation is being
	// released.
	SrcCancelling
	// SrcConfirming: the release found no reservation (the target may have
	// committed already), or released it after the object left or was held
	// (is it still recorded at all, and by whom?). The authority row
	// decides (see ReservationGone, OwnerGone, OwnerIsOther,
	// MayHaveCommitted).
	SrcConfirming
	// SrcAwaiting: cutover submitted; the source follows the object and
	// reads the store until it names the target (it never waits for a
	// reply from the target, §1.3 step 8), keeping the payload meanwhile.
	SrcAwaiting
	// SrcReclaiming: the deadline passed without the store naming the
	// target (the target died or its CAS never landed): the source
	// releases the reservation, which makes a later commit impossible.
	SrcReclaiming
	// SrcMoved: the store names the target; the source keeps Message
	// Follow and has freed the payload. Final.
	SrcMoved
	// SrcRecovered: after relay-ready the target never committed and can
	// no longer commit (the reservation is released): the source restored
	// the object from the payload it kept. Final.
	SrcRecovered
	// SrcReopened: the move was cancelled; the source kept ownership and
	// reopened its queue in original order (§9.4). Final.
	SrcReopened
	// SrcRefused: refused before anything was held or written beyond a
	// released reservation (DisableRelocation, no capacity, object gone).
	// Final.
	SrcRefused
	// SrcRemoved: the object's authority record was removed from the store
	// while the move held the object or waited for the target's commit
	// (reclaimed, deleted): no node owns it, so neither side serves it —
	// the source drops what it held instead of taking it back. Final.
	SrcRemoved
	// SrcOwnedElsewhere: the object's authority record, at the moved
	// ObjectGeneration, names an owner this move did not make — another
	// node, another owner run, or the target when the target cannot have
	// committed this move (no Restore was sent, or the release found the
	// reservation still there and deleted it). Its owner changed under
	// the move (a recovery after this node's lease ended, a row written by
	// hand): the source must not serve it beside that owner, and must not
	// report it Moved either (§10: "a different valid owner or generation
	// ends the stale relocation"). It hands what it took in to that owner
	// (Handover) and records Message Follow to it. Final.
	SrcOwnedElsewhere
)

var sourceStateNames = []string{"start", "securing", "capturing", "recording", "streaming", "relaying",
	"cancelling", "confirming", "awaiting", "reclaiming", "moved", "recovered", "reopened", "refused", "removed",
	"ownedElsewhere"}

func (s SourceState) String() string { return enumName(s, sourceStateNames, "SourceState") }

// Final reports whether no event changes s any more.
func (s SourceState) Final() bool {
	return s == SrcMoved || s == SrcRecovered || s == SrcReopened || s == SrcRefused || s == SrcRemoved ||
		s == SrcOwnedElsewhere
}

// SourceEvent is what happened, fed to Source.Step.
type SourceEvent uint8

// Source events.
const (
	// EvBegin starts the move (the policy is the Source's).
	EvBegin SourceEvent = iota + 1
	// EvSecured: the target capacity reservation is confirmed (written, or
	// the same reservation was found on a re-read after a lost answer).
	EvSecured
	// EvSecureFailed: no capacity, target lease stale, store unavailable.
	EvSecureFailed
	// EvCaptured: the turn ended and queue, timers (and state) are in memory.
	EvCaptured
	// EvCaptureFailed: the object closed or the snapshot adapter failed.
	EvCaptureFailed
	// EvRecorded: the Captured stage is in the store.
	EvRecorded
	// EvRecordRefused: the record changed or vanished before Captured (§9.1
	// "Required information disappears right before Captured").
	EvRecordRefused
	// EvRelayReady: the target answered relay-ready.
	EvRelayReady
	// EvTargetFailed: the target answered an explicit failure (checksum,
	// authority mismatch, restore failed…) before relay-ready; or, while
	// the source awaits the commit, a target that stopped said its move
	// can no longer commit (its owner sweep released the reservation), or
	// one said its arrival failed for relay mismatch (no CAS was sent).
	EvTargetFailed
	// EvStreamFailed: the Restore stream could not be sent (peer down).
	EvStreamFailed
	// EvDeadline: the move's deadline passed.
	EvDeadline
	// EvCancel: the caller cancelled the move.
	EvCancel
	// EvCutoverSubmitted: relay and cutover were handed to the ordered
	// connection (or failed to be: the source does not reopen either way).
	EvCutoverSubmitted
	// EvReleased: the reservation was released (or had been already by
	// this move), so the target can no longer commit (its owner CAS needs
	// the reservation row).
	EvReleased
	// EvReservationGone: the release found no reservation row: the target's
	// owner CAS may have consumed it.
	EvReservationGone
	// EvOwnerIsTarget: the authority row names the target under this move
	// (the target's node run and owner, past the moved owner generation),
	// or — found by the caller's own check — a later owner that only the
	// target's commit can have led to. Moved only while the target can
	// have committed (MayHaveCommitted); else the same as EvOwnerIsOther.
	EvOwnerIsTarget
	// EvOwnerIsSource: the authority row still names the source.
	EvOwnerIsSource
	// EvCommitSeen: the store names the target under this move.
	EvCommitSeen
	// EvSecureUnknown: the capacity batch was sent, its result lost, and
	// no re-read could decide whether it applied: the reservation may be
	// there, holding the target's slots, and must be released.
	EvSecureUnknown
	// EvOwnerGone: the authority row is gone, or holds another
	// ObjectGeneration: the object was removed from the mesh during the
	// move (reclaimed, deleted) and no node owns it. The target's CAS,
	// conditioned on the row it first read, can never apply.
	EvOwnerGone
	// EvOwnerIsOther: the authority row, at the moved ObjectGeneration,
	// names neither this source as the move found it nor the target: an
	// owner the move did not make (SrcOwnedElsewhere).
	EvOwnerIsOther
	// EvSnapshotFailed: the application's snapshot adapter failed or
	// panicked during capture; the captured queue is back in the object,
	// which stays here.
	EvSnapshotFailed
	// EvDeadlineInSnapshot: the move's deadline passed while the
	// application's snapshot adapter was still in its call (it does not
	// return, or not in time). The move ends there like EvDeadline, but
	// the call may still read the handler: the object stays held until it
	// returns (ActReopenAfterSnapshot). The captured queue is back in the
	// object.
	EvDeadlineInSnapshot
	// EvCancelInSnapshot: the same for a move cancelled (its caller, the
	// node's halt) while the snapshot adapter was in its call.
	EvCancelInSnapshot
)

var sourceEventNames = []string{"", "begin", "secured", "secureFailed", "captured", "captureFailed",
	"recorded", "recordRefused", "relayReady", "targetFailed", "streamFailed", "deadline", "cancel",
	"cutoverSubmitted", "released", "reservationGone", "ownerIsTarget", "ownerIsSource", "commitSeen", "secureUnknown",
	"ownerGone", "ownerIsOther", "snapshotFailed", "deadlineInSnapshot", "cancelInSnapshot"}

func (e SourceEvent) String() string { return enumName(e, sourceEventNames, "SourceEvent") }

// SourceAction is one step the caller performs, in the order returned.
type SourceAction uint8

// Source actions.
const (
	// ActSecureCapacity: secure the target's capacity under this move's
	// Reservation ID (§8.1); answer EvSecured / EvSecureFailed.
	ActSecureCapacity SourceAction = iota + 1
	// ActHoldAndCapture: close dispatch (reception continues into the
	// ingress hold), wait for the running turn, capture queue, timers and —
	// for Preserve — state; answer EvCaptured / EvCaptureFailed.
	ActHoldAndCapture
	// ActRecordCaptured: write the Captured stage with the target linked;
	// answer EvRecorded / EvRecordRefused.
	ActRecordCaptured
	// ActStreamRestore: send the Restore request (40) and its chunks (52) on
	// the ordered connection; answer EvRelayReady / EvTargetFailed /
	// EvStreamFailed (or EvDeadline / EvCancel).
	ActStreamRestore
	// ActRelayHold: relay the ingress hold in arrival order on the same
	// connection, then ActSendCutover.
	ActRelayHold
	// ActSendCutover: send the cutover (54) one-way with the relayed count
	// and digest; answer EvCutoverSubmitted. Nobody waits for a reply.
	ActSendCutover
	// ActKeepFollow: record source→target for Message Follow (§7.3) and
	// route what still arrives to the target.
	ActKeepFollow
	// ActFreePayload: drop the captured payload kept in memory (§1.3 step 8).
	ActFreePayload
	// ActSendCancel: tell the target (55) to discard its temporary queue and
	// assembly staging of this binding (§9.4 steps 2 and 4).
	ActSendCancel
	// ActReleaseCapacity: release the reservation; answer EvReleased /
	// EvReservationGone.
	ActReleaseCapacity
	// ActReadOwner: re-read the authority row; answer EvOwnerIsTarget /
	// EvOwnerIsSource / EvOwnerGone / EvOwnerIsOther.
	ActReadOwner
	// ActRequeue: put the captured work back in front of the ingress hold,
	// in original order, and re-arm the timers (§9.4 step 2).
	ActRequeue
	// ActSessionAbort: send command 44 abort one-way to a bound Session's
	// owner, if any (§9.4 step 3). Nobody waits for an apply reply.
	ActSessionAbort
	// ActForgetProgress: drop the move's in-memory progress (§9.4 step 5).
	ActForgetProgress
	// ActReopen: reopen dispatch (§9.4 step 6).
	ActReopen
	// ActAwaitCommit: read the store until it names the target (answer
	// EvCommitSeen) or the deadline passes (EvDeadline).
	ActAwaitCommit
	// ActRecover: drop the Message Follow entry and restore the object on
	// the source from the kept payload and the relayed messages.
	ActRecover
	// ActDiscard: the object was removed from the mesh during the move:
	// drop what the source still holds of it (the held instance, the
	// Message Follow entry) without serving it again — its requests
	// answered closed, except those a target that may have committed was
	// given (Handover) — and log it.
	ActDiscard
	// ActHandOver: the object's record names an owner the move did not
	// make (SrcOwnedElsewhere): record Message Follow to that owner and
	// hand it, in order, the messages the source took in, as Handover
	// says; the source serves the object no more.
	ActHandOver
	// ActReopenAfterSnapshot: ActReopen for a move that ended while the
	// snapshot adapter was still in its call (EvDeadlineInSnapshot,
	// EvCancelInSnapshot): the move ends now, but the object stays held
	// here — no turn runs while the adapter may still read the handler —
	// until the call returns; its result is then discarded and dispatch
	// reopens. The object stays this node's throughout (§9.4).
	ActReopenAfterSnapshot
)

var sourceActionNames = []string{"", "secureCapacity", "holdAndCapture", "recordCaptured", "streamRestore",
	"relayHold", "sendCutover", "keepFollow", "freePayload", "sendCancel", "releaseCapacity", "readOwner",
	"requeue", "sessionAbort", "forgetProgress", "reopen", "awaitCommit", "recover", "discard", "handOver",
	"reopenAfterSnapshot"}

func (a SourceAction) String() string { return enumName(a, sourceActionNames, "SourceAction") }

// Reason says why a move did not end Moved.
type Reason uint8

// Reasons.
const (
	ReasonNone Reason = iota
	// ReasonDisabled: the object's policy is DisableRelocation (§1.3 table).
	ReasonDisabled
	// ReasonCapacity: the target capacity could not be secured.
	ReasonCapacity
	// ReasonObjectGone: the object closed before capture finished.
	ReasonObjectGone
	// ReasonRecordChanged: the authority record changed before Captured.
	ReasonRecordChanged
	// ReasonTargetFailed: the target answered an explicit failure.
	ReasonTargetFailed
	// ReasonStreamFailed: the Restore stream could not be delivered.
	ReasonStreamFailed
	// ReasonDeadline: the move's deadline passed before relay-ready.
	ReasonDeadline
	// ReasonCancelled: the caller cancelled before relay-ready.
	ReasonCancelled
	// ReasonTargetLost: the target never committed after relay-ready;
	// the source took the object back (SrcRecovered).
	ReasonTargetLost
	// ReasonStoreUnconfirmed: the store did not confirm a write of the
	// move (its result lost, the re-read failed too); the move was
	// cancelled and its reservation released.
	ReasonStoreUnconfirmed
	// ReasonLeftToTarget: the source node stopped while the move's
	// reservation release was unconfirmed; the target may still commit,
	// so the object was left to it (its record kept), neither taken back
	// nor removed. Set by the driver, not the machine.
	ReasonLeftToTarget
	// ReasonRemoved: the object's authority record was removed from the
	// store during the move (an operator's ctl reclaim, the reclaim sweep
	// after this node's lease ended, a deleted row): no node owns it any
	// more, and neither the source nor the target serves it (SrcRemoved).
	ReasonRemoved
	// ReasonOwnerChanged: the object's authority record names an owner
	// this move did not make (SrcOwnedElsewhere): not moved, and no longer
	// served here.
	ReasonOwnerChanged
	// ReasonSnapshotFailed: the application's snapshot adapter failed or
	// panicked (PreserveStateWith); the object stays served here, as it
	// was. Before, this read "objectGone", as if the object had ended.
	ReasonSnapshotFailed
)

var reasonNames = []string{"none", "relocationDisabled", "capacity", "objectGone", "recordChanged",
	"targetFailed", "streamFailed", "deadlineExceeded", "cancelled", "targetLost", "storeUnconfirmed", "leftToTarget",
	"removed", "ownerChanged", "snapshotFailed"}

func (r Reason) String() string { return enumName(r, reasonNames, "Reason") }

// Source is one move on the source node. The zero value is not usable;
// use NewSource.
type Source struct {
	policy Policy
	state  SourceState
	reason Reason
	// captured: the queue was taken out of the object, so a cancellation
	// must put it back; sent: the target may hold staging for this binding;
	// relayed: relay-ready was accepted, the object left the source;
	// released: a release deleted the reservation row, so the target,
	// whose owner CAS needs that row, had not committed and never will.
	// snapshotLate: the move ended while the snapshot adapter was still
	// in its call, so the reopen waits for that call to return.
	captured, sent, relayed, released, snapshotLate bool
}

// NewSource returns the machine of one move of an object with policy p.
func NewSource(p Policy) *Source { return &Source{policy: p} }

// State returns where the move stands.
func (s *Source) State() SourceState { return s.state }

// Reason returns why the move did not end Moved (ReasonNone while running
// or once moved).
func (s *Source) Reason() Reason { return s.reason }

// MayHaveCommitted reports whether the target can have committed this move:
// the Restore was sent (a target without it has nothing to commit) and no
// release deleted the reservation (its owner CAS needs that row). Only
// then may a record that no longer names the source mean Moved; the
// caller asks before it infers the target's commit from a consumed
// reservation (a row gone while this node still holds its lease).
func (s *Source) MayHaveCommitted() bool { return s.sent && !s.released }

// Step applies one event and returns the actions to perform, in order.
func (s *Source) Step(ev SourceEvent) ([]SourceAction, error) {
	switch s.state {
	case SrcStart:
		if ev != EvBegin {
			break
		}
		if s.policy == Disable {
			// §1.3: a DisableRelocation cross-node move is rejected before
			// Capture — and before any store change.
			return s.refuse(ReasonDisabled)
		}
		s.state = SrcSecuring
		return []SourceAction{ActSecureCapacity}, nil
	case SrcSecuring:
		switch ev {
		case EvSecured:
			s.state = SrcCapturing
			return []SourceAction{ActHoldAndCapture}, nil
		case EvSecureFailed:
			// Nothing was held or written, but the move has begun (the
			// shell marked the object moving: Destroy/Close and other
			// moves wait for its end): Reopen ends it, as after any
			// refusal past EvBegin. Without it the object stayed marked
			// moving for good — every later move or close answered
			// ErrMoving.
			acts, err := s.refuse(ReasonCapacity)
			return append(acts, ActReopen), err
		case EvDeadline, EvCancel:
			// The reservation may or may not have been written: release it
			// (a missing row is nothing to do). Nothing was held.
			return s.cancel(reasonOf(ev))
		case EvSecureUnknown:
			// The same: refused as "capacity" with nothing released, the
			// reservation held the target's slots for good while both
			// nodes lived.
			return s.cancel(ReasonStoreUnconfirmed)
		}
	case SrcCapturing:
		switch ev {
		case EvCaptured:
			s.captured = true
			s.state = SrcRecording
			return []SourceAction{ActRecordCaptured}, nil
		case EvCaptureFailed:
			return s.cancel(ReasonObjectGone)
		case EvSnapshotFailed:
			return s.cancel(ReasonSnapshotFailed)
		case EvDeadline, EvCancel:
			// A turn of the object was still running: nothing was
			// captured, dispatch is open again; release the reservation.
			return s.cancel(reasonOf(ev))
		case EvDeadlineInSnapshot, EvCancelInSnapshot:
			// The snapshot adapter has not returned: the move ends as at
			// its deadline (nothing was sent, the target cannot commit
			// once the reservation is released), but turns running now
			// would run beside the adapter's read of the handler — the
			// reopen waits for its call to return.
			s.snapshotLate = true
			if ev == EvDeadlineInSnapshot {
				return s.cancel(ReasonDeadline)
			}
			return s.cancel(ReasonCancelled)
		}
	case SrcRecording:
		switch ev {
		case EvRecorded:
			s.sent = true
			s.state = SrcStreaming
			return []SourceAction{ActStreamRestore}, nil
		case EvRecordRefused:
			return s.cancel(ReasonRecordChanged)
		case EvDeadline, EvCancel:
			return s.cancel(reasonOf(ev))
		}
	case SrcStreaming:
		switch ev {
		case EvRelayReady:
			s.state, s.relayed = SrcRelaying, true
			return []SourceAction{ActRelayHold, ActSendCutover}, nil
		case EvTargetFailed:
			return s.cancel(ReasonTargetFailed)
		case EvStreamFailed:
			return s.cancel(ReasonStreamFailed)
		case EvDeadline, EvCancel:
			return s.cancel(reasonOf(ev))
		}
	case SrcRelaying:
		if ev == EvCutoverSubmitted {
			s.state = SrcAwaiting
			return []SourceAction{ActKeepFollow, ActAwaitCommit}, nil
		}
		// Deadline, cancel or a target failure after relay-ready change
		// nothing: the source never reopens once relay-ready was accepted.
	case SrcAwaiting:
		switch ev {
		case EvCommitSeen:
			s.state = SrcMoved
			return []SourceAction{ActFreePayload}, nil
		case EvDeadline, EvTargetFailed:
			// The target had until the same deadline for its CAS (or the
			// record is gone: the shell stops waiting), or it said it
			// stopped and fenced the move. Take the object back only if
			// the target can never commit: releasing the reservation its
			// CAS needs decides that — the target's word is not taken
			// for it (a release that finds the reservation gone reads
			// the record, which names the target if its CAS applied).
			s.state = SrcReclaiming
			return []SourceAction{ActReleaseCapacity}, nil
		}
	case SrcReclaiming:
		switch ev {
		case EvReleased:
			// The target can no longer commit; the object is taken back
			// only if its record still names the source — one read on
			// this failure path. Before, the source took it back without
			// reading, and served an object whose record had been removed
			// (reclaimed) while it waited: an instance nobody could reach
			// through the store.
			s.state, s.released = SrcConfirming, true
			return []SourceAction{ActReadOwner}, nil
		case EvReservationGone:
			s.state = SrcConfirming
			return []SourceAction{ActReadOwner}, nil
		}
	case SrcCancelling:
		switch ev {
		case EvReleased:
			if s.captured {
				// The target can no longer commit, but the held object
				// is reopened only if its record still names the source
				// — one read, on this failure path only. Before, it was
				// reopened unread: a record removed meanwhile (ctl
				// reclaim, a deleted row; or the reason RecordCaptured
				// was refused) left it serving here with no record
				// naming it.
				s.state, s.released = SrcConfirming, true
				return []SourceAction{ActReadOwner}, nil
			}
			// Nothing was held: the object never stopped serving.
			return s.reopen()
		case EvReservationGone:
			if !s.captured {
				// Nothing was held (the reservation was never written,
				// or the capture failed): the object never stopped.
				return s.reopen()
			}
			// The held object is reopened only if its record still
			// names the source, as after a release. Before a Restore
			// was sent the target cannot have committed, so a read
			// naming anyone else is not Moved (MayHaveCommitted).
			// Before, a move whose reservation was gone before any
			// Restore (released by a reclaim, or by this move's own
			// release whose answer was lost) reopened the held object
			// unread, and served it with no record naming it.
			s.state = SrcConfirming
			return []SourceAction{ActReadOwner}, nil
		}
	case SrcConfirming:
		switch ev {
		case EvOwnerIsTarget:
			if !s.MayHaveCommitted() {
				// No Restore was sent, or the release deleted the
				// reservation the target's CAS needs: the target did
				// not commit this move, whatever the row says. Before,
				// this read as Moved.
				return s.ownedElsewhere()
			}
			// The target's CAS won the race with the release: the move
			// happened. The captured work is the target's now; whatever
			// arrived since follows it.
			s.state, s.reason = SrcMoved, ReasonNone
			if s.relayed {
				return []SourceAction{ActFreePayload}, nil // already following
			}
			return []SourceAction{ActKeepFollow, ActFreePayload}, nil
		case EvOwnerIsSource:
			if s.relayed {
				return s.recover()
			}
			return s.reopen()
		case EvOwnerGone:
			// Removed from the mesh during the move: nobody owns it. Not
			// Moved (the store never named the target), and not taken
			// back (no record names the source).
			s.state, s.reason = SrcRemoved, ReasonRemoved
			return []SourceAction{ActDiscard, ActFreePayload}, nil
		case EvOwnerIsOther:
			return s.ownedElsewhere()
		}
	}
	return nil, fmt.Errorf("%w: %s in %s", ErrUnexpected, ev, s.state)
}

// ownedElsewhere ends a move whose record names an owner the move did not
// make: not Moved, not taken back or reopened (that owner serves it, or
// will); what the source took in is handed to that owner (Handover).
func (s *Source) ownedElsewhere() ([]SourceAction, error) {
	s.state, s.reason = SrcOwnedElsewhere, ReasonOwnerChanged
	return []SourceAction{ActHandOver, ActFreePayload}, nil
}

// Disposition is what ActHandOver (or ActDiscard) does with one kind of
// message of one part of what the source took in during the move.
type Disposition uint8

// Dispositions.
const (
	// Keep: nothing to do here (the part is empty in this state).
	Keep Disposition = iota
	// PassOn: send it to the owner the record names, in order with the
	// rest (Message Follow, §7.3): nobody else can run it.
	PassOn
	// RefuseNotRun: answer the request with a typed refusal saying the
	// object moved and the request did not run (the requester's send is
	// then retried on the route the store names). Used for requests the
	// target was given but cannot have run (a target failing after
	// relay-ready answered them itself until 2026-12-07: one passed on
	// and run elsewhere could then read "failed" although it ran).
	RefuseNotRun
	// LeaveToTarget: the target was given it and may have committed and
	// run it: the source neither passes it on (it would run twice) nor
	// answers it (the target's answer is the one; a target that failed
	// after relay-ready, which answers only what the source never had,
	// or vanished leaves the request to its deadline — whether it ran is
	// not known here).
	LeaveToTarget
	// Closed: the object is gone from the mesh (SrcRemoved) and nobody
	// ran it or can: a request is answered that the object closed, a
	// one-way message is dropped.
	Closed
)

var dispositionNames = []string{"keep", "passOn", "refuseNotRun", "leaveToTarget", "closed"}

func (d Disposition) String() string { return enumName(d, dispositionNames, "Disposition") }

// Handover says what ActHandOver does with the messages the source took
// in during the move, part by part; the parts are handed over in this
// order, the order they would have run in here.
type Handover struct {
	// Captured is the captured queue: in the Restore payload once a
	// Restore was sent.
	Captured Fate
	// Held is the ingress hold of an object still held here (the move
	// ended before relay-ready): never the target's.
	Held Fate
	// Relayed is, after relay-ready, the relayed hold, the leftovers
	// passed on at the cutover and the one-way messages Message Follow
	// passed on since: all the target's.
	Relayed Fate
}

// Fate is the disposition of a part's one-way messages and of its
// requests.
type Fate struct{ OneWay, Requests Disposition }

var (
	passOn  = Fate{PassOn, PassOn}
	notRun  = Fate{PassOn, RefuseNotRun}
	targets = Fate{LeaveToTarget, LeaveToTarget}
	closed  = Fate{Closed, Closed}
)

// Handover returns what ActHandOver does; meaningful in SrcOwnedElsewhere
// (and in SrcRemoved for ActDiscard, where nothing can be passed on: what
// the target may have run is left to it, the rest is Closed). What the
// target never had goes on to the owner the record names: nobody else has
// it. What it had goes on too (one-way messages; requests are
// refused as not run) when it cannot have committed this move
// (MayHaveCommitted false: no Restore, or a release deleted the
// reservation its owner CAS needs); it is left to the target when it may
// have — the reservation found consumed while this node's owner lease had
// ended, where the target's CAS and a reclaim look the same: run there
// once, or lost with a target that did not commit, never run twice.
func (s *Source) Handover() Handover {
	var h Handover
	never, given := passOn, notRun
	if s.state == SrcRemoved {
		never, given = closed, closed
	}
	if s.MayHaveCommitted() {
		given = targets
	}
	switch {
	case !s.captured:
	case !s.sent:
		h.Captured, h.Held = never, never
	case !s.relayed:
		h.Captured, h.Held = given, never
	default:
		h.Captured, h.Relayed = given, given
	}
	return h
}

func reasonOf(ev SourceEvent) Reason {
	if ev == EvDeadline {
		return ReasonDeadline
	}
	return ReasonCancelled
}

// recover ends a move whose target can no longer commit after the object
// left the source: the source restores it from what it kept.
func (s *Source) recover() ([]SourceAction, error) {
	s.state, s.reason = SrcRecovered, ReasonTargetLost
	return []SourceAction{ActRecover, ActFreePayload}, nil
}

func (s *Source) refuse(r Reason) ([]SourceAction, error) {
	s.state, s.reason = SrcRefused, r
	return nil, nil
}

// cancel starts the §9.4 cleanup. The release comes before the queue is
// put back: the target's owner CAS needs the reservation row, so once the
// release is confirmed the target can no longer commit, and only then is it
// safe to reopen. If the release finds the row gone, the authority row says
// whether the target committed (see SrcConfirming).
func (s *Source) cancel(r Reason) ([]SourceAction, error) {
	s.state, s.reason = SrcCancelling, r
	var acts []SourceAction
	if s.sent {
		acts = append(acts, ActSendCancel)
	}
	return append(acts, ActReleaseCapacity), nil
}

// reopen finishes the §9.4 cleanup in the spec's order: captured work back
// in front of the hold, the Session told (abort, one-way), progress
// forgotten, dispatch reopened — never before the others.
func (s *Source) reopen() ([]SourceAction, error) {
	var acts []SourceAction
	if s.captured {
		acts = append(acts, ActRequeue, ActSessionAbort)
	}
	if s.snapshotLate {
		acts = append(acts, ActForgetProgress, ActReopenAfterSnapshot)
	} else {
		acts = append(acts, ActForgetProgress, ActReopen)
	}
	s.state = SrcReopened
	if !s.captured {
		// Nothing was held: the object never stopped; Reopen is a no-op
		// for the runtime but ends the move.
		s.state = SrcRefused
	}
	return acts, nil
}
