package authority

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// The relocation capacity reservation (spec §8.1 "Reservation ID"): a row
// keyed by the Reservation ID that records what a keyed SecureCapacity
// reserved on the target, so that
//   - the same Reservation ID with the same content returns the earlier
//     value without reserving twice (§8.1 "Same Reservation ID, same
//     content"), and a lost SecureCapacity answer is confirmed by reading
//     the row (§10);
//   - the reserved slots are returned (ReleaseCapacity) or converted to
//     active (the relocation's NewOwner) exactly once: both delete the row
//     in the same batch as the counter change.

// KindRelocationReservation is the record kind (first preimage segment and
// store-key prefix) of relocation capacity reservations. Project-specific.
const KindRelocationReservation record.Kind = "relocation-reservation"

// Party is one side of a relocation: a host run (Owner) on a MeshNode run
// (Node).
type Party struct {
	Node  Node
	Owner Owner
}

func (p Party) validate() error {
	if err := p.Node.validate(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := p.Owner.validate(); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	return nil
}

// validateParties checks both sides of a move and that they are different
// node runs (§6.1: an invalid target combination).
func validateParties(source, target Party) error {
	if err := source.validate(); err != nil {
		return fmt.Errorf("source %w", err)
	}
	if err := target.validate(); err != nil {
		return fmt.Errorf("target %w", err)
	}
	if source.Node.Equal(target.Node) {
		return fmt.Errorf("target node %s is the source's node run", target.Node)
	}
	return nil
}

// Equal reports whether p and o are the same host run on the same node run.
func (p Party) Equal(o Party) bool { return p.Owner == o.Owner && p.Node.Equal(o.Node) }

func (p Party) String() string {
	return p.Owner.ID + "/" + strconv.FormatUint(p.Owner.LeaseGeneration, 10) + " on " + p.Node.String()
}

// PartyOf returns the owner and node an authority record names.
func PartyOf(a record.Authority) Party { return Party{Node: NodeOf(a), Owner: OwnerOf(a)} }

// Party returns the target's host run and node run.
func (t Target) Party() Party { return Party{Node: t.Node, Owner: t.Owner} }

func (p Party) relocationParty() record.RelocationParty {
	return record.RelocationParty{
		OwnerID:              p.Owner.ID,
		OwnerLeaseGeneration: record.Generation(p.Owner.LeaseGeneration),
		MeshName:             p.Node.MeshName,
		RoutingID:            cloneBytes(p.Node.RoutingID),
		LifecycleGeneration:  record.Generation(p.Node.LifecycleGeneration),
	}
}

func partyOfRelocation(r record.RelocationParty) Party {
	return Party{
		Node:  Node{MeshName: r.MeshName, RoutingID: r.RoutingID, LifecycleGeneration: uint64(r.LifecycleGeneration)},
		Owner: Owner{ID: r.OwnerID, LeaseGeneration: uint64(r.OwnerLeaseGeneration)},
	}
}

// ReservationPreimage is the reservation's logical key preimage:
//
//	relocation-reservation\0{reservationId as 32 lowercase hex digits}
func ReservationPreimage(id [16]byte) ([]byte, error) {
	if id == ([16]byte{}) {
		return nil, fmt.Errorf("reservation id is zero")
	}
	b := append([]byte(KindRelocationReservation), 0)
	return hex.AppendEncode(b, id[:]), nil
}

// ReservationKey is record.Key(ReservationPreimage(id)):
// "relocation-reservation:" + lowercase hex SHA-256 of the preimage.
func ReservationKey(id [16]byte) (string, error) {
	p, err := ReservationPreimage(id)
	if err != nil {
		return "", err
	}
	return record.Key(p), nil
}

// Reservation is a relocation capacity reservation: Bundle reserved on
// Target's node run for moving one object from Source, secured while the
// object's authority row was at AuthorityVersion.
type Reservation struct {
	ID               [16]byte
	ObjectID         string
	ObjectKind       record.ObjectKind
	ObjectGeneration uint64
	// AuthorityVersion is the authority row's StoreVersion the reservation
	// was secured against (the version the source first read, §8.1:
	// "securing target space fixes together the object ID, StoreVersion,
	// …"). It records what was checked; later batches check their own
	// first-read versions.
	AuthorityVersion string
	Source           Party
	Target           Party
	Bundle           Bundle
}

func (r Reservation) validate() error {
	if r.ID == ([16]byte{}) {
		return fmt.Errorf("reservation id is zero")
	}
	if err := record.ValidateObjectID(r.ObjectID); err != nil {
		return err
	}
	switch r.ObjectKind {
	case record.ObjectActor, record.ObjectUserSpot, record.ObjectInstanceSpot:
	default:
		return fmt.Errorf("object kind %q is not actor, userSpot or instanceSpot", r.ObjectKind)
	}
	if !record.Generation(r.ObjectGeneration).Valid() {
		return fmt.Errorf("object generation %d outside 1..2^63-1", r.ObjectGeneration)
	}
	if v := r.AuthorityVersion; v == "" || len(v) > locstore.MaxVersionBytes || !utf8.ValidString(v) {
		return fmt.Errorf("authority version must be 1..%d bytes of UTF-8", locstore.MaxVersionBytes)
	}
	if err := validateParties(r.Source, r.Target); err != nil {
		return err
	}
	return validateBundle(r.Bundle)
}

// Equal reports whether r and o have the same content.
func (r Reservation) Equal(o Reservation) bool {
	return r.ID == o.ID && r.ObjectID == o.ObjectID && r.ObjectKind == o.ObjectKind &&
		r.ObjectGeneration == o.ObjectGeneration && r.AuthorityVersion == o.AuthorityVersion &&
		r.Source.Equal(o.Source) && r.Target.Equal(o.Target) && bundleEqual(r.Bundle, o.Bundle)
}

func bundleEqual(a, b Bundle) bool {
	if a.Actors != b.Actors || a.Spots != b.Spots || (a.SpotType == nil) != (b.SpotType == nil) {
		return false
	}
	return a.SpotType == nil || *a.SpotType == *b.SpotType
}

// appendParty writes a party's canonical object, members in their sorted
// order.
func appendParty(b []byte, p Party) []byte {
	b = append(b, `{"lifecycleGeneration":"`...)
	b = strconv.AppendUint(b, p.Node.LifecycleGeneration, 10)
	b = append(b, `","meshName":`...)
	b = appendJSONString(b, p.Node.MeshName)
	b = append(b, `,"ownerId":`...)
	b = appendJSONString(b, p.Owner.ID)
	b = append(b, `,"ownerLeaseGeneration":"`...)
	b = strconv.AppendUint(b, p.Owner.LeaseGeneration, 10)
	b = append(b, `","routingIdHex":"`...)
	b = hex.AppendEncode(b, p.Node.RoutingID)
	return append(b, `"}`...)
}

// Encode returns the canonical value (docs/AUTHORITY.md §9):
//
//	{"authorityVersion":"…","bundle":{"actors":N,"spotType":null|{"count":N,
//	 "objectKind":"…","stableType":"…"},"spots":N},"object":{"id":"…",
//	 "kind":"…"},"objectGeneration":"…","recordVersion":1,
//	 "reservationId":"<32 hex>","source":{party},"target":{party}}
//
// party = {"lifecycleGeneration":"…","meshName":"…","ownerId":"…",
// "ownerLeaseGeneration":"…","routingIdHex":"…"}. Slot counts are JSON
// numbers, generations decimal strings (as in the capacity counter).
func (r Reservation) Encode() ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	b := appendReservation(make([]byte, 0, r.encodedLenHint()), &r)
	if len(b) > record.MaxValueBytes {
		return nil, &record.LimitError{Kind: KindRelocationReservation, What: "value bytes", Limit: record.MaxValueBytes, Actual: len(b)}
	}
	return b, nil
}

