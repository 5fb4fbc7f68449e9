package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"a", "b", -1},
		{"", "a", -1},
		{"ab", "a", 1},
		{"same", "same", 0},
		{"Z", "a", -1},           // case is not folded
		{"\u00e9", "e\u0301", 1}, // no normalisation: U+00E9 > 'e'
		{"😀", "\ufb01", -1},      // D83D < FB01 although U+1F600 > U+FB01
		{"\ufb01", "😀", 1},       //
		{"\uffff", "😀", 1},       // U+FFFF > D83D
		{"\ud7ff", "😀", -1},      // U+D7FF < D83D
		{"😀", "😁", -1},           // same high surrogate, low decides
		{"x😀", "x\ue000", -1},    // after a common prefix
		{"recordVersion", "payload", 1},
	}
	for _, tt := range tests {
		if got := compareUTF16(tt.a, tt.b); got != tt.want {
			t.Errorf("compareUTF16(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`"`, `"\""`},
		{`\`, `"\\"`},
		{"/", `"/"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"\x00\x01\x0b\x0e\x1f", `"\u0000\u0001\u000b\u000e\u001f"`},
		{"\x7f", "\"\x7f\""},
		{"\u2028\u2029", "\"\u2028\u2029\""},
		{"<>&", `"<>&"`},
		{"é😀가", `"é😀가"`},
	}
	for _, tt := range tests {
		if got := string(appendString(nil, tt.in)); got != tt.want {
			t.Errorf("appendString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical re-serialisation
	}{
		{` { "b" : [ 1 , true , null ] , "a" : "x" } `, `{"a":"x","b":[1,true,null]}`},
		{`"\u00e9\ud83d\ude00\/\"\\\b\f\n\r\t\u0041"`, "\"é😀/\\\"\\\\\\b\\f\\n\\r\\tA\""},
		{`"\uD83D\uDE00"`, `"😀"`},
		{`[0,-0,1.5,-2e10,3E+2,4e-1]`, `[0,-0,1.5,-2e10,3E+2,4e-1]`}, // grammar only; fields check form
		{`{}`, `{}`},
		{`[]`, `[]`},
		{"\t\r\n[]\n", `[]`},
	}
	for _, tt := range tests {
		v, err := parseJSON("test", []byte(tt.in))
		if err != nil {
			t.Errorf("parse %s: %v", tt.in, err)
			continue
		}
		if got := string(appendCanonical(nil, v)); got != tt.want {
			t.Errorf("parse %s = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		in     string
		reason string
	}{
		{``, "end of input"},
		{`{"a":1,"a":2}`, "duplicate member"},
		{`{"a":1,"\u0061":2}`, "duplicate member"},
		{`{"a":1,}`, "member name"},
		{`[1,]`, "unexpected character"},
		{`{"a" 1}`, "expected ':'"},
		{`{"a":1 "b":2}`, "expected ','"},
		{`[1 2]`, "expected ','"},
		{`01`, "leading zero"},
		{`-`, "invalid number"},
		{`1.`, "fraction"},
		{`.5`, "unexpected character"},
		{`1e`, "exponent"},
		{`+1`, "unexpected character"},
		{`"abc`, "unterminated"},
		{`"a\`, "unterminated escape"},
		{`"\x"`, "invalid escape"},
		{`"\u12"`, `invalid \u`},
		{`"\u12g4"`, `invalid \u`},
		{`"\ud800"`, "unpaired surrogate"},
		{`"\ud800\u0041"`, "unpaired surrogate"},
		{`"\udc00"`, "unpaired surrogate"},
		{"\"a\x01\"", "raw control"},
		{"\"a\\n\x01\"", "raw control"},
		{"\"\xff\"", "UTF-8"},
		{"\xef\xbb\xbf{}", "unexpected character"},
		{`tru`, "unexpected character"},
		{`nul`, "unexpected character"},
		{`{} []`, "after the JSON value"},
		{strings.Repeat("[", 33) + strings.Repeat("]", 33), "nesting"},
	}
	for _, tt := range tests {
		_, err := parseJSON("test", []byte(tt.in))
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrMalformed) {
			t.Errorf("parse %q: err = %v, want *SyntaxError", tt.in, err)
			continue
		}
		if !strings.Contains(se.Reason, tt.reason) {
			t.Errorf("parse %q: reason %q, want it to mention %q", tt.in, se.Reason, tt.reason)
		}
	}
	// 32 levels are fine.
	if _, err := parseJSON("test", []byte(strings.Repeat("[", 32)+strings.Repeat("]", 32))); err != nil {
		t.Errorf("32 levels: %v", err)
	}
}

func TestParseCanonicalUint(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false},
		{"", 0, false},
		{"00", 0, false},
		{"07", 0, false},
		{"+7", 0, false},
		{"-7", 0, false},
		{" 7", 0, false},
		{"7 ", 0, false},
		{"1e3", 0, false},
		{"1.0", 0, false},
		{"٣", 0, false}, // Arabic-Indic digit three
	}
	for _, tt := range tests {
		got, reason := parseCanonicalUint(tt.in)
		if (reason == "") != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("parseCanonicalUint(%q) = %d, %q", tt.in, got, reason)
		}
	}
}

// appendObject orders members canonically whether they come sorted, out
// of order (the index on the stack) or more than sortBuf of them (a copy on
// the heap), and leaves the caller's members as they were.
func TestAppendObjectOrders(t *testing.T) {
	many := map[string]int{}
	for i := range sortBuf + 6 {
		many[fmt.Sprintf("k%02d", (i*7)%(sortBuf+6))] = i
	}
	cases := []struct {
		name string
		in   map[string]int // written in Go's (random) map order
		want string
	}{
		{"one", map[string]int{"a": 1}, `{"a":1}`},
		{"few, UTF-16 order", map[string]int{"z": 1, "😀": 2, "\ufb01": 3, "a": 4}, `{"a":4,"z":1,"😀":2,"ﬁ":3}`},
		{"more than sortBuf", many, func() string { b, _ := json.Marshal(many); return string(b) }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ms []jmember
			for k, v := range tc.in {
				ms = append(ms, mem(k, jUintV(uint64(v))))
			}
			before := slices.Clone(ms)
			if got := string(appendObject(nil, ms)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			for i := range ms {
				if ms[i].name != before[i].name {
					t.Fatal("appendObject reordered the caller's members")
				}
			}
		})
	}
}
