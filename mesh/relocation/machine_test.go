package relocation

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// src abbreviates the source's action lists in the tables.
type sa = []SourceAction
type ta = []TargetAction

// steps feeds events to a machine's Step in order and returns all the
// actions it answered. An event its state does not expect (ErrUnexpected)
// is part of a scenario; any other error fails the test.
func steps[E fmt.Stringer, A any](t *testing.T, step func(E) ([]A, error), events []E) []A {
	t.Helper()
	var got []A
	for _, ev := range events {
		acts, err := step(ev)
		if err != nil && !errors.Is(err, ErrUnexpected) {
			t.Fatalf("%s: %v", ev, err)
		}
		got = append(got, acts...)
	}
	return got
}

// TestSourceTable walks the source machine through the spec's paths: the
// normal order (§1.3 steps 2–8), the §9.1 failure points and the §9.4
// cancellation order.
func TestSourceTable(t *testing.T) {
	happy := []SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvCommitSeen}
	cancelTail := sa{ActRequeue, ActSessionAbort, ActForgetProgress, ActReopen}
	tests := []struct {
		name   string
		policy Policy
		events []SourceEvent
		acts   sa // every action returned, in order
		final  SourceState
		reason Reason
	}{
		{"normal move §1.3", Preserve, happy,
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActFreePayload}, SrcMoved, ReasonNone},
		{"recreate moves the same way (state is the caller's business)", Recreate, happy,
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActFreePayload}, SrcMoved, ReasonNone},
		{"DisableRelocation refused before capture and before any store change", Disable,
			[]SourceEvent{EvBegin}, nil, SrcRefused, ReasonDisabled},
		{"no capacity: nothing held, the move ends (reopen)", Preserve, []SourceEvent{EvBegin, EvSecureFailed},
			sa{ActSecureCapacity, ActReopen}, SrcRefused, ReasonCapacity},
		{"capacity batch of unknown outcome: the reservation is released, nothing held", Preserve,
			[]SourceEvent{EvBegin, EvSecureUnknown, EvReleased},
			sa{ActSecureCapacity, ActReleaseCapacity, ActForgetProgress, ActReopen}, SrcRefused, ReasonStoreUnconfirmed},
		{"deadline while securing: the reservation is released, nothing held", Preserve,
			[]SourceEvent{EvBegin, EvDeadline, EvReleased},
			sa{ActSecureCapacity, ActReleaseCapacity, ActForgetProgress, ActReopen}, SrcRefused, ReasonDeadline},
		{"§9.1 source object gone during capture", Preserve, []SourceEvent{EvBegin, EvSecured, EvCaptureFailed, EvReleased},
			sa{ActSecureCapacity, ActHoldAndCapture, ActReleaseCapacity, ActForgetProgress, ActReopen}, SrcRefused, ReasonObjectGone},
		{"deadline while a turn runs: nothing captured, the reservation is released", Preserve, []SourceEvent{EvBegin, EvSecured, EvDeadline, EvReleased},
			sa{ActSecureCapacity, ActHoldAndCapture, ActReleaseCapacity, ActForgetProgress, ActReopen}, SrcRefused, ReasonDeadline},
		{"the snapshot adapter fails during capture: the object stays, not gone", Preserve, []SourceEvent{EvBegin, EvSecured, EvSnapshotFailed, EvReleased},
			sa{ActSecureCapacity, ActHoldAndCapture, ActReleaseCapacity, ActForgetProgress, ActReopen}, SrcRefused, ReasonSnapshotFailed},
		{"the deadline passes while the snapshot adapter is in its call: the reopen waits for the call", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvDeadlineInSnapshot, EvReleased},
			sa{ActSecureCapacity, ActHoldAndCapture, ActReleaseCapacity, ActForgetProgress, ActReopenAfterSnapshot}, SrcRefused, ReasonDeadline},
		{"... and a release that finds the reservation gone: the same (nothing was sent)", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvDeadlineInSnapshot, EvReservationGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActReleaseCapacity, ActForgetProgress, ActReopenAfterSnapshot}, SrcRefused, ReasonDeadline},
		{"cancelled while the snapshot adapter is in its call", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCancelInSnapshot, EvReleased},
			sa{ActSecureCapacity, ActHoldAndCapture, ActReleaseCapacity, ActForgetProgress, ActReopenAfterSnapshot}, SrcRefused, ReasonCancelled},
		{"§9.1 required information disappears right before Captured", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecordRefused, EvReleased, EvOwnerIsSource},
			append(sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActReleaseCapacity, ActReadOwner}, cancelTail...),
			SrcReopened, ReasonRecordChanged},
		{"§9.1 target explicit failure before relay-ready (§9.4 order)", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvTargetFailed, EvReleased, EvOwnerIsSource},
			append(sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity, ActReadOwner}, cancelTail...),
			SrcReopened, ReasonTargetFailed},
		{"stream failure before relay-ready", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvStreamFailed, EvReleased, EvOwnerIsSource},
			append(sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity, ActReadOwner}, cancelTail...),
			SrcReopened, ReasonStreamFailed},
		{"explicit cancellation before relay-ready", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvCancel, EvReleased, EvOwnerIsSource},
			append(sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity, ActReadOwner}, cancelTail...),
			SrcReopened, ReasonCancelled},
		{"record removed while the object was held before relay-ready, the cancel's release succeeds: dropped, not reopened", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvCancel, EvReleased, EvOwnerGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity,
				ActReadOwner, ActDiscard, ActFreePayload}, SrcRemoved, ReasonRemoved},
		{"record removed before Captured (the refusal's cause): released, the held object dropped", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecordRefused, EvReleased, EvOwnerGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActReleaseCapacity,
				ActReadOwner, ActDiscard, ActFreePayload}, SrcRemoved, ReasonRemoved},
		{"deadline before relay-ready, release races a commit the target won", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvDeadline, EvReservationGone, EvOwnerIsTarget},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity,
				ActReadOwner, ActKeepFollow, ActFreePayload}, SrcMoved, ReasonNone},
		{"deadline before relay-ready, reservation gone but the source still owns", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvDeadline, EvReservationGone, EvOwnerIsSource},
			append(sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity,
				ActReadOwner}, cancelTail...), SrcReopened, ReasonDeadline},
		{"after relay-ready the source never reopens (§9.4 last paragraph)", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvDeadline, EvCancel, EvTargetFailed, EvCutoverSubmitted, EvCommitSeen},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActFreePayload}, SrcMoved, ReasonNone},
		{"target lost after relay-ready: the release proves it can never commit, the record still names the source: taken back", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReleased, EvOwnerIsSource},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActRecover, ActFreePayload}, SrcRecovered, ReasonTargetLost},
		{"a stopping target says it fenced the move (53 failed while the source awaits the commit): its release found gone, the record still the source's: taken back", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvTargetFailed, EvReservationGone, EvOwnerIsSource},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActRecover, ActFreePayload}, SrcRecovered, ReasonTargetLost},
		{"the target's word is not taken for it: a 53 failed while awaiting, the record names the target: moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvTargetFailed, EvReservationGone, EvOwnerIsTarget},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActFreePayload}, SrcMoved, ReasonNone},
		{"record removed while the move awaited the commit (reclaimed): released, not taken back, not moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReleased, EvOwnerGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActDiscard, ActFreePayload}, SrcRemoved, ReasonRemoved},
		{"record and reservation both removed while the move awaited the commit: not moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReservationGone, EvOwnerGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActDiscard, ActFreePayload}, SrcRemoved, ReasonRemoved},
		{"record removed before relay-ready, the cancel's release finds no reservation: the held object is dropped", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvDeadline, EvReservationGone, EvOwnerGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity,
				ActReadOwner, ActDiscard, ActFreePayload}, SrcRemoved, ReasonRemoved},
		{"a late commit wins the race with the reclaim: moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReservationGone, EvOwnerIsTarget},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActFreePayload}, SrcMoved, ReasonNone},
		{"reservation gone after relay-ready and the source still owns: take it back", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReservationGone, EvOwnerIsSource},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActRecover, ActFreePayload}, SrcRecovered, ReasonTargetLost},
		// A reservation already gone before any Restore was sent (a reclaim
		// released it, or this move's own release lost its answer): the
		// held object is reopened only after a read, and the target —
		// which never saw a Restore — cannot have committed, so nothing
		// but the source's own record reopens it, and nothing reads Moved.
		{"reservation gone before any Restore, the record still names the source: reopened after one read", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecordRefused, EvReservationGone, EvOwnerIsSource},
			append(sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActReleaseCapacity, ActReadOwner}, cancelTail...),
			SrcReopened, ReasonRecordChanged},
		{"reservation gone before any Restore, the record removed: the held object is dropped, not reopened", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecordRefused, EvReservationGone, EvOwnerGone},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActReleaseCapacity,
				ActReadOwner, ActDiscard, ActFreePayload}, SrcRemoved, ReasonRemoved},
		{"reservation gone before any Restore, the record names another node: dropped, not reopened, not moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvCancel, EvReservationGone, EvOwnerIsOther},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActReleaseCapacity,
				ActReadOwner, ActHandOver, ActFreePayload}, SrcOwnedElsewhere, ReasonOwnerChanged},
		{"reservation gone before any Restore, the record names the target: the target cannot have committed, not moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvDeadline, EvReservationGone, EvOwnerIsTarget},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActReleaseCapacity,
				ActReadOwner, ActHandOver, ActFreePayload}, SrcOwnedElsewhere, ReasonOwnerChanged},
		{"reservation gone while securing, nothing held: the move ends unread", Preserve,
			[]SourceEvent{EvBegin, EvDeadline, EvReservationGone},
			sa{ActSecureCapacity, ActReleaseCapacity, ActForgetProgress, ActReopen}, SrcRefused, ReasonDeadline},
		// A release that deleted the reservation proves the target did not
		// commit (its CAS needs the row): a record naming anyone but the
		// source then is an owner the move did not make, never Moved.
		{"cancelled before relay-ready, the release succeeds, the record names the target: not moved", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvCancel, EvReleased, EvOwnerIsTarget},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity,
				ActReadOwner, ActHandOver, ActFreePayload}, SrcOwnedElsewhere, ReasonOwnerChanged},
		{"cancelled before relay-ready, the release succeeds, the record names another node: not moved, not reopened", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvTargetFailed, EvReleased, EvOwnerIsOther},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActSendCancel, ActReleaseCapacity,
				ActReadOwner, ActHandOver, ActFreePayload}, SrcOwnedElsewhere, ReasonOwnerChanged},
		{"target lost after relay-ready, the release succeeds, the record names the target: not moved, not taken back", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReleased, EvOwnerIsTarget},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActHandOver, ActFreePayload}, SrcOwnedElsewhere, ReasonOwnerChanged},
		{"reservation gone after relay-ready, the record names another node: not moved, not taken back", Preserve,
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReservationGone, EvOwnerIsOther},
			sa{ActSecureCapacity, ActHoldAndCapture, ActRecordCaptured, ActStreamRestore, ActRelayHold, ActSendCutover,
				ActKeepFollow, ActAwaitCommit, ActReleaseCapacity, ActReadOwner, ActHandOver, ActFreePayload}, SrcOwnedElsewhere, ReasonOwnerChanged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewSource(tc.policy)
			if got := steps(t, m.Step, tc.events); !reflect.DeepEqual(got, tc.acts) {
				t.Errorf("actions\n got %v\nwant %v", got, tc.acts)
			}
			if m.State() != tc.final || m.Reason() != tc.reason {
				t.Errorf("end %s/%s, want %s/%s", m.State(), m.Reason(), tc.final, tc.reason)
			}
		})
	}
}

