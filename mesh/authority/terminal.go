package authority

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// The stored final result of an Actor or User Spot creation (spec §7 "Stored
// final result"): written in the same batch as the Commit (Created) or Abort
// (Rejected, Failed) that decides it, kept until 5 minutes after the
// request's original deadline by the store's clock, and readable only by the
// same request (same identifier and same request SHA-256). A framework
// failure before the callback records no final application result.

// TerminalFormat is the format tag of the stored final result.
const TerminalFormat = "creation-operation-terminal-v1"

// KindCreationTerminal is the record kind (first preimage segment and
// store-key prefix) of stored final results. Project-specific.
const KindCreationTerminal record.Kind = "creation-terminal"

// TerminalRetentionAfterDeadline is how long after the original deadline a
// stored final result stays readable (§7: "up to 5 minutes after the
// original deadline").
const TerminalRetentionAfterDeadline = 5 * time.Minute

// MaxTerminalBytes bounds an encoded final result (§7: at most 1,048,576
// bytes).
const MaxTerminalBytes = 1 << 20

// OperationRef identifies one creation request (§7: source Node RID, source
// host run generation and a 128-bit OperationId). Network correlation and
// reply route are deliberately not part of it.
type OperationRef struct {
	SourceRoutingID     []byte
	SourceRunGeneration uint64
	OperationID         [16]byte // non-zero
}

func (o OperationRef) validate() error {
	if err := record.ValidateRoutingID(o.SourceRoutingID); err != nil {
		return err
	}
	if !record.Generation(o.SourceRunGeneration).Valid() {
		return fmt.Errorf("source run generation %d outside 1..2^63-1", o.SourceRunGeneration)
	}
	if o.OperationID == [16]byte{} {
		return fmt.Errorf("operation id is zero")
	}
	return nil
}

// TerminalPreimage is the final result's logical key preimage:
//
//	creation-terminal\0{hex(source RoutingId)}\0{source run generation}\0{hex(OperationId)}
//
// with the generation in decimal and the 128-bit OperationId as 32
// lowercase hex digits.
func TerminalPreimage(o OperationRef) ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(KindCreationTerminal)+3+2*len(o.SourceRoutingID)+20+2*len(o.OperationID))
	b = append(append(b, KindCreationTerminal...), 0)
	b = append(hex.AppendEncode(b, o.SourceRoutingID), 0)
	b = append(strconv.AppendUint(b, o.SourceRunGeneration, 10), 0)
	return hex.AppendEncode(b, o.OperationID[:]), nil
}

// TerminalKey is record.Key(TerminalPreimage(o)): "creation-terminal:" +
// lowercase hex SHA-256 of the preimage.
func TerminalKey(o OperationRef) (string, error) {
	p, err := TerminalPreimage(o)
	if err != nil {
		return "", err
	}
	return record.Key(p), nil
}

// Outcome is a creation's final application result.
type Outcome string

// Outcomes (§7 callback results).
const (
	OutcomeCreated  Outcome = "created"
	OutcomeRejected Outcome = "rejected"
	OutcomeFailed   Outcome = "failed"
)

// Failure is a typed creation failure (§7: "records a typed Failed").
type Failure struct {
	Type    string // 1..255 bytes, no NUL (e.g. "factoryPanic")
	Message string // UTF-8
}

// TerminalResult is what Commit or Abort records as the final result.
type TerminalResult struct {
	Operation     OperationRef
	RequestSHA256 [32]byte
	// Deadline is the request's original deadline on the store's clock; the
	// record is kept until Deadline+5min.
	Deadline time.Time
	Outcome  Outcome
	// Reason is the application's rejection reason (OutcomeRejected only;
	// may be empty).
	Reason string
	// Failure is required for OutcomeFailed and absent otherwise.
	Failure *Failure
	// Reply is the optional application reply; nil or empty means none.
	Reply []byte
}

// CreatedRef is the ref a Created result carries (§7.2: global Id,
// ObjectGeneration, MeshName, NodeRid), plus the AuthorityOwnerGeneration
// the object was created with.
type CreatedRef struct {
	ObjectGeneration         uint64
	AuthorityOwnerGeneration uint64
	MeshName                 string
	RoutingID                []byte
}

