package chunk

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// Format constants (docs/RESTORE-PAYLOAD.md §2).
const (
	// Magic opens every payload: "MNRP", meshnode restore payload.
	Magic = "MNRP"
	// FormatVersion is the highest version this build writes and reads.
	// Version 2 adds the session section after the timers; Encode writes
	// version 1 (no section) when a payload has no sessions, so such a
	// payload is byte for byte what a version 1 build writes and reads.
	// Decode reads both.
	FormatVersion = 2

	// headerFixed is magic, version, codec, kind, policy, objectGeneration.
	headerFixed = 4 + 1 + 1 + 1 + 1 + 8
	// minEnvelope is an envelope with every variable field empty.
	minEnvelope = 1 + 4 + 2 + 4 + 4
	// minTimer is a timer with an empty name.
	minTimer = 2 + 8 + 8
	// maxGeneration is the largest ObjectGeneration a store can hold (§3.2).
	maxGeneration = 1<<63 - 1
)

// Object is the identity of the moving Actor or Spot as the payload records
// it. The target checks it against the Restore request and the location
// record before restoring (§9.1).
type Object struct {
	Kind       spot.ObjectKind // actor, user spot or instance spot
	ID         string          // ActorId or SpotId, 1..255 bytes UTF-8, no NUL
	Generation uint64          // ObjectGeneration, 1..2^63-1; kept across moves (§3.2)
	StableType string          // 1..255 bytes UTF-8, no NUL
}

// Payload is one object's handoff payload: what the source captured and
// keeps in memory until cutover (§1.3 steps 3, 8).
type Payload struct {
	Object Object
	// Policy is the factory's relocation policy: PolicyRecreate (no state)
	// or PolicyPreserveState (State carries the snapshot adapter's bytes,
	// possibly empty). PolicyDisabled never produces a payload (§1.3 table).
	Policy spot.Policy
	// State is the application state; it must be empty under
	// PolicyRecreate. After Decode it is nil when empty.
	State []byte
	// Captured is the not-yet-run queue in order and the pending timers.
	Captured spot.Captured
	// Sessions are the Actor's bound Sessions (version 2 only; nil after
	// Decode when there are none).
	Sessions []SessionBinding
}

// EncodeOptions configure Encode.
type EncodeOptions struct {
	Compression Compression // default CompressNone
	Limits      Limits
	// force keeps the compressed form whatever its size (tests only).
	force bool
}

// Encode validates p and renders it in the payload format. It fails with an
// error wrapping ErrInvalid for a value the format cannot carry, or
// ErrTooLarge when the body or the payload exceeds the limits. The result
// shares no memory with p.
func Encode(p *Payload, opt EncodeOptions) ([]byte, error) {
	lim, err := opt.Limits.Normalize()
	if err != nil {
		return nil, err
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	bodyLen, err := p.bodyLen(lim.MaxBody)
	if err != nil {
		return nil, err
	}
	hdrLen := headerFixed + 1 + len(p.Object.ID) + 1 + len(p.Object.StableType) + 8
	rawLen := uint64(hdrLen) + bodyLen
	codec := CodecRaw
	switch opt.Compression {
	case CompressNone:
	case CompressS2:
		codec = CodecS2
	case CompressZstd:
		codec = CodecZstd
	default:
		return nil, invalid("compression", "undefined compression %d", opt.Compression)
	}
	if rawLen > lim.MaxPayload && codec == CodecRaw {
		return nil, fmt.Errorf("%w: payload of %d bytes above MaxPayload %d", ErrTooLarge, rawLen, lim.MaxPayload)
	}
	// The raw form is built in place, header then body in one buffer, so
	// the raw path copies every byte exactly once.
	raw := make([]byte, rawLen)
	w := writer{b: raw}
	p.putHeader(&w, CodecRaw, bodyLen)
	p.putBody(&w)
	out := raw
	if codec != CodecRaw && (bodyLen >= AutoMinBody || opt.force) {
		z, ok, err := compress(codec, raw[:hdrLen], raw[hdrLen:])
		if err != nil {
			return nil, err
		}
		if ok {
			z[5] = byte(codec)
			saves := uint64(len(z)-hdrLen) <= bodyLen-bodyLen/8
			fitsOnly := rawLen > lim.MaxPayload && uint64(len(z)) <= lim.MaxPayload
			if saves || fitsOnly || opt.force {
				out = z
			}
		}
	}
	if uint64(len(out)) > lim.MaxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes above MaxPayload %d", ErrTooLarge, len(out), lim.MaxPayload)
	}
	return out, nil
}

