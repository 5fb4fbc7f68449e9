package authority

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The package's own records (capacity counters, creation final results) are
// canonical JSON by the rules of docs/RECORDS.md §2 (RFC 8785 reduced to a
// data model of strings, null, objects and non-negative integers). mesh/record
// keeps its encoder unexported, so this file holds the few functions these
// two records need. Member names are fixed ASCII constants, so sorting them
// bytewise is the same as JCS's UTF-16 order.

type jsonMember struct {
	name  string
	value []byte // already-encoded JSON
}

func jsonObject(members ...jsonMember) []byte {
	slices.SortFunc(members, func(a, b jsonMember) int { return compareStrings(a.name, b.name) })
	// One allocation: names are fixed ASCII constants (no escapes), values
	// are already encoded, so the length is known.
	n := 2 + len(members)
	for _, m := range members {
		n += len(m.name) + 3 + len(m.value)
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, m.name)
		b = append(b, ':')
		b = append(b, m.value...)
	}
	return append(b, '}')
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var jsonNull = []byte("null")

func jsonString(s string) []byte { return appendJSONString(nil, s) }

// jsonDecString is a 64-bit quantity written as a decimal JSON string.
func jsonDecString(u uint64) []byte {
	b := append(make([]byte, 0, 22), '"')
	b = strconv.AppendUint(b, u, 10)
	return append(b, '"')
}

// jsonHex is p in lowercase hex as a JSON string (hex needs no escapes).
func jsonHex(p []byte) []byte {
	b := make([]byte, 2+hex.EncodedLen(len(p)))
	b[0], b[len(b)-1] = '"', '"'
	hex.Encode(b[1:], p)
	return b
}

// jsonBase64 is p in standard padded base64 as a JSON string (no escapes
// needed either).
func jsonBase64(p []byte) []byte {
	b := make([]byte, 2+base64.StdEncoding.EncodedLen(len(p)))
	b[0], b[len(b)-1] = '"', '"'
	base64.StdEncoding.Encode(b[1:], p)
	return b
}

func jsonNullableString(s *string) []byte {
	if s == nil {
		return jsonNull
	}
	return jsonString(*s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s with exactly the escapes of RFC 8785: `"` and
// `\`, the five short forms, \u00xx (lowercase) for the other controls, and
// nothing else. Callers have checked that s is valid UTF-8.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b = append(b, '\\', '"')
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// decodeStrict unmarshals value into v (a struct whose fields mirror the
// record's members) and then demands that re-encoding what was decoded gives
// back exactly value. The round trip is what makes decoding strict without a
// hand-written parser: encoding/json accepts case-insensitive member names,
// duplicate members, invalid UTF-8 (replaced), whitespace, escapes and
// missing members, but each of those makes the canonical re-encoding differ
// from the input. Unknown members are refused by the decoder itself.
func decodeStrict(value []byte, v any, encode func() ([]byte, error)) error {
	if !utf8.Valid(value) {
		return fmt.Errorf("value is not valid UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(value))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("not a well-formed record: %w", err)
	}
	again, err := encode()
	if err != nil {
		return err
	}
	if !bytes.Equal(again, value) {
		return fmt.Errorf("value is not the canonical encoding of the record it decodes to (first difference at byte %d)", firstDiff(again, value))
	}
	return nil
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// parseDecString reads a canonical decimal string ("0" or no leading zero).
func parseDecString(field, s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%s: %q is not a canonical decimal", field, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%s: %q is not a canonical decimal", field, s)
		}
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", field, s, err)
	}
	return u, nil
}
