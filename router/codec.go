package router

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// codec walks one wire structure field by field. The same walk, written once
// per type, serves three purposes so that the encoder, the decoder and the
// JSON description can never disagree about order, widths or bounds:
//
//   - decoding: values are read from buf into the struct;
//   - encoding: values are validated with exactly the decoder's rules and
//     appended to buf;
//   - describing: encoding plus a JSON rendering into js.
//
// Errors are sticky: after the first failure every primitive is a no-op, so a
// type's walk needs no error plumbing. Every length read while decoding is
// checked against the schema bound and the bytes remaining before anything
// is sliced or allocated.
type codec struct {
	decoding bool
	buf      []byte // decoding: region being read (narrowed by delimited); encoding: output
	off      int    // decoding: read position in buf
	cmd      Command
	flags    uint8
	err      *ProtocolError
	js       *jsonWriter // describing only
}

func newDecoder(cmd Command, flags uint8, b []byte) *codec {
	return &codec{decoding: true, buf: b, cmd: cmd, flags: flags}
}

func newEncoder(cmd Command, flags uint8, b []byte) *codec {
	return &codec{buf: b, cmd: cmd, flags: flags}
}

// fail records the first error; later failures are ignored.
func (c *codec) fail(k ErrorKind, name, detail string) {
	if c.err != nil {
		return
	}
	c.err = &ProtocolError{Kind: k, Command: c.cmd, Field: name, Detail: detail}
}

// within prefixes the Field of an error raised inside the scope name
// (an object, a vector, a frame) with that name, on the way out of the
// scope. The path is only needed when a walk fails, so a walk that
// succeeds builds none (keeping a stack of names cost several allocations
// per record).
func (c *codec) within(name string) {
	if c.err == nil || name == "" {
		return
	}
	if c.err.Field == "" {
		c.err.Field = name
	} else {
		c.err.Field = name + "." + c.err.Field
	}
}

// remaining is the number of unread bytes in the current (possibly narrowed)
// region while decoding.
func (c *codec) remaining() int { return len(c.buf) - c.off }

// need checks that n bytes remain; it reports Truncated otherwise.
func (c *codec) need(name string, n uint64) bool {
	if c.err != nil {
		return false
	}
	if uint64(c.remaining()) < n {
		c.fail(Truncated, name, fmt.Sprintf("needs %d bytes, %d remain", n, c.remaining()))
		return false
	}
	return true
}

// readUint reads a big-endian unsigned integer of width 1, 2, 4 or 8.
func (c *codec) readUint(name string, width int) (uint64, bool) {
	if !c.need(name, uint64(width)) {
		return 0, false
	}
	b := c.buf[c.off : c.off+width]
	c.off += width
	switch width {
	case 1:
		return uint64(b[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), true
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), true
	default:
		return binary.BigEndian.Uint64(b), true
	}
}

func (c *codec) writeUint(width int, v uint64) {
	switch width {
	case 1:
		c.buf = append(c.buf, byte(v))
	case 2:
		c.buf = binary.BigEndian.AppendUint16(c.buf, uint16(v))
	case 4:
		c.buf = binary.BigEndian.AppendUint32(c.buf, uint32(v))
	default:
		c.buf = binary.BigEndian.AppendUint64(c.buf, v)
	}
}

func widthMax(width int) uint64 {
	if width >= 8 {
		return math.MaxUint64
	}
	return 1<<(8*uint(width)) - 1
}

// checkRange applies a schema integer range. A zero below a positive minimum
// is ZeroNotAllowed; everything else out of range is BoundExceeded.
func (c *codec) checkRange(name string, v, min, max uint64) bool {
	if c.err != nil {
		return false
	}
	if v < min {
		if v == 0 {
			c.fail(ZeroNotAllowed, name, fmt.Sprintf("must be at least %d", min))
		} else {
			c.fail(BoundExceeded, name, fmt.Sprintf("%d is below minimum %d", v, min))
		}
		return false
	}
	if v > max {
		c.fail(BoundExceeded, name, fmt.Sprintf("%d exceeds maximum %d", v, max))
		return false
	}
	return true
}