// TerminalRecord is a stored final result.
type TerminalRecord struct {
	Operation     OperationRef
	RequestSHA256 [32]byte
	ID            string
	ObjectKind    record.ObjectKind
	StableType    string
	Outcome       Outcome
	Ref           *CreatedRef // OutcomeCreated only
	Reason        *string     // OutcomeRejected only
	Failure       *Failure    // OutcomeFailed only
	Reply         []byte      // nil: none
	Deadline      record.EpochMillis
	RecordedAt    record.EpochMillis // StoreNow of the read the batch was planned from
}

func (t *TerminalRecord) validate() error {
	if err := t.Operation.validate(); err != nil {
		return err
	}
	if err := record.ValidateObjectID(t.ID); err != nil {
		return err
	}
	switch t.ObjectKind {
	case record.ObjectActor, record.ObjectUserSpot, record.ObjectInstanceSpot:
	default:
		return fmt.Errorf("object kind %q", t.ObjectKind)
	}
	if err := record.ValidateStableType(t.StableType); err != nil {
		return err
	}
	if t.Deadline < 0 || t.RecordedAt < 0 {
		return fmt.Errorf("negative timestamp")
	}
	switch t.Outcome {
	case OutcomeCreated:
		if t.Ref == nil || t.Reason != nil || t.Failure != nil {
			return fmt.Errorf("a created result has a ref and no reason or failure")
		}
		if !record.Generation(t.Ref.ObjectGeneration).Valid() || !record.Generation(t.Ref.AuthorityOwnerGeneration).Valid() {
			return fmt.Errorf("ref generations outside 1..2^63-1")
		}
		if err := record.ValidateMeshName(t.Ref.MeshName); err != nil {
			return err
		}
		if err := record.ValidateRoutingID(t.Ref.RoutingID); err != nil {
			return err
		}
	case OutcomeRejected:
		if t.Ref != nil || t.Reason == nil || t.Failure != nil {
			return fmt.Errorf("a rejected result has a reason and no ref or failure")
		}
		if !utf8.ValidString(*t.Reason) {
			return fmt.Errorf("reason is not valid UTF-8")
		}
	case OutcomeFailed:
		if t.Ref != nil || t.Reason != nil || t.Failure == nil {
			return fmt.Errorf("a failed result has a failure and no ref or reason")
		}
		if err := record.ValidateStableType(t.Failure.Type); err != nil { // same text rules: 1..255, no NUL
			return fmt.Errorf("failure type: %w", err)
		}
		if !utf8.ValidString(t.Failure.Message) {
			return fmt.Errorf("failure message is not valid UTF-8")
		}
	default:
		return fmt.Errorf("unknown outcome %q", t.Outcome)
	}
	return nil
}

