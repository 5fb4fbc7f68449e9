package record

import (
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the package's own JSON: a strict parser (duplicate member
// names, invalid UTF-8, lone surrogates and trailing data are errors) and the
// canonical serializer of RFC 8785 (JCS) restricted to the values records
// contain. encoding/json is not used because it escapes <, >, & and U+2028/9,
// silently replaces invalid UTF-8 and keeps the last of duplicate members:
// each of those would make two runtimes disagree on bytes or meaning.

type jtype uint8

const (
	jNull jtype = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

func (t jtype) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[t]
}

// jvalue is one JSON value. For jNumber, s holds the number's text exactly
// as written (the parser checks the JSON grammar; fields check the form).
// Values are held inline (arrays and members are slices of values, not of
// pointers): a record is a few dozen small values, and one allocation per
// value used to be most of the cost of decoding one.
type jvalue struct {
	t   jtype
	b   bool
	s   string
	arr []jvalue
	obj []jmember
	off int // byte offset in the parsed input, for errors
}

type jmember struct {
	name string
	val  jvalue
}

func jNullV() jvalue                 { return jvalue{t: jNull} }
func jBoolV(b bool) jvalue           { return jvalue{t: jBool, b: b} }
func jStrV(s string) jvalue          { return jvalue{t: jString, s: s} }
func jUintV(u uint64) jvalue         { return jvalue{t: jNumber, s: strconv.FormatUint(u, 10)} }
func jDecStrV(u uint64) jvalue       { return jStrV(strconv.FormatUint(u, 10)) }
func jArrV(a []jvalue) jvalue        { return jvalue{t: jArray, arr: a} }
func jObjV(m ...jmember) jvalue      { return jvalue{t: jObject, obj: m} }
func mem(n string, v jvalue) jmember { return jmember{name: n, val: v} }

// maxDepth bounds nesting; records nest at most 5 deep, and the bound keeps
// a hostile value from exhausting the stack.
const maxDepth = 32

// linearDupLimit is the member count up to which duplicate names are found
// by scanning the members read so far; larger objects (only a hostile or
// unusual value has them) switch to a map so that the check stays linear.
const linearDupLimit = 32

// localMembers is how many members an object collects on the stack before
// spilling to the heap: more than any record's object has.
const localMembers = 24

type parser struct {
	kind Kind
	in   []byte
	// src is in as one string, copied once: strings without escapes (member
	// names, numbers, most values) are substrings of it instead of one
	// allocation each. Decoders copy the strings a record keeps (see
	// obj.str), so a decoded record does not pin the whole input.
	src   string
	pos   int
	depth int
	// mstore is where closed objects' members live: carved from chunks so
	// that a whole record costs one or two allocations, not one per object.
	mstore []jmember
}

func (p *parser) fail(off int, reason string) error {
	return &SyntaxError{Kind: p.kind, Offset: off, Reason: reason}
}

// parseJSON parses exactly one JSON value (RFC 8259) surrounded by optional
// whitespace. A byte-order mark is not whitespace and is rejected.
func parseJSON(kind Kind, in []byte) (jvalue, error) {
	v, _, err := parseJSONInto(kind, in, nil)
	return v, err
}

// parseJSONInto is parseJSON carving objects' members from mstore (reused
// scratch, see begin); it returns the chunk it ended with.
func parseJSONInto(kind Kind, in []byte, mstore []jmember) (jvalue, []jmember, error) {
	if !utf8.Valid(in) {
		off := 0
		for off < len(in) {
			r, n := utf8.DecodeRune(in[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return jvalue{}, mstore, &SyntaxError{Kind: kind, Offset: off, Reason: "not valid UTF-8"}
	}
	p := &parser{kind: kind, in: in, src: string(in), mstore: mstore[:0]}
	p.ws()
	v, err := p.value()
	if err != nil {
		return jvalue{}, p.mstore, err
	}
	p.ws()
	if p.pos != len(p.in) {
		return jvalue{}, p.mstore, p.fail(p.pos, "data after the JSON value")
	}
	return v, p.mstore, nil
}

// storeMembers copies ms (an object's members, collected on the stack) to
// stable storage and returns the copy, with its capacity clipped so that no append can reach
// a neighbour's members.
func (p *parser) storeMembers(ms []jmember) []jmember {
	n := len(ms)
	if cap(p.mstore)-len(p.mstore) < n {
		// The first chunk is sized for the whole input at about one member
		// per 16 bytes (records have fewer), capped so that a large value
		// of few members does not reserve much; later chunks double.
		size := max(n, 2*cap(p.mstore), min(max(len(p.in)/16, 8), 64))
		p.mstore = make([]jmember, 0, size)
	}
	start := len(p.mstore)
	p.mstore = append(p.mstore, ms...)
	return p.mstore[start : start+n : start+n]
}

func (p *parser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (jvalue, error) {
	if p.pos >= len(p.in) {
		return jvalue{}, p.fail(p.pos, "unexpected end of input")
	}
	start := p.pos
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return jvalue{}, err
		}
		return jvalue{t: jString, s: s, off: start}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.lit("true"):
		return jvalue{t: jBool, b: true, off: start}, nil
	case p.lit("false"):
		return jvalue{t: jBool, off: start}, nil
	case p.lit("null"):
		return jvalue{t: jNull, off: start}, nil
	}
	return jvalue{}, p.fail(p.pos, "unexpected character "+strconv.QuoteRune(rune(p.in[p.pos])))
}

func (p *parser) lit(word string) bool {
	if len(p.in)-p.pos >= len(word) && string(p.in[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.fail(p.pos, "nesting deeper than "+strconv.Itoa(maxDepth))
	}
	return nil
}

func (p *parser) object() (jvalue, error) {
	v := jvalue{t: jObject, off: p.pos}
	if err := p.enter(); err != nil {
		return jvalue{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	// Members are collected in a stack array (records' objects have at
	// most a dozen; a larger one spills to the heap) and copied to p.mstore
	// when the object closes.
	var local [localMembers]jmember
	ms := local[:0]
	var seen map[string]struct{} // nil while the object is small
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return jvalue{}, p.fail(p.pos, "expected a member name")
		}
		nameOff := p.pos
		name, err := p.str()
		if err != nil {
			return jvalue{}, err
		}
		// Duplicates are compared after unescaping: "a" and "\u0061" are
		// the same name.
		if duplicate(ms, &seen, name) {
			return jvalue{}, p.fail(nameOff, "duplicate member "+quote(name))
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return jvalue{}, p.fail(p.pos, "expected ':'")
		}
		p.pos++
		p.ws()
		val, err := p.value()
		if err != nil {
			return jvalue{}, err
		}
		ms = append(ms, jmember{name: name, val: val})
		p.ws()
		if p.pos >= len(p.in) {
			return jvalue{}, p.fail(p.pos, "unexpected end of input in object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			v.obj = p.storeMembers(ms)
			return v, nil
		default:
			return jvalue{}, p.fail(p.pos, "expected ',' or '}'")
		}
	}
}

// duplicate reports whether name is among ms, the members of an object
// read so far, keeping *seen (all of ms) once ms is large.
func duplicate(ms []jmember, seen *map[string]struct{}, name string) bool {
	if *seen == nil && len(ms) < linearDupLimit {
		for i := range ms {
			if ms[i].name == name {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(ms))
		for i := range ms {
			(*seen)[ms[i].name] = struct{}{}
		}
	}
	if _, dup := (*seen)[name]; dup {
		return true
	}
	(*seen)[name] = struct{}{}
	return false
}

func (p *parser) array() (jvalue, error) {
	v := jvalue{t: jArray, off: p.pos}
	if err := p.enter(); err != nil {
		return jvalue{}, err
	}
	defer func() { p.depth-- }()
	p.pos++ // [
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.ws()
		el, err := p.value()
		if err != nil {
			return jvalue{}, err
		}
		v.arr = append(v.arr, el)
		p.ws()
		if p.pos >= len(p.in) {
			return jvalue{}, p.fail(p.pos, "unexpected end of input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return jvalue{}, p.fail(p.pos, "expected ',' or ']'")
		}
	}
}

// number checks the RFC 8259 number grammar and keeps the text.
func (p *parser) number() (jvalue, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if digits() == 0 {
		return jvalue{}, p.fail(p.pos, "invalid number")
	}
	if p.in[intStart] == '0' && p.pos-intStart > 1 {
		return jvalue{}, p.fail(intStart, "number with a leading zero")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return jvalue{}, p.fail(p.pos, "invalid number fraction")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return jvalue{}, p.fail(p.pos, "invalid number exponent")
		}
	}
	return jvalue{t: jNumber, s: p.src[start:p.pos], off: start}, nil
}

// str parses a string starting at the opening quote. The input is already
// known to be valid UTF-8; raw control characters are not allowed, and a
// \u escape of a surrogate must form a pair. A string without escapes is a
// substring of p.src.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := p.src[start:p.pos]
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail(p.pos, "raw control character in string")
		}
		p.pos++
	}
	buf := append([]byte(nil), p.in[start:p.pos]...)
	for {
		if p.pos >= len(p.in) {
			return "", p.fail(p.pos, "unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail(p.pos, "raw control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		escOff := p.pos
		p.pos++
		if p.pos >= len(p.in) {
			return "", p.fail(p.pos, "unterminated escape")
		}
		e := p.in[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail(escOff, "invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || !p.lit(`\u`) {
					return "", p.fail(escOff, "unpaired surrogate in \\u escape")
				}
				lo, ok := p.hex4()
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", p.fail(escOff, "unpaired surrogate in \\u escape")
				}
				r = utf16.DecodeRune(r, lo)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail(escOff, "invalid escape \\"+string(rune(e)))
		}
	}
}

func (p *parser) hex4() (rune, bool) {
	if len(p.in)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.in[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// --- canonical serializer (RFC 8785) -------------------------------------

// appendCanonical writes v in canonical form: no whitespace, object members
// sorted by their names' UTF-16 code units, strings escaped as appendString
// does, numbers exactly as held (records only build non-negative integers
// below 2^53, whose JCS form is their plain decimal text).
func appendCanonical(b []byte, v jvalue) []byte { return appendCanonicalAt(b, &v) }

// encodeCanonical is appendCanonical into a buffer of exactly the encoded
// length, so that encoding a record allocates its bytes once.
func encodeCanonical(v jvalue) []byte {
	return appendCanonicalAt(make([]byte, 0, canonicalLen(&v)), &v)
}

func appendCanonicalAt(b []byte, v *jvalue) []byte {
	switch v.t {
	case jNull:
		return append(b, "null"...)
	case jBool:
		if v.b {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case jNumber:
		return append(b, v.s...)
	case jString:
		return appendString(b, v.s)
	case jArray:
		b = append(b, '[')
		for i := range v.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonicalAt(b, &v.arr[i])
		}
		return append(b, ']')
	default:
		return appendObject(b, v.obj)
	}
}

// appendObject writes an object's members in canonical order, leaving the
// caller's members as they are. Out of order members are written through a
// sorted index of at most sortBuf bytes on the stack (an object of more
// members sorts a copy on the heap): the records' encoders are called from
// many short-lived goroutines (one per move, per request), where a
// kilobytes-large frame per nesting level — a copy of the members, as this
// once was — made every new goroutine grow its stack (runtime.copystack
// was ~8 % of a host relocation's CPU).
func appendObject(b []byte, ms []jmember) []byte {
	b = append(b, '{')
	switch {
	case slices.IsSortedFunc(ms, compareMembers):
		for i := range ms {
			b = appendMember(b, i, &ms[i])
		}
	case len(ms) <= sortBuf:
		var idx [sortBuf]uint8
		order := idx[:len(ms)]
		for i := range order {
			order[i] = uint8(i)
		}
		slices.SortFunc(order, func(x, y uint8) int { return compareUTF16(ms[x].name, ms[y].name) })
		for k, i := range order {
			b = appendMember(b, k, &ms[i])
		}
	default:
		sorted := slices.Clone(ms)
		slices.SortFunc(sorted, compareMembers)
		for i := range sorted {
			b = appendMember(b, i, &sorted[i])
		}
	}
	return append(b, '}')
}

// appendMember writes the k-th member of an object.
func appendMember(b []byte, k int, m *jmember) []byte {
	if k > 0 {
		b = append(b, ',')
	}
	b = appendString(b, m.name)
	b = append(b, ':')
	return appendCanonicalAt(b, &m.val)
}

// sortBuf bounds the members appendObject orders with an index on the
// stack: more than any record's object has.
const sortBuf = 24

// canonicalLen is the length appendCanonical writes for v. It only sizes a
// buffer: were it ever wrong, the append would grow the buffer, not change
// the bytes.
func canonicalLen(v *jvalue) int {
	switch v.t {
	case jNull:
		return len("null")
	case jBool:
		if v.b {
			return len("true")
		}
		return len("false")
	case jNumber:
		return len(v.s)
	case jString:
		return stringLen(v.s)
	case jArray:
		n := 2 + max(len(v.arr)-1, 0)
		for i := range v.arr {
			n += canonicalLen(&v.arr[i])
		}
		return n
	default:
		n := 2 + max(len(v.obj)-1, 0)
		for i := range v.obj {
			n += stringLen(v.obj[i].name) + 1 + canonicalLen(&v.obj[i].val)
		}
		return n
	}
}

// compareMembers orders members by name (RFC 8785). The names of one
// object are distinct, so the order is total and an unstable sort exact.
func compareMembers(a, b jmember) int { return compareUTF16(a.name, b.name) }

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785 §3.2.3
// requires. It differs from byte (code point) order only when a character
// above U+FFFF meets one in U+E000..U+FFFF: the former's first unit is a
// high surrogate (0xD800..0xDBFF), which sorts below 0xE000.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			// Compare first code units; if both are the same high
			// surrogate, the low surrogates order as the code points do.
			if fa, fb := firstUTF16Unit(ra), firstUTF16Unit(rb); fa != fb {
				return cmpRune(fa, fb)
			}
			return cmpRune(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

func firstUTF16Unit(r rune) rune {
	if r >= 0x10000 {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

func cmpRune(a, b rune) int {
	if a < b {
		return -1
	}
	return 1
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way RFC 8785 (ECMAScript
// JSON.stringify) does: '"' and '\\' are backslash-escaped, U+0008, U+0009,
// U+000A, U+000C and U+000D use \b \t \n \f \r, every other character below
// U+0020 is \u00xx with lowercase hex, and everything else — '/', U+007F,
// U+2028, U+2029, all non-ASCII — is written as raw UTF-8. s must be valid
// UTF-8 (checked by the callers).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// stringLen is the length appendString writes for s.
func stringLen(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}

func quote(s string) string { return strconv.Quote(s) }
