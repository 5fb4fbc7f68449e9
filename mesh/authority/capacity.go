package authority

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"unsafe"

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
// A counter is stored as two rows (issue 15): the secured count
// (reserved+active, what a limit bounds) and the active count; reserved is
// their difference. Why two: a creation's Reserve (run by the source) adds
// to the secured count and its Commit (run by the target) moves the slots
// from reserved to active, which leaves the secured count as it is. With
// one row both batches were conditioned on it, so every concurrent creation
// on a node made the source's Reserves and the target's Commits lose to
// each other across processes (0.8 Conflicts per creation, each a read and
// a batch more under the counter's lane). With two rows a Reserve
// conditions the secured row and a Commit the active row only.
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

// Measure names one of the two stored rows of a counter.
type Measure string

// Measures.
const (
	// MeasureSecured is reserved+active: the slots secured on the node run,
	// in use or not; a limit bounds it.
	MeasureSecured Measure = "secured"
	// MeasureActive is the slots in use by Active authority records.
	MeasureActive Measure = "active"
)

// CapacityPreimage is the logical key preimage of one stored row of a
// counter:
//
//	capacity\0{MeshName}\0{hex(RoutingId)}\0{lifecycleGeneration}\0actors\0{secured|active}
//	capacity\0{MeshName}\0{hex(RoutingId)}\0{lifecycleGeneration}\0spots\0{secured|active}
//	capacity\0{MeshName}\0{hex(RoutingId)}\0{lifecycleGeneration}\0spotType\0{userSpot|instanceSpot}\0{stableType}\0{secured|active}
//
// lifecycleGeneration is decimal. The values follow the rules of
// docs/RECORDS.md §1.2 (no NUL inside a value), so the \0 separators fix
// the boundaries.
func CapacityPreimage(c CounterID, m Measure) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if m != MeasureSecured && m != MeasureActive {
		return nil, fmt.Errorf("unknown capacity measure %q", m)
	}
	parts := []string{string(KindCapacity), c.Node.MeshName, hex.EncodeToString(c.Node.RoutingID),
		strconv.FormatUint(c.Node.LifecycleGeneration, 10), string(c.Class)}
	if c.Class == SlotSpotType {
		parts = append(parts, string(c.SpotKind), c.StableType)
	}
	parts = append(parts, string(m))
	var b []byte
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b, nil
}

// CapacityKey is the store key of one row of a counter:
// record.Key(CapacityPreimage(c, m)), "capacity:" + lowercase hex SHA-256
// of the preimage.
func CapacityKey(c CounterID, m Measure) (string, error) {
	p, err := CapacityPreimage(c, m)
	if err != nil {
		return "", err
	}
	return record.Key(p), nil
}

// CounterKeys are the store keys of both rows of counter c.
func CounterKeys(c CounterID) (secured, active string, err error) {
	// The lookup views the routing id's bytes as a string without copying
	// them (the key does not outlive get); put stores a copy.
	rid := c.Node.RoutingID
	mk := counterMemoKey{mesh: c.Node.MeshName, rid: unsafe.String(unsafe.SliceData(rid), len(rid)), gen: c.Node.LifecycleGeneration,
		class: c.Class, kind: c.SpotKind, stableType: c.StableType}
	if p, ok := counterKeys.get(mk); ok {
		return p.secured, p.active, nil
	}
	mk.rid = string(rid)
	if secured, err = CapacityKey(c, MeasureSecured); err != nil {
		return "", "", err
	}
	if active, err = CapacityKey(c, MeasureActive); err != nil {
		return "", "", err
	}
	counterKeys.put(mk, counterKeyPair{secured: secured, active: active})
	return secured, active, nil
}

// Usage is a capacity counter's value: slots reserved and slots active.
type Usage struct {
	Reserved int
	Active   int
}

// Total is Reserved+Active, the amount a limit bounds.
func (u Usage) Total() int { return u.Reserved + u.Active }

