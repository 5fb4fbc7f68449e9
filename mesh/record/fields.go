package record

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
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
	objs []obj // see newObj
	// objBuf is the first store of objs: enough for an authority record.
	objBuf [8]obj
	// mstore is the parser's member store, kept for the next decode.
	mstore []jmember
}

// decPool keeps decoders (and their parsers' member stores) between
// decodes: a record is decoded for every store row an operation reads,
// and the decoder and the parse tree were a tenth of the bytes a creation
// allocated. Nothing a decoder returns points into them: decoded records
// copy their strings (obj.str), errors carry their own.
var decPool = sync.Pool{New: func() any { return new(dec) }}

// maxPooledMembers bounds the member store a pooled decoder keeps, so one
// large record does not pin a large buffer.
const maxPooledMembers = 256

// newDec returns a decoder for a record of kind; release gives it back.
func newDec(kind Kind) *dec {
	d := decPool.Get().(*dec)
	ms := d.mstore
	*d = dec{kind: kind, mstore: ms}
	d.objs = d.objBuf[:0]
	return d
}

// release returns d to the pool; d and everything it decoded into objs
// must not be used afterwards.
func (d *dec) release() {
	clear(d.objBuf[:])
	d.objs, d.err = nil, nil
	if cap(d.mstore) > maxPooledMembers {
		d.mstore = nil
	} else {
		clear(d.mstore[:cap(d.mstore)]) // no input strings kept alive
		d.mstore = d.mstore[:0]
	}
	decPool.Put(d)
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
//
// An obj's path is only needed for an error, so it is kept as its parts
// (parent and member name, or a base and an array index) and joined only
// when an error is reported.
type obj struct {
	d       *dec
	parent  *obj   // nil: the path is base, or base[index]
	name    string // member name in parent
	base    string
	index   int // -1: none
	members []jmember
	ok      bool   // the value was an object (members may be empty)
	used    uint64 // members[i] asked for, i < 64
	usedBig []bool // the same beyond 64 members
}

// path is the dotted path of o, as FieldError.Field reports it.
func (o *obj) path() string {
	switch {
	case o.parent != nil:
		return joinPath(o.parent.path(), o.name)
	case o.index >= 0:
		return indexPath(o.base, o.index)
	}
	return o.base
}

// newObj returns a zeroed obj from the decoder's store: a record has a
// handful of objects, and carving them from one array keeps them to one
// allocation with the decoder itself.
func (d *dec) newObj() *obj {
	if len(d.objs) == cap(d.objs) {
		d.objs = make([]obj, 0, 2*cap(d.objs))
	}
	d.objs = d.objs[:len(d.objs)+1]
	o := &d.objs[len(d.objs)-1]
	o.d, o.index = d, -1
	return o
}

func (d *dec) object(path string, v *jvalue) *obj {
	o := d.newObj()
	o.base = path
	d.load(o, v)
	return o
}

// element is d.object for element i of the array at path parent.
func (d *dec) element(parent string, i int, v *jvalue) *obj {
	o := d.newObj()
	o.base, o.index = parent, i
	d.load(o, v)
	return o
}

func (d *dec) load(o *obj, v *jvalue) {
	if d.err != nil || v == nil {
		return
	}
	if v.t != jObject {
		d.fieldErr(pathOrRoot(o.path()), "must be an object, got "+v.t.String())
		return
	}
	o.members = v.obj
	o.ok = true
	if len(v.obj) > 64 {
		o.usedBig = make([]bool, len(v.obj))
	}
}

func (o *obj) mark(i int) {
	if o.usedBig != nil {
		o.usedBig[i] = true
		return
	}
	o.used |= 1 << uint(i)
}

func (o *obj) isUsed(i int) bool {
	if o.usedBig != nil {
		return o.usedBig[i]
	}
	return o.used&(1<<uint(i)) != 0
}

func pathOrRoot(p string) string {
	if p == "" {
		return "(record)"
	}
	return p
}

// get returns the member's value, or nil (with an error) when absent.
func (o *obj) get(name string) *jvalue {
	if o.d.err != nil || !o.ok {
		return nil
	}
	for i := range o.members {
		if o.members[i].name == name {
			o.mark(i)
			return &o.members[i].val
		}
	}
	o.d.fieldErr(joinPath(o.path(), name), "missing")
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
		o.d.fieldErr(joinPath(o.path(), name), "must be a "+want+", got "+v.t.String())
		return nil
	}
	return v
}

func (o *obj) end() {
	if o.d.err != nil || !o.ok {
		return
	}
	for i := range o.members {
		if !o.isUsed(i) {
			o.d.fieldErr(joinPath(o.path(), o.members[i].name), "unknown member")
			return
		}
	}
}

