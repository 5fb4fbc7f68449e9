// Package activation is the pure core of Instance Spot cold activation
// (spec §7.1): the record a target stores in the Relocation Store before it
// claims the Spot (creation info + the first message), its reference and
// checksum, the stable-type rule of §7.1's second table, and the recovery
// decision of §7.1's restart table. It does no I/O; mesh wires it to the
// stores and the transport (docs/INSTANCE-SPOTS.md).
package activation

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Errors of this package, matched with errors.Is.
var (
	// ErrMalformed: bytes that are not an activation record of a known
	// version (a corrupt or foreign payload).
	ErrMalformed = errors.New("activation: malformed record")
	// ErrTooLarge: the record would exceed MaxRecordBytes.
	ErrTooLarge = errors.New("activation: record too large")
	// ErrNoInstanceType: the type was omitted and no candidate offers an
	// Instance Spot type (§7.1: NotFound).
	ErrNoInstanceType = errors.New("activation: no Instance Spot type is offered")
	// ErrAmbiguousType: the type was omitted and two or more Instance Spot
	// types are offered (§7.1: InvalidOperation).
	ErrAmbiguousType = errors.New("activation: several Instance Spot types are offered; name one")
)

// MaxRecordBytes bounds an encoded record: it is referenced from the
// authority's pendingCreation, whose requestEncodedSize is at most 1 MiB
// (§7 "The creation request's stored size is at most 1 MiB").
const MaxRecordBytes = 1 << 20

// magic starts every encoded record; the version is part of it, so a record
// of another version is ErrMalformed, never misread.
const magic = "meshnode-instance-activation-v1\n"

// Record is the creation info and first message of one cold activation
// (§7.1: "type, Mesh, target descriptor, SpotId, source Node RID and host run
// generation, an optional source SpotId, operation ID, reply correlation,
// deadline, command 39 information, and the first message").
type Record struct {
	SpotID     string
	StableType string
	MeshName   string
	// Target is the node run the source chose (RID and lifecycle generation).
	TargetRID []byte
	TargetGen uint64
	// Source is the node run that sent the first message.
	SourceRID    []byte
	SourceGen    uint64
	SourceSpotID string // optional
	Operation    [16]byte
	// Request is true for a request (ReplyRouteID names its reply route),
	// false for a one-way send.
	Request      bool
	ReplyRouteID uint64
	// DeadlineUnixMs is the source's one deadline for the whole call.
	DeadlineUnixMs uint64
	// Metadata is the first message's metadata record (may be empty).
	Metadata []byte
	// Body is the first message's application payload.
	Body []byte
}

// header is the JSON part of the encoding: everything but the body.
type header struct {
	SpotID       string `json:"spotId"`
	StableType   string `json:"stableType"`
	MeshName     string `json:"meshName"`
	TargetRID    string `json:"targetRidHex"`
	TargetGen    string `json:"targetGeneration"`
	SourceRID    string `json:"sourceRidHex"`
	SourceGen    string `json:"sourceGeneration"`
	SourceSpotID string `json:"sourceSpotId,omitempty"`
	Operation    string `json:"operationId"`
	Request      bool   `json:"request"`
	ReplyRouteID string `json:"replyRouteId,omitempty"`
	Deadline     string `json:"deadlineUnixMs"`
	Metadata     []byte `json:"metadata,omitempty"`
}

// Encode returns the record's bytes: magic, a 4-byte big-endian header
// length, the JSON header, then the body as is (no base64: the body may use
// almost all of MaxRecordBytes).
func (r Record) Encode() ([]byte, error) {
	if r.SpotID == "" || r.StableType == "" || r.MeshName == "" || len(r.TargetRID) == 0 || len(r.SourceRID) == 0 ||
		r.TargetGen == 0 || r.SourceGen == 0 || r.DeadlineUnixMs == 0 || r.Operation == ([16]byte{}) {
		return nil, fmt.Errorf("%w: a required field is empty", ErrMalformed)
	}
	if r.Request != (r.ReplyRouteID != 0) {
		return nil, fmt.Errorf("%w: a request has a reply route id and a send has none", ErrMalformed)
	}
	h := header{SpotID: r.SpotID, StableType: r.StableType, MeshName: r.MeshName,
		TargetRID: hex.EncodeToString(r.TargetRID), TargetGen: strconv.FormatUint(r.TargetGen, 10),
		SourceRID: hex.EncodeToString(r.SourceRID), SourceGen: strconv.FormatUint(r.SourceGen, 10),
		SourceSpotID: r.SourceSpotID, Operation: hex.EncodeToString(r.Operation[:]), Request: r.Request,
		Deadline: strconv.FormatUint(r.DeadlineUnixMs, 10), Metadata: r.Metadata}
	if r.Request {
		h.ReplyRouteID = strconv.FormatUint(r.ReplyRouteID, 10)
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	n := len(magic) + 4 + len(hb) + len(r.Body)
	if n > MaxRecordBytes {
		return nil, fmt.Errorf("%w: %d bytes (first message %d bytes), at most %d", ErrTooLarge, n, len(r.Body), MaxRecordBytes)
	}
	out := make([]byte, 0, n)
	out = append(out, magic...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(hb)))
	out = append(out, hb...)
	return append(out, r.Body...), nil
}