// capacityRecordVersion is the recordVersion of a counter row. Version 1
// was one row per counter holding {active, reserved}; version 2 is one row
// per measure holding count.
const capacityRecordVersion = 2

// capacityJSON mirrors the capacity row's members for decoding.
type capacityJSON struct {
	Class               string  `json:"class"`
	Count               int64   `json:"count"`
	LifecycleGeneration string  `json:"lifecycleGeneration"`
	Measure             string  `json:"measure"`
	MeshName            string  `json:"meshName"`
	ObjectKind          *string `json:"objectKind"`
	RecordVersion       int64   `json:"recordVersion"`
	RoutingIDHex        string  `json:"routingIdHex"`
	StableType          *string `json:"stableType"`
}

// EncodeCapacity returns the canonical value of the m row of counter c
// holding count:
//
//	{"class":"…","count":N,"lifecycleGeneration":"N","measure":"secured|active",
//	 "meshName":"…","objectKind":null|"…","recordVersion":2,
//	 "routingIdHex":"…","stableType":null|"…"}
//
// The row's identity is repeated in the value so that an operator (or a
// sweep over the "capacity:" prefix) can tell which counter a row is, and so
// that a reader detects a row read under the wrong key.
func EncodeCapacity(c CounterID, m Measure, count int) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	if m != MeasureSecured && m != MeasureActive {
		return nil, fmt.Errorf("unknown capacity measure %q", m)
	}
	if count < 0 || count > record.MaxSlots {
		return nil, fmt.Errorf("%s count %d outside 0..2^31-1", m, count)
	}
	return appendCapacity(make([]byte, 0, 170+len(c.Node.MeshName)+2*len(c.Node.RoutingID)+len(c.StableType)), c, m, count), nil
}

