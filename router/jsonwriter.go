package router

import (
	"encoding/hex"
	"encoding/json"
)

// jsonWriter renders a codec walk as JSON, keeping the wire order of fields
// (encoding/json would sort map keys or need a struct per shape).
type jsonWriter struct {
	b     []byte
	stack []byte // '{' or '[' per open container
	first []bool // whether the next value is the container's first
}

func (w *jsonWriter) sep(name string) {
	if n := len(w.stack); n > 0 {
		if !w.first[n-1] {
			w.b = append(w.b, ',')
		}
		w.first[n-1] = false
		if w.stack[n-1] == '{' {
			w.b = appendJSONString(w.b, name)
			w.b = append(w.b, ':')
		}
	}
}

func (w *jsonWriter) open(name string, kind byte) {
	w.sep(name)
	w.b = append(w.b, kind)
	w.stack = append(w.stack, kind)
	w.first = append(w.first, true)
}

// close ends the innermost open container.
func (w *jsonWriter) close() {
	if w.stack[len(w.stack)-1] == '{' {
		w.b = append(w.b, '}')
	} else {
		w.b = append(w.b, ']')
	}
	w.stack = w.stack[:len(w.stack)-1]
	w.first = w.first[:len(w.first)-1]
}

// raw writes an already valid JSON literal (number, bool, null).
func (w *jsonWriter) raw(name, lit string) {
	w.sep(name)
	w.b = append(w.b, lit...)
}

func (w *jsonWriter) str(name, s string) {
	w.sep(name)
	w.b = appendJSONString(w.b, s)
}

func (w *jsonWriter) hex(name string, b []byte) {
	w.str(name, hex.EncodeToString(b))
}

func appendJSONString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil { // cannot happen for a Go string; keep the output valid anyway
		return append(b, `""`...)
	}
	return append(b, q...)
}