// Encode returns the canonical value (docs/AUTHORITY.md §5):
//
//	{"deadlineEpochMs":"…","failure":null|{"message":"…","type":"…"},
//	 "format":"creation-operation-terminal-v1","objectId":"…","objectKind":"…",
//	 "operationIdHex":"…","outcome":"…","reason":null|"…",
//	 "recordedAtEpochMs":"…","ref":null|{"authorityOwnerGeneration":"…",
//	 "meshName":"…","objectGeneration":"…","routingIdHex":"…"},
//	 "reply":null|"<base64>","requestSha256":"…","sourceRoutingIdHex":"…",
//	 "sourceRunGeneration":"…","stableType":"…"}
func (t TerminalRecord) Encode() ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	failure, ref, reply := jsonNull, jsonNull, jsonNull
	if f := t.Failure; f != nil {
		failure = jsonObject(jsonMember{"message", jsonString(f.Message)}, jsonMember{"type", jsonString(f.Type)})
	}
	if r := t.Ref; r != nil {
		ref = jsonObject(
			jsonMember{"authorityOwnerGeneration", jsonDecString(r.AuthorityOwnerGeneration)},
			jsonMember{"meshName", jsonString(r.MeshName)},
			jsonMember{"objectGeneration", jsonDecString(r.ObjectGeneration)},
			jsonMember{"routingIdHex", jsonHex(r.RoutingID)},
		)
	}
	if len(t.Reply) > 0 {
		reply = jsonBase64(t.Reply)
	}
	b := jsonObject(
		jsonMember{"deadlineEpochMs", jsonDecString(uint64(t.Deadline))},
		jsonMember{"failure", failure},
		jsonMember{"format", jsonString(TerminalFormat)},
		jsonMember{"objectId", jsonString(t.ID)},
		jsonMember{"objectKind", jsonString(string(t.ObjectKind))},
		jsonMember{"operationIdHex", jsonHex(t.Operation.OperationID[:])},
		jsonMember{"outcome", jsonString(string(t.Outcome))},
		jsonMember{"reason", jsonNullableString(t.Reason)},
		jsonMember{"recordedAtEpochMs", jsonDecString(uint64(t.RecordedAt))},
		jsonMember{"ref", ref},
		jsonMember{"reply", reply},
		jsonMember{"requestSha256", jsonHex(t.RequestSHA256[:])},
		jsonMember{"sourceRoutingIdHex", jsonHex(t.Operation.SourceRoutingID)},
		jsonMember{"sourceRunGeneration", jsonDecString(t.Operation.SourceRunGeneration)},
		jsonMember{"stableType", jsonString(t.StableType)},
	)
	if len(b) > MaxTerminalBytes {
		return nil, &record.LimitError{Kind: KindCreationTerminal, What: "value bytes", Limit: MaxTerminalBytes, Actual: len(b)}
	}
	return b, nil
}