// appendCapacity writes the canonical value of a valid row. The members
// are written in their canonical (sorted) order by hand, so that encoding,
// and the canonical check of decoding, build no intermediate values.
func appendCapacity(b []byte, c CounterID, m Measure, count int) []byte {
	b = append(b, `{"class":`...)
	b = appendJSONString(b, string(c.Class))
	b = append(b, `,"count":`...)
	b = strconv.AppendUint(b, uint64(count), 10)
	b = append(b, `,"lifecycleGeneration":"`...)
	b = strconv.AppendUint(b, c.Node.LifecycleGeneration, 10)
	b = append(b, `","measure":"`...)
	b = append(b, m...)
	b = append(b, `","meshName":`...)
	b = appendJSONString(b, c.Node.MeshName)
	b = append(b, `,"objectKind":`...)
	if c.Class == SlotSpotType {
		b = appendJSONString(b, string(c.SpotKind))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"recordVersion":`...)
	b = strconv.AppendUint(b, capacityRecordVersion, 10)
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
// it only if the row read is valid and encodes back to exactly value. Such
// a value is one DecodeCapacity's strict path accepts with the same result;
// anything else (escapes, other spellings, every error) goes to that path,
// which also words the errors.
func decodeCanonicalCapacity(value []byte) (CounterID, Measure, int, bool) {
	r := capReader{in: value}
	var id CounterID
	r.lit(`{"class":`)
	class := r.span()
	r.lit(`,"count":`)
	count := r.num()
	r.lit(`,"lifecycleGeneration":"`)
	id.Node.LifecycleGeneration = uint64(r.num())
	r.lit(`","measure":`)
	var measure Measure
	switch string(r.span()) {
	case string(MeasureSecured):
		measure = MeasureSecured
	case string(MeasureActive):
		measure = MeasureActive
	}
	r.lit(`,"meshName":`)
	mesh := r.str()
	r.lit(`,"objectKind":`)
	kind, hasKind := r.nullStr()
	r.lit(`,"recordVersion":2,"routingIdHex":`)
	ridHex := r.span()
	r.lit(`,"stableType":`)
	stable, hasStable := r.nullStr()
	r.lit(`}`)
	if r.bad || r.pos != len(value) || hasKind != hasStable || measure == "" {
		return CounterID{}, "", 0, false
	}
	switch string(class) {
	case string(SlotActors):
		id.Class = SlotActors
	case string(SlotSpots):
		id.Class = SlotSpots
	case string(SlotSpotType):
		id.Class = SlotSpotType
	default:
		return CounterID{}, "", 0, false
	}
	switch kind {
	case "":
	case string(record.ObjectUserSpot):
		id.SpotKind = record.ObjectUserSpot
	case string(record.ObjectInstanceSpot):
		id.SpotKind = record.ObjectInstanceSpot
	default:
		return CounterID{}, "", 0, false
	}
	rid, ok := hexBytes(ridHex)
	if !ok {
		return CounterID{}, "", 0, false
	}
	id.Node.MeshName, id.Node.RoutingID, id.StableType = mesh, rid, stable
	if id.validate() != nil || count > record.MaxSlots {
		return CounterID{}, "", 0, false
	}
	var buf [256]byte
	if !bytes.Equal(appendCapacity(buf[:0], id, measure, count), value) {
		return CounterID{}, "", 0, false
	}
	return id, measure, count, true
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
	if b := r.span(); !r.bad {
		return string(b)
	}
	return ""
}

// span reads a JSON string without escapes and returns its bytes in the
// input (no copy: for a value only compared or decoded further).
func (r *capReader) span() []byte {
	r.lit(`"`)
	start := r.pos
	for !r.bad && r.pos < len(r.in) {
		switch c := r.in[r.pos]; {
		case c == '"':
			b := r.in[start:r.pos]
			r.pos++
			return b
		case c == '\\' || c < 0x20:
			r.bad = true
		default:
			r.pos++
		}
	}
	r.bad = true
	return nil
}

// hexBytes decodes hex text into a new slice (one allocation).
func hexBytes(h []byte) ([]byte, bool) {
	out := make([]byte, hex.DecodedLen(len(h)))
	if _, err := hex.Decode(out, h); err != nil {
		return nil, false
	}
	return out, true
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

// DecodeCapacity reads a capacity row value and returns the counter and
// measure it names and its count. Only the canonical bytes are accepted (our
// writers only write those, and every write is a whole-value CAS); a row of
// another recordVersion (the one-row layout of version 1 included) is a
// *record.UnknownVersionError.
func DecodeCapacity(value []byte) (CounterID, Measure, int, error) {
	if len(value) <= record.MaxValueBytes {
		if id, m, n, ok := decodeCanonicalCapacity(value); ok {
			return id, m, n, nil
		}
	}
	return decodeCapacityStrict(value)
}

// decodeCapacityStrict is DecodeCapacity by encoding/json and a canonical
// re-encoding check: the reference behaviour, and the path that words the
// errors.
func decodeCapacityStrict(value []byte) (CounterID, Measure, int, error) {
	var j capacityJSON
	var id CounterID
	if len(value) > record.MaxValueBytes {
		return id, "", 0, fmt.Errorf("capacity value is %d bytes, limit %d", len(value), record.MaxValueBytes)
	}
	// A row of another layout (version 1 held {active, reserved} in one row)
	// has other members: name its version rather than an unknown member.
	var v struct {
		RecordVersion *int64 `json:"recordVersion"`
	}
	if json.Unmarshal(value, &v) == nil && v.RecordVersion != nil && *v.RecordVersion != capacityRecordVersion {
		return id, "", 0, &record.UnknownVersionError{Kind: KindCapacity, Version: strconv.FormatInt(*v.RecordVersion, 10)}
	}
	err := decodeStrict(value, &j, func() ([]byte, error) {
		if j.RecordVersion != capacityRecordVersion {
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
		if j.Count < 0 || j.Count > record.MaxSlots {
			return nil, fmt.Errorf("count %d outside 0..2^31-1", j.Count)
		}
		return EncodeCapacity(id, Measure(j.Measure), int(j.Count))
	})
	if err != nil {
		return CounterID{}, "", 0, err
	}
	return id, Measure(j.Measure), int(j.Count), nil
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
	out := make([]slotAmount, 0, 3) // at most one per class
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
