package relocation

import (
	"fmt"
	"time"
)

// CutoverGrace is how long after its relay-ready answer the target waits
// for the cutover before running the owner CAS anyway (§1.3 step 6, §8).
const CutoverGrace = 1000 * time.Millisecond

// TargetState is where one move attempt stands on the target node.
type TargetState uint8

// Target states. Owner, Failed and Cancelled are final.
const (
	TgtStart TargetState = iota
	// TgtPreparing: the temporary queue is registered and chunks are being
	// assembled while the authority record is read by object id and the
	// expected AuthorityOwnerGeneration (§9.1 last paragraph). Nothing is
	// built before both are done.
	TgtPreparing
	// TgtRestoring: payload verified and authority matched; the instance is
	// being built hidden (factory, snapshot restore, queue and timers).
	TgtRestoring
	// TgtRelay: relay-ready answered; relayed records and direct arrivals
	// collect; waiting for the cutover or CutoverGrace.
	TgtRelay
	// TgtCommitting: the owner CAS runs on the first-read StoreVersion; an
	// unanswered CAS is re-read with the same key and version (§10).
	TgtCommitting
	// TgtDeciding: the Restore deadline passed while a CAS answer was
	// unknown. No CAS is sent any more; the instance stays hidden and the
	// record is read until it shows the CAS applied (open) or that it can
	// never apply (remove) — docs/RELOCATION.md §5, "A CAS still in flight
	// at the deadline".
	TgtDeciding
	// TgtOwner: the CAS named this node; queues merged, dispatch open. Final.
	TgtOwner
	// TgtFailed: the attempt ended without ownership; everything prepared was
	// removed and nothing was dispatched. Final.
	TgtFailed
	// TgtCancelled: the source cancelled before relay-ready (55). Final.
	TgtCancelled
)

var targetStateNames = []string{"start", "preparing", "restoring", "relay", "committing", "deciding", "owner", "failed", "cancelled"}

func (s TargetState) String() string { return enumName(s, targetStateNames, "TargetState") }

// Final reports whether no event changes s any more.
func (s TargetState) Final() bool { return s == TgtOwner || s == TgtFailed || s == TgtCancelled }

// TargetEvent is what happened, fed to Target.Step.
type TargetEvent uint8

// Target events.
const (
	// EvPrepare: a Restore request (40) with a new binding arrived.
	EvPrepare TargetEvent = iota + 1
	// EvAuthorityMatched: the record exists at the expected generations and
	// names this move (Captured, this target).
	EvAuthorityMatched
	// EvAuthorityMismatch: missing, other generation, other move.
	EvAuthorityMismatch
	// EvAssembled: every chunk arrived and the CRC-32C matched.
	EvAssembled
	// EvAssemblyFailed: checksum or length mismatch, or a conflicting
	// retransmission (§9.1): never restored from a partial payload.
	EvAssemblyFailed
	// EvRestored: the hidden instance is built with queue and timers.
	EvRestored
	// EvRestoreFailed: factory or snapshot restore failed.
	EvRestoreFailed
	// EvCancelled: the source's cancel (55) for this binding.
	EvCancelled
	// EvCutover: the cutover (54) arrived and its relayed count and digest
	// match what was relayed.
	EvCutover
	// EvCutoverMismatch: the cutover's count or digest differs from what
	// arrived.
	EvCutoverMismatch
	// EvGraceElapsed: CutoverGrace passed since relay-ready.
	EvGraceElapsed
	// EvCommitted: the CAS applied (or a re-read found this move's commit).
	EvCommitted
	// EvConflict: another owner, generation or move holds the record.
	EvConflict
	// EvUnknown: the CAS answer was lost; re-read and retry (§10).
	EvUnknown
	// EvExpired: the Restore deadline passed.
	EvExpired
	// EvHalted: the node is stopping; nothing more can be decided.
	EvHalted
	// EvSourceEnded: the source's node run is known to have ended (§9.1
	// "Source terminates during Preparing or capture"): before relay-ready
	// nothing of the move can go on — no chunk, no cutover comes — so the
	// attempt ends as the source's cancel would end it (everything
	// prepared removed, ActRemove), and a failure is answered besides: a
	// source run judged ended that still reads its connection stops
	// waiting for relay-ready and takes its object back. After
	// relay-ready it is not taken: the target may commit then (§9.1, §9.4).
	EvSourceEnded
)

