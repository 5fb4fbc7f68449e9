package record

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// Decoding happens in two steps: extraction (this file) checks JSON types
// and textual forms and converts to Go types; the record's validate method,
// shared with encoding, then checks ranges, lengths and enums. The first
// error found wins; later calls are no-ops, which keeps record decoders
// linear.

type dec struct {
	kind Kind
	err  error
}

func (d *dec) setErr(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *dec) fieldErr(path, reason string) {
	d.setErr(&FieldError{Kind: d.kind, Field: path, Reason: reason})
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func indexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// obj reads the members of one JSON object and, at end(), rejects members
// that were never asked for: unknown members are an error because a reader
// that dropped them and wrote the record back (every CAS rewrites the whole
// value) would silently lose data a newer writer put there.
type obj struct {
	d       *dec
	path    string
	members []jmember
	used    []bool
}

func (d *dec) object(path string, v *jvalue) *obj {
	o := &obj{d: d, path: path}
	if d.err != nil || v == nil {
		return o
	}
	if v.t != jObject {
		d.fieldErr(pathOrRoot(path), "must be an object, got "+v.t.String())
		return o
	}
	o.members = v.obj
	o.used = make([]bool, len(v.obj))
	return o
}

func pathOrRoot(p string) string {
	if p == "" {
		return "(record)"
	}
	return p
}

// get returns the member's value, or nil (with an error) when absent.
func (o *obj) get(name string) *jvalue {
	if o.d.err != nil || o.used == nil {
		return nil
	}
	for i, m := range o.members {
		if m.name == name {
			o.used[i] = true
			return m.val
		}
	}
	o.d.fieldErr(joinPath(o.path, name), "missing")
	return nil
}

func (o *obj) typed(name string, t jtype, nullable bool) *jvalue {
	v := o.get(name)
	if v == nil {
		return nil
	}
	if nullable && v.t == jNull {
		return v
	}
	if v.t != t {
		want := t.String()
		if nullable {
			want += " or null"
		}
		o.d.fieldErr(joinPath(o.path, name), "must be a "+want+", got "+v.t.String())
		return nil
	}
	return v
}

func (o *obj) end() {
	if o.d.err != nil || o.used == nil {
		return
	}
	for i, m := range o.members {
		if !o.used[i] {
			o.d.fieldErr(joinPath(o.path, m.name), "unknown member")
			return
		}
	}
}

func (o *obj) str(name string) string {
	if v := o.typed(name, jString, false); v != nil {
		return v.s
	}
	return ""
}

// nullStr returns nil for JSON null.
func (o *obj) nullStr(name string) *string {
	v := o.typed(name, jString, true)
	if v == nil || v.t == jNull {
		return nil
	}
	s := v.s
	return &s
}

func (o *obj) boolean(name string) bool {
	if v := o.typed(name, jBool, false); v != nil {
		return v.b
	}
	return false
}

func (o *obj) child(name string) *obj {
	return o.d.object(joinPath(o.path, name), o.typed(name, jObject, false))
}

// nullChild returns nil for JSON null.
func (o *obj) nullChild(name string) *obj {
	v := o.typed(name, jObject, true)
	if v == nil || v.t == jNull {
		return nil
	}
	return o.d.object(joinPath(o.path, name), v)
}

func (o *obj) array(name string) []*jvalue {
	if v := o.typed(name, jArray, false); v != nil {
		return v.arr
	}
	return nil
}

// decimalString reads a non-negative integer written as a JSON string in
// canonical decimal form: "0" or a non-zero digit followed by digits; no
// sign, no leading zero, no whitespace, at most 2^64-1. Ranges are the
// validator's job.
func (o *obj) decimalString(name string) uint64 {
	v := o.typed(name, jString, false)
	if v == nil {
		return 0
	}
	u, reason := parseCanonicalUint(v.s)
	if reason != "" {
		o.d.fieldErr(joinPath(o.path, name), "decimal string "+quote(v.s)+": "+reason)
	}
	return u
}

func (o *obj) gen(name string) Generation { return Generation(o.decimalString(name)) }

func (o *obj) millis(name string) EpochMillis {
	u := o.decimalString(name)
	if u > uint64(MaxGeneration) {
		o.d.fieldErr(joinPath(o.path, name), "timestamp beyond 2^63-1")
		return 0
	}
	return EpochMillis(u)
}

// decimalInt reads an integer field written as a decimal string into an int
// (authority capacity counts and requestEncodedSize).
func (o *obj) decimalInt(name string) int {
	u := o.decimalString(name)
	if u > uint64(MaxGeneration) {
		o.d.fieldErr(joinPath(o.path, name), "out of range")
		return 0
	}
	return int(u)
}

// number reads a magnitude written as a JSON number: an integer without
// sign, fraction or exponent.
func (o *obj) number(name string) int {
	v := o.typed(name, jNumber, false)
	if v == nil {
		return 0
	}
	return o.d.numberValue(joinPath(o.path, name), v)
}

func (d *dec) numberValue(path string, v *jvalue) int {
	if v.t != jNumber {
		d.fieldErr(path, "must be a number, got "+v.t.String())
		return 0
	}
	u, reason := parseCanonicalUint(v.s)
	if reason != "" {
		d.fieldErr(path, "number "+v.s+": must be a non-negative integer without fraction or exponent")
		return 0
	}
	if u > uint64(MaxGeneration) {
		d.fieldErr(path, "number "+v.s+" out of range")
		return 0
	}
	return int(u)
}

// hexBytes reads lowercase hex of raw bytes (even length, 0-9a-f only).
func (o *obj) hexBytes(name string) []byte {
	v := o.typed(name, jString, false)
	if v == nil {
		return nil
	}
	b, reason := parseLowerHex(v.s)
	if reason != "" {
		o.d.fieldErr(joinPath(o.path, name), reason)
	}
	return b
}

// base64Bytes reads RFC 4648 standard base64 with padding, in its one
// canonical form (no line breaks, zero pad bits): the decoded bytes must
// re-encode to exactly the text read.
func (o *obj) base64Bytes(name string) []byte {
	v := o.typed(name, jString, false)
	if v == nil {
		return nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v.s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != v.s {
		o.d.fieldErr(joinPath(o.path, name), "not canonical standard base64 with padding")
		return nil
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

func parseCanonicalUint(s string) (uint64, string) {
	switch {
	case s == "":
		return 0, "empty"
	case s[0] == '0' && len(s) > 1:
		return 0, "leading zero"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, "only the digits 0-9 are allowed"
		}
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, "out of range"
	}
	return u, ""
}

func parseLowerHex(s string) ([]byte, string) {
	if len(s)%2 != 0 {
		return nil, "hex of odd length"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, "not lowercase hex"
		}
	}
	b, _ := hex.DecodeString(s) // cannot fail after the checks above
	return b, ""
}

// --- shared validation --------------------------------------------------

// val collects the first validation error of a record being encoded or
// just decoded.
type val struct {
	kind Kind
	err  error
}

func (v *val) fail(path, reason string) {
	if v.err == nil {
		v.err = &FieldError{Kind: v.kind, Field: path, Reason: reason}
	}
}

func (v *val) text(path, s string, minLen, maxLen int, noNUL bool) {
	if r := checkText(s, minLen, maxLen, noNUL); r != "" {
		v.fail(path, r)
	}
}

func (v *val) name(path, s string) { v.text(path, s, 1, MaxNameBytes, true) }

func (v *val) gen(path string, g Generation) {
	if !g.Valid() {
		v.fail(path, "generation "+g.String()+" outside 1..2^63-1")
	}
}

func (v *val) millis(path string, e EpochMillis) {
	if e < 0 {
		v.fail(path, "negative timestamp")
	}
}

func (v *val) rng(path string, n, lo, hi int) {
	if n < lo || n > hi {
		v.fail(path, strconv.Itoa(n)+" outside "+strconv.Itoa(lo)+".."+strconv.Itoa(hi))
	}
}

func (v *val) routingID(path string, rid []byte) {
	if r := checkRoutingID(rid); r != "" {
		v.fail(path, r)
	}
}

func (v *val) enum(path, s string, ok bool) {
	if !ok {
		v.fail(path, "unknown value "+quote(s))
	}
}

// finish checks the encoded size of a record.
func finish(kind Kind, b []byte) ([]byte, error) {
	if len(b) > MaxValueBytes {
		return nil, &LimitError{Kind: kind, What: "value bytes", Limit: MaxValueBytes, Actual: len(b)}
	}
	return b, nil
}

// begin parses a value and checks recordVersion before anything else, so
// that a record of another version is reported as such rather than as a
// pile of field errors.
func begin(kind Kind, value []byte) (*dec, *obj, error) {
	if len(value) > MaxValueBytes {
		return nil, nil, &LimitError{Kind: kind, What: "value bytes", Limit: MaxValueBytes, Actual: len(value)}
	}
	root, err := parseJSON(kind, value)
	if err != nil {
		return nil, nil, err
	}
	d := &dec{kind: kind}
	o := d.object("", root)
	if d.err != nil {
		return nil, nil, d.err
	}
	v := o.get("recordVersion")
	if d.err != nil {
		return nil, nil, d.err
	}
	if v.t != jNumber || v.s != strconv.Itoa(RecordVersion) {
		return nil, nil, &UnknownVersionError{Kind: kind, Version: shorten(string(appendCanonical(nil, v)))}
	}
	return d, o, nil
}

// checkCanonical compares a value with the canonical encoding of what it
// decoded to.
func checkCanonical(kind Kind, value, canonical []byte) error {
	if bytes.Equal(value, canonical) {
		return nil
	}
	i := 0
	for i < len(value) && i < len(canonical) && value[i] == canonical[i] {
		i++
	}
	return &NonCanonicalError{Kind: kind, Offset: i}
}

// maxVersionText bounds the recordVersion text an error carries: a hostile
// value could make it a megabyte.
const maxVersionText = 64

func shorten(s string) string {
	if len(s) <= maxVersionText {
		return s
	}
	cut := maxVersionText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