// uintN is the common integer walk; quoted renders the JSON value as a
// decimal string (64-bit values, which JSON numbers cannot carry exactly).
func (c *codec) uintN(name string, width int, v *uint64, min, max uint64, quoted bool) {
	if c.err != nil {
		return
	}
	if c.decoding {
		x, ok := c.readUint(name, width)
		if !ok || !c.checkRange(name, x, min, max) {
			return
		}
		*v = x
		return
	}
	if *v > widthMax(width) {
		c.fail(BoundExceeded, name, fmt.Sprintf("%d does not fit %d bytes", *v, width))
		return
	}
	if !c.checkRange(name, *v, min, max) {
		return
	}
	c.writeUint(width, *v)
	if c.js != nil {
		if quoted {
			c.js.str(name, fmt.Sprint(*v))
		} else {
			c.js.raw(name, fmt.Sprint(*v))
		}
	}
}

func (c *codec) u8(name string, v *uint8, min, max uint8) {
	x := uint64(*v)
	c.uintN(name, 1, &x, uint64(min), uint64(max), false)
	*v = uint8(x)
}

func (c *codec) u32(name string, v *uint32, min, max uint32) {
	x := uint64(*v)
	c.uintN(name, 4, &x, uint64(min), uint64(max), false)
	*v = uint32(x)
}

func (c *codec) u64(name string, v *uint64, min, max uint64) {
	c.uintN(name, 8, v, min, max, true)
}

// nz64 is the schema's nonzero-u64: 1..2^63-1.
func (c *codec) nz64(name string, v *uint64) { c.u64(name, v, 1, MaxGeneration) }

// ord64 is the schema's ordinal-or-zero: 0..2^63-1.
func (c *codec) ord64(name string, v *uint64) { c.u64(name, v, 0, MaxGeneration) }

// any64 is a plain u64.
func (c *codec) any64(name string, v *uint64) { c.u64(name, v, 0, math.MaxUint64) }

// nz32 is the schema's nonzero-u32.
func (c *codec) nz32(name string, v *uint32) { c.u32(name, v, 1, math.MaxUint32) }

// i64 is a signed big-endian 64-bit integer restricted to min..max (min ≥ 0
// for every use in the schema).
func (c *codec) i64(name string, v *int64, min, max int64) {
	if c.err != nil {
		return
	}
	if c.decoding {
		x, ok := c.readUint(name, 8)
		if !ok {
			return
		}
		s := int64(x)
		if s < min || s > max {
			c.fail(BoundExceeded, name, fmt.Sprintf("%d outside %d..%d", s, min, max))
			return
		}
		*v = s
		return
	}
	if *v < min || *v > max {
		c.fail(BoundExceeded, name, fmt.Sprintf("%d outside %d..%d", *v, min, max))
		return
	}
	c.writeUint(8, uint64(*v))
	if c.js != nil {
		c.js.str(name, fmt.Sprint(*v))
	}
}

func (c *codec) boolean(name string, v *bool) {
	var x uint64
	if *v {
		x = 1
	}
	if c.err != nil {
		return
	}
	if c.decoding {
		b, ok := c.readUint(name, 1)
		if !ok {
			return
		}
		if b > 1 {
			c.fail(EnumRange, name, fmt.Sprintf("bool8 value %d", b))
			return
		}
		*v = b == 1
		return
	}
	c.writeUint(1, x)
	if c.js != nil {
		c.js.raw(name, fmt.Sprint(*v))
	}
}

// checkLen applies a length-prefixed field's minimum/maximum byte bounds.
func (c *codec) checkLen(name string, n, min, max uint64) bool {
	if n < min {
		if n == 0 {
			c.fail(ZeroNotAllowed, name, "empty value not allowed")
		} else {
			c.fail(BoundExceeded, name, fmt.Sprintf("length %d below minimum %d", n, min))
		}
		return false
	}
	if n > max {
		c.fail(BoundExceeded, name, fmt.Sprintf("length %d exceeds maximum %d", n, max))
		return false
	}
	return true
}

// span reads a length prefix of width lw and returns the bounded slice that
// follows it, aliasing the input. The schema bound is checked before the
// remaining length, both before the slice is taken.
func (c *codec) span(name string, lw int, min, max uint64) ([]byte, bool) {
	n, ok := c.readUint(name, lw)
	if !ok || !c.checkLen(name, n, min, max) || !c.need(name, n) {
		return nil, false
	}
	b := c.buf[c.off : c.off+int(n) : c.off+int(n)]
	c.off += int(n)
	return b, true
}