// Decode parses bytes Encode produced. Anything else is ErrMalformed.
func Decode(b []byte) (Record, error) {
	bad := func(format string, a ...any) (Record, error) {
		return Record{}, fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
	}
	if len(b) > MaxRecordBytes {
		return Record{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(b))
	}
	if !bytes.HasPrefix(b, []byte(magic)) {
		return bad("unknown version or not an activation record")
	}
	b = b[len(magic):]
	if len(b) < 4 {
		return bad("truncated header length")
	}
	hl := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(hl) > uint64(len(b)) {
		return bad("header length %d exceeds the %d bytes left", hl, len(b))
	}
	var h header
	dec := json.NewDecoder(bytes.NewReader(b[:hl]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return bad("header: %v", err)
	}
	r := Record{SpotID: h.SpotID, StableType: h.StableType, MeshName: h.MeshName, SourceSpotID: h.SourceSpotID,
		Request: h.Request, Metadata: h.Metadata, Body: append([]byte(nil), b[hl:]...)}
	var err error
	num := func(s, field string) uint64 {
		if err != nil {
			return 0
		}
		v, e := strconv.ParseUint(s, 10, 64)
		if e != nil {
			err = fmt.Errorf("%w: %s %q", ErrMalformed, field, s)
		}
		return v
	}
	hexOf := func(s, field string) []byte {
		if err != nil {
			return nil
		}
		v, e := hex.DecodeString(s)
		if e != nil {
			err = fmt.Errorf("%w: %s %q", ErrMalformed, field, s)
		}
		return v
	}
	r.TargetRID, r.TargetGen = hexOf(h.TargetRID, "targetRidHex"), num(h.TargetGen, "targetGeneration")
	r.SourceRID, r.SourceGen = hexOf(h.SourceRID, "sourceRidHex"), num(h.SourceGen, "sourceGeneration")
	r.DeadlineUnixMs = num(h.Deadline, "deadlineUnixMs")
	if h.Request {
		r.ReplyRouteID = num(h.ReplyRouteID, "replyRouteId")
	}
	op := hexOf(h.Operation, "operationId")
	if err != nil {
		return Record{}, err
	}
	if len(op) != 16 {
		return bad("operationId is %d bytes, want 16", len(op))
	}
	copy(r.Operation[:], op)
	if len(r.Metadata) == 0 {
		r.Metadata = nil
	}
	// The same rules as Encode: a decoded record can be encoded again.
	if _, err := r.Encode(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// Checksum is the SHA-256 the authority's pendingCreation.requestSha256
// carries for the stored bytes (§10: a payload whose checksum differs is
// DataLost).
func Checksum(b []byte) [32]byte { return sha256.Sum256(b) }

// Reference is the Relocation Store reference of one attempt of a cold
// activation: the operation's identity (source run and OperationId) and the
// SpotId, fixed in advance (§10 "a write must support being read or stored
// again using the same reference the Framework fixed in advance"), and the
// target node run the attempt was handed to. A retried store of the same
// attempt lands on the same reference, two activations never share one, and
// neither do two attempts of one activation: a sender whose first target
// refused after storing its record (and deleted it, leaving a tombstone)
// hands the same operation to another node run, whose record differs (the
// target run and a request's reply route id are in it) and so must not
// meet that tombstone. A sender hands an operation to a node run at most
// once (a refusal excludes the node; any other outcome ends the call), so
// each reference is issued once. Recovery never recomputes it: it reads
// the reference from the authority record's pendingCreation.
//
// Until 2026-12-07 the reference left the target out (".../v1/..."): the
// retry's store met the first target's tombstone, a Conflict, and the
// message failed ErrInvalidOperation "operation id reused" although a node
// with room offered the type (docs/INSTANCE-SPOTS.md "One reference per
// attempt"). v2 references never equal v1 ones, so nodes of both versions
// in one mesh cannot collide either.
func Reference(r Record) string {
	sum := sha256.Sum256([]byte(r.SpotID))
	return "meshnode/instance-activation/v2/" + hex.EncodeToString(sum[:12]) + "/" + hex.EncodeToString(r.SourceRID) + "/" +
		strconv.FormatUint(r.SourceGen, 10) + "/" + hex.EncodeToString(r.Operation[:]) + "/" +
		hex.EncodeToString(r.TargetRID) + "/" + strconv.FormatUint(r.TargetGen, 10)
}

// ChooseType applies §7.1's type rule: a named type is used as given (the
// candidates decide whether anyone offers it); an omitted type is the one
// Instance Spot type offered, ErrNoInstanceType with none and
// ErrAmbiguousType with several. offered may repeat a type (several nodes
// registering one type are one type with several candidates).
func ChooseType(offered []string, requested string) (string, error) {
	if requested != "" {
		return requested, nil
	}
	var only string
	for _, t := range offered {
		switch {
		case only == "":
			only = t
		case t != only:
			return "", fmt.Errorf("%w (%q, %q, ...)", ErrAmbiguousType, only, t)
		}
	}
	if only == "" {
		return "", ErrNoInstanceType
	}
	return only, nil
}