// encodedLenHint is the encoding's length without escapes, with room for
// the numbers' digits: one allocation for the usual value (escapes only
// grow the slice). The members' names and punctuation, with every number a
// single digit and the strings empty, make 410 bytes (449 with a spotType).
func (r *Reservation) encodedLenHint() int {
	n := 410 + 48 + len(r.AuthorityVersion) + len(r.ObjectID) +
		len(r.Source.Node.MeshName) + len(r.Source.Owner.ID) + 2*len(r.Source.Node.RoutingID) +
		len(r.Target.Node.MeshName) + len(r.Target.Owner.ID) + 2*len(r.Target.Node.RoutingID)
	if st := r.Bundle.SpotType; st != nil {
		n += 39 + 10 + len(st.ObjectKind) + len(st.StableType)
	}
	return n
}

// appendReservation writes the canonical value of a valid reservation. The
// members are written in their canonical (sorted) order by hand, so that
// encoding, and the canonical check of decoding, build no intermediate
// values (the generic object builder made 27 allocations per encoding).
func appendReservation(b []byte, r *Reservation) []byte {
	b = append(b, `{"authorityVersion":`...)
	b = appendJSONString(b, r.AuthorityVersion)
	b = append(b, `,"bundle":{"actors":`...)
	b = strconv.AppendUint(b, uint64(r.Bundle.Actors), 10)
	b = append(b, `,"spotType":`...)
	if st := r.Bundle.SpotType; st != nil {
		b = append(b, `{"count":`...)
		b = strconv.AppendUint(b, uint64(st.Count), 10)
		b = append(b, `,"objectKind":`...)
		b = appendJSONString(b, string(st.ObjectKind))
		b = append(b, `,"stableType":`...)
		b = appendJSONString(b, st.StableType)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"spots":`...)
	b = strconv.AppendUint(b, uint64(r.Bundle.Spots), 10)
	b = append(b, `},"object":{"id":`...)
	b = appendJSONString(b, r.ObjectID)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(r.ObjectKind))
	b = append(b, `},"objectGeneration":"`...)
	b = strconv.AppendUint(b, r.ObjectGeneration, 10)
	b = append(b, `","recordVersion":`...)
	b = strconv.AppendUint(b, record.RecordVersion, 10)
	b = append(b, `,"reservationId":"`...)
	b = hex.AppendEncode(b, r.ID[:])
	b = append(b, `","source":`...)
	b = appendParty(b, r.Source)
	b = append(b, `,"target":`...)
	b = appendParty(b, r.Target)
	return append(b, '}')
}