// checkText applies the text rules (valid UTF-8, no NUL) to b or s.
func (c *codec) checkText(name string, b []byte, s string) bool {
	valid, nul := utf8.Valid(b), bytes.IndexByte(b, 0) >= 0
	if b == nil {
		valid, nul = utf8.ValidString(s), strings.IndexByte(s, 0) >= 0
	}
	if !valid {
		c.fail(BadUTF8, name, "text is not valid UTF-8")
		return false
	}
	if nul {
		c.fail(NULInText, name, "text contains NUL")
		return false
	}
	return true
}

// text is a length-prefixed UTF-8 text without NUL.
func (c *codec) text(name string, v *string, lw int, min, max uint64) {
	if c.err != nil {
		return
	}
	if c.decoding {
		b, ok := c.span(name, lw, min, max)
		if !ok || !c.checkText(name, b, "") {
			return
		}
		*v = string(b)
		return
	}
	if !c.checkLen(name, uint64(len(*v)), min, max) || !c.checkText(name, nil, *v) {
		return
	}
	c.writeUint(lw, uint64(len(*v)))
	c.buf = append(c.buf, *v...)
	if c.js != nil {
		c.js.str(name, *v)
	}
}

// text8 is the schema's text8 (u8 length, 1..255 bytes).
func (c *codec) text8(name string, v *string) { c.text(name, v, 1, 1, ShortTextBytes) }

// optText8 is optional-text8: zero length means absent ("").
func (c *codec) optText8(name string, v *string) { c.text(name, v, 1, 0, ShortTextBytes) }

// storeVersion is authority-store-version (u16 length, 1..4096 bytes).
func (c *codec) storeVersion(name string, v *string) {
	c.text(name, v, 2, 1, AuthorityStoreVersionBytes)
}

// bytesField is a length-prefixed opaque byte string. Decoded values alias
// the input; an empty value decodes as nil.
func (c *codec) bytesField(name string, v *[]byte, lw int, min, max uint64) {
	if c.err != nil {
		return
	}
	if c.decoding {
		b, ok := c.span(name, lw, min, max)
		if !ok {
			return
		}
		if len(b) == 0 {
			b = nil
		}
		*v = b
		return
	}
	if uint64(len(*v)) > widthMax(lw) {
		c.fail(BoundExceeded, name, fmt.Sprintf("length %d does not fit its %d-byte prefix", len(*v), lw))
		return
	}
	if !c.checkLen(name, uint64(len(*v)), min, max) {
		return
	}
	c.writeUint(lw, uint64(len(*v)))
	c.buf = append(c.buf, *v...)
	if c.js != nil {
		c.js.hex(name, *v)
	}
}

// rid is the schema's rid (u8 length, 1..255 bytes).
func (c *codec) rid(name string, v *[]byte) { c.bytesField(name, v, 1, 1, RIDBytes) }

// obj groups nested fields under name (error path and JSON object).
func (c *codec) obj(name string, f func()) {
	if c.err != nil {
		return
	}
	if c.js != nil {
		c.js.open(name, '{')
	}
	f()
	if c.js != nil && c.err == nil {
		c.js.close()
	}
	c.within(name) // only an error raised by f: c.err was nil on entry
}

// delimited walks f inside a region announced by a length prefix of width lw
// (2 or 4) that covers exactly the bytes f produces. maxBody bounds the
// covered length. Decoding narrows the readable region so that nothing in f
// can read past it, and rejects bytes f leaves unread.
func (c *codec) delimited(name string, lw int, maxBody uint64, f func()) {
	if c.err != nil {
		return
	}
	if c.decoding {
		n, ok := c.readUint(name, lw)
		if !ok {
			return
		}
		if n > maxBody {
			c.fail(BoundExceeded, name, fmt.Sprintf("declared length %d exceeds maximum %d", n, maxBody))
			return
		}
		if !c.need(name, n) {
			return
		}
		full := c.buf
		end := c.off + int(n)
		c.buf = c.buf[:end]
		f()
		if c.err == nil && c.off != end {
			c.fail(TrailingBytes, name, fmt.Sprintf("%d bytes left inside declared length", end-c.off))
		}
		c.buf = full
		return
	}
	pos := len(c.buf)
	c.writeUint(lw, 0)
	f()
	if c.err != nil {
		return
	}
	n := uint64(len(c.buf) - pos - lw)
	if n > maxBody || n > widthMax(lw) {
		c.fail(BoundExceeded, name, fmt.Sprintf("encoded length %d exceeds maximum %d", n, min(maxBody, widthMax(lw))))
		return
	}
	switch lw {
	case 2:
		binary.BigEndian.PutUint16(c.buf[pos:], uint16(n))
	default:
		binary.BigEndian.PutUint32(c.buf[pos:], uint32(n))
	}
}

