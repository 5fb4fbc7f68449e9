package record

import (
	"sort"
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
type jvalue struct {
	t   jtype
	b   bool
	s   string
	arr []*jvalue
	obj []jmember
	off int // byte offset in the parsed input, for errors
}

type jmember struct {
	name string
	val  *jvalue
}

func jNullV() *jvalue                 { return &jvalue{t: jNull} }
func jBoolV(b bool) *jvalue           { return &jvalue{t: jBool, b: b} }
func jStrV(s string) *jvalue          { return &jvalue{t: jString, s: s} }
func jUintV(u uint64) *jvalue         { return &jvalue{t: jNumber, s: strconv.FormatUint(u, 10)} }
func jDecStrV(u uint64) *jvalue       { return jStrV(strconv.FormatUint(u, 10)) }
func jArrV(a []*jvalue) *jvalue       { return &jvalue{t: jArray, arr: a} }
func jObjV(m ...jmember) *jvalue      { return &jvalue{t: jObject, obj: m} }
func mem(n string, v *jvalue) jmember { return jmember{name: n, val: v} }

// maxDepth bounds nesting; records nest at most 5 deep, and the bound keeps
// a hostile value from exhausting the stack.
const maxDepth = 32

type parser struct {
	kind  Kind
	in    []byte
	pos   int
	depth int
}

func (p *parser) fail(off int, reason string) error {
	return &SyntaxError{Kind: p.kind, Offset: off, Reason: reason}
}

// parseJSON parses exactly one JSON value (RFC 8259) surrounded by optional
// whitespace. A byte-order mark is not whitespace and is rejected.
func parseJSON(kind Kind, in []byte) (*jvalue, error) {
	if !utf8.Valid(in) {
		off := 0
		for off < len(in) {
			r, n := utf8.DecodeRune(in[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return nil, &SyntaxError{Kind: kind, Offset: off, Reason: "not valid UTF-8"}
	}
	p := &parser{kind: kind, in: in}
	p.ws()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos != len(p.in) {
		return nil, p.fail(p.pos, "data after the JSON value")
	}
	return v, nil
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

func (p *parser) value() (*jvalue, error) {
	if p.pos >= len(p.in) {
		return nil, p.fail(p.pos, "unexpected end of input")
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
			return nil, err
		}
		return &jvalue{t: jString, s: s, off: start}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.lit("true"):
		return &jvalue{t: jBool, b: true, off: start}, nil
	case p.lit("false"):
		return &jvalue{t: jBool, off: start}, nil
	case p.lit("null"):
		return &jvalue{t: jNull, off: start}, nil
	}
	return nil, p.fail(p.pos, "unexpected character "+strconv.QuoteRune(rune(p.in[p.pos])))
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

func (p *parser) object() (*jvalue, error) {
	v := &jvalue{t: jObject, off: p.pos}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++ // {
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	seen := make(map[string]struct{})
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.fail(p.pos, "expected a member name")
		}
		nameOff := p.pos
		name, err := p.str()
		if err != nil {
			return nil, err
		}
		// Duplicates are compared after unescaping: "a" and "\u0061" are
		// the same name.
		if _, dup := seen[name]; dup {
			return nil, p.fail(nameOff, "duplicate member "+quote(name))
		}
		seen[name] = struct{}{}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.fail(p.pos, "expected ':'")
		}
		p.pos++
		p.ws()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		v.obj = append(v.obj, jmember{name: name, val: val})
		p.ws()
		if p.pos >= len(p.in) {
			return nil, p.fail(p.pos, "unexpected end of input in object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return nil, p.fail(p.pos, "expected ',' or '}'")
		}
	}
}

func (p *parser) array() (*jvalue, error) {
	v := &jvalue{t: jArray, off: p.pos}
	if err := p.enter(); err != nil {
		return nil, err
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
			return nil, err
		}
		v.arr = append(v.arr, el)
		p.ws()
		if p.pos >= len(p.in) {
			return nil, p.fail(p.pos, "unexpected end of input in array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return nil, p.fail(p.pos, "expected ',' or ']'")
		}
	}
}

// number checks the RFC 8259 number grammar and keeps the text.
func (p *parser) number() (*jvalue, error) {
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
		return nil, p.fail(p.pos, "invalid number")
	}
	if p.in[intStart] == '0' && p.pos-intStart > 1 {
		return nil, p.fail(intStart, "number with a leading zero")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.fail(p.pos, "invalid number fraction")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.fail(p.pos, "invalid number exponent")
		}
	}
	return &jvalue{t: jNumber, s: string(p.in[start:p.pos]), off: start}, nil
}

// str parses a string starting at the opening quote. The input is already
// known to be valid UTF-8; raw control characters are not allowed, and a
// \u escape of a surrogate must form a pair.
func (p *parser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '"' {
			s := string(p.in[start:p.pos])
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
func appendCanonical(b []byte, v *jvalue) []byte {
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
		for i, el := range v.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, el)
		}
		return append(b, ']')
	default:
		ms := sortedMembers(v.obj)
		b = append(b, '{')
		for i, m := range ms {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m.name)
			b = append(b, ':')
			b = appendCanonical(b, m.val)
		}
		return append(b, '}')
	}
}

func sortedMembers(ms []jmember) []jmember {
	out := append([]jmember(nil), ms...)
	sort.Slice(out, func(i, j int) bool { return compareUTF16(out[i].name, out[j].name) < 0 })
	return out
}

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

func quote(s string) string { return strconv.Quote(s) }