type partyJSON struct {
	LifecycleGeneration  string `json:"lifecycleGeneration"`
	MeshName             string `json:"meshName"`
	OwnerID              string `json:"ownerId"`
	OwnerLeaseGeneration string `json:"ownerLeaseGeneration"`
	RoutingIDHex         string `json:"routingIdHex"`
}

func (j partyJSON) party(field string) (Party, error) {
	var p Party
	var err error
	p.Node.MeshName, p.Owner.ID = j.MeshName, j.OwnerID
	if p.Node.RoutingID, err = hex.DecodeString(j.RoutingIDHex); err != nil {
		return p, fmt.Errorf("%s.routingIdHex: %w", field, err)
	}
	if p.Node.LifecycleGeneration, err = parseDecString(field+".lifecycleGeneration", j.LifecycleGeneration); err != nil {
		return p, err
	}
	if p.Owner.LeaseGeneration, err = parseDecString(field+".ownerLeaseGeneration", j.OwnerLeaseGeneration); err != nil {
		return p, err
	}
	return p, nil
}

type reservationJSON struct {
	AuthorityVersion string `json:"authorityVersion"`
	Bundle           struct {
		Actors   int64 `json:"actors"`
		SpotType *struct {
			Count      int64  `json:"count"`
			ObjectKind string `json:"objectKind"`
			StableType string `json:"stableType"`
		} `json:"spotType"`
		Spots int64 `json:"spots"`
	} `json:"bundle"`
	Object struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	} `json:"object"`
	ObjectGeneration string    `json:"objectGeneration"`
	RecordVersion    int64     `json:"recordVersion"`
	ReservationID    string    `json:"reservationId"`
	Source           partyJSON `json:"source"`
	Target           partyJSON `json:"target"`
}

// DecodeReservation reads a reservation value. Only the canonical bytes are
// accepted (every write of the row is ours and canonical); an unknown
// recordVersion is a *record.UnknownVersionError.
func DecodeReservation(value []byte) (Reservation, error) {
	if len(value) > record.MaxValueBytes {
		return Reservation{}, &record.LimitError{Kind: KindRelocationReservation, What: "value bytes", Limit: record.MaxValueBytes, Actual: len(value)}
	}
	if r, ok := decodeCanonicalReservation(value); ok {
		return r, nil
	}
	return decodeReservationStrict(value)
}

// decodeCanonicalReservation reads the canonical bytes piece by piece (what
// our writers always write) and pins them by re-encoding; anything else —
// escapes, numbers beyond 18 digits, another member order, a bad value —
// returns false and takes the strict path, which words the error. The
// strict decode (encoding/json and a re-encoding) was the largest CPU item
// of a move left after the authority record's own codec (benchmarks/README.md).
func decodeCanonicalReservation(value []byte) (Reservation, bool) {
	rd := capReader{in: value}
	var r Reservation
	rd.lit(`{"authorityVersion":`)
	r.AuthorityVersion = rd.str()
	rd.lit(`,"bundle":{"actors":`)
	r.Bundle.Actors = rd.num()
	rd.lit(`,"spotType":`)
	if !rd.null() {
		var st record.SpotTypeSlots
		rd.lit(`{"count":`)
		st.Count = rd.num()
		rd.lit(`,"objectKind":`)
		st.ObjectKind = record.ObjectKind(rd.str())
		rd.lit(`,"stableType":`)
		st.StableType = rd.str()
		rd.lit(`}`)
		r.Bundle.SpotType = &st
	}
	rd.lit(`,"spots":`)
	r.Bundle.Spots = rd.num()
	rd.lit(`},"object":{"id":`)
	r.ObjectID = rd.str()
	rd.lit(`,"kind":`)
	r.ObjectKind = record.ObjectKind(rd.str())
	rd.lit(`},"objectGeneration":"`)
	r.ObjectGeneration = uint64(rd.num())
	rd.lit(`","recordVersion":1,"reservationId":`)
	id := rd.str()
	rd.lit(`,"source":`)
	r.Source = rd.party()
	rd.lit(`,"target":`)
	r.Target = rd.party()
	rd.lit(`}`)
	if rd.bad || rd.pos != len(value) || len(id) != 2*len(r.ID) {
		return Reservation{}, false
	}
	if _, err := hex.Decode(r.ID[:], []byte(id)); err != nil {
		return Reservation{}, false
	}
	again, err := r.Encode() // validates, and pins every piece read
	if err != nil || !bytes.Equal(again, value) {
		return Reservation{}, false
	}
	return r, true
}