// str returns a copy of the string: the parsed text is a substring of the
// whole input, which a decoded record must not keep alive.
func (o *obj) str(name string) string {
	if v := o.typed(name, jString, false); v != nil {
		return strings.Clone(v.s)
	}
	return ""
}

// sym is str for an enumerated field: a known value is returned as the
// package's own constant (no copy); anything else is copied for the
// validator to reject.
func (o *obj) sym(name string, known []string) string {
	v := o.typed(name, jString, false)
	if v == nil {
		return ""
	}
	for _, k := range known {
		if v.s == k {
			return k
		}
	}
	return strings.Clone(v.s)
}

// nullStr returns nil for JSON null.
func (o *obj) nullStr(name string) *string {
	v := o.typed(name, jString, true)
	if v == nil || v.t == jNull {
		return nil
	}
	s := strings.Clone(v.s)
	return &s
}

func (o *obj) boolean(name string) bool {
	if v := o.typed(name, jBool, false); v != nil {
		return v.b
	}
	return false
}

func (o *obj) child(name string) *obj {
	v := o.typed(name, jObject, false)
	c := o.d.newObj()
	c.parent, c.name = o, name
	o.d.load(c, v)
	return c
}

// nullChild returns nil for JSON null.
func (o *obj) nullChild(name string) *obj {
	v := o.typed(name, jObject, true)
	if v == nil || v.t == jNull {
		return nil
	}
	c := o.d.newObj()
	c.parent, c.name = o, name
	o.d.load(c, v)
	return c
}

func (o *obj) array(name string) []jvalue {
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
		o.d.fieldErr(joinPath(o.path(), name), "decimal string "+quote(v.s)+": "+reason)
	}
	return u
}

func (o *obj) gen(name string) Generation { return Generation(o.decimalString(name)) }

func (o *obj) millis(name string) EpochMillis {
	u := o.decimalString(name)
	if u > uint64(MaxGeneration) {
		o.d.fieldErr(joinPath(o.path(), name), "timestamp beyond 2^63-1")
		return 0
	}
	return EpochMillis(u)
}

// decimalInt reads an integer field written as a decimal string into an int
// (authority capacity counts and requestEncodedSize).
func (o *obj) decimalInt(name string) int {
	u := o.decimalString(name)
	if u > uint64(MaxGeneration) {
		o.d.fieldErr(joinPath(o.path(), name), "out of range")
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
	if n, ok := plainNumber(v); ok {
		return n
	}
	return o.d.numberValue(joinPath(o.path(), name), v)
}

// plainNumber is numberValue's accepting case, for callers that build the
// error path only when it is needed.
func plainNumber(v *jvalue) (int, bool) {
	if v.t != jNumber {
		return 0, false
	}
	u, reason := parseCanonicalUint(v.s)
	if reason != "" || u > uint64(MaxGeneration) {
		return 0, false
	}
	return int(u), true
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
		o.d.fieldErr(joinPath(o.path(), name), reason)
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
	b, ok := decodeCanonicalBase64(v.s)
	if !ok {
		o.d.fieldErr(joinPath(o.path(), name), "not canonical standard base64 with padding")
		return nil
	}
	if len(b) == 0 {
		return nil
	}
	return b
}

// strictBase64 is the standard alphabet with padding, refusing non-zero pad
// bits. (Strict returns a copy of the encoding, so it is made once.)
var strictBase64 = base64.StdEncoding.Strict()

// decodeCanonicalBase64 decodes s if it is the canonical standard base64
// of the bytes it decodes to, that is if encoding them gives back s. The
// strict decoder already refuses everything else except line breaks, which
// it skips wherever they are; so refusing '\r' and '\n' first makes
// strict decoding exactly the canonical check, without encoding again.
// The length comparison restates that equivalence cheaply.
func decodeCanonicalBase64(s string) ([]byte, bool) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := strictBase64.DecodeString(s)
	if err != nil || base64.StdEncoding.EncodedLen(len(b)) != len(s) {
		return nil, false
	}
	return b, true
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
	if !inRange(n, lo, hi) {
		v.fail(path, strconv.Itoa(n)+" outside "+strconv.Itoa(lo)+".."+strconv.Itoa(hi))
	}
}

func inRange(n, lo, hi int) bool { return n >= lo && n <= hi }

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
	d := newDec(kind)
	root, ms, err := parseJSONInto(kind, value, d.mstore)
	d.mstore = ms
	if err != nil {
		d.release()
		return nil, nil, err
	}
	o := d.object("", &root)
	if d.err != nil {
		err := d.err
		d.release()
		return nil, nil, err
	}
	v := o.get("recordVersion")
	if d.err != nil {
		err := d.err
		d.release()
		return nil, nil, err
	}
	if v.t != jNumber || v.s != strconv.Itoa(RecordVersion) {
		err := &UnknownVersionError{Kind: kind, Version: shorten(string(appendCanonical(nil, *v)))}
		d.release()
		return nil, nil, err
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
