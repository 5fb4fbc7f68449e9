package authority

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/meshnode/meshnode/mesh/record"
)

// Capacity model (spec §3.3, §4). Every MeshNode run has one counter per
// slot class: actors, spots, and one per (Spot kind, stable type). A
// counter holds how many slots are reserved (secured by a Reserve or a
// relocation's SecureCapacity, not yet in use) and how many are active (in
// use by an Active authority record). A limit of 0 is unlimited; otherwise
// reserved+active never exceeds it. Limits are the node's configuration
// (its descriptor's capacity limits) and are passed in, not stored: the
// counters are usage only.
//
// Why per run (lifecycleGeneration) and not per RoutingId: an authority
// record's allocation names its node by (descriptor {meshName,
// routingIdHex}, descriptorLifecycleGeneration), so Commit, NewOwner and
// Delete find the counters to change from the record alone; and a restarted
// node (new run) hosts none of the previous run's objects, which recovery
// moves (NewOwner) or deletes, returning the old run's slots.

// KindCapacity is the record kind (first preimage segment and store-key
// prefix) of capacity counters. Project-specific, like record.KindCounter.
const KindCapacity record.Kind = "capacity"

// Node identifies one MeshNode run: the key inputs of its descriptor and the
// descriptor's lifecycleGeneration.
type Node struct {
	MeshName            string
	RoutingID           []byte
	LifecycleGeneration uint64
}

func (n Node) validate() error {
	if err := record.ValidateMeshName(n.MeshName); err != nil {
		return err
	}
	if err := record.ValidateRoutingID(n.RoutingID); err != nil {
		return err
	}
	if !record.Generation(n.LifecycleGeneration).Valid() {
		return fmt.Errorf("lifecycleGeneration %d outside 1..2^63-1", n.LifecycleGeneration)
	}
	return nil
}

// Equal reports whether n and o are the same node run.
func (n Node) Equal(o Node) bool {
	return n.MeshName == o.MeshName && bytes.Equal(n.RoutingID, o.RoutingID) && n.LifecycleGeneration == o.LifecycleGeneration
}

func (n Node) String() string {
	return n.MeshName + "/" + hex.EncodeToString(n.RoutingID) + "@" + strconv.FormatUint(n.LifecycleGeneration, 10)
}

// NodeOf returns the node run an authority record's allocation names.
func NodeOf(a record.Authority) Node {
	return Node{
		MeshName:            a.Allocation.Descriptor.MeshName,
		RoutingID:           a.Allocation.Descriptor.RoutingID,
		LifecycleGeneration: uint64(a.Allocation.DescriptorLifecycleGeneration),
	}
}

// SlotClass is a capacity counter's class.
type SlotClass string

// Slot classes.
const (
	SlotActors   SlotClass = "actors"
	SlotSpots    SlotClass = "spots"
	SlotSpotType SlotClass = "spotType"
)

// CounterID names one capacity counter: a node run and a slot class; for
// SlotSpotType also the Spot kind (userSpot or instanceSpot) and stable type.
type CounterID struct {
	Node       Node
	Class      SlotClass
	SpotKind   record.ObjectKind // SlotSpotType only
	StableType string            // SlotSpotType only
}

func (c CounterID) String() string {
	if c.Class == SlotSpotType {
		return c.Node.String() + "/" + string(c.Class) + "/" + string(c.SpotKind) + "/" + c.StableType
	}
	return c.Node.String() + "/" + string(c.Class)
}

func (c CounterID) equal(o CounterID) bool {
	return c.Node.Equal(o.Node) && c.Class == o.Class && c.SpotKind == o.SpotKind && c.StableType == o.StableType
}

func (c CounterID) validate() error {
	if err := c.Node.validate(); err != nil {
		return err
	}
	switch c.Class {
	case SlotActors, SlotSpots:
		if c.SpotKind != "" || c.StableType != "" {
			return fmt.Errorf("counter class %s takes no Spot kind or stable type", c.Class)
		}
	case SlotSpotType:
		if c.SpotKind != record.ObjectUserSpot && c.SpotKind != record.ObjectInstanceSpot {
			return fmt.Errorf("spot kind %q is not userSpot or instanceSpot", c.SpotKind)
		}
		if err := record.ValidateStableType(c.StableType); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown slot class %q", c.Class)
	}
	return nil
}