// party reads a canonical reservation party.
func (r *capReader) party() Party {
	var p Party
	r.lit(`{"lifecycleGeneration":"`)
	p.Node.LifecycleGeneration = uint64(r.num())
	r.lit(`","meshName":`)
	p.Node.MeshName = r.str()
	r.lit(`,"ownerId":`)
	p.Owner.ID = r.str()
	r.lit(`,"ownerLeaseGeneration":"`)
	p.Owner.LeaseGeneration = uint64(r.num())
	r.lit(`","routingIdHex":`)
	rid, ok := hexBytes(r.span())
	if !ok {
		r.bad = true
	}
	p.Node.RoutingID = rid
	r.lit(`}`)
	return p
}

// decodeReservationStrict is DecodeReservation by encoding/json and a
// canonical re-encoding check: the reference behaviour, and the path that
// words the errors.
func decodeReservationStrict(value []byte) (Reservation, error) {
	var j reservationJSON
	var r Reservation
	err := decodeStrict(value, &j, func() ([]byte, error) {
		if j.RecordVersion != record.RecordVersion {
			return nil, &record.UnknownVersionError{Kind: KindRelocationReservation, Version: strconv.FormatInt(j.RecordVersion, 10)}
		}
		var err error
		r = Reservation{ObjectID: j.Object.ID, ObjectKind: record.ObjectKind(j.Object.Kind), AuthorityVersion: j.AuthorityVersion}
		if err := decodeHexInto(r.ID[:], "reservationId", j.ReservationID); err != nil {
			return nil, err
		}
		if r.ObjectGeneration, err = parseDecString("objectGeneration", j.ObjectGeneration); err != nil {
			return nil, err
		}
		if r.Source, err = j.Source.party("source"); err != nil {
			return nil, err
		}
		if r.Target, err = j.Target.party("target"); err != nil {
			return nil, err
		}
		bj := j.Bundle
		if bj.Actors < 0 || bj.Actors > record.MaxSlots || bj.Spots < 0 || bj.Spots > record.MaxSlots {
			return nil, fmt.Errorf("bundle actors=%d spots=%d outside 0..2^31-1", bj.Actors, bj.Spots)
		}
		r.Bundle = Bundle{Actors: int(bj.Actors), Spots: int(bj.Spots)}
		if st := bj.SpotType; st != nil {
			if st.Count < 0 || st.Count > record.MaxSlots {
				return nil, fmt.Errorf("bundle spotType count %d outside 0..2^31-1", st.Count)
			}
			r.Bundle.SpotType = &record.SpotTypeSlots{ObjectKind: record.ObjectKind(st.ObjectKind), StableType: st.StableType, Count: int(st.Count)}
		}
		return r.Encode()
	})
	if err != nil {
		return Reservation{}, err
	}
	return r, nil
}

// ReservationRow is a reservation key as read: Missing (never secured,
// released, or consumed by the relocation's NewOwner), or Found.
type ReservationRow struct {
	Key         string
	Found       bool
	Reservation Reservation
	Version     string
}

// ReservationRowOf turns a read of key into a ReservationRow, decoding the
// value (ErrCorruptRecord when it does not decode or names another
// reservation than its key).
func ReservationRowOf(key string, rr locstore.ReadResult) (ReservationRow, error) {
	row := ReservationRow{Key: key, Found: rr.Found, Version: rr.Version}
	if !rr.Found {
		row.Version = ""
		return row, nil
	}
	r, err := DecodeReservation(rr.Value)
	if err != nil {
		return ReservationRow{}, &Error{Kind: ErrCorruptRecord, Reason: "reservation row " + key, Err: err}
	}
	if k, err := ReservationKey(r.ID); err != nil || k != key {
		return ReservationRow{}, &Error{Kind: ErrCorruptRecord, Reason: fmt.Sprintf("reservation row %s holds reservation %x", key, r.ID)}
	}
	row.Reservation = r
	return row, nil
}
