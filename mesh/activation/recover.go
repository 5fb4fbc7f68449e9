package activation

import "fmt"

// RowState is what the Location Store says about an Instance Spot id.
type RowState uint8

// Row states a recovery can meet.
const (
	// RowMissing: no authority record.
	RowMissing RowState = iota + 1
	// RowCreating: a Reserved (Creating) record holding recovery info.
	RowCreating
	// RowReadyPending: a Ready record still holding recovery info: its
	// first message has not been recorded done (§7.1).
	RowReadyPending
	// RowReady: a Ready record without recovery info (nothing to recover).
	RowReady
)

func (s RowState) String() string {
	switch s {
	case RowMissing:
		return "missing"
	case RowCreating:
		return "creating"
	case RowReadyPending:
		return "ready, first message pending"
	case RowReady:
		return "ready"
	}
	return fmt.Sprintf("RowState(%d)", uint8(s))
}

// PayloadState is what the Relocation Store says about the referenced
// payload, after the bounded re-reads of §10.
type PayloadState uint8

// Payload states.
const (
	// PayloadIntact: found, with the size and checksum the record names.
	PayloadIntact PayloadState = iota + 1
	// PayloadMissing: still missing after the bounded re-reads.
	PayloadMissing
	// PayloadCorrupt: found, but its size or checksum differs, or it does
	// not decode as this activation's record.
	PayloadCorrupt
)

func (s PayloadState) String() string {
	switch s {
	case PayloadIntact:
		return "intact"
	case PayloadMissing:
		return "missing"
	case PayloadCorrupt:
		return "corrupt"
	}
	return fmt.Sprintf("PayloadState(%d)", uint8(s))
}

// Situation is one row of the recovery table: the record, whether the host
// run it names is gone (its owner lease ended), and the payload.
type Situation struct {
	Row RowState
	// OwnerEnded: the record's owner lease is missing, expired or of
	// another generation — that run can never finish the activation.
	OwnerEnded bool
	// Payload matters only for RowReadyPending with an ended owner (the one
	// case that needs the stored first message).
	Payload PayloadState
}

// Action is what a recovering node does.
type Action uint8

// Recovery actions.
const (
	// Leave: nothing to recover, or the owner is alive and finishes the
	// activation itself (the caller waits for its result).
	Leave Action = iota + 1
	// Cancel: a Creating record whose creator is gone: abort that same
	// record (capacity returned, no final result), then delete the payload
	// the record pointed at (§7.1 "or cancels the same record").
	Cancel
	// Restore: a Ready record whose first message is not done and whose
	// owner is gone: take the record over under the same ObjectGeneration
	// (a recovery owner change that keeps the recovery info), build the
	// instance, put the stored first message at the head of its queue and
	// only then open it (§7.1 "Restores starting from the first message
	// using the stored data. No new message is received before that").
	Restore
	// DataLost: as Restore, but the payload is gone or does not match: the
	// error is recorded in the location record and the recovery info
	// cleared; the owner is not rolled back and no other payload is
	// guessed (§10).
	DataLost
)

func (a Action) String() string {
	switch a {
	case Leave:
		return "leave"
	case Cancel:
		return "cancel"
	case Restore:
		return "restore"
	case DataLost:
		return "dataLost"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Decide is §7.1's restart table. A payload with no record pointing at it
// ("after storing payload, before recording Creating") is never seen here:
// nothing leads to it, and the Relocation Store deletes it when its
// retention ends.
func Decide(s Situation) Action {
	switch {
	case !s.OwnerEnded:
		return Leave
	case s.Row == RowCreating:
		return Cancel
	case s.Row == RowReadyPending && s.Payload == PayloadIntact:
		return Restore
	case s.Row == RowReadyPending:
		return DataLost
	}
	return Leave
}