// CapacityPreimage is the counter's logical key preimage:
//
//	capacity\0{MeshName}\0{hex(RoutingId)}\0{lifecycleGeneration}\0actors
//	capacity\0{MeshName}\0{hex(RoutingId)}\0{lifecycleGeneration}\0spots
//	capacity\0{MeshName}\0{hex(RoutingId)}\0{lifecycleGeneration}\0spotType\0{userSpot|instanceSpot}\0{stableType}
//
// lifecycleGeneration is decimal. The values follow the rules of
// docs/RECORDS.md §1.2 (no NUL inside a value), so the \0 separators fix
// the boundaries.
func CapacityPreimage(c CounterID) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	parts := []string{string(KindCapacity), c.Node.MeshName, hex.EncodeToString(c.Node.RoutingID),
		strconv.FormatUint(c.Node.LifecycleGeneration, 10), string(c.Class)}
	if c.Class == SlotSpotType {
		parts = append(parts, string(c.SpotKind), c.StableType)
	}
	var b []byte
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b, nil
}

// CapacityKey is the counter's store key: record.Key(CapacityPreimage(c)),
// "capacity:" + lowercase hex SHA-256 of the preimage.
func CapacityKey(c CounterID) (string, error) {
	p, err := CapacityPreimage(c)
	if err != nil {
		return "", err
	}
	return record.Key(p), nil
}

// Usage is a capacity counter's value: slots reserved and slots active.
type Usage struct {
	Reserved int
	Active   int
}

// Total is Reserved+Active, the amount a limit bounds.
func (u Usage) Total() int { return u.Reserved + u.Active }

// capacityJSON mirrors the capacity record's members for decoding.
type capacityJSON struct {
	Active              int64   `json:"active"`
	Class               string  `json:"class"`
	LifecycleGeneration string  `json:"lifecycleGeneration"`
	MeshName            string  `json:"meshName"`
	ObjectKind          *string `json:"objectKind"`
	RecordVersion       int64   `json:"recordVersion"`
	Reserved            int64   `json:"reserved"`
	RoutingIDHex        string  `json:"routingIdHex"`
	StableType          *string `json:"stableType"`
}

// EncodeCapacity returns the canonical value of counter c holding u:
//
//	{"active":N,"class":"…","lifecycleGeneration":"N","meshName":"…",
//	 "objectKind":null|"…","recordVersion":1,"reserved":N,
//	 "routingIdHex":"…","stableType":null|"…"}
//
// The counter's identity is repeated in the value so that an operator (or a
// sweep over the "capacity:" prefix) can tell which counter a row is, and so
// that a reader detects a row read under the wrong key.
func EncodeCapacity(c CounterID, u Usage) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if u.Reserved < 0 || u.Active < 0 || u.Reserved > record.MaxSlots || u.Active > record.MaxSlots || u.Total() > record.MaxSlots {
		return nil, fmt.Errorf("usage reserved=%d active=%d outside 0..2^31-1", u.Reserved, u.Active)
	}
	return appendCapacity(make([]byte, 0, 160+len(c.Node.MeshName)+2*len(c.Node.RoutingID)+len(c.StableType)), c, u), nil
}