var targetEventNames = []string{"", "prepare", "authorityMatched", "authorityMismatch", "assembled",
	"assemblyFailed", "restored", "restoreFailed", "cancelled", "cutover", "cutoverMismatch", "graceElapsed",
	"committed", "conflict", "unknown", "expired", "halted", "sourceEnded"}

func (e TargetEvent) String() string { return enumName(e, targetEventNames, "TargetEvent") }

// TargetAction is one step the caller performs, in the order returned.
type TargetAction uint8

// Target actions.
const (
	// ActRegisterTemp: register the relocation temporary queue so arrivals
	// for the object collect there (§1.3 step 5), before anything else.
	ActRegisterTemp TargetAction = iota + 1
	// ActBeginAssembly: start chunk assembly for the binding.
	ActBeginAssembly
	// ActReadAuthority: read the record by object id and the expected
	// AuthorityOwnerGeneration; keep its StoreVersion as the first read.
	ActReadAuthority
	// ActBuildHidden: run the factory / snapshot restore, restore queue and
	// timers into an instance not exposed to dispatch.
	ActBuildHidden
	// ActReplyRelayReady: answer 53 relay-ready.
	ActReplyRelayReady
	// ActArmGrace: start the CutoverGrace timer.
	ActArmGrace
	// ActReplyFailed: answer 53 failed with the reason.
	ActReplyFailed
	// ActCAS: run the owner CAS (NewOwner) on the first-read StoreVersion,
	// bound to the RelocationId, target attempt and reservation.
	ActCAS
	// ActRetryCAS: re-read the same key and version, CAS again if needed.
	ActRetryCAS
	// ActOpen: merge saved work, pre-cutover relay and the temporary queue
	// in that order, switch to the regular route with dispatch closed, run
	// the lifecycle callbacks, open dispatch, send the Session commit (44),
	// record the move as completed (§9.2).
	ActOpen
	// ActRemove: discard the hidden instance (if built), the temporary
	// queue without running it, and the assembly staging.
	ActRemove
	// ActDecide: read the record (no CAS) until it shows whether a CAS of
	// this attempt applied (EvCommitted) or never can (EvConflict).
	ActDecide
)

var targetActionNames = []string{"", "registerTemp", "beginAssembly", "readAuthority", "buildHidden",
	"replyRelayReady", "armGrace", "replyFailed", "cas", "retryCas", "open", "remove", "decide"}

func (a TargetAction) String() string { return enumName(a, targetActionNames, "TargetAction") }

// TargetFailure says why a target attempt ended Failed.
type TargetFailure uint8

// Target failures.
const (
	TgtFailNone TargetFailure = iota
	TgtFailAuthority
	TgtFailAssembly
	TgtFailRestore
	TgtFailRelayMismatch
	TgtFailConflict
	// TgtFailLocationUpdate: ownership was not confirmed before the Restore
	// deadline: the spec's location_update_failed (§10) — decided once the
	// record shows no CAS of this attempt can apply any more.
	TgtFailLocationUpdate
	TgtFailDeadline
	// TgtFailSourceEnded: the source's node run ended before relay-ready
	// (EvSourceEnded).
	TgtFailSourceEnded
)

var targetFailureNames = []string{"none", "authorityMismatch", "assemblyFailed", "restoreFailed",
	"relayMismatch", "conflict", "location_update_failed", "deadlineExceeded", "sourceEnded"}

func (f TargetFailure) String() string { return enumName(f, targetFailureNames, "TargetFailure") }

// Target is one move attempt on the target node (one binding: RelocationId,
// target attempt, source fence). A different attempt is a different Target.
type Target struct {
	state              TargetState
	failure            TargetFailure
	authorityOK, whole bool // both needed before the instance is built
}

// NewTarget returns the machine of one attempt.
func NewTarget() *Target { return &Target{} }

// State returns where the attempt stands.
func (t *Target) State() TargetState { return t.state }

// Failure returns why the attempt failed (TgtFailNone otherwise).
func (t *Target) Failure() TargetFailure { return t.failure }