type terminalJSON struct {
	DeadlineEpochMs string `json:"deadlineEpochMs"`
	Failure         *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"failure"`
	Format            *string `json:"format"`
	ObjectID          string  `json:"objectId"`
	ObjectKind        string  `json:"objectKind"`
	OperationIDHex    string  `json:"operationIdHex"`
	Outcome           string  `json:"outcome"`
	Reason            *string `json:"reason"`
	RecordedAtEpochMs string  `json:"recordedAtEpochMs"`
	Ref               *struct {
		AuthorityOwnerGeneration string `json:"authorityOwnerGeneration"`
		MeshName                 string `json:"meshName"`
		ObjectGeneration         string `json:"objectGeneration"`
		RoutingIDHex             string `json:"routingIdHex"`
	} `json:"ref"`
	Reply               *string `json:"reply"`
	RequestSHA256       string  `json:"requestSha256"`
	SourceRoutingIDHex  string  `json:"sourceRoutingIdHex"`
	SourceRunGeneration string  `json:"sourceRunGeneration"`
	StableType          string  `json:"stableType"`
}

// DecodeTerminal reads a stored final result. The format tag is checked
// first; an unknown one is a *record.UnknownVersionError. Only canonical
// bytes are accepted.
func DecodeTerminal(value []byte) (TerminalRecord, error) {
	if len(value) > MaxTerminalBytes {
		return TerminalRecord{}, &record.LimitError{Kind: KindCreationTerminal, What: "value bytes", Limit: MaxTerminalBytes, Actual: len(value)}
	}
	var j terminalJSON
	var t TerminalRecord
	err := decodeStrict(value, &j, func() ([]byte, error) {
		if j.Format == nil || *j.Format != TerminalFormat {
			v := "null"
			if j.Format != nil {
				v = strconv.Quote(*j.Format)
			}
			return nil, &record.UnknownVersionError{Kind: KindCreationTerminal, Version: v}
		}
		var err error
		t = TerminalRecord{ID: j.ObjectID, ObjectKind: record.ObjectKind(j.ObjectKind), StableType: j.StableType,
			Outcome: Outcome(j.Outcome), Reason: j.Reason}
		if t.Operation.SourceRoutingID, err = hex.DecodeString(j.SourceRoutingIDHex); err != nil {
			return nil, fmt.Errorf("sourceRoutingIdHex: %w", err)
		}
		if t.Operation.SourceRunGeneration, err = parseDecString("sourceRunGeneration", j.SourceRunGeneration); err != nil {
			return nil, err
		}
		if err := decodeHexInto(t.Operation.OperationID[:], "operationIdHex", j.OperationIDHex); err != nil {
			return nil, err
		}
		if err := decodeHexInto(t.RequestSHA256[:], "requestSha256", j.RequestSHA256); err != nil {
			return nil, err
		}
		d, err := parseDecString("deadlineEpochMs", j.DeadlineEpochMs)
		if err != nil {
			return nil, err
		}
		r, err := parseDecString("recordedAtEpochMs", j.RecordedAtEpochMs)
		if err != nil {
			return nil, err
		}
		if d > uint64(record.MaxGeneration) || r > uint64(record.MaxGeneration) {
			return nil, fmt.Errorf("timestamp beyond 2^63-1")
		}
		t.Deadline, t.RecordedAt = record.EpochMillis(d), record.EpochMillis(r)
		if f := j.Failure; f != nil {
			t.Failure = &Failure{Type: f.Type, Message: f.Message}
		}
		if rf := j.Ref; rf != nil {
			ref := &CreatedRef{MeshName: rf.MeshName}
			if ref.ObjectGeneration, err = parseDecString("ref.objectGeneration", rf.ObjectGeneration); err != nil {
				return nil, err
			}
			if ref.AuthorityOwnerGeneration, err = parseDecString("ref.authorityOwnerGeneration", rf.AuthorityOwnerGeneration); err != nil {
				return nil, err
			}
			if ref.RoutingID, err = hex.DecodeString(rf.RoutingIDHex); err != nil {
				return nil, fmt.Errorf("ref.routingIdHex: %w", err)
			}
			t.Ref = ref
		}
		if j.Reply != nil {
			if t.Reply, err = base64.StdEncoding.Strict().DecodeString(*j.Reply); err != nil {
				return nil, fmt.Errorf("reply: %w", err)
			}
		}
		return t.Encode()
	})
	if err != nil {
		return TerminalRecord{}, err
	}
	return t, nil
}

func decodeHexInto(dst []byte, field, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(dst) {
		return fmt.Errorf("%s: must be %d lowercase hex digits", field, 2*len(dst))
	}
	copy(dst, b)
	return nil
}

// terminalRetention is how long after the batch's StoreNow the result must
// stay: until Deadline+5min. The batch commits at a StoreNow at or after the
// read's, so the record lives at least until Deadline+5min (slightly longer
// by the read-to-commit gap, which is harmless: "up to" bounds what a reader
// may rely on). Rounded up to whole milliseconds, the stores' unit.
func terminalRetention(deadline, storeNow time.Time) time.Duration {
	d := deadline.Add(TerminalRetentionAfterDeadline).Sub(storeNow)
	if rem := d % time.Millisecond; rem > 0 {
		d += time.Millisecond - rem
	}
	return d
}

// CheckTerminal interprets a read of a final result key for the request
// (op, requestSHA256) (§7 "Only the same request can be read"): Missing is
// ErrNotFound; a record of another request (other identifier or other
// request hash) is ErrInvalidOperation, because an OperationId is never
// reused within a source host run.
func CheckTerminal(op OperationRef, requestSHA256 [32]byte, rr locstore.ReadResult) (TerminalRecord, error) {
	const o = OpTerminalLookup
	if !rr.Found {
		return TerminalRecord{}, newErr(o, ErrNotFound, "no stored final result for this operation")
	}
	t, err := DecodeTerminal(rr.Value)
	if err != nil {
		return TerminalRecord{}, &Error{Op: o, Kind: ErrCorruptRecord, Reason: "stored final result", Err: err}
	}
	same := string(t.Operation.SourceRoutingID) == string(op.SourceRoutingID) &&
		t.Operation.SourceRunGeneration == op.SourceRunGeneration && t.Operation.OperationID == op.OperationID
	if !same {
		return TerminalRecord{}, newErr(o, ErrCorruptRecord, "stored final result names another operation")
	}
	if t.RequestSHA256 != requestSHA256 {
		return TerminalRecord{}, invalid(o, "stored final result belongs to another request with the same operation id (request SHA-256 %x, stored %x)", requestSHA256, t.RequestSHA256)
	}
	return t, nil
}