// appendCapacity writes the canonical value of a valid counter and usage.
// The members are written in their canonical (sorted) order by hand, so
// that encoding, and the canonical check of decoding, build no
// intermediate values.
func appendCapacity(b []byte, c CounterID, u Usage) []byte {
	b = append(b, `{"active":`...)
	b = strconv.AppendUint(b, uint64(u.Active), 10)
	b = append(b, `,"class":`...)
	b = appendJSONString(b, string(c.Class))
	b = append(b, `,"lifecycleGeneration":"`...)
	b = strconv.AppendUint(b, c.Node.LifecycleGeneration, 10)
	b = append(b, `","meshName":`...)
	b = appendJSONString(b, c.Node.MeshName)
	b = append(b, `,"objectKind":`...)
	if c.Class == SlotSpotType {
		b = appendJSONString(b, string(c.SpotKind))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"recordVersion":`...)
	b = strconv.AppendUint(b, record.RecordVersion, 10)
	b = append(b, `,"reserved":`...)
	b = strconv.AppendUint(b, uint64(u.Reserved), 10)
	b = append(b, `,"routingIdHex":"`...)
	b = hex.AppendEncode(b, c.Node.RoutingID)
	b = append(b, `","stableType":`...)
	if c.Class == SlotSpotType {
		b = appendJSONString(b, c.StableType)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// decodeCanonicalCapacity is DecodeCapacity's fast path: it reads value
// as laid out by appendCapacity (strings without escapes only) and accepts
// it only if the counter and usage read are valid and encode back to
// exactly value. Such a value is one DecodeCapacity's strict path accepts
// with the same result; anything else (escapes, other spellings, every
// error) goes to that path, which also words the errors.
func decodeCanonicalCapacity(value []byte) (CounterID, Usage, bool) {
	r := capReader{in: value}
	var id CounterID
	var u Usage
	r.lit(`{"active":`)
	u.Active = r.num()
	r.lit(`,"class":`)
	class := r.str()
	r.lit(`,"lifecycleGeneration":"`)
	id.Node.LifecycleGeneration = uint64(r.num())
	r.lit(`","meshName":`)
	mesh := r.str()
	r.lit(`,"objectKind":`)
	kind, hasKind := r.nullStr()
	r.lit(`,"recordVersion":1,"reserved":`)
	u.Reserved = r.num()
	r.lit(`,"routingIdHex":`)
	ridHex := r.str()
	r.lit(`,"stableType":`)
	stable, hasStable := r.nullStr()
	r.lit(`}`)
	if r.bad || r.pos != len(value) || hasKind != hasStable {
		return CounterID{}, Usage{}, false
	}
	switch class {
	case string(SlotActors):
		id.Class = SlotActors
	case string(SlotSpots):
		id.Class = SlotSpots
	case string(SlotSpotType):
		id.Class = SlotSpotType
	default:
		return CounterID{}, Usage{}, false
	}
	switch kind {
	case "":
	case string(record.ObjectUserSpot):
		id.SpotKind = record.ObjectUserSpot
	case string(record.ObjectInstanceSpot):
		id.SpotKind = record.ObjectInstanceSpot
	default:
		return CounterID{}, Usage{}, false
	}
	rid, err := hex.DecodeString(ridHex)
	if err != nil {
		return CounterID{}, Usage{}, false
	}
	id.Node.MeshName, id.Node.RoutingID, id.StableType = mesh, rid, stable
	if id.validate() != nil || u.Reserved > record.MaxSlots || u.Active > record.MaxSlots || u.Total() > record.MaxSlots {
		return CounterID{}, Usage{}, false
	}
	var buf [256]byte
	if !bytes.Equal(appendCapacity(buf[:0], id, u), value) {
		return CounterID{}, Usage{}, false
	}
	return id, u, true
}

// capReader reads the pieces of a canonical capacity value; any surprise
// sets bad, after which every read is a no-op.
type capReader struct {
	in  []byte
	pos int
	bad bool
}

func (r *capReader) lit(s string) {
	if r.bad || len(r.in)-r.pos < len(s) || string(r.in[r.pos:r.pos+len(s)]) != s {
		r.bad = true
		return
	}
	r.pos += len(s)
}

// num reads 1 to 18 digits, which cannot overflow (a longer number takes
// the strict path); the re-encoding check then pins what was read to its
// canonical form.
func (r *capReader) num() int {
	start, n := r.pos, 0
	for !r.bad && r.pos < len(r.in) && r.pos-start < 18 && r.in[r.pos] >= '0' && r.in[r.pos] <= '9' {
		n = n*10 + int(r.in[r.pos]-'0')
		r.pos++
	}
	if r.pos == start {
		r.bad = true
	}
	return n
}

// str reads a JSON string without escapes and returns a copy.
func (r *capReader) str() string {
	r.lit(`"`)
	start := r.pos
	for !r.bad && r.pos < len(r.in) {
		switch c := r.in[r.pos]; {
		case c == '"':
			s := string(r.in[start:r.pos])
			r.pos++
			return s
		case c == '\\' || c < 0x20:
			r.bad = true
		default:
			r.pos++
		}
	}
	r.bad = true
	return ""
}

// null consumes null when it comes next and reports whether it did.
func (r *capReader) null() bool {
	if !r.bad && len(r.in)-r.pos >= 4 && string(r.in[r.pos:r.pos+4]) == "null" {
		r.pos += 4
		return true
	}
	return false
}

// nullStr reads null or a string; ok is false for null.
func (r *capReader) nullStr() (string, bool) {
	if r.null() {
		return "", false
	}
	return r.str(), true
}

// DecodeCapacity reads a capacity counter value and returns the counter it
// names and its usage. Only the canonical bytes are accepted (our writers
// only write those, and every write is a whole-value CAS).
func DecodeCapacity(value []byte) (CounterID, Usage, error) {
	if len(value) <= record.MaxValueBytes {
		if id, u, ok := decodeCanonicalCapacity(value); ok {
			return id, u, nil
		}
	}
	return decodeCapacityStrict(value)
}

// decodeCapacityStrict is DecodeCapacity by encoding/json and a canonical
// re-encoding check: the reference behaviour, and the path that words the
// errors.
func decodeCapacityStrict(value []byte) (CounterID, Usage, error) {
	var j capacityJSON
	var id CounterID
	var u Usage
	if len(value) > record.MaxValueBytes {
		return id, u, fmt.Errorf("capacity value is %d bytes, limit %d", len(value), record.MaxValueBytes)
	}
	err := decodeStrict(value, &j, func() ([]byte, error) {
		if j.RecordVersion != record.RecordVersion {
			return nil, &record.UnknownVersionError{Kind: KindCapacity, Version: strconv.FormatInt(j.RecordVersion, 10)}
		}
		rid, err := hex.DecodeString(j.RoutingIDHex)
		if err != nil {
			return nil, fmt.Errorf("routingIdHex: %w", err)
		}
		lg, err := parseDecString("lifecycleGeneration", j.LifecycleGeneration)
		if err != nil {
			return nil, err
		}
		id = CounterID{Node: Node{MeshName: j.MeshName, RoutingID: rid, LifecycleGeneration: lg}, Class: SlotClass(j.Class)}
		if (j.ObjectKind == nil) != (j.StableType == nil) {
			return nil, fmt.Errorf("objectKind and stableType must both be null or both be set")
		}
		if j.ObjectKind != nil {
			id.SpotKind, id.StableType = record.ObjectKind(*j.ObjectKind), *j.StableType
		}
		if j.Reserved < 0 || j.Active < 0 || j.Reserved > record.MaxSlots || j.Active > record.MaxSlots {
			return nil, fmt.Errorf("usage reserved=%d active=%d outside 0..2^31-1", j.Reserved, j.Active)
		}
		u = Usage{Reserved: int(j.Reserved), Active: int(j.Active)}
		return EncodeCapacity(id, u)
	})
	if err != nil {
		return CounterID{}, Usage{}, err
	}
	return id, u, nil
}

// Limits are a node run's capacity limits for one object's counters: the
// node-wide Actor and Spot limits and the limit of the object's (Spot kind,
// stable type) (§4: 0 means unlimited, otherwise 1..2^31-1; negative is a
// configuration error). SpotType is ignored for an Actor.
type Limits struct {
	Actors   int
	Spots    int
	SpotType int
}

func (l Limits) validate() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"actors", l.Actors}, {"spots", l.Spots}, {"spotType", l.SpotType}} {
		if v.n < 0 || v.n > record.MaxSlots {
			return fmt.Errorf("%s limit %d outside 0..2^31-1", v.name, v.n)
		}
	}
	return nil
}