// TestSourceHandover: what a move whose record names an owner it did not
// make hands to that owner. What the target never had (the ingress hold of
// an object still held here; the captured queue when no Restore was sent)
// always goes on. What the target had goes on too — its requests refused
// as not run — when the target cannot have committed; when it may have
// (the reservation found consumed after this node's owner lease ended:
// the executor keeps that read an owner the move did not make), it is
// left to the target: run there once, or lost with it, never twice.
func TestSourceHandover(t *testing.T) {
	before := []SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecorded}
	after := append(append([]SourceEvent{}, before...), EvRelayReady, EvCutoverSubmitted, EvDeadline)
	all := Fate{PassOn, PassOn}
	notRun := Fate{PassOn, RefuseNotRun}
	left := Fate{LeaveToTarget, LeaveToTarget}
	closed := Fate{Closed, Closed}
	tests := []struct {
		name   string
		events []SourceEvent
		want   Handover
	}{
		{"no Restore sent: the target had nothing, everything goes on",
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvRecordRefused, EvReservationGone, EvOwnerIsOther},
			Handover{Captured: all, Held: all}},
		{"no Restore sent, the record names the target: the same",
			[]SourceEvent{EvBegin, EvSecured, EvCaptured, EvDeadline, EvReservationGone, EvOwnerIsTarget},
			Handover{Captured: all, Held: all}},
		{"held, the release succeeded: the hold goes on, so do the payload's one-way messages; its requests did not run",
			append(append([]SourceEvent{}, before...), EvCancel, EvReleased, EvOwnerIsOther),
			Handover{Captured: notRun, Held: all}},
		{"held, the reservation consumed (lease ended; the target may have committed on its grace and moved it on): the hold goes on, the payload is the target's",
			append(append([]SourceEvent{}, before...), EvDeadline, EvReservationGone, EvOwnerIsOther),
			Handover{Captured: left, Held: all}},
		{"relayed, the release succeeded: the relayed one-way messages go on, the requests did not run",
			append(append([]SourceEvent{}, after...), EvReleased, EvOwnerIsOther),
			Handover{Captured: notRun, Relayed: notRun}},
		{"relayed, the release succeeded, the record names the target: it did not commit this move",
			append(append([]SourceEvent{}, after...), EvReleased, EvOwnerIsTarget),
			Handover{Captured: notRun, Relayed: notRun}},
		{"relayed, the reservation consumed (lease ended): left to the target, whose answers come back to the requesters",
			append(append([]SourceEvent{}, after...), EvReservationGone, EvOwnerIsOther),
			Handover{Captured: left, Relayed: left}},
		// Removed from the mesh: nothing can be passed on. What nobody ran
		// is closed (requests answered so); what a target that may have
		// committed was given is left to it (before 2026-12-07 the held
		// requests were answered closed although it may have run them).
		{"removed while held, the release succeeded: all closed",
			append(append([]SourceEvent{}, before...), EvCancel, EvReleased, EvOwnerGone),
			Handover{Captured: closed, Held: closed}},
		{"removed while held, the reservation consumed (lease ended): the payload is the target's, the hold closed",
			append(append([]SourceEvent{}, before...), EvDeadline, EvReservationGone, EvOwnerGone),
			Handover{Captured: left, Held: closed}},
		{"removed after relay-ready, the release succeeded: all closed",
			append(append([]SourceEvent{}, after...), EvReleased, EvOwnerGone),
			Handover{Captured: closed, Relayed: closed}},
		{"removed after relay-ready, the reservation consumed (lease ended): left to the target",
			append(append([]SourceEvent{}, after...), EvReservationGone, EvOwnerGone),
			Handover{Captured: left, Relayed: left}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewSource(Preserve)
			acts := steps(t, m.Step, tc.events)
			end, act := SrcOwnedElsewhere, ActHandOver
			if m.Reason() == ReasonRemoved {
				end, act = SrcRemoved, ActDiscard
			}
			if m.State() != end || len(acts) < 2 || acts[len(acts)-2] != act {
				t.Fatalf("end %s, actions %v: want %s after %s", m.State(), acts, end, act)
			}
			if got := m.Handover(); got != tc.want {
				t.Errorf("handover %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSourceFinalIgnoresLateEvents: once a move ended, no late answer —
// relay-ready, a store result — changes it (§9.4, §10).
func TestSourceFinalIgnoresLateEvents(t *testing.T) {
	ends := map[string][]SourceEvent{
		"moved":          {EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvCommitSeen},
		"recovered":      {EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReleased, EvOwnerIsSource},
		"removed":        {EvBegin, EvSecured, EvCaptured, EvRecorded, EvRelayReady, EvCutoverSubmitted, EvDeadline, EvReleased, EvOwnerGone},
		"reopened":       {EvBegin, EvSecured, EvCaptured, EvRecorded, EvTargetFailed, EvReleased, EvOwnerIsSource},
		"refused":        {EvBegin, EvSecureFailed},
		"ownedElsewhere": {EvBegin, EvSecured, EvCaptured, EvRecorded, EvCancel, EvReleased, EvOwnerIsOther},
	}
	for name, evs := range ends {
		m := NewSource(Preserve)
		for _, ev := range evs {
			if _, err := m.Step(ev); err != nil {
				t.Fatalf("%s: %s: %v", name, ev, err)
			}
		}
		if !m.State().Final() {
			t.Fatalf("%s: %s is not final", name, m.State())
		}
		before := *m
		for ev := EvBegin; ev <= EvCancelInSnapshot; ev++ {
			acts, err := m.Step(ev)
			if !errors.Is(err, ErrUnexpected) || acts != nil || *m != before {
				t.Errorf("%s: late %s gave %v, %v; state %s", name, ev, acts, err, m.State())
			}
		}
	}
}

// TestTargetTable walks the target machine: §1.3 steps 5–7, §9.1 (checks
// before any factory call, checksum failure, conflicts), §9.2, §10 (CAS
// retried until the Restore deadline, then location_update_failed).
func TestTargetTable(t *testing.T) {
	prep := ta{ActRegisterTemp, ActBeginAssembly, ActReadAuthority}
	tests := []struct {
		name    string
		events  []TargetEvent
		acts    ta
		final   TargetState
		failure TargetFailure
	}{
		{"normal: cutover then CAS then open", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"authority read before the last chunk", []TargetEvent{EvPrepare, EvAuthorityMatched, EvAssembled, EvRestored, EvCutover, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"no cutover: CAS after the grace", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvGraceElapsed, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"grace then a late cutover: one CAS", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvGraceElapsed, EvCutover, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"§9.1 record missing or other generation: no factory", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMismatch},
			append(append(ta{}, prep...), ActRemove, ActReplyFailed), TgtFailed, TgtFailAuthority},
		{"§9.1 checksum mismatch: never restored from a partial payload", []TargetEvent{EvPrepare, EvAuthorityMatched, EvAssemblyFailed},
			append(append(ta{}, prep...), ActRemove, ActReplyFailed), TgtFailed, TgtFailAssembly},
		{"restore failed", []TargetEvent{EvPrepare, EvAuthorityMatched, EvAssembled, EvRestoreFailed},
			append(append(ta{}, prep...), ActBuildHidden, ActRemove, ActReplyFailed), TgtFailed, TgtFailRestore},
		{"§9.4 cancel before relay-ready discards the temporary queue", []TargetEvent{EvPrepare, EvAssembled, EvCancelled},
			append(append(ta{}, prep...), ActRemove), TgtCancelled, TgtFailNone},
		{"cancel while restoring", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvCancelled},
			append(append(ta{}, prep...), ActBuildHidden, ActRemove), TgtCancelled, TgtFailNone},
		{"CAS conflict: removed, never dispatched", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvConflict},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActRemove), TgtFailed, TgtFailConflict},
		{"§10 unanswered CAS re-read until it converges", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvUnknown, EvUnknown, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActRetryCAS, ActRetryCAS, ActOpen), TgtOwner, TgtFailNone},
		{"§10 CAS answer unknown at the deadline, then the record shows it can never apply: location_update_failed", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvUnknown, EvExpired, EvUnknown, EvConflict},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActRetryCAS, ActDecide, ActRemove), TgtFailed, TgtFailLocationUpdate},
		{"§10 CAS answer unknown at the deadline, then the record shows it applied: open, never a record naming a node without the object", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvUnknown, EvExpired, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActRetryCAS, ActDecide, ActOpen), TgtOwner, TgtFailNone},
		{"undecided when the node stops: removed", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvExpired, EvHalted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActDecide, ActRemove), TgtFailed, TgtFailLocationUpdate},
		{"deadline in the relay, no CAS sent: location_update_failed at once", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvExpired},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActRemove), TgtFailed, TgtFailLocationUpdate},
		{"node stops during the CAS: removed", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvHalted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActRemove), TgtFailed, TgtFailLocationUpdate},
		{"node stops before relay-ready: as the deadline", []TargetEvent{EvPrepare, EvHalted},
			append(append(ta{}, prep...), ActRemove, ActReplyFailed), TgtFailed, TgtFailDeadline},
		{"relayed records differ from the cutover's count/digest", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutoverMismatch},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActRemove, ActReplyFailed), TgtFailed, TgtFailRelayMismatch},
		{"a mismatching cutover after the grace's CAS: ignored, no second 53 while the CAS may apply", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvGraceElapsed, EvCutoverMismatch, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"§9.1 the source's run ended while its chunks were assembled: removed as its cancel would", []TargetEvent{EvPrepare, EvAuthorityMatched, EvSourceEnded},
			append(append(ta{}, prep...), ActRemove, ActReplyFailed), TgtFailed, TgtFailSourceEnded},
		{"§9.1 the source's run ended while restoring", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvSourceEnded},
			append(append(ta{}, prep...), ActBuildHidden, ActRemove, ActReplyFailed), TgtFailed, TgtFailSourceEnded},
		{"the source's run ended after relay-ready: not taken, the grace commits", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvSourceEnded, EvGraceElapsed, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"the source's run ended while committing: not taken", []TargetEvent{EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvSourceEnded, EvCommitted},
			append(append(ta{}, prep...), ActBuildHidden, ActReplyRelayReady, ActArmGrace, ActCAS, ActOpen), TgtOwner, TgtFailNone},
		{"deadline before relay-ready", []TargetEvent{EvPrepare, EvExpired},
			append(append(ta{}, prep...), ActRemove, ActReplyFailed), TgtFailed, TgtFailDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewTarget()
			if got := steps(t, m.Step, tc.events); !reflect.DeepEqual(got, tc.acts) {
				t.Errorf("actions\n got %v\nwant %v", got, tc.acts)
			}
			if m.State() != tc.final || m.Failure() != tc.failure {
				t.Errorf("end %s/%s, want %s/%s", m.State(), m.Failure(), tc.final, tc.failure)
			}
		})
	}
}