// version walks the constant version byte of a versioned structure.
func (c *codec) version(name string) {
	if c.err != nil {
		return
	}
	if c.decoding {
		v, ok := c.readUint(name, 1)
		if ok && v != 1 {
			c.fail(BadVersion, name, fmt.Sprintf("version %d, want 1", v))
		}
		return
	}
	c.writeUint(1, 1)
	if c.js != nil {
		c.js.raw(name, "1")
	}
}

// count walks a vector count of width cw and, when decoding, checks it
// against maxItems and against the remaining bytes (each item needs at least
// minItem bytes) before the caller allocates.
func (c *codec) count(name string, cw int, n *int, maxItems uint64, minItem uint64) bool {
	if c.err != nil {
		return false
	}
	if c.decoding {
		x, ok := c.readUint(name, cw)
		if !ok {
			return false
		}
		if x > maxItems {
			c.fail(BoundExceeded, name, fmt.Sprintf("%d items exceed maximum %d", x, maxItems))
			return false
		}
		if !c.need(name, x*minItem) {
			return false
		}
		*n = int(x)
		return true
	}
	if uint64(*n) > maxItems || uint64(*n) > widthMax(cw) {
		c.fail(BoundExceeded, name, fmt.Sprintf("%d items exceed maximum %d", *n, min(maxItems, widthMax(cw))))
		return false
	}
	c.writeUint(cw, uint64(*n))
	return true
}

// vector walks a counted vector. item walks one element; it is called with
// the JSON writer inside an array, so names given to scalar items are ignored.
func vector[T any](c *codec, name string, cw int, maxItems, minItem uint64, v *[]T, item func(*T)) {
	n := len(*v)
	if !c.count(name, cw, &n, maxItems, minItem) {
		return
	}
	if c.decoding {
		*v = nil
		if n > 0 {
			*v = make([]T, n)
		}
	}
	if c.js != nil {
		c.js.open(name, '[')
	}
	for i := 0; i < n && c.err == nil; i++ {
		item(&(*v)[i])
	}
	if c.js != nil && c.err == nil {
		c.js.close()
	}
	c.within(name) // only an item's error: count succeeded
}

// enum is a closed set of wire values with names.
type enum interface {
	comparable
	String() string
	valid() bool
}

// enumField walks an enum stored in width bytes. Unknown values are
// EnumRange.
func enumField[T interface {
	enum
	~uint8 | ~uint32
}](c *codec, name string, width int, v *T) {
	if c.err != nil {
		return
	}
	if c.decoding {
		x, ok := c.readUint(name, width)
		if !ok {
			return
		}
		t := T(x)
		if !t.valid() {
			c.fail(EnumRange, name, fmt.Sprintf("undefined value %d", x))
			return
		}
		*v = t
		return
	}
	if !(*v).valid() {
		c.fail(EnumRange, name, fmt.Sprintf("undefined value %d", uint64(*v)))
		return
	}
	c.writeUint(width, uint64(*v))
	if c.js != nil {
		c.js.str(name, (*v).String())
	}
}

func enum8[T interface {
	enum
	~uint8
}](c *codec, name string, v *T) {
	enumField(c, name, 1, v)
}

func enum32[T interface {
	enum
	~uint32
}](c *codec, name string, v *T) {
	enumField(c, name, 4, v)
}

// unionCase prepares the struct of the selected case of a conditional union:
// decoding allocates it; encoding requires it to be set.
func unionCase[T any](c *codec, name string, p **T) *T {
	if c.err != nil {
		return nil
	}
	if c.decoding {
		*p = new(T)
		return *p
	}
	if *p == nil {
		c.fail(MissingField, name, "selected union case is not set")
		return nil
	}
	return *p
}

// unionOthers, when encoding, rejects a union whose non-selected cases are set:
// such a value has no single wire form.
func (c *codec) unionOthers(name string, set bool) {
	if c.err == nil && !c.decoding && set {
		c.fail(Constraint, name, "a union case other than the discriminated one is set")
	}
}

// constraint reports a violated cross-field rule.
func (c *codec) constraint(name string, bad bool, detail string) {
	if c.err == nil && bad {
		c.fail(Constraint, name, detail)
	}
}