func (l Limits) of(class SlotClass) int {
	switch class {
	case SlotActors:
		return l.Actors
	case SlotSpots:
		return l.Spots
	}
	return l.SpotType
}

// Bundle is a set of slots secured or used together (§3.3). It is the
// authority record's allocation capacity type itself, so that what a record
// says it secured and what the counters move are the same value.
type Bundle = record.AllocationCapacity

// BundleFor returns the bundle one object of kind needs (§3.3): an Actor
// (including an Entry Spot's Actor, §4) 1 actor slot; a User or Instance
// Spot 1 spot slot plus 1 slot of its (kind, stable type). Entry Spots have
// no authority allocation and are refused.
func BundleFor(kind record.ObjectKind, stableType string) (Bundle, error) {
	if err := record.ValidateStableType(stableType); err != nil {
		return Bundle{}, err
	}
	switch kind {
	case record.ObjectActor:
		return Bundle{Actors: 1}, nil
	case record.ObjectUserSpot, record.ObjectInstanceSpot:
		return Bundle{Spots: 1, SpotType: &record.SpotTypeSlots{ObjectKind: kind, StableType: stableType, Count: 1}}, nil
	}
	return Bundle{}, fmt.Errorf("object kind %q has no capacity bundle (actor, userSpot or instanceSpot)", kind)
}