// Decode parses a payload. Errors are *FormatError values matching
// ErrMalformed and their kind (ErrTruncated, ErrTrailing, ErrMagic,
// ErrVersion, ErrCorrupt, ErrInvalid, ErrTooLarge). Every length and count
// is checked against the bytes present and the limits before anything sized
// by it is allocated. Byte fields of the result alias b (raw body) or the
// decompressed body: b must not be modified while the result is in use.
func Decode(b []byte, lim Limits) (*Payload, error) {
	lim, err := lim.Normalize()
	if err != nil {
		return nil, err
	}
	if uint64(len(b)) > lim.MaxPayload {
		return nil, &FormatError{Kind: ErrTooLarge, Field: "payload", Detail: fmt.Sprintf("%d bytes above MaxPayload %d", len(b), lim.MaxPayload)}
	}
	r := reader{b: b}
	p := &Payload{}
	if m := r.take(named("magic"), 4); m != nil && string(m) != Magic {
		r.fail(ErrMagic, named("magic"), r.off-4, fmt.Sprintf("%q", m))
	}
	version := r.u8(named("version"))
	if r.err == nil && version != versionNoSessions && version != FormatVersion {
		r.fail(ErrVersion, named("version"), r.off-1, fmt.Sprintf("version %d, this build reads %d and %d", version, versionNoSessions, FormatVersion))
	}
	codec := Codec(r.u8(named("codec")))
	if r.err == nil && codec != CodecRaw && codec != CodecS2 && codec != CodecZstd {
		r.fail(ErrInvalid, named("codec"), r.off-1, fmt.Sprintf("undefined codec %d", codec))
	}
	p.Object.Kind = readEnum(&r, named("object.kind"), "object kind", kindWire[:])
	p.Policy = readEnum(&r, named("policy"), "policy", policyWire[:])
	p.Object.Generation = r.u64(named("object.generation"))
	if r.err == nil && (p.Object.Generation == 0 || p.Object.Generation > maxGeneration) {
		r.fail(ErrInvalid, named("object.generation"), r.off-8, fmt.Sprintf("%d outside 1..2^63-1", p.Object.Generation))
	}
	p.Object.ID = r.text8(named("object.id"))
	p.Object.StableType = r.text8(named("object.stableType"))
	bodyLen := r.u64(named("bodyLength"))
	if r.err == nil && bodyLen > lim.MaxBody {
		r.fail(ErrTooLarge, named("bodyLength"), r.off-8, fmt.Sprintf("%d above MaxBody %d", bodyLen, lim.MaxBody))
	}
	if r.err != nil {
		return nil, r.err
	}
	stored := b[r.off:]
	var body []byte
	switch codec {
	case CodecRaw:
		if uint64(len(stored)) < bodyLen {
			return nil, &FormatError{Kind: ErrTruncated, Field: "body", Offset: r.off, Detail: fmt.Sprintf("body length %d, %d bytes present", bodyLen, len(stored))}
		}
		if uint64(len(stored)) > bodyLen {
			return nil, &FormatError{Kind: ErrTrailing, Field: "body", Offset: r.off + int(bodyLen), Detail: fmt.Sprintf("%d bytes after the body", uint64(len(stored))-bodyLen)}
		}
		body = stored
	default:
		body, err = decompress(codec, stored, bodyLen, r.off)
		if err != nil {
			return nil, err
		}
	}
	br := reader{b: body, body: true}
	br.decodeBody(p)
	if version == FormatVersion {
		br.decodeSessions(p)
	}
	if br.err == nil && br.off != len(body) {
		br.fail(ErrTrailing, named("body"), br.off, fmt.Sprintf("%d bytes after the last section", len(body)-br.off))
	}
	if br.err != nil {
		return nil, br.err
	}
	return p, nil
}

// ---- validation and size (encode side) ----

func invalid(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, a...))
}