// TestTargetFinalIgnoresLateEvents: a late store answer never reactivates
// a terminal attempt (§10), a late cutover never runs a second CAS.
func TestTargetFinalIgnoresLateEvents(t *testing.T) {
	ends := map[string][]TargetEvent{
		"owner":     {EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvCommitted},
		"failed":    {EvPrepare, EvAssembled, EvAuthorityMatched, EvRestored, EvCutover, EvExpired, EvConflict},
		"cancelled": {EvPrepare, EvCancelled},
	}
	for name, evs := range ends {
		m := NewTarget()
		for _, ev := range evs {
			if _, err := m.Step(ev); err != nil {
				t.Fatalf("%s: %s: %v", name, ev, err)
			}
		}
		if !m.State().Final() {
			t.Fatalf("%s: %s is not final", name, m.State())
		}
		before := *m
		for ev := EvPrepare; ev <= EvSourceEnded; ev++ {
			acts, err := m.Step(ev)
			if !errors.Is(err, ErrUnexpected) || acts != nil || *m != before {
				t.Errorf("%s: late %s gave %v, %v; state %s", name, ev, acts, err, m.State())
			}
		}
	}
}

// TestNames keeps every enum printable (logs use them).
func TestNames(t *testing.T) {
	for s := SrcStart; s <= SrcOwnedElsewhere; s++ {
		if s.String() == "" {
			t.Errorf("source state %d unnamed", s)
		}
		if s.String() == "" || s.String()[0] == 'S' {
			t.Errorf("source state %d unnamed", s)
		}
	}
	for a := ActSecureCapacity; a <= ActReopenAfterSnapshot; a++ {
		if a.String()[0] == 'S' {
			t.Errorf("source action %d unnamed", a)
		}
	}
	for e := EvBegin; e <= EvCancelInSnapshot; e++ {
		if e.String()[0] == 'S' {
			t.Errorf("source event %d unnamed", e)
		}
	}
	for r := ReasonNone; r <= ReasonSnapshotFailed; r++ {
		if r.String()[0] == 'R' {
			t.Errorf("reason %d unnamed", r)
		}
	}
	for s := TgtStart; s <= TgtCancelled; s++ {
		if s.String()[0] == 'T' {
			t.Errorf("target state %d unnamed", s)
		}
	}
	for a := ActRegisterTemp; a <= ActDecide; a++ {
		if a.String()[0] == 'T' {
			t.Errorf("target action %d unnamed", a)
		}
	}
	for e := EvPrepare; e <= EvSourceEnded; e++ {
		if e.String()[0] == 'T' {
			t.Errorf("target event %d unnamed", e)
		}
	}
}