// Step applies one event and returns the actions to perform, in order.
func (t *Target) Step(ev TargetEvent) ([]TargetAction, error) {
	if ev == EvHalted {
		if t.state == TgtCommitting || t.state == TgtDeciding {
			// The node is stopping: nothing can be read or decided any
			// more; what it hosted is swept by the §11 shutdown.
			return t.fail(TgtFailLocationUpdate, false), nil
		}
		ev = EvExpired // before the CAS a stopping node ends the attempt as its deadline would
	}
	switch t.state {
	case TgtStart:
		if ev == EvPrepare {
			t.state = TgtPreparing
			return []TargetAction{ActRegisterTemp, ActBeginAssembly, ActReadAuthority}, nil
		}
	case TgtPreparing:
		switch ev {
		case EvAuthorityMatched:
			t.authorityOK = true
			return t.maybeBuild(), nil
		case EvAssembled:
			t.whole = true
			return t.maybeBuild(), nil
		case EvAuthorityMismatch:
			return t.fail(TgtFailAuthority, true), nil
		case EvAssemblyFailed:
			return t.fail(TgtFailAssembly, true), nil
		case EvCancelled:
			return t.cancel(), nil
		case EvSourceEnded:
			return t.fail(TgtFailSourceEnded, true), nil
		case EvExpired:
			return t.fail(TgtFailDeadline, true), nil
		}
	case TgtRestoring:
		switch ev {
		case EvRestored:
			t.state = TgtRelay
			return []TargetAction{ActReplyRelayReady, ActArmGrace}, nil
		case EvRestoreFailed:
			return t.fail(TgtFailRestore, true), nil
		case EvCancelled:
			return t.cancel(), nil
		case EvSourceEnded:
			return t.fail(TgtFailSourceEnded, true), nil
		case EvExpired:
			return t.fail(TgtFailDeadline, true), nil
		}
	case TgtRelay:
		switch ev {
		case EvCutover, EvGraceElapsed:
			t.state = TgtCommitting
			return []TargetAction{ActCAS}, nil
		case EvCutoverMismatch:
			// Records were lost or altered between relay and cutover: do
			// not expose an object whose queue is not what the source sent.
			// No owner CAS of this attempt was sent (ActCAS comes only on
			// the way to TgtCommitting, and a mismatch after it is a late
			// event), so none can ever apply: the source, which awaits the
			// commit, is told at once (a second 53 failed) instead of
			// waiting for its deadline. Its own release and owner read
			// still decide whether it takes the object back.
			return t.fail(TgtFailRelayMismatch, true), nil
		case EvCancelled:
			// The source gave up before it accepted relay-ready; its
			// release also makes the CAS impossible. Remove.
			return t.cancel(), nil
		case EvExpired:
			return t.fail(TgtFailLocationUpdate, false), nil
		}
	case TgtCommitting:
		switch ev {
		case EvCommitted:
			t.state = TgtOwner
			return []TargetAction{ActOpen}, nil
		case EvConflict:
			return t.fail(TgtFailConflict, false), nil
		case EvUnknown:
			return []TargetAction{ActRetryCAS}, nil
		case EvExpired:
			// A CAS was sent and its answer is not known (§10): it may
			// still apply. Removing now would leave a record naming this
			// node for an object it no longer has; decide by reading.
			t.state = TgtDeciding
			return []TargetAction{ActDecide}, nil
		}
	case TgtDeciding:
		switch ev {
		case EvCommitted:
			t.state = TgtOwner
			return []TargetAction{ActOpen}, nil
		case EvConflict:
			return t.fail(TgtFailLocationUpdate, false), nil
		case EvUnknown, EvExpired:
			return nil, nil // the decide loop runs until it knows
		}
	}
	return nil, fmt.Errorf("%w: %s in %s", ErrUnexpected, ev, t.state)
}

func (t *Target) maybeBuild() []TargetAction {
	if !t.authorityOK || !t.whole {
		return nil
	}
	t.state = TgtRestoring
	return []TargetAction{ActBuildHidden}
}

// fail ends the attempt: before relay-ready the source is told (53 failed)
// so it can reopen; afterwards nobody is waiting for an answer, except
// after a relay mismatch, which ends an attempt that never sent its CAS:
// then a second 53 failed ends the source's wait for the commit. The told
// source reopens at once, so the hidden instance, temporary queue and
// assembly staging go first (§9.4: the source must not accept new work
// before that cleanup finishes) — told first, the source's result could
// come while this node still hosted the object incoming.
func (t *Target) fail(f TargetFailure, reply bool) []TargetAction {
	t.state, t.failure = TgtFailed, f
	if reply {
		return []TargetAction{ActRemove, ActReplyFailed}
	}
	return []TargetAction{ActRemove}
}

func (t *Target) cancel() []TargetAction {
	t.state = TgtCancelled
	return []TargetAction{ActRemove}
}