func (p *Payload) validate() error {
	if p == nil {
		return invalid("payload", "nil")
	}
	if _, ok := wireCode(kindWire[:], p.Object.Kind); !ok {
		return invalid("object.kind", "undefined object kind %d", p.Object.Kind)
	}
	if _, ok := wireCode(policyWire[:], p.Policy); !ok {
		return invalid("policy", "policy %v carries no payload (only recreate or preserve-state)", p.Policy)
	}
	if g := p.Object.Generation; g == 0 || g > maxGeneration {
		return invalid("object.generation", "%d outside 1..2^63-1", g)
	}
	if e := checkText8(p.Object.ID); e != "" {
		return invalid("object.id", "%s", e)
	}
	if e := checkText8(p.Object.StableType); e != "" {
		return invalid("object.stableType", "%s", e)
	}
	if p.Policy == spot.PolicyRecreate && len(p.State) != 0 {
		return invalid("state", "policy recreate carries no application state (%d bytes given)", len(p.State))
	}
	for i, env := range p.Captured.Queue {
		if e := checkEnvelope(env.Kind, len(env.Timer), len(env.ReplyRoute)); e != "" {
			return invalid(fmt.Sprintf("queue[%d]", i), "%s", e)
		}
		for _, f := range [...]struct {
			name string
			n    int
			max  uint64
		}{{"body", len(env.Body), math.MaxUint32}, {"timer", len(env.Timer), math.MaxUint16},
			{"replyRoute", len(env.ReplyRoute), math.MaxUint32}, {"meta", len(env.Meta), math.MaxUint32}} {
			if uint64(f.n) > f.max {
				return fmt.Errorf("%w: queue[%d].%s: %d bytes above %d", ErrTooLarge, i, f.name, f.n, f.max)
			}
		}
	}
	seen := make(map[string]struct{}, len(p.Captured.Timers))
	for i, t := range p.Captured.Timers {
		if len(t.Name) > math.MaxUint16 {
			return fmt.Errorf("%w: timers[%d].name: %d bytes above %d", ErrTooLarge, i, len(t.Name), math.MaxUint16)
		}
		if _, dup := seen[t.Name]; dup {
			return invalid(fmt.Sprintf("timers[%d].name", i), "duplicate timer %q", t.Name)
		}
		seen[t.Name] = struct{}{}
		if t.Remaining < 0 || t.Period < 0 {
			return invalid(fmt.Sprintf("timers[%d]", i), "negative duration (remaining %v, period %v)", t.Remaining, t.Period)
		}
	}
	if uint64(len(p.Captured.Queue)) > math.MaxUint32 || uint64(len(p.Captured.Timers)) > math.MaxUint32 {
		return fmt.Errorf("%w: queue or timer count above 2^32-1", ErrTooLarge)
	}
	return p.validateSessions()
}

// checkEnvelope returns "" when an envelope's kind and optional fields fit
// together: a timer name only on Timer envelopes, a reply route only on
// Request envelopes (spec §9.3: absent for Send and events).
func checkEnvelope(kind spot.EnvelopeKind, timerLen, routeLen int) string {
	switch kind {
	case spot.Send, spot.Request, spot.Timer:
	default:
		return fmt.Sprintf("undefined envelope kind %d", kind)
	}
	if kind != spot.Timer && timerLen != 0 {
		return fmt.Sprintf("a %v envelope carries no timer name", kind)
	}
	if kind != spot.Request && routeLen != 0 {
		return fmt.Sprintf("a %v envelope carries no reply route", kind)
	}
	return ""
}

// bodyLen is the exact raw body size, or ErrTooLarge once it passes max.
func (p *Payload) bodyLen(max uint64) (uint64, error) {
	var n uint64 = 4 + 4
	if p.Policy == spot.PolicyPreserveState {
		n += 8 + uint64(len(p.State))
	}
	// Checking after each item keeps n far from overflow: max is at most
	// 64 GiB and one item adds at most ~12 GiB.
	for _, env := range p.Captured.Queue {
		n += minEnvelope + uint64(len(env.Body)) + uint64(len(env.Timer)) + uint64(len(env.ReplyRoute)) + uint64(len(env.Meta))
		if n > max {
			break
		}
	}
	if n <= max {
		for _, t := range p.Captured.Timers {
			n += minTimer + uint64(len(t.Name))
		}
		n += p.sessionsLen()
	}
	if n > max {
		return 0, fmt.Errorf("%w: body above MaxBody %d", ErrTooLarge, max)
	}
	return n, nil
}

// ---- wire values of the enums (explicit, not Go's iota) ----

// Each table is the one place an enum's wire values are written: the index
// is the wire byte, read by the decoder (fromWire) and searched by the
// encoder (wireCode), so the two directions cannot drift apart. Index 0 is
// never a wire value. Object kinds are the wire's stateful-object-kind
// values (docs/RESTORE-PAYLOAD.md §2).
var (
	kindWire = [...]spot.ObjectKind{router.StatefulActor: spot.KindActor, router.StatefulUserSpot: spot.KindUserSpot,
		router.StatefulInstanceSpot: spot.KindInstanceSpot}
	policyWire   = [...]spot.Policy{1: spot.PolicyRecreate, 2: spot.PolicyPreserveState}
	envelopeWire = [...]spot.EnvelopeKind{1: spot.Send, 2: spot.Request, 3: spot.Timer}
)