// RelocationBundle is what moving a User Spot together with its member
// Actors secures on the target (§3.3 third row): 1 spot slot, 1 slot of the
// Spot's type, and one actor slot per member Actor.
func RelocationBundle(spotKind record.ObjectKind, stableType string, memberActors int) (Bundle, error) {
	b, err := BundleFor(spotKind, stableType)
	if err != nil {
		return Bundle{}, err
	}
	if b.SpotType == nil {
		return Bundle{}, fmt.Errorf("object kind %q is not a Spot", spotKind)
	}
	if memberActors < 0 || memberActors > record.MaxSlots {
		return Bundle{}, fmt.Errorf("member actor count %d outside 0..2^31-1", memberActors)
	}
	b.Actors = memberActors
	return b, nil
}

// validateBundle checks ranges and that the bundle holds at least one
// positive slot (§3.3).
func validateBundle(b Bundle) error {
	if b.Actors < 0 || b.Actors > record.MaxSlots || b.Spots < 0 || b.Spots > record.MaxSlots {
		return fmt.Errorf("bundle actors=%d spots=%d outside 0..2^31-1", b.Actors, b.Spots)
	}
	total := b.Actors + b.Spots
	if st := b.SpotType; st != nil {
		if st.ObjectKind != record.ObjectUserSpot && st.ObjectKind != record.ObjectInstanceSpot {
			return fmt.Errorf("bundle spot type kind %q is not userSpot or instanceSpot", st.ObjectKind)
		}
		if err := record.ValidateStableType(st.StableType); err != nil {
			return err
		}
		if st.Count < 0 || st.Count > record.MaxSlots {
			return fmt.Errorf("bundle spot type count %d outside 0..2^31-1", st.Count)
		}
		total += st.Count
	}
	if total == 0 {
		return fmt.Errorf("a secured bundle needs at least one positive slot")
	}
	return nil
}

// slotsOf lists the counters a bundle touches on node n, with their slot
// counts, in class order (actors, spots, spotType). Zero counts are left
// out: a bundle without Spot slots reads and writes no Spot counter.
func slotsOf(n Node, b Bundle) []slotAmount {
	var out []slotAmount
	if b.Actors > 0 {
		out = append(out, slotAmount{CounterID{Node: n, Class: SlotActors}, b.Actors})
	}
	if b.Spots > 0 {
		out = append(out, slotAmount{CounterID{Node: n, Class: SlotSpots}, b.Spots})
	}
	if st := b.SpotType; st != nil && st.Count > 0 {
		out = append(out, slotAmount{CounterID{Node: n, Class: SlotSpotType, SpotKind: st.ObjectKind, StableType: st.StableType}, st.Count})
	}
	return out
}

type slotAmount struct {
	id    CounterID
	slots int
}

// CountersFor lists the counters a bundle touches on node n: the rows the
// framework must read (and put in the Snapshot) before planning an operation
// that moves that bundle on that node.
func CountersFor(n Node, b Bundle) []CounterID {
	s := slotsOf(n, b)
	out := make([]CounterID, len(s))
	for i, a := range s {
		out[i] = a.id
	}
	return out
}