// wireCode is v's wire byte in table; false: v has none (not encodable).
func wireCode[T comparable](table []T, v T) (byte, bool) {
	for c := 1; c < len(table); c++ {
		if table[c] == v {
			return byte(c), true
		}
	}
	return 0, false
}

// fromWire is the value of wire byte c in table; false: c is undefined.
func fromWire[T any](table []T, c byte) (T, bool) {
	if c == 0 || int(c) >= len(table) {
		var zero T
		return zero, false
	}
	return table[c], true
}

// ---- writer ----

// writer fills a buffer whose size was computed exactly beforehand.
type writer struct {
	b   []byte
	off int
}

func (w *writer) u8(v byte) { w.b[w.off] = v; w.off++ }
func (w *writer) u16(v int) { binary.BigEndian.PutUint16(w.b[w.off:], uint16(v)); w.off += 2 }
func (w *writer) u32(v int) { binary.BigEndian.PutUint32(w.b[w.off:], uint32(v)); w.off += 4 }
func (w *writer) u64(v uint64) {
	binary.BigEndian.PutUint64(w.b[w.off:], v)
	w.off += 8
}
func (w *writer) raw(b []byte)     { w.off += copy(w.b[w.off:], b) }
func (w *writer) str(s string)     { w.off += copy(w.b[w.off:], s) }
func (w *writer) bytes32(b []byte) { w.u32(len(b)); w.raw(b) }

func (p *Payload) putHeader(w *writer, c Codec, bodyLen uint64) {
	w.str(Magic)
	w.u8(p.version())
	w.u8(byte(c))
	k, _ := wireCode(kindWire[:], p.Object.Kind) // validated before
	w.u8(k)
	pc, _ := wireCode(policyWire[:], p.Policy)
	w.u8(pc)
	w.u64(p.Object.Generation)
	w.u8(byte(len(p.Object.ID)))
	w.str(p.Object.ID)
	w.u8(byte(len(p.Object.StableType)))
	w.str(p.Object.StableType)
	w.u64(bodyLen)
}

func (p *Payload) putBody(w *writer) {
	if p.Policy == spot.PolicyPreserveState {
		w.u64(uint64(len(p.State)))
		w.raw(p.State)
	}
	w.u32(len(p.Captured.Queue))
	for _, env := range p.Captured.Queue {
		ec, _ := wireCode(envelopeWire[:], env.Kind) // validated before
		w.u8(ec)
		w.bytes32(env.Body)
		w.u16(len(env.Timer))
		w.str(env.Timer)
		w.bytes32(env.ReplyRoute)
		w.bytes32(env.Meta)
	}
	w.u32(len(p.Captured.Timers))
	for _, t := range p.Captured.Timers {
		w.u16(len(t.Name))
		w.str(t.Name)
		w.u64(uint64(t.Remaining))
		w.u64(uint64(t.Period))
	}
	p.putSessions(w)
}

// ---- reader ----

// field names a payload field for errors. It is rendered only when a
// read fails, so decoding a large queue formats nothing.
type field struct {
	list  string // "queue" or "timers" for an item field, else ""
	index int
	name  string
}

func (f field) String() string {
	if f.list == "" {
		return f.name
	}
	if f.name == "" {
		return fmt.Sprintf("%s[%d]", f.list, f.index)
	}
	return fmt.Sprintf("%s[%d].%s", f.list, f.index, f.name)
}

func named(name string) field { return field{name: name} }

// reader walks a payload or a body; the first error sticks and every later
// read returns zero values, so decoding code reads straight through.
type reader struct {
	b    []byte
	off  int
	body bool
	err  *FormatError
}

func (r *reader) fail(kind error, f field, off int, detail string) {
	if r.err == nil {
		r.err = &FormatError{Kind: kind, Field: f.String(), Offset: off, Body: r.body, Detail: detail}
	}
}

// take returns the next n bytes (aliasing the input), or nil after failing
// with ErrTruncated. n is compared with what is left before any use.
func (r *reader) take(f field, n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if left := uint64(len(r.b) - r.off); n > left {
		r.fail(ErrTruncated, f, r.off, fmt.Sprintf("needs %d bytes, %d left", n, left))
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) u8(f field) byte {
	if s := r.take(f, 1); s != nil {
		return s[0]
	}
	return 0
}

func (r *reader) u16(f field) uint16 {
	if s := r.take(f, 2); s != nil {
		return binary.BigEndian.Uint16(s)
	}
	return 0
}

func (r *reader) u32(f field) uint32 {
	if s := r.take(f, 4); s != nil {
		return binary.BigEndian.Uint32(s)
	}
	return 0
}

func (r *reader) u64(f field) uint64 {
	if s := r.take(f, 8); s != nil {
		return binary.BigEndian.Uint64(s)
	}
	return 0
}

// bytes32 and bytes16 read a length-prefixed byte field; empty decodes as
// nil. The length is checked against what is left by take.
func (r *reader) bytes32(f field) []byte { return nilIfEmpty(r.take(f, uint64(r.u32(f)))) }
func (r *reader) bytes16(f field) []byte { return nilIfEmpty(r.take(f, uint64(r.u16(f)))) }

func nilIfEmpty(s []byte) []byte {
	if len(s) == 0 {
		return nil
	}
	return s
}

func (r *reader) text8(f field) string {
	n := r.u8(f)
	start := r.off
	s := string(r.take(f, uint64(n)))
	if r.err != nil {
		return ""
	}
	if e := checkText8(s); e != "" {
		r.fail(ErrInvalid, f, start, e)
		return ""
	}
	return s
}

// readEnum reads a one-byte wire value of table; an undefined one fails as
// "undefined <what> <byte>" at the byte's offset.
func readEnum[T any](r *reader, f field, what string, table []T) T {
	at := r.off
	c := r.u8(f)
	v, ok := fromWire(table, c)
	if !ok {
		r.fail(ErrInvalid, f, at, fmt.Sprintf("undefined %s %d", what, c))
	}
	return v
}

func (r *reader) duration(f field) time.Duration {
	v := r.u64(f)
	if r.err == nil && v > math.MaxInt64 {
		r.fail(ErrInvalid, f, r.off-8, fmt.Sprintf("%d ns above the largest duration", v))
	}
	return time.Duration(v)
}

// count reads a u32 item count and checks that count items of at least min
// bytes each fit in what is left, so the slice it sizes is bounded by the
// input actually present.
func (r *reader) count(f field, min int) int {
	n := r.u32(f)
	if r.err != nil {
		return 0
	}
	if left := uint64(len(r.b) - r.off); uint64(n)*uint64(min) > left {
		r.fail(ErrTruncated, f, r.off-4, fmt.Sprintf("%d items need at least %d bytes, %d left", n, uint64(n)*uint64(min), left))
		return 0
	}
	return int(n)
}

func (r *reader) decodeBody(p *Payload) {
	if p.Policy == spot.PolicyPreserveState {
		f := named("state")
		p.State = nilIfEmpty(r.take(f, r.u64(f)))
	}
	nq := r.count(named("queue.count"), minEnvelope)
	if nq > 0 {
		p.Captured.Queue = make([]spot.Envelope, nq)
	}
	for i := 0; i < nq && r.err == nil; i++ {
		env := &p.Captured.Queue[i]
		at := r.off
		item := func(name string) field { return field{list: "queue", index: i, name: name} }
		env.Kind = readEnum(r, item("kind"), "envelope kind", envelopeWire[:])
		env.Body = r.bytes32(item("body"))
		env.Timer = string(r.bytes16(item("timer")))
		env.ReplyRoute = r.bytes32(item("replyRoute"))
		env.Meta = r.bytes32(item("meta"))
		if r.err == nil {
			if e := checkEnvelope(env.Kind, len(env.Timer), len(env.ReplyRoute)); e != "" {
				r.fail(ErrInvalid, item(""), at, e)
			}
		}
	}
	nt := r.count(named("timers.count"), minTimer)
	if nt > 0 && r.err == nil {
		p.Captured.Timers = make([]spot.TimerState, nt)
	}
	var seen map[string]struct{}
	for i := 0; i < nt && r.err == nil; i++ {
		t := &p.Captured.Timers[i]
		at := r.off
		item := func(name string) field { return field{list: "timers", index: i, name: name} }
		t.Name = string(r.bytes16(item("name")))
		t.Remaining = r.duration(item("remaining"))
		t.Period = r.duration(item("period"))
		if r.err != nil {
			break
		}
		if seen == nil {
			seen = make(map[string]struct{}, nt)
		}
		if _, dup := seen[t.Name]; dup {
			r.fail(ErrInvalid, item("name"), at, fmt.Sprintf("duplicate timer %q", t.Name))
		}
		seen[t.Name] = struct{}{}
	}
}
